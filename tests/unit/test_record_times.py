"""The record-time lookup consumer's settings (``client.record_times``), without a broker."""

from __future__ import annotations

from typing import Any

import pytest

from sparkafka.client.record_times import (
    _Decided,
    _last_outcome,
    _outcome,
    _read_until_decided,
    lookup_settings,
)
from sparkafka.errors import BrokerError
from sparkafka.structs import TimestampedOffset, TopicPartition

CONF = {"bootstrap.servers": "127.0.0.1:9", "fetch.wait.max.ms": "5", "group.id": "the-users"}


def test_a_lookup_of_one_record_fetches_at_most_librdkafkas_default_a_partition() -> None:
    """A first-record lookup needs one record batch a partition: a raised ``kafka.max.partition.fetch.bytes``
    (or its alias) set for the executors' reads would bring that much a partition. Never less than the
    default (1 MiB) unless set lower: read_committed, a lookup past a large aborted transaction fetches it
    all, and a smaller cap takes more round trips for it."""
    for user in ({}, {"max.partition.fetch.bytes": "8388608"}, {"fetch.message.max.bytes": "8388608"}):
        settings = lookup_settings({**CONF, **user}, first_only=True)
        assert settings["max.partition.fetch.bytes"] == str(1024 * 1024)
        assert "fetch.message.max.bytes" not in settings
        assert settings["group.id"] == "sparkafka-record-times"
    for key in ("max.partition.fetch.bytes", "fetch.message.max.bytes"):
        settings = lookup_settings({**CONF, key: "65536"}, first_only=True)
        assert settings["max.partition.fetch.bytes"] == "65536"
        assert "fetch.message.max.bytes" not in settings


def test_a_scan_for_the_bound_keeps_the_fetch_size_it_was_given() -> None:
    """A scan looks at up to 10,000 records: capped it would take more round trips."""
    assert "max.partition.fetch.bytes" not in lookup_settings(CONF, first_only=False)
    given = {**CONF, "max.partition.fetch.bytes": "8388608"}
    assert lookup_settings(given, first_only=False)["max.partition.fetch.bytes"] == "8388608"


class _Record:
    """A fetched data record as confluent-kafka gives it (no error)."""

    def __init__(self, offset: int, timestamp_ms: int) -> None:
        self._offset, self._timestamp_ms = offset, timestamp_ms

    def error(self) -> None:
        return None

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return 1, self._timestamp_ms


def test_a_record_below_the_scans_start_is_no_answer() -> None:
    """The log truncated under a scan (its start past the new end): the consumer resets to the log's start
    (auto.offset.reset=earliest) and fetches records below the range. Taken as the range's first record it
    would be cached as the record at a position it lies before; read on, the scan would read the log from
    its start. Nothing is known at or past the start: the scan ends there."""
    tp = TopicPartition("t", 0)
    for last in (False, True):
        assert _outcome(CONF, tp, _Record(5, 100), (10, 20), at_least_ms=None, last=last) == (None, 10)
        assert _outcome(CONF, tp, _Record(5, 100), (10, 20), at_least_ms=50, last=last) == (None, 10)
    assert _last_outcome(CONF, tp, _Record(5, 100), (10, 20)) == (None, True)
    found = _outcome(CONF, tp, _Record(12, 100), (10, 20), at_least_ms=None, last=False)
    assert found == (TimestampedOffset(12, 100), 12)


class _Message:
    """A fetched record of partition ``tp`` (no error), as the lookup consumer hands it over."""

    def __init__(self, tp: TopicPartition, offset: int) -> None:
        self._tp, self._offset = tp, offset

    def topic(self) -> str:
        return self._tp.topic

    def partition(self) -> int:
        return self._tp.partition

    def error(self) -> None:
        return None

    def offset(self) -> int:
        return self._offset


class _Clock:
    """A monotonic clock that moves only when something waits on it."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _LookupConsumer:
    """A lookup consumer that hands over ``queued`` and then nothing: each empty poll waits out its timeout
    on ``clock``. Records the calls that change what it fetches."""

    def __init__(self, queued: list[_Message], clock: _Clock) -> None:
        self.queued, self.clock, self.calls = queued, clock, list[tuple[str, list[Any]]]()

    def list_topics(self, topic: str, timeout: float) -> None:
        return None

    def assign(self, tps: list[Any]) -> None:
        self.calls.append(("assign", [(tp.topic, tp.partition, tp.offset) for tp in tps]))

    def pause(self, tps: list[Any]) -> None:
        self.calls.append(("pause", [(tp.topic, tp.partition) for tp in tps]))

    def resume(self, tps: list[Any]) -> None:
        self.calls.append(("resume", [(tp.topic, tp.partition) for tp in tps]))

    def unassign(self) -> None:
        self.calls.append(("unassign", []))

    def consume(self, n: int, _timeout: float) -> list[_Message]:
        taken, self.queued = self.queued[:n], self.queued[n:]
        return taken

    def poll(self, timeout: float) -> None:
        self.clock.now += timeout  # nothing came within it


def test_undecided_partitions_at_the_deadline_fail_the_lookup_and_none_stays_paused_or_assigned() -> None:
    """The loop both lookups share: a partition decided is paused at once and its later messages passed
    over; at the deadline the lookup fails naming only the undecided ones, and the reused consumer is left
    with nothing paused or assigned."""
    clock = _Clock()
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    consumer = _LookupConsumer([_Message(a, 3), _Message(b, 7), _Message(a, 4)], clock)
    given: list[tuple[TopicPartition, int]] = []

    def first_record(tp: TopicPartition, msg: Any) -> _Decided[int] | None:
        given.append((tp, msg.offset()))
        return _Decided(msg.offset()) if tp == a else None  # b: never decided

    with pytest.raises(BrokerError, match=r"^looking up the xs of t-1 failed .*: timed out$"):
        _read_until_decided(
            CONF,
            consumer,
            {a: (3, 9), b: (7, 9)},
            first_record,
            per_call=10,
            timeout_s=1.0,
            what="the xs",
            clock=clock,
        )
    assert given == [(a, 3), (b, 7)]  # not (a, 4): decided already
    assert consumer.calls == [
        ("assign", [("t", 0, 3), ("t", 1, 7)]),
        ("pause", [("t", 0)]),
        ("resume", [("t", 0)]),
        ("unassign", []),
    ]
    assert clock.now >= 101.0  # the whole second waited out


def test_each_lookup_names_its_undecided_partitions_when_its_time_is_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``scan_times`` and ``last_times`` with no time left: each fails in its own words naming the
    partitions with something to read (an empty range is not looked up), and unassigns them."""
    from sparkafka.client import record_times

    consumers: list[_LookupConsumer] = []

    def lookup_consumer(_conf: Any, *, first_only: bool) -> _LookupConsumer:
        consumers.append(_LookupConsumer([], _Clock()))
        return consumers[-1]

    monkeypatch.setattr(record_times, "_consumer", lookup_consumer)
    ranges = {TopicPartition("t", 0): (5, 9), TopicPartition("t", 1): (4, 4), TopicPartition("u", 0): (0, 1)}
    with pytest.raises(BrokerError, match=r"^looking up record timestamps of t-0, u-0 failed .*: timed out$"):
        record_times.scan_times(CONF, ranges, None, 1, 0.0)
    with pytest.raises(BrokerError, match=r"^looking up the last records of t-0, u-0 failed .*: timed out$"):
        record_times.last_times(CONF, ranges, 0.0)
    for consumer in consumers:
        assert consumer.calls == [("assign", [("t", 0, 5), ("u", 0, 0)]), ("unassign", [])]
