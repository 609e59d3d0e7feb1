"""The exactly-once sink's guard on librdkafka's line (``sink.identity.check_transaction_protocol``)."""

from __future__ import annotations

import pytest

from sparkafka.errors import ConfigError
from sparkafka.sink import identity
from sparkafka.sink.identity import PROVEN_LIBRDKAFKA, check_transaction_protocol, open_transactional_producer
from sparkafka.sink.options import parse_sink_options


def librdkafka(text: str) -> tuple[str, int]:
    major, minor, patch = (int(x) for x in text.split("."))
    return text, major << 24 | minor << 16 | patch << 8 | 0xFF


def test_the_proven_line_passes_with_any_patch_release() -> None:
    proven = ".".join(map(str, PROVEN_LIBRDKAFKA))
    assert check_transaction_protocol(lambda: librdkafka(f"{proven}.0")) is None
    assert check_transaction_protocol(lambda: librdkafka(f"{proven}.7")) is None
    assert check_transaction_protocol() is None  # this venv's: what CI proves


@pytest.mark.parametrize("other", ["2.17.0", "3.0.1", "2.15.2"])
def test_another_line_is_refused_in_one_sentence_naming_both_and_the_fix(other: str) -> None:
    refusal = check_transaction_protocol(lambda: librdkafka(other))
    assert refusal is not None
    assert f"this Python has librdkafka {other}" in refusal
    assert "transaction version 2 (KIP-890)" in refusal
    assert refusal.endswith("Install 'confluent-kafka==2.16.*' (sparkafka's own requirement)")


def test_exactly_once_is_refused_at_the_options_and_in_the_task_not_other_guarantees(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import confluent_kafka

    monkeypatch.setattr(confluent_kafka, "libversion", lambda: librdkafka("2.17.0"))
    base = {"kafka.bootstrap.servers": "b:9092", "topic": "t"}
    with pytest.raises(ConfigError, match=r"is proven with librdkafka 2\.16"):
        parse_sink_options({**base, "deliveryGuarantee": "exactly_once", "transactionalIdPrefix": "p"})
    parse_sink_options({**base, "deliveryGuarantee": "at_least_once"})
    monkeypatch.setattr(identity, "new_producer", lambda _settings: pytest.fail("no producer is made"))
    with pytest.raises(ConfigError, match=r"librdkafka 2\.17\.0"):
        open_transactional_producer({"bootstrap.servers": "b:9092"}, "p-0")
