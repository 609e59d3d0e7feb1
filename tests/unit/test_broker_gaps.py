"""``broker_gaps``: the fetch-wait decision table (short, raised tenfold on a stall, kept if set), and riding
through a leader election in the cluster check and in fetching to the ends of partitions."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from sparkafka.client import broker_gaps
from sparkafka.errors import BrokerError
from sparkafka.structs import TopicPartition


@pytest.fixture(autouse=True)
def _fresh_levels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker_gaps, "_wait_level", {})


def test_starts_short_and_grows_tenfold_per_stall_up_to_one_second() -> None:
    conf = {"bootstrap.servers": "b:9092"}
    seen = [broker_gaps.fetch_wait_ms(conf)]
    while broker_gaps.note_stalled_fetch(conf):
        seen.append(broker_gaps.fetch_wait_ms(conf))
    assert seen == ["10", "100", "1000"]
    assert not broker_gaps.note_stalled_fetch(conf)  # at the top it stays
    assert broker_gaps.fetch_wait_ms(conf) == "1000"


def test_a_stall_on_one_broker_leaves_others_short() -> None:
    assert broker_gaps.note_stalled_fetch({"bootstrap.servers": "slow:9092"})
    assert broker_gaps.fetch_wait_ms({"bootstrap.servers": "slow:9092"}) == "100"
    assert broker_gaps.fetch_wait_ms({"bootstrap.servers": "other:9092"}) == "10"


def test_a_wait_the_user_set_is_kept_and_never_raised() -> None:
    conf = {"bootstrap.servers": "b:9092", "fetch.wait.max.ms": "250"}
    assert broker_gaps.fetch_wait_ms(conf) == "250"
    assert not broker_gaps.note_stalled_fetch(conf)
    assert broker_gaps.fetch_wait_ms(conf) == "250"


# --- Leader elections (a broker dying) are ridden through here too -----------------------------------------


class _Meta:
    cluster_id = "MkU3OEVBNTcwNTJENDM2Qg"  # the form Apache Kafka generates: trusted without a probe


class _FlakyAdmin:
    def __init__(self, failures: int) -> None:
        self.failures = failures

    def list_topics(self, timeout: float) -> _Meta:
        if self.failures:
            self.failures -= 1
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))  # the broker asked just died
        return _Meta()


def test_the_cluster_check_is_retried_through_a_broker_dying(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker_gaps, "_exact", {})
    assert broker_gaps.latest_is_exact({"bootstrap.servers": "b:9092"}, 5.0, _FlakyAdmin(failures=1))


T0 = TopicPartition("t", 0)
CONF = {"bootstrap.servers": "b:9092", "fetch.wait.max.ms": "10"}  # a set wait: never raised on a stall


class _Msg:
    def __init__(self, offset: int, error: KafkaError | None = None, tp: TopicPartition = T0):
        self._offset, self._error, self._tp = offset, error, tp

    def topic(self) -> str:
        return self._tp.topic

    def partition(self) -> int:
        return self._tp.partition

    def offset(self) -> int:
        return self._offset

    def error(self) -> KafkaError | None:
        return self._error


class _ScriptedConsumer:
    def __init__(self, batches: list[list[_Msg]]) -> None:
        self.batches = batches

    def consume(self, _n: int, _timeout: float) -> list[_Msg]:
        return self.batches.pop(0) if self.batches else []


def test_fetching_to_the_end_waits_out_leaderless_answers() -> None:
    no_broker = TopicPartition(None, -1)  # type: ignore[arg-type]  # a client-wide error event
    consumer = _ScriptedConsumer(
        [
            [_Msg(-1, KafkaError(KafkaError._TRANSPORT), no_broker)],
            [_Msg(-1, KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION), T0)],
            [_Msg(4)],
            [_Msg(5, KafkaError(KafkaError._PARTITION_EOF))],
        ]
    )
    ends = {T0: 3}
    stalled = broker_gaps._consume_to_ends(consumer, CONF, {T0}, ends, time.monotonic() + 5.0)
    assert not stalled
    assert ends == {T0: 5}


def test_fetching_to_the_end_still_fails_on_other_errors() -> None:
    consumer = _ScriptedConsumer([[_Msg(-1, KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), T0)]])
    with pytest.raises(BrokerError, match="TOPIC_AUTHORIZATION_FAILED"):
        broker_gaps._consume_to_ends(consumer, CONF, {T0}, {T0: 0}, time.monotonic() + 5.0)
