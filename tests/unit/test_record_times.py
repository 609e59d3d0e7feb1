"""The record-time lookup consumer's settings (``client.record_times``), without a broker."""

from __future__ import annotations

from sparkafka.client.record_times import _last_outcome, _outcome, lookup_settings
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
