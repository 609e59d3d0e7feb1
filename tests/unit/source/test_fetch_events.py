"""The reader's event sorting: data, end-of-partition, data loss, leaderless answers ridden out."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from sparkafka.errors import BrokerError, DataLossError
from sparkafka.source.fetch import _DeniedError, _read_events
from sparkafka.structs import TopicPartition


def test_end_of_partition_is_told_apart_from_errors() -> None:
    events = [
        (KafkaError(KafkaError._PARTITION_EOF), "t", 0, 2),
        (KafkaError(KafkaError._PARTITION_EOF), "t", 1, 9),
    ]
    assert _read_events(events, TopicPartition("t", 0)) == (2, 3)  # partition 1's event is not this read's
    assert _read_events([], TopicPartition("t", 0)) == (None, -1)


@pytest.mark.parametrize(
    "code", [KafkaError._TRANSPORT, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE]
)
def test_a_leader_change_is_ridden_out_not_a_failed_task(code: int) -> None:
    assert _read_events([(KafkaError(code), "t", 0, -1)], TopicPartition("t", 0)) == (None, -1)


def test_out_of_range_is_data_loss_and_other_errors_fail() -> None:
    tp = TopicPartition("t", 0)
    with pytest.raises(DataLossError, match="out of range"):
        _read_events([(KafkaError(KafkaError.OFFSET_OUT_OF_RANGE), "t", 0, 3)], tp)
    with pytest.raises(BrokerError, match="t-0 failed"):
        _read_events([(KafkaError(KafkaError.UNSUPPORTED_VERSION), None, -1, -1)], tp)
    with pytest.raises(_DeniedError):  # worded by read_ranges, which knows the user (test_secure_acls)
        _read_events([(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), None, -1, -1)], tp)


def test_a_refused_lookup_of_the_readers_group_is_no_failure() -> None:
    tp = TopicPartition("t", 0)
    group = KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "FindCoordinator response error")
    assert _read_events([(group, None, -1, -1)], tp) == (None, -1)


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
