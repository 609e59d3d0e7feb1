"""``probe_broker`` tells the broker's answer (a missing capability) from a probe that could not finish."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from confluent_kafka import KafkaError, KafkaException

from sparkafka.client.core import broker_error
from sparkafka.ops import probes
from sparkafka.ops.probes import Capability, probe_broker

CONF = {"bootstrap.servers": "b:9092"}


def _retried(error: BaseException) -> BaseException:
    """``error`` as ``with_retries`` raises it once its time is up: worded, caused by the last error."""
    worded = broker_error("creating probe topic x", CONF, error)
    worded.__cause__ = error
    return worded


def _raising(error: BaseException) -> object:
    def probe(conf: Mapping[str, str]) -> Capability:
        raise error

    return probe


@pytest.mark.parametrize(
    "error",
    [
        KafkaException(KafkaError(KafkaError._TIMED_OUT, "Timed out")),  # a busy machine
        KafkaException(KafkaError(KafkaError._TRANSPORT, "Connection reset")),
        TimeoutError("5 records not delivered within 30 s"),
        _retried(KafkaException(KafkaError(KafkaError._TIMED_OUT))),
    ],
)
def test_a_probe_ended_by_a_timeout_is_inconclusive_not_a_missing_capability(
    error: BaseException, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(probes.PROBES, "transactions", _raising(error))
    found = probe_broker(CONF, "transactions")
    assert (found.ok, found.conclusive) == (False, False)
    assert found.detail.startswith("could not tell: ")


@pytest.mark.parametrize(
    "error",
    [
        KafkaException(KafkaError(KafkaError.UNSUPPORTED_VERSION, "no such API")),  # tansu's answers
        _retried(KafkaException(KafkaError(KafkaError.INVALID_CONFIG))),
    ],
)
def test_the_brokers_refusal_is_a_missing_capability(
    error: BaseException, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(probes.PROBES, "transactions", _raising(error))
    found = probe_broker(CONF, "transactions")
    assert (found.ok, found.conclusive) == (False, True)
    assert found.detail.startswith("probe failed: ")


def test_an_answer_is_conclusive_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    for ok in (True, False):
        monkeypatch.setitem(
            probes.PROBES, "transactions", lambda conf, ok=ok: Capability("transactions", ok, "")
        )
        assert probe_broker(CONF, "transactions") == Capability("transactions", ok, "", conclusive=True)
