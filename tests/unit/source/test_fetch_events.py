"""The reader's event sorting (data, end-of-partition, out of range, leaderless answers ridden out), the
binding of a range when its task starts, and where a read goes on after offsets went out of range."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from sparkafka.errors import AuthorizationError, BrokerError, DataLossError
from sparkafka.source.fetch import (
    OffsetRange,
    _bind,
    _DeniedError,
    _OutOfRangeError,
    _read_events,
    resume_after_out_of_range,
)
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


def test_out_of_range_is_told_to_the_read_and_other_errors_fail() -> None:
    tp = TopicPartition("t", 0)
    for code in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
        with pytest.raises(_OutOfRangeError):
            _read_events([(KafkaError(code), "t", 0, 3)], tp)
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


T0 = TopicPartition("t", 0)


def test_the_log_start_lookup_rides_through_a_leader_election() -> None:
    from sparkafka.client.core import LEADER_ELECTION_S

    consumer = LeaderlessThenFine([KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError._DESTROY_BROKER])
    r = OffsetRange(T0, 5, 9)
    assert _bind(consumer, r, True, {"bootstrap.servers": "b:9092"}) == r
    assert len(consumer.calls) == 3
    assert all(t <= LEADER_ELECTION_S for t in consumer.calls)  # a dead leader cannot use the whole timeout
    with pytest.raises(
        DataLossError, match=r"t-0: offsets 1\.\.2 were removed .*failOnDataLoss=false"
    ) as lost:
        _bind(LeaderlessThenFine([]), OffsetRange(T0, 1, 9), True, {})
    assert lost.value.condition == "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE"  # as Spark's executor says
    assert _bind(LeaderlessThenFine([]), OffsetRange(T0, 1, 9), False, {}) == OffsetRange(T0, 3, 9)
    with pytest.raises(AuthorizationError, match=r"^user ANONYMOUS may not DESCRIBE topic t "):
        _bind(
            LeaderlessThenFine([KafkaError.TOPIC_AUTHORIZATION_FAILED]),
            r,
            True,
            {"bootstrap.servers": "b:9092"},
        )


def test_a_batch_reads_earliest_and_latest_as_the_log_is_when_its_task_starts() -> None:
    """The log holds [3, 10) now: a range planned as [0, 6) from earliest to latest reads [3, 10), with no
    data loss; a planned start or end stays as it was."""
    log = LeaderlessThenFine([])
    assert _bind(log, OffsetRange(T0, 0, 6, from_earliest=True, to_latest=True), True, {}) == OffsetRange(
        T0, 3, 10
    )
    assert _bind(log, OffsetRange(T0, 4, 6, to_latest=True), True, {}) == OffsetRange(T0, 4, 10)
    assert _bind(log, OffsetRange(T0, 0, 6, from_earliest=True), True, {}) == OffsetRange(T0, 3, 6)


@pytest.mark.parametrize(
    ("at", "end", "low", "high", "resume"),
    [
        (5, 20, 8, 30, 8),  # retention overtook the read: on from the log start
        (5, 20, 0, 30, 5),  # the log holds it again (recreated and refilled): read it
        (5, 20, 25, 30, 20),  # the log starts past the range: the rest of the range is gone
        (5, 20, 0, 3, 20),  # the log ends below the read (truncated, or recreated): the rest is gone
    ],
)
def test_where_a_read_goes_on_after_offsets_went_out_of_range(
    at: int, end: int, low: int, high: int, resume: int
) -> None:
    assert resume_after_out_of_range(at, end, low, high) == resume
