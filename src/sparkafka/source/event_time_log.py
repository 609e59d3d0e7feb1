"""What event-time alignment asks of a partition's log (``EventTimeLog``), and the answers' types.

Implemented over Kafka by ``source.admin.SourceMetadata`` (driver side, at planning) and by fakes in the unit
tests; ``source.alignment`` decides from the answers. Apart from the aligner so that the log's side can be
read, and faked, alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple, Protocol

from sparkafka.structs import TimestampedOffset, TopicPartition

__all__ = ["LAST_LOOK_BACK", "EventTimeLog", "Scan"]

LAST_LOOK_BACK = 1 << 20
"""Offsets ``EventTimeLog.last`` looks back from an end at most: past that, a partition whose last offsets are
all transaction markers and aborted records has no event time (``empty``). Part of the protocol, so that an
aligner that carries an answer from one end to the next (``EventTimeAligner._ask_last``) gives what a cold one
asking the log would."""


class Scan(NamedTuple):
    """What a scan from a position found: the first record at or above a timestamp, or how far it looked."""

    found: TimestampedOffset | None
    scanned_to: int
    """No record in ``[position, scanned_to)`` is at or above the timestamp (when ``found`` is None)."""


class EventTimeLog(Protocol):
    """What alignment asks of the log. Implemented over Kafka (``source.admin``), and by fakes in tests."""

    def newest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, TimestampedOffset | None]:
        """Per partition its record with the largest timestamp (ListOffsets MAX_TIMESTAMP); None if empty."""
        ...

    def at_time(
        self, tps: Iterable[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, TimestampedOffset | None]:
        """Per partition its first record whose timestamp is >= ``timestamp_ms`` (ListOffsets by
        timestamp, from the log's start); None when no record is that new."""
        ...

    def scan(
        self, ranges: Mapping[TopicPartition, tuple[int, int]], at_least_ms: int | None, max_records: int
    ) -> dict[TopicPartition, Scan]:
        """Per ``(start, end)``: the first record in it with timestamp >= ``at_least_ms`` (any record when
        None), looking at no more than ``max_records`` records (by fetching)."""
        ...

    def last(self, ends: Mapping[TopicPartition, int]) -> dict[TopicPartition, TimestampedOffset | None]:
        """Per partition, the last record below its end that a reader reads (no transaction marker, no
        aborted record under read_committed), by fetching; None when there is none within
        ``LAST_LOOK_BACK`` offsets below the end."""
        ...

    def pending(self, ends: Mapping[TopicPartition, int]) -> dict[TopicPartition, TimestampedOffset | None]:
        """Read_committed: per partition, the first record at or after its end (the last stable offset) as
        a read_uncommitted reader sees it, a record of a transaction still open; None when the log holds
        none there. Read_uncommitted: None for all, without asking (the end is the high watermark)."""
        ...
