"""Event-time alignment of partitions (Flink's watermark alignment), decided when a micro-batch is planned.

Runs on the driver side, in Spark's Python source runner, inside ``latestOffset``: ``EventTimeAligner.cap``
lowers each partition's end so that the batch reads no record at or after ``slowest + maxEventTimeDrift``,
where ``slowest`` is the lowest event time among the partitions that count (below). Why: Spark's watermark
is the *largest* event time seen minus the delay, so a partition whose records are hours older than the
others' (a backlog read from earliest, a slower producer, uneven retention) has them dropped as late. With
every batch bounded this way and ``withWatermark(delay)`` at least the drift, the watermark never passes a
record that a counted partition has still to deliver (the proof is in ``docs/event-time.md``).

**A partition's event time** is the timestamp of the first record at or after its position (the next record
it will read); for a partition with nothing left to read, the largest timestamp it holds (ListOffsets
MAX_TIMESTAMP). Both are facts of the log at the offsets in Spark's checkpoint, so planning after a restart,
with every in-process cache gone, decides exactly as the process that planned before it: nothing here
depends on the history of the process. The max seen so far (Flink's bounded-out-of-orderness generator)
would need that history, which the offsets JSON does not hold. The definition never overstates where a
partition is: when a partition's timestamps are out of order by at most D (every record is at least the
largest earlier timestamp minus D), each record it delivers later is at least its event time minus D, so
the guarantee holds with ``delay >= drift + D``; with timestamps in order, ``delay >= drift``.

**Which partitions count** toward the slowest: every partition with a record to read, and every partition
that has read all it holds but may get more (its records so far bound its next ones). Not counted:

- ``idle``: nothing to read, and its newest record is more than ``partitionIdleTimeout`` older than the newest
  record of any partition of the query. Time here is the stream's own (record timestamps), not the wall
  clock: a restart decides the same, and a replay of old data treats a partition that went quiet as idle
  where it went quiet in the data, not hours later by the clock. A partition with records to read is never
  idle, so a partition held back by alignment never becomes idle (Flink's FLIP-471). It rejoins as soon as
  it has a record to read, aligned from there.
- ``finished``: under ``Trigger.AvailableNow``, a partition that reached the end of what the run reads (as a
  bounded Flink split that finished: it will deliver nothing more in this run).
- ``empty``: a partition holding no record at all has no event time to align to.

**Progress is always possible**: the slowest counted partition's next record is below the bound, so when it
has records to read its range always includes at least that record; a batch never stalls on alignment alone.
A quiet partition does hold the others back until ``partitionIdleTimeout`` says it is idle, as in Flink.

The decision (``decide``, ``end_at_cut``, ``end_after_scan``, ``settle``) is pure; ``EventTimeAligner`` asks
the log (an ``EventTimeLog``: Kafka in production, a fake in tests) and keeps caches of log facts only
(the record at an offset, the first record at a timestamp), so a warm and a cold aligner plan the same.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, Protocol, get_args

from sparkafka.structs import TimestampedOffset, TopicPartition

__all__ = [
    "ALIGNMENT_STATES",
    "AlignmentState",
    "AlignmentStatus",
    "Decision",
    "EventTimeAligner",
    "EventTimeLog",
    "PartitionEventTime",
    "PartitionTimes",
    "Scan",
    "decide",
    "describe_duration",
    "describe_time",
    "end_after_scan",
    "end_at_cut",
    "settle",
]

log = logging.getLogger(__name__)

AlignmentState = Literal["active", "held", "idle", "finished", "empty"]
"""``active``: counts toward the slowest and reads what the other limits allow; ``held``: counts, is not the
slowest, and alignment ends its range before its latest offset (it waits for the slowest); ``idle``,
``finished``, ``empty``: does not count (see the module's docstring)."""
ALIGNMENT_STATES: tuple[AlignmentState, ...] = get_args(AlignmentState)

SCAN_LIMIT = 10_000
"""Records a scan for the bound looks at per partition before it stops there (see ``end_after_scan``)."""


class PartitionTimes(NamedTuple):
    """What the decision knows of one partition when a micro-batch is planned."""

    position: int
    """The batch's start: the next offset to read."""
    latest: int
    """The end the batch may read to (the latest offset, or the availableNow target)."""
    next: TimestampedOffset | None
    """The first record at or after ``position`` (None: no record there yet, or only transaction markers)."""
    newest: TimestampedOffset | None
    """The record with the largest timestamp in the partition (None: the partition holds no record)."""

    @property
    def readable(self) -> bool:
        """Whether a record lies in ``[position, latest)``."""
        return self.next is not None and self.next.offset < self.latest

    @property
    def event_time_ms(self) -> int | None:
        """The next record's timestamp, else the newest one's; None for a partition with no record."""
        if self.next is not None:
            return self.next.timestamp_ms
        return self.newest.timestamp_ms if self.newest is not None else None


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


@dataclass(frozen=True)
class Decision:
    """``decide``'s answer: the bound, the slowest partition, each partition's state and known ends."""

    bound_ms: int | None
    """No record at or after this timestamp is read in the batch; None: nothing counts, nothing is bound."""
    slowest: TopicPartition | None
    states: Mapping[TopicPartition, AlignmentState]
    """``active`` for every counted partition here; ``settle`` tells ``held`` ones apart."""
    ends: Mapping[TopicPartition, int | None]
    """The end each partition may read to; None where the first record at the bound must be looked up."""


def decide(
    times: Mapping[TopicPartition, PartitionTimes],
    *,
    drift_ms: int,
    idle_timeout_ms: int | None,
    bounded: bool,
) -> Decision:
    """Which partitions count, the slowest of them, the bound, and every end that needs no further lookup.

    ``bounded``: the run reads to a fixed end (``Trigger.AvailableNow``), so a partition with nothing left
    to read is finished.
    """
    newest_anywhere = max(
        (t.newest.timestamp_ms for t in times.values() if t.newest is not None), default=None
    )
    states: dict[TopicPartition, AlignmentState] = {}
    for tp, t in times.items():
        if t.readable:
            states[tp] = "active"
        elif bounded:
            states[tp] = "finished"
        elif t.event_time_ms is None:
            states[tp] = "empty"
        elif (
            idle_timeout_ms is not None
            and newest_anywhere is not None
            and t.newest is not None
            and t.newest.timestamp_ms < newest_anywhere - idle_timeout_ms
        ):
            states[tp] = "idle"
        else:
            states[tp] = "active"
    # A counted partition has an event time: a record to read, or records read ("empty" otherwise).
    counted = [(t.event_time_ms or 0, tp) for tp, t in times.items() if states[tp] == "active"]
    if not counted:
        return Decision(None, None, states, {tp: t.latest for tp, t in times.items()})
    slowest_ms, slowest = min(counted)
    bound = slowest_ms + drift_ms
    ends: dict[TopicPartition, int | None] = {}
    for tp, t in times.items():
        if not t.readable:
            ends[tp] = t.latest  # nothing to read there (at most transaction markers): nothing to bound
        elif t.newest is not None and t.newest.timestamp_ms < bound:
            ends[tp] = t.latest  # every record it holds is below the bound
        elif t.next is not None and t.next.timestamp_ms >= bound:
            ends[tp] = t.position  # its very next record is past the bound: held where it is
        else:
            ends[tp] = None
    return Decision(bound, slowest, states, ends)


def end_at_cut(t: PartitionTimes, cut: TimestampedOffset | None) -> int | None:
    """The end of a partition whose next record is below the bound and whose newest is not, from its first
    record at or above the bound (``EventTimeLog.at_time``); None: the caller scans (``end_after_scan``).

    ListOffsets searches from the log's start, so every record before that offset is below the bound,
    whatever the order of the timestamps. It is used when it lies past the next record. Otherwise it is a
    record before the position (read already: out-of-order timestamps, a partition that rejoined) or one a
    read_committed reader skips (an aborted transaction's, which ListOffsets still finds): it says nothing
    of the records from the next one on, and ending there could keep the partition from advancing.
    """
    if cut is None:
        return t.latest  # no record is that new
    if t.next is not None and cut.offset > t.next.offset:
        return min(cut.offset, t.latest)
    return None


def end_after_scan(t: PartitionTimes, scan: Scan) -> int:
    """The end from a scan from the position: before the first record at or above the bound, or where the
    scan stopped (``SCAN_LIMIT`` records, all below it)."""
    end = scan.found.offset if scan.found is not None else scan.scanned_to
    return max(t.position, min(end, t.latest))


def settle(
    decision: Decision,
    times: Mapping[TopicPartition, PartitionTimes],
    ends: Mapping[TopicPartition, int],
    *,
    drift_ms: int,
    idle_timeout_ms: int | None,
) -> AlignmentStatus:
    """The status of the plan: ``held`` for counted partitions, other than the slowest, whose end alignment
    put before their latest offset (they wait for the slowest)."""
    partitions = {}
    for tp, t in times.items():
        state = decision.states[tp]
        if state == "active" and ends[tp] < t.latest and tp != decision.slowest:
            state = "held"
        partitions[tp] = PartitionEventTime(t.event_time_ms, state)
    quiet = decision.slowest is not None and not times[decision.slowest].readable
    return AlignmentStatus(decision.bound_ms, decision.slowest, partitions, drift_ms, idle_timeout_ms, quiet)


@dataclass(frozen=True)
class PartitionEventTime:
    """One partition as the source's metrics show it."""

    event_time_ms: int | None
    """Its event time (see the module's docstring); None for a partition with no record."""
    state: AlignmentState


@dataclass(frozen=True)
class AlignmentStatus:
    """The last plan's alignment, per partition: what the source's metrics file carries (``eventTime``)."""

    bound_ms: int | None
    slowest: TopicPartition | None
    partitions: Mapping[TopicPartition, PartitionEventTime]
    drift_ms: int = 0
    idle_timeout_ms: int | None = None
    slowest_quiet: bool = False
    """The slowest partition has nothing to read: it holds the others until it gets records or is idle."""

    @property
    def held(self) -> list[TopicPartition]:
        """The partitions alignment stopped before their latest offset, in order."""
        return sorted(tp for tp, p in self.partitions.items() if p.state == "held")

    @property
    def slowest_ms(self) -> int | None:
        """The event time everything is aligned to (the lowest among the counted partitions)."""
        return None if self.bound_ms is None else self.bound_ms - self.drift_ms

    def to_json(self) -> dict[str, Any]:
        """The status as the metrics file holds it: camelCase keys, partitions per topic and partition."""
        parts: dict[str, dict[str, dict[str, Any]]] = {}
        for tp, p in sorted(self.partitions.items()):
            parts.setdefault(tp.topic, {})[str(tp.partition)] = {
                "eventTimeMs": p.event_time_ms,
                "state": p.state,
            }
        return {
            "driftMs": self.drift_ms,
            "idleTimeoutMs": self.idle_timeout_ms,
            "boundMs": self.bound_ms,
            "slowest": None if self.slowest is None else [self.slowest.topic, self.slowest.partition],
            "slowestQuiet": self.slowest_quiet,
            "partitions": parts,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AlignmentStatus:
        """The inverse of ``to_json``."""
        slowest = data.get("slowest")
        return cls(
            bound_ms=data.get("boundMs"),
            slowest=None if slowest is None else TopicPartition(str(slowest[0]), int(slowest[1])),
            partitions={
                TopicPartition(t, int(p)): PartitionEventTime(v.get("eventTimeMs"), v["state"])
                for t, parts in data.get("partitions", {}).items()
                for p, v in parts.items()
            },
            drift_ms=int(data.get("driftMs", 0)),
            idle_timeout_ms=data.get("idleTimeoutMs"),
            slowest_quiet=bool(data.get("slowestQuiet", False)),
        )

    def describe_hold(self) -> str | None:
        """One sentence on what alignment holds back and behind which partition; None when it holds nothing.

        For the source's log and ``sparkafka run``'s progress lines (driver side).
        """
        held = self.held
        if not held or self.slowest is None:
            return None
        names = ", ".join(map(str, held[:8])) + (f" and {len(held) - 8} more" if len(held) > 8 else "")
        text = (
            f"event-time alignment holds {names} at {describe_time(self.bound_ms)} (slowest {self.slowest} "
            f"at {describe_time(self.slowest_ms)}, maxEventTimeDrift {describe_duration(self.drift_ms)})"
        )
        if self.slowest_quiet:
            text += f"; {self.slowest} has no new records"
            if self.idle_timeout_ms is None:
                text += ": set partitionIdleTimeout so that a quiet partition stops holding the others back"
        return text


def describe_duration(ms: int) -> str:
    """``600000`` as ``10m``, ``1500`` as ``1500ms``: the largest unit that divides it."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def describe_time(ms: int | None) -> str:
    """An epoch-ms timestamp as ``2026-11-25 09:00:00.000 UTC`` for logs and progress lines."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


class EventTimeAligner:
    """Caps each micro-batch's end offsets by event time; lives in Spark's source runner (driver side).

    Per plan it asks the log for: the newest record of partitions whose latest offset moved (one
    ListOffsets for all), the record at each position it does not know yet (one fetch for all), and the
    first record at the bound for partitions that reach it (one ListOffsets for all). Known answers are
    kept: they are facts of the log at an offset, so the plan does not depend on them being there.

    Args:
        log: the log to ask (Kafka in production).
        drift_ms: ``maxEventTimeDrift``.
        idle_timeout_ms: ``partitionIdleTimeout`` (None: a partition is never idle).
        scan_limit: see ``SCAN_LIMIT``.
    """

    def __init__(
        self, log: EventTimeLog, drift_ms: int, idle_timeout_ms: int | None, scan_limit: int = SCAN_LIMIT
    ) -> None:
        """Nothing is asked of the log until the first plan."""
        if drift_ms <= 0 or scan_limit <= 0:
            raise ValueError("drift_ms and scan_limit must be positive")
        self._log = log
        self._drift_ms = drift_ms
        self._idle_timeout_ms = idle_timeout_ms
        self._scan_limit = scan_limit
        self._newest: dict[TopicPartition, tuple[int, TimestampedOffset | None]] = {}
        """Per partition: (the latest offset it was asked at, its newest record then)."""
        self._records: dict[TopicPartition, dict[int, tuple[int, TimestampedOffset | None]]] = {}
        """Per partition: position -> (looked up to, the first record at or after it; None: none there)."""
        self._cuts: dict[TopicPartition, tuple[int, TimestampedOffset]] = {}
        """Per partition: (bound, its first record at or above the bound)."""
        self.status: AlignmentStatus | None = None
        """The last plan's status (None before the first)."""

    def cap(
        self, start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], *, bounded: bool
    ) -> dict[TopicPartition, int]:
        """``latest`` lowered so that the batch from ``start`` reads nothing at or after the bound.

        The answer is never below ``start`` nor above ``latest``. ``bounded``: under Trigger.AvailableNow.
        """
        times = self._times(start, latest)
        decision = decide(
            times, drift_ms=self._drift_ms, idle_timeout_ms=self._idle_timeout_ms, bounded=bounded
        )
        ends = dict(decision.ends)
        missing = [tp for tp, e in ends.items() if e is None]
        if missing:
            assert decision.bound_ms is not None
            cuts = self._cuts_at(missing, decision.bound_ms)
            scan: dict[TopicPartition, tuple[int, int]] = {}
            for tp in missing:
                end = end_at_cut(times[tp], cuts[tp])
                if end is None:
                    scan[tp] = (times[tp].position, times[tp].latest)
                ends[tp] = end
            if scan:
                scanned = self._log.scan(scan, decision.bound_ms, self._scan_limit)
                for tp in scan:
                    ends[tp] = end_after_scan(times[tp], scanned[tp])
        final = {tp: int(e) for tp, e in ends.items() if e is not None}
        before, self.status = (
            self.status,
            settle(decision, times, final, drift_ms=self._drift_ms, idle_timeout_ms=self._idle_timeout_ms),
        )
        self._log_change(before, self.status)
        return final

    def _log_change(self, before: AlignmentStatus | None, now: AlignmentStatus) -> None:
        """A line when the partitions held, or the one they wait for, change (not on every plan)."""

        def shape(s: AlignmentStatus | None) -> tuple[object, ...]:
            return () if s is None or not s.held else (s.held, s.slowest, s.slowest_quiet)

        if shape(before) == shape(now):
            return
        quiet_blocks = now.slowest_quiet and self._idle_timeout_ms is None and bool(now.held)
        log.log(
            logging.WARNING if quiet_blocks else logging.INFO,
            "%s",
            now.describe_hold() or "event-time alignment holds no partition back",
        )

    def _times(
        self, start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, PartitionTimes]:
        stale = [tp for tp in start if tp not in self._newest or self._newest[tp][0] != latest[tp]]
        if stale:
            found = self._log.newest(stale)
            for tp in stale:
                self._newest[tp] = (latest[tp], found.get(tp))
        lookup = {}
        for tp, pos in start.items():
            newest = self._newest[tp][1]
            # Up to latest, or past it to the newest record when the log grew between the two lookups
            # (then the newest record is not behind the position, and the next one is what counts).
            reach = max(latest[tp], newest.offset + 1 if newest is not None else 0)
            known = self._records.setdefault(tp, {})
            for old in [o for o in known if o < pos]:
                del known[old]  # positions only move forward: older answers are never asked for again
            looked = known.get(pos)
            if pos < reach and (looked is None or (looked[1] is None and looked[0] < reach)):
                lookup[tp] = (pos, reach)
        if lookup:
            for tp, scan in self._log.scan(lookup, None, 1).items():
                self._records[tp][lookup[tp][0]] = (scan.scanned_to, scan.found)
        return {
            tp: PartitionTimes(pos, latest[tp], self._records[tp].get(pos, (0, None))[1], self._newest[tp][1])
            for tp, pos in start.items()
        }

    def _cuts_at(
        self, tps: list[TopicPartition], bound_ms: int
    ) -> dict[TopicPartition, TimestampedOffset | None]:
        out: dict[TopicPartition, TimestampedOffset | None] = {}
        ask = []
        for tp in tps:
            cached = self._cuts.get(tp)
            if cached is not None and cached[0] == bound_ms:
                out[tp] = cached[1]
            else:
                ask.append(tp)
        if ask:
            found = self._log.at_time(ask, bound_ms)
            for tp in ask:
                cut = found.get(tp)
                out[tp] = cut
                if cut is not None:  # a record that new exists: the answer stays true as the log grows
                    self._cuts[tp] = (bound_ms, cut)
        return out
