"""The reader's event sorting: data, end-of-partition, data loss, leaderless answers ridden out."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from sparkafka.errors import BrokerError, DataLossError
from sparkafka.source.fetch import _split_events
from sparkafka.structs import TopicPartition


class Msg:
    def __init__(self, offset: int, error: KafkaError | None = None, partition: int = 0) -> None:
        self._offset, self._error, self._partition = offset, error, partition

    def error(self) -> KafkaError | None:
        return self._error

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


def test_data_and_end_of_partition_are_told_apart() -> None:
    msgs: list[Any] = [Msg(0), Msg(1), Msg(2, KafkaError(KafkaError._PARTITION_EOF))]
    data, eof = _split_events(msgs)
    assert [m.offset() for m in data] == [0, 1]
    assert eof == {TopicPartition("t", 0): 2}


@pytest.mark.parametrize(
    "code", [KafkaError._TRANSPORT, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE]
)
def test_a_leader_change_is_ridden_out_not_a_failed_task(code: int) -> None:
    data, eof = _split_events([Msg(5), Msg(-1, KafkaError(code)), Msg(6)])
    assert [m.offset() for m in data] == [5, 6]
    assert eof == {}


def test_out_of_range_is_data_loss_and_other_errors_fail() -> None:
    with pytest.raises(DataLossError, match="out of range"):
        _split_events([Msg(3, KafkaError(KafkaError.OFFSET_OUT_OF_RANGE))])
    with pytest.raises(BrokerError, match="failed"):
        _split_events([Msg(3, KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))])


class LeaderlessThenFine:
    """A consumer whose watermark lookup first meets a leader election, then answers."""

    def __init__(self, failures: list[int]) -> None:
        self.failures = failures
        self.calls: list[float] = []

    def get_watermark_offsets(self, _tp: Any, timeout: float) -> tuple[int, int]:
        from confluent_kafka import KafkaException

        self.calls.append(timeout)
        if self.failures:
            raise KafkaException(KafkaError(self.failures.pop(0)))
        return 3, 10


def test_the_log_start_lookup_rides_through_a_leader_election() -> None:
    from sparkafka.client.core import LEADER_ELECTION_S
    from sparkafka.source.fetch import OffsetRange, _check_start

    consumer = LeaderlessThenFine([KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError._DESTROY_BROKER])
    r = OffsetRange(TopicPartition("t", 0), 5, 9)
    assert _check_start(consumer, r, True, {"bootstrap.servers": "b:9092"}) == 5
    assert len(consumer.calls) == 3
    assert all(t <= LEADER_ELECTION_S for t in consumer.calls)  # a dead leader cannot use the whole timeout
    with pytest.raises(DataLossError, match="were removed"):
        _check_start(LeaderlessThenFine([]), OffsetRange(TopicPartition("t", 0), 1, 9), True, {})
    with pytest.raises(BrokerError, match="b:9092"):
        _check_start(
            LeaderlessThenFine([KafkaError.TOPIC_AUTHORIZATION_FAILED]),
            r,
            True,
            {"bootstrap.servers": "b:9092"},
        )
