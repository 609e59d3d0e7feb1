"""Event-time alignment of partitions (Flink's watermark alignment), decided when a micro-batch is planned.

Runs on the driver side, in Spark's Python source runner, inside ``latestOffset``: ``EventTimeAligner.cap``
lowers each partition's end so that the batch reads no record at or after a bound of ``slowest +
maxEventTimeDrift``. Why: Spark's watermark is the *largest* event time seen minus the delay, so a partition
whose records are hours older than the others' (a backlog read from earliest, a slower producer, uneven
retention) has them dropped as late. With every batch bounded and ``withWatermark(delay)`` at least the
drift, the watermark never passes a record that a counted partition has still to deliver.

**The bound.** Spark moves its watermark after a batch, from the batch's largest event time, and applies it
to the next batches. What must hold is that every record a batch reads is below the drift past the slowest
counted partition *where the next batch starts*: every record read later is then at least that partition's
event time (up to the disorder below), so it is above the watermark. The bound is the drift past the
slowest partition's event time at the batch's end (its ends as the read limit makes them), or at its start
when that is later; the ends are checked against it once cut (and the bound falls back to the slowest
where it starts, always safe, if a cut moved the slowest end back: out-of-order timestamps). So partitions
that progress together read as wide a batch as the read limit gives, and only a partition ahead waits.

**A partition's event time** is the timestamp of the first record at or after a position (for the status:
the position it is at, the next record it will read); read_committed, for a partition with nothing to read
there while a transaction is open past its end (the last stable offset), the first record at that end, as
read_uncommitted sees it (``PartitionTimes.pending``: the record it reads, or reads past, once the
transaction ends; ListOffsets answers nothing at or past the last stable offset, so without it such a
partition looked empty, held no one back, and its records were late when the transaction committed); for a
partition with nothing left, the largest timestamp it holds (ListOffsets MAX_TIMESTAMP) when a reader reads
that record, else its last record a reader reads (``PartitionTimes.last``: MAX_TIMESTAMP also answers
transaction markers, stamped with the broker's clock). Each is determined
by the log, the batch's start (the offsets in Spark's checkpoint) and the partition's end as this plan looks
it up, so planning after a restart, with every in-process cache gone, decides as the process that planned
before it would have: the plan does not depend on the history of the process. An open transaction's first
record counts before it is known to commit: the disorder D below is that of the log as read_uncommitted
reads it, aborted records included. The max seen so far (Flink's bounded-out-of-orderness generator) would
need that history, which the offsets JSON does not hold. The definition never overstates where a partition is:
when its timestamps are out of order by at most D (every record is at least the largest earlier timestamp
minus D), each record it delivers later is at least its event time minus D, so the guarantee holds with
``delay >= drift + D``; with timestamps in order (per partition), ``delay >= drift``.

**Which partitions count** toward the slowest: every partition with a record to read, every partition
behind an open transaction, and every partition that has read all it holds but may get more (its records so
far bound its next ones). Not counted:

- ``idle``: nothing to read, and no new record to read for ``partitionIdleTimeout`` on this process's
  clock (Flink's idleness; a read_committed split behind an open transaction delivers nothing, so Flink
  makes it idle too). By the clock only: a partition whose records lag the others' by hours but keep
  coming is slow, not idle. Markers, aborted records and a transaction opening are no new record (a
  producer crash-looping through aborted transactions delivers nothing). Under availableNow idleness
  never applies (a partition with nothing left is ``finished``). After a restart the clock's count starts
  again, as in Flink;
  batches Spark replays keep their logged ends, so nothing already planned changes. A partition with
  records to read is never idle, so a partition held back by alignment never becomes idle
  (Flink's FLIP-471). It rejoins as soon as it has a record to read, aligned from there (its records older
  than the watermark are late, as in Flink).
- ``finished``: under ``Trigger.AvailableNow``, a partition that reached the end of what the run reads (as a
  bounded Flink split that finished: it delivers nothing more in this run).
- ``empty``: a partition holding no record at all (nor one of an open transaction) has no event time to
  align to.

**Progress is always possible**: the bound is at least the drift past the slowest partition's next record,
so when that partition has records to read, the batch may include its next one; a batch never stalls on
alignment alone. A quiet partition, or one behind an open transaction, does hold the others back until
``partitionIdleTimeout`` says it is idle, as in Flink; without it, until it gets records or the transaction
ends (the broker aborts a transaction left open after its timeout; a hanging one, only an operator).

The decision (``decide``, ``slowest_after``, ``cap_known``, ``cap_at_cut``, ``cap_after_scan``, ``settle``)
is pure; ``EventTimeAligner`` asks the log (an ``EventTimeLog``: Kafka in production, a fake in tests) and
keeps caches of log facts only (the first record at an offset, the first record at a timestamp), so a warm
and a cold aligner plan the same.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from sparkafka.source.alignment_status import AlignmentState, AlignmentStatus, PartitionEventTime
from sparkafka.source.event_time_log import LAST_LOOK_BACK, EventTimeLog, Scan
from sparkafka.source.planning import apply_read_limit
from sparkafka.structs import TimestampedOffset, TopicPartition

__all__ = [
    "LAST_LOOK_BACK",
    "Decision",
    "EventTimeAligner",
    "EventTimeLog",
    "PartitionTimes",
    "Scan",
    "cap_after_scan",
    "cap_at_cut",
    "cap_known",
    "decide",
    "settle",
    "slowest_after",
]

log = logging.getLogger(__name__)


SCAN_LIMIT = 10_000
"""Records a scan for the bound looks at per partition before it stops there (see ``cap_after_scan``)."""


class PartitionTimes(NamedTuple):
    """What the decision knows of one partition at one position (a batch's start, or a planned end)."""

    position: int
    latest: int
    """The end the batch may read to (the latest offset, or the availableNow target)."""
    next: TimestampedOffset | None
    """The first record at or after ``position`` (None: no record there yet, or only transaction markers)."""
    newest: TimestampedOffset | None
    """The record with the largest timestamp in the partition (ListOffsets MAX_TIMESTAMP; None: it holds no
    record, or, read_committed, that record lies past the last stable offset). It may be a transaction
    marker, which carries the broker's clock when it was written, or an aborted record: an upper bound of
    every timestamp the partition holds, not an event time."""
    pending: TimestampedOffset | None = None
    """Read_committed: the first record at or after ``latest`` (the last stable offset), of a transaction
    still open: the partition reads it, or records after it, once the transaction ends (None: none)."""
    last: TimestampedOffset | None = None
    """For a partition with nothing to read (looked up only then): ``newest`` when a reader reads that
    record, else the last record below ``latest`` a reader reads (None: none)."""

    @property
    def readable(self) -> bool:
        """Whether a record lies in ``[position, latest)``."""
        return self.next is not None and self.next.offset < self.latest

    @property
    def event_time_ms(self) -> int | None:
        """The next record's timestamp, else the pending one's, else the last one's; None for a partition
        with no record a reader reads. Never a transaction marker's: its timestamp is when the broker wrote
        it, which may be hours past the records of its transaction (a replay, a producer's event times)."""
        for record in (self.next, self.pending, self.last):
            if record is not None:
                return record.timestamp_ms
        return None


class _Last(NamedTuple):
    """A quiet partition's event time at an end: ``PartitionTimes.last`` there, and how it was found."""

    end: int
    record: TimestampedOffset | None
    unread: TimestampedOffset | None
    """The newest record by timestamp (MAX_TIMESTAMP) when it is none a reader reads, so that ``record``
    came from ``EventTimeLog.last``; None: ``record`` is that newest record itself (or there is none)."""


@dataclass(frozen=True)
class Decision:
    """``decide``'s answer: which partitions count, and the slowest of them where they are now."""

    states: Mapping[TopicPartition, AlignmentState]
    """``active`` for every counted partition here; ``settle`` tells ``held`` ones apart."""
    slowest: TopicPartition | None
    """None: no partition counts, nothing is bound."""
    slowest_ms: int | None


def decide(
    times: Mapping[TopicPartition, PartitionTimes],
    *,
    idle_timeout_ms: int | None,
    bounded: bool,
    quiet_ms: Mapping[TopicPartition, float] | None = None,
) -> Decision:
    """Which partitions count at the batch's start, and the slowest of them (ties: the first in order).

    ``bounded``: the run reads to a fixed end (``Trigger.AvailableNow``), so a partition with nothing left
    to read is finished. ``quiet_ms``: per partition, the wall-clock time since it last had a record to
    read, as this process saw it (Flink's idleness: no new record for that long): a partition with nothing
    to read is idle once that reaches ``idle_timeout_ms``. By the clock only: a partition whose producer
    writes records with old timestamps, but writes, is slow, not idle, and holds the others.
    """
    states: dict[TopicPartition, AlignmentState] = {}
    for tp, t in times.items():
        if t.readable:
            states[tp] = "active"
        elif bounded:
            states[tp] = "finished"
        elif t.event_time_ms is None:
            states[tp] = "empty"
        elif idle_timeout_ms is not None and (quiet_ms or {}).get(tp, 0) >= idle_timeout_ms:
            states[tp] = "idle"
        else:
            states[tp] = "active"
    # A counted partition has an event time: a record to read, or records read ("empty" otherwise).
    counted = [(t.event_time_ms or 0, tp) for tp, t in times.items() if states[tp] == "active"]
    if not counted:
        return Decision(states, None, None)
    slowest_ms, slowest = min(counted)
    return Decision(states, slowest, slowest_ms)


def slowest_after(decision: Decision, at_ends: Mapping[TopicPartition, PartitionTimes]) -> int | None:
    """The lowest event time among the counted partitions at their planned ends (where the next batch
    starts); None when nothing counts."""
    times = [at_ends[tp].event_time_ms or 0 for tp, state in decision.states.items() if state == "active"]
    return min(times, default=None)


def cap_known(t: PartitionTimes, bound_ms: int) -> int | None:
    """The end alignment allows a partition when no lookup is needed; None: look up its first record at
    the bound (``cap_at_cut``)."""
    if not t.readable:
        return t.latest  # nothing to read there (at most transaction markers): nothing to bound
    if t.newest is not None and t.newest.timestamp_ms < bound_ms:
        return t.latest  # every record it holds is below the bound
    if t.next is not None and t.next.timestamp_ms >= bound_ms:
        return t.position  # its very next record is at or past the bound: held where it is
    return None


def cap_at_cut(t: PartitionTimes, cut: TimestampedOffset | None) -> int | None:
    """The end of a partition whose next record is below the bound and whose newest is not, from its first
    record at or above the bound (``EventTimeLog.at_time``); None: the caller scans (``cap_after_scan``).

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


def cap_after_scan(t: PartitionTimes, scan: Scan) -> int:
    """The end from a scan from the position: before the first record at or above the bound, or where the
    scan stopped (``SCAN_LIMIT`` records, all below it)."""
    end = scan.found.offset if scan.found is not None else scan.scanned_to
    return max(t.position, min(end, t.latest))


def settle(
    decision: Decision,
    times: Mapping[TopicPartition, PartitionTimes],
    caps: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    *,
    bound_ms: int | None,
    drift_ms: int,
    idle_timeout_ms: int | None,
) -> AlignmentStatus:
    """The plan's status. ``held``: a counted partition, not the slowest, that alignment ends before its
    latest offset (its cap is where the batch ends it: it waits for the slowest)."""
    partitions = {}
    for tp, t in times.items():
        state = decision.states[tp]
        if state == "active" and tp != decision.slowest and caps[tp] < t.latest and ends[tp] == caps[tp]:
            state = "held"
        partitions[tp] = PartitionEventTime(t.event_time_ms, state)
    slowest = None if decision.slowest is None else times[decision.slowest]
    quiet = slowest is not None and not slowest.readable
    pending = slowest is not None and not slowest.readable and slowest.pending is not None
    return AlignmentStatus(bound_ms, decision.slowest, partitions, drift_ms, idle_timeout_ms, quiet, pending)


class EventTimeAligner:
    """Caps each micro-batch's end offsets by event time; lives in Spark's source runner (driver side).

    Per plan it asks the log for, in this order: the newest record of partitions whose latest offset moved
    (one ListOffsets for all); except under availableNow, the first record past each partition's end
    (``EventTimeLog.pending``: under read_committed one ListOffsets, and a fetch where a transaction is
    open), after the newest so that an open transaction is never missed by both (``cap``); the first
    record at positions it does not know yet (the batch's start, its planned ends: a fetch for all); the
    first record at the bound for partitions that reach it (one ListOffsets for all). Known answers are
    kept: they are facts of the log at an offset, so the plan does not depend on them being there. The
    ends planned for one batch are the next one's start, so in a catch-up most starts are known already.

    Args:
        log: the log to ask (Kafka in production).
        drift_ms: ``maxEventTimeDrift``.
        idle_timeout_ms: ``partitionIdleTimeout`` (None: a partition is never idle).
        scan_limit: see ``SCAN_LIMIT``.
    """

    def __init__(
        self,
        log: EventTimeLog,
        drift_ms: int,
        idle_timeout_ms: int | None,
        scan_limit: int = SCAN_LIMIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Nothing is asked of the log until the first plan. ``clock``: seconds, for idleness."""
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
        self._pending: dict[TopicPartition, tuple[int, TimestampedOffset]] = {}
        """Per partition: (an end, the first record at or after it as read_uncommitted sees it), kept while
        the end stays (the records at offsets never change). Where none was found, the next plan asks again
        (a transaction may open at any time)."""
        self._last: dict[TopicPartition, _Last] = {}
        """Per partition: its ``PartitionTimes.last`` at an end."""
        self._clock = clock
        self._moved: dict[TopicPartition, float] = {}
        """Per partition: when this process last planned it with a record to read (or first planned it).
        Every record a reader reads is one to read in some plan (the one whose latest offset first
        includes it starts before it), so this is when its last new record was seen. Not a latest offset
        that moved: transaction markers and aborted records move it too, and a producer whose transactions
        are all aborted would keep a partition that delivers nothing from ever being idle; nor a
        transaction opening past the end, for the same reason."""
        self.status: AlignmentStatus | None = None
        """The last plan's status (None before the first)."""

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Drop what is known of ``tps``' logs: their offsets now name other records (a topic recreated, a
        log truncated: ``data_loss``'s moved partitions), so a kept answer would be about the old log."""
        for tp in tps:
            self._newest.pop(tp, None)
            self._records.pop(tp, None)
            self._cuts.pop(tp, None)
            self._pending.pop(tp, None)
            self._last.pop(tp, None)
            self._moved.pop(tp, None)

    def cap(
        self,
        start: Mapping[TopicPartition, int],
        latest: Mapping[TopicPartition, int],
        *,
        bounded: bool,
        max_records: int | None,
    ) -> dict[TopicPartition, int]:
        """``latest`` lowered so that the batch from ``start`` reads nothing at or after the bound.

        ``max_records``: the read limit (``maxOffsetsPerTrigger``) the caller applies to the answer with
        ``apply_read_limit``, as the plan here does. The answer is never below ``start`` nor above
        ``latest``. ``bounded``: under Trigger.AvailableNow.
        """
        for tp, pos in start.items():  # positions only move forward: older answers are never needed again
            known = self._records.setdefault(tp, {})
            for old in [o for o in known if o < pos]:
                del known[old]
        pending = not bounded  # under availableNow a partition at its end is finished: nothing to look up
        # The newest records first, then what lies past the ends: a transaction that opens between the two
        # is then seen by the second (a partition read to its end counts at its first record), and one open
        # at the first was open at the second too. Asked the other way round, a transaction opening in
        # between was missed by the pending lookup while ListOffsets MAX_TIMESTAMP already answered nothing
        # (its newest record past the last stable offset): the partition looked empty for a plan, and the
        # others read ahead past the drift.
        self._ask_newest(latest)
        if pending:
            self._look_past_ends(latest)
        times = self._times(start, latest, pending=pending)
        now = self._clock()
        for tp, t in times.items():
            if t.readable or tp not in self._moved:
                self._moved[tp] = now
        quiet = {tp: (now - self._moved[tp]) * 1000 for tp in latest}
        decision = decide(times, idle_timeout_ms=self._idle_timeout_ms, bounded=bounded, quiet_ms=quiet)
        caps: dict[TopicPartition, int] = dict(latest)
        bound = None
        if decision.slowest_ms is not None:
            bound, caps = self._widest(decision, decision.slowest_ms, times, max_records, pending=pending)
        before, self.status = (
            self.status,
            settle(
                decision,
                times,
                caps,
                apply_read_limit(start, caps, max_records),
                bound_ms=bound,
                drift_ms=self._drift_ms,
                idle_timeout_ms=self._idle_timeout_ms,
            ),
        )
        self._log_change(before, self.status)
        return caps

    def _widest(
        self,
        decision: Decision,
        slowest_ms: int,
        times: Mapping[TopicPartition, PartitionTimes],
        max_records: int | None,
        *,
        pending: bool,
    ) -> tuple[int, dict[TopicPartition, int]]:
        """The widest bound, and its caps, for which the batch ends with every record below the drift past
        the slowest counted partition where it then stands (or where it starts: always true of
        ``slowest_ms + drift``, taken when no wider bound holds).

        Tried first: the drift past the slowest end as the read limit alone would make the ends; then again
        with the partitions that bound holds where they are left out of the read limit's share (so the
        others get it). A bound is taken only when the ends it makes keep it; each try is wider.
        """
        start = {tp: t.position for tp, t in times.items()}
        latest = {tp: t.latest for tp, t in times.items()}
        safe = slowest_ms + self._drift_ms
        bound, caps = safe, None
        hint = apply_read_limit(start, latest, max_records)
        for _ in range(len(times) + 1):
            at_hint = self._times(hint, latest, pending=pending)
            wider = max(slowest_ms, slowest_after(decision, at_hint) or 0) + self._drift_ms
            if caps is not None and wider <= bound:
                break
            wider_caps = self._caps(times, wider)
            ends = self._times(apply_read_limit(start, wider_caps, max_records), latest, pending=pending)
            if wider > safe and (slowest_after(decision, ends) or 0) + self._drift_ms < wider:
                break  # the cuts moved the slowest end back (out-of-order timestamps): not this one
            bound, caps = wider, wider_caps
            held = {tp for tp, t in times.items() if t.readable and caps[tp] == t.position}
            hint = apply_read_limit(
                start, {tp: start[tp] if tp in held else latest[tp] for tp in times}, max_records
            )
        return bound, caps if caps is not None else self._caps(times, safe)

    def _log_change(self, before: AlignmentStatus | None, now: AlignmentStatus) -> None:
        """A line when the partitions held, or the one they wait for, change (not on every plan)."""
        if (before.hold if before is not None else ()) == now.hold:
            return
        quiet_blocks = now.slowest_quiet and self._idle_timeout_ms is None and bool(now.held)
        log.log(
            logging.WARNING if quiet_blocks else logging.INFO,
            "%s",
            now.describe_hold() or "event-time alignment holds no partition back",
        )

    def _look_past_ends(self, latest: Mapping[TopicPartition, int]) -> None:
        """Once per plan, for every partition: the first record past its end (``EventTimeLog.pending``),
        unless one was found at that end already. Every partition, not only those with nothing to read at
        the start: a planned end may reach the latest offset, and its event time there is asked of this."""
        ask = {tp: end for tp, end in latest.items() if self._pending.get(tp, (None,))[0] != end}
        if ask:
            found = self._log.pending(ask)
            for tp, end in ask.items():
                record = found.get(tp)
                if record is None:
                    self._pending.pop(tp, None)
                else:
                    self._pending[tp] = (end, record)

    def _times(
        self, positions: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], *, pending: bool
    ) -> dict[TopicPartition, PartitionTimes]:
        """What is known of each partition at ``positions``, asking the log what is not known yet.

        ``pending``: with the first record past the end of partitions with nothing to read there, as this
        plan looked it up (``_look_past_ends``).
        """
        self._ask_newest({tp: latest[tp] for tp in positions})
        lookup = {}
        for tp, pos in positions.items():
            newest = self._newest[tp][1]
            # Up to latest, or past it to the newest record when the log grew between the two lookups
            # (then the newest record is not behind the position, and the next one is what counts).
            reach = max(latest[tp], newest.offset + 1 if newest is not None else 0)
            looked = self._records.setdefault(tp, {}).get(pos)
            if pos < reach and (looked is None or (looked[1] is None and looked[0] < reach)):
                lookup[tp] = (pos, reach)
        if lookup:
            for tp, scan in self._log.scan(lookup, None, 1).items():
                self._records[tp][lookup[tp][0]] = (scan.scanned_to, scan.found)
        nexts = {tp: self._records[tp].get(pos, (0, None))[1] for tp, pos in positions.items()}
        pendings = {
            tp: self._pending_at(tp, latest[tp]) if pending and nexts[tp] is None else None
            for tp in positions
        }
        quiet = [tp for tp in positions if nexts[tp] is None and pendings[tp] is None]
        self._ask_last({tp: latest[tp] for tp in quiet}, positions)
        return {
            tp: PartitionTimes(
                pos,
                latest[tp],
                nexts[tp],
                self._newest[tp][1],
                pendings[tp],
                self._last[tp].record if tp in quiet else None,
            )
            for tp, pos in positions.items()
        }

    def _ask_newest(self, latest: Mapping[TopicPartition, int]) -> None:
        """The newest record of each partition whose latest offset moved since it was asked (one ListOffsets
        MAX_TIMESTAMP for all)."""
        stale = [tp for tp, end in latest.items() if self._newest.get(tp, (None,))[0] != end]
        if stale:
            found = self._log.newest(stale)
            for tp in stale:
                self._newest[tp] = (latest[tp], found.get(tp))

    def _ask_last(
        self, latest: Mapping[TopicPartition, int], positions: Mapping[TopicPartition, int]
    ) -> None:
        """The event time of partitions with nothing to read, at each end not asked yet: the newest record
        (MAX_TIMESTAMP) when a reader reads it (one fetch of the record at its offset, for all), else the
        last record a reader reads below the end (``EventTimeLog.last``). MAX_TIMESTAMP answers any record
        batch's largest timestamp, a transaction's COMMIT or ABORT marker's (the broker's clock when it
        was written: Apache Kafka 4.4, probed) and an aborted record's too; taken as the partition's time,
        a marker written an hour after its transaction's records made a partition read to its end look an
        hour further on, and the others read that far ahead: their records were late.

        An end that moved over nothing a reader reads (``_carried``) keeps the read-back's answer instead of
        reading back again: a producer whose transactions all abort (a crash loop) moves the end every
        plan, and each read-back reads up to about 1.27 x ``LAST_LOOK_BACK`` offsets (a reviewer's case:
        every plan read the whole aborted tail again, and a large one could time the plan out)."""
        ask = {}
        for tp, end in latest.items():
            known = self._last.get(tp)
            if known is not None and known.end == end:
                continue
            carried = self._carried(tp, known, end, positions[tp])
            if carried is not None:
                self._last[tp] = carried
            else:
                ask[tp] = end
        if not ask:
            return
        newest = {tp: self._newest[tp][1] for tp in ask}
        check = {tp: (n.offset, n.offset + 1) for tp, n in newest.items() if n is not None}
        read = self._log.scan(check, None, 1) if check else {}
        back = {}
        for tp, end in ask.items():
            n = newest[tp]
            if n is None or read[tp].found == n:
                self._last[tp] = _Last(end, n, unread=None)
            else:
                back[tp] = end
        if back:
            found = self._log.last(back)
            for tp, end in back.items():
                self._last[tp] = _Last(end, found.get(tp), unread=newest[tp])

    def _carried(self, tp: TopicPartition, known: _Last | None, end: int, position: int) -> _Last | None:
        """``known`` moved to ``end`` without asking the log, or None where the log must be asked. Exactly
        what asking gives: ``known`` came from a read-back, and this plan's scan from ``position`` (at or
        below ``known.end``) found nothing a reader reads up to ``end``; so the newest record by timestamp
        is, as before, one no reader reads (the one checked then, or one in that stretch), and the last
        record below ``end`` is the last below ``known.end``, unless it now lies more than
        ``LAST_LOOK_BACK`` back.

        One exception, as for an answer kept while the end stays: retention (or deleteRecords, or
        compaction of a tombstone) removing the carried record. A cold aligner would find an older record
        or none (``empty``); this one keeps it and holds the others back where a cold one would not, until
        ``partitionIdleTimeout`` or the partition's next record: the cautious side (the record was
        delivered), never a record read late."""
        if known is None or known.unread is None or not position <= known.end < end:
            return None
        looked = self._records.get(tp, {}).get(position)
        if looked is None or looked[1] is not None or looked[0] < end:
            return None
        newest = self._newest[tp][1]
        if newest is None or (newest.offset < known.end and newest != known.unread):
            return None
        record = known.record
        if record is not None and end - record.offset > LAST_LOOK_BACK:
            record = None
        return _Last(end, record, unread=newest)

    def _pending_at(self, tp: TopicPartition, end: int) -> TimestampedOffset | None:
        known = self._pending.get(tp)
        return known[1] if known is not None and known[0] == end else None

    def _caps(
        self, times: Mapping[TopicPartition, PartitionTimes], bound_ms: int
    ) -> dict[TopicPartition, int]:
        caps: dict[TopicPartition, int | None] = {tp: cap_known(t, bound_ms) for tp, t in times.items()}
        missing = [tp for tp, cap in caps.items() if cap is None]
        if missing:
            cuts = self._cuts_at(missing, bound_ms)
            scan: dict[TopicPartition, tuple[int, int]] = {}
            for tp in missing:
                caps[tp] = cap_at_cut(times[tp], cuts[tp])
                if caps[tp] is None:
                    scan[tp] = (times[tp].position, times[tp].latest)
            if scan:
                scanned = self._log.scan(scan, bound_ms, self._scan_limit)
                for tp in scan:
                    caps[tp] = cap_after_scan(times[tp], scanned[tp])
        return {tp: int(cap) for tp, cap in caps.items() if cap is not None}

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
