"""Event-time alignment: the decision table, and properties over simulated logs and Spark's watermark."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparkafka.source.alignment as alignment_module
from sparkafka.source.alignment import (
    EventTimeAligner,
    PartitionTimes,
    Scan,
    cap_after_scan,
    cap_at_cut,
    cap_known,
    decide,
)
from sparkafka.source.alignment_status import AlignmentStatus
from sparkafka.source.planning import apply_read_limit
from sparkafka.structs import TimestampedOffset, TopicPartition

A0, A1, A2, A3 = (TopicPartition("a", p) for p in range(4))


@dataclass
class FakeLog:
    """Partitions as lists of (timestamp, visible) by offset; invisible records are aborted ones (ListOffsets
    sees them, a read_committed fetch does not). ``open_from``: per partition, where an open transaction
    starts (its last stable offset): a read_committed reader reads nothing from there on, and ListOffsets
    answers nothing there (Kafka filters its answers by the LSO); a read_uncommitted lookup sees it all."""

    records: dict[TopicPartition, list[tuple[int, bool]]]
    calls: list[str] = field(default_factory=list)
    open_from: dict[TopicPartition, int] = field(default_factory=dict)
    asked_pending: list[set[TopicPartition]] = field(default_factory=list)

    def end(self, tp: TopicPartition) -> int:
        """The end as a read_committed reader sees it: the last stable offset."""
        return self.open_from.get(tp, len(self.records[tp]))

    def _stable(self, tp: TopicPartition, found: TimestampedOffset | None) -> TimestampedOffset | None:
        return found if found is not None and found.offset < self.end(tp) else None

    def newest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, TimestampedOffset | None]:
        self.calls.append("newest")
        out: dict[TopicPartition, TimestampedOffset | None] = {}
        for tp in tps:
            recs = self.records[tp]
            newest = max(
                (TimestampedOffset(o, ts) for o, (ts, _) in enumerate(recs)),
                key=lambda r: r[::-1],
                default=None,
            )
            out[tp] = self._stable(tp, newest)
        return out

    def at_time(
        self, tps: Iterable[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, TimestampedOffset | None]:
        self.calls.append("at_time")
        return {
            tp: self._stable(
                tp,
                next(
                    (
                        TimestampedOffset(o, ts)
                        for o, (ts, _) in enumerate(self.records[tp])
                        if ts >= timestamp_ms
                    ),
                    None,
                ),
            )
            for tp in tps
        }

    def scan(
        self, ranges: Mapping[TopicPartition, tuple[int, int]], at_least_ms: int | None, max_records: int
    ) -> dict[TopicPartition, Scan]:
        self.calls.append("scan")
        out = {}
        for tp, (start, end) in ranges.items():
            looked = 0
            result = Scan(None, max(start, min(end, self.end(tp))))
            for o in range(start, min(end, self.end(tp))):
                ts, visible = self.records[tp][o]
                if not visible:
                    continue
                if at_least_ms is None or ts >= at_least_ms:
                    result = Scan(TimestampedOffset(o, ts), o)
                    break
                looked += 1
                if looked >= max_records:
                    result = Scan(None, o + 1)
                    break
            out[tp] = result
        return out

    def last(self, ends: Mapping[TopicPartition, int]) -> dict[TopicPartition, TimestampedOffset | None]:
        """The last visible record below each end (and the last stable offset)."""
        self.calls.append("last")
        out: dict[TopicPartition, TimestampedOffset | None] = {}
        for tp, end in ends.items():
            reach = end - alignment_module.LAST_LOOK_BACK  # read at call time: tests lower it
            below = range(min(end, self.end(tp)) - 1, max(reach, 0) - 1, -1)
            out[tp] = next(
                (TimestampedOffset(o, self.records[tp][o][0]) for o in below if self.records[tp][o][1]), None
            )
        return out

    def pending(self, ends: Mapping[TopicPartition, int]) -> dict[TopicPartition, TimestampedOffset | None]:
        """The first record at or after each end as a read_uncommitted reader sees it (any record)."""
        self.calls.append("pending")
        self.asked_pending.append(set(ends))
        return {
            tp: TimestampedOffset(end, self.records[tp][end][0]) if end < len(self.records[tp]) else None
            for tp, end in ends.items()
        }


def times(
    position: int, latest: int, nxt: tuple[int, int] | None, newest: tuple[int, int] | None
) -> PartitionTimes:
    newest_record = None if newest is None else TimestampedOffset(*newest)
    return PartitionTimes(
        position,
        latest,
        None if nxt is None else TimestampedOffset(*nxt),
        newest_record,
        last=newest_record if nxt is None or nxt[0] >= latest else None,
    )


# --- the decision table ---------------------------------------------------------------------------------

HOLDS = {A0: times(0, 10, (0, 100), (9, 900)), A1: times(0, 10, (0, 500), (9, 600))}


@pytest.mark.parametrize(
    ("name", "parts", "idle", "bounded", "slowest", "states", "caps"),
    [
        (
            "the slowest needs its cut looked up; a partition past the bound is held where it is",
            HOLDS,
            None,
            False,
            A0,
            {A0: "active", A1: "active"},
            {A0: None, A1: 0},
        ),
        (
            "a partition whose newest record is below the bound reads to latest",
            {A0: times(0, 10, (0, 100), (9, 900)), A1: times(0, 10, (0, 120), (9, 140))},
            None,
            False,
            A0,
            {A0: "active", A1: "active"},
            {A0: None, A1: 10},
        ),
        (
            "a caught-up partition counts at its newest timestamp and holds the others",
            {A0: times(10, 10, None, (9, 100)), A1: times(0, 10, (0, 500), (9, 600))},
            None,
            False,
            A0,
            {A0: "active", A1: "active"},
            {A0: 10, A1: 0},
        ),
        (
            "its newest record older than the newest anywhere by more than the idle timeout, but not quiet "
            "by the clock: it counts (idleness is by the clock only)",
            {A0: times(10, 10, None, (9, 100)), A1: times(0, 10, (0, 500), (9, 540))},
            400,
            False,
            A0,
            {A0: "active", A1: "active"},
            {A0: 10, A1: 0},
        ),
        (
            "quiet for less than the idle timeout: still counts",
            {A0: times(10, 10, None, (9, 300)), A1: times(0, 10, (0, 500), (9, 600))},
            400,
            False,
            A0,
            {A0: "active", A1: "active"},
            {A0: 10, A1: 0},
        ),
        (
            "a partition with records to read is never idle, however old they are",
            {A0: times(0, 10, (0, 100), (9, 100)), A1: times(0, 10, (0, 500), (9, 600))},
            1,
            False,
            A0,
            {A0: "active", A1: "active"},
            {A0: 10, A1: 0},
        ),
        (
            "availableNow: a partition at the end of the run is finished and holds no one",
            {A0: times(10, 10, None, (9, 100)), A1: times(0, 10, (0, 500), (9, 540))},
            None,
            True,
            A1,
            {A0: "finished", A1: "active"},
            {A0: 10, A1: 10},
        ),
        (
            "an empty partition has no event time and holds no one",
            {A0: times(0, 0, None, None), A1: times(0, 10, (0, 500), (9, 540))},
            None,
            False,
            A1,
            {A0: "empty", A1: "active"},
            {A0: 0, A1: 10},
        ),
        (
            "nothing counts: nothing is bound",
            {A0: times(10, 10, None, (9, 100)), A1: times(3, 3, None, (2, 900))},
            None,
            True,
            None,
            {A0: "finished", A1: "finished"},
            {A0: 10, A1: 3},
        ),
        (
            "only transaction markers left: not readable, counts at its newest, ends at latest",
            {A0: times(8, 10, None, (7, 100)), A1: times(0, 10, (0, 500), (9, 600))},
            None,
            False,
            A0,
            {A0: "active", A1: "active"},
            {A0: 10, A1: 0},
        ),
        (
            "ties: the first partition in order is the slowest",
            {A1: times(0, 10, (0, 100), (9, 900)), A0: times(0, 10, (0, 100), (9, 900))},
            None,
            False,
            A0,
            {A0: "active", A1: "active"},
            {A0: None, A1: None},
        ),
    ],
)
def test_decision_table(
    name: str,
    parts: dict[TopicPartition, PartitionTimes],
    idle: int | None,
    bounded: bool,
    slowest: TopicPartition | None,
    states: dict[TopicPartition, str],
    caps: dict[TopicPartition, int | None],
) -> None:
    """Which partitions count, the slowest, and the caps known without a lookup at slowest + 50."""
    decision = decide(parts, idle_timeout_ms=idle, bounded=bounded)
    assert (decision.slowest, dict(decision.states)) == (slowest, states), name
    bound = (decision.slowest_ms or 0) + 50
    known = {tp: cap_known(t, bound) if slowest is not None else t.latest for tp, t in parts.items()}
    assert known == caps, name


@pytest.mark.parametrize(
    ("cut", "cap"),
    [
        (None, 10),  # no record reaches the bound: to latest
        ((6, 200), 6),  # past the next record: stop before it
        ((20, 200), 10),  # beyond latest (the log grew): to latest
        ((1, 200), None),  # before the position (read already): scan
        ((3, 200), None),  # at or before the next readable record (an aborted one): scan
    ],
)
def test_cap_at_cut(cut: tuple[int, int] | None, cap: int | None) -> None:
    t = times(2, 10, (3, 100), (9, 900))
    assert cap_at_cut(t, None if cut is None else TimestampedOffset(*cut)) == cap


def test_cap_after_scan_stops_before_the_record_found_or_where_it_stopped() -> None:
    t = times(2, 10, (3, 100), (9, 900))
    assert cap_after_scan(t, Scan(TimestampedOffset(7, 300), 7)) == 7
    assert cap_after_scan(t, Scan(None, 6)) == 6
    assert cap_after_scan(t, Scan(None, 10)) == 10


def test_out_of_order_record_before_the_position_makes_a_scan_from_the_position() -> None:
    # a-0: an early record at 900 (read already), then 100, 110, ..., 190, then 2000s: ListOffsets(170)
    # answers offset 0. a-1 ends the batch at 120: the bound is 170.
    early = [(900, True)] + [(100 + 10 * i, True) for i in range(10)] + [(2000, True)] * 5
    log = FakeLog({A0: early, A1: [(120, True)] * 3})
    aligner = EventTimeAligner(log, drift_ms=50, idle_timeout_ms=None)
    caps = aligner.cap({A0: 1, A1: 0}, {A0: 16, A1: 3}, bounded=False, max_records=None)
    assert caps == {A0: 8, A1: 3}  # 100..160 read; 170 is the first at the bound
    assert "scan" in log.calls


def test_partitions_that_progress_together_read_the_whole_read_limit() -> None:
    """The bound is the drift past the slowest where the batch *ends*: no skew, no narrowing."""
    log = FakeLog({tp: [(1000 * i, True) for i in range(100)] for tp in (A0, A1)})
    aligner = EventTimeAligner(log, drift_ms=50, idle_timeout_ms=None)
    start, latest = {A0: 0, A1: 0}, {A0: 100, A1: 100}
    caps = aligner.cap(start, latest, bounded=False, max_records=60)
    assert apply_read_limit(start, caps, 60) == {A0: 30, A1: 30}  # 30 s of records each, drift 50 ms
    assert aligner.status is not None
    assert aligner.status.held == []


def test_a_partition_ahead_waits_while_the_lagging_one_reads_its_share() -> None:
    lagging = [(1000 * i, True) for i in range(100)]
    ahead = [(200_000 + 1000 * i, True) for i in range(100)]
    log = FakeLog({A0: lagging, A1: ahead})
    aligner = EventTimeAligner(log, drift_ms=5000, idle_timeout_ms=None)
    start, latest = {A0: 0, A1: 0}, {A0: 100, A1: 100}
    caps = aligner.cap(start, latest, bounded=False, max_records=60)
    # a-1 is held where it is, so a-0 takes the whole limit: it ends at 60 s, and the bound is 5 s past it.
    assert caps == {A0: 65, A1: 0}
    assert apply_read_limit(start, caps, 60) == {A0: 60, A1: 0}
    status = aligner.status
    assert status is not None
    assert status.held == [A1]
    assert status.bound_ms == 60_000 + 5000


def test_a_warm_aligner_asks_only_whether_a_transaction_opened_while_nothing_changes() -> None:
    """One lookup a plan (``pending``: one ListOffsets under read_committed, nothing under read_uncommitted);
    under availableNow, none."""
    log = FakeLog({A0: [(100 + i, True) for i in range(100)], A1: [(500, True)] * 3})
    for bounded, calls in ((False, ["pending"]), (True, [])):
        aligner = EventTimeAligner(log, drift_ms=50, idle_timeout_ms=None)
        first = aligner.cap({A0: 0, A1: 0}, {A0: 100, A1: 3}, bounded=bounded, max_records=None)
        log.calls.clear()
        assert aligner.cap({A0: 0, A1: 0}, {A0: 100, A1: 3}, bounded=bounded, max_records=None) == first
        assert log.calls == calls


def still_aligner(log: FakeLog) -> EventTimeAligner:
    """A 1-second drift, no idleness, a clock that stands still."""
    return EventTimeAligner(log, drift_ms=1000, idle_timeout_ms=None, clock=lambda: 0.0)


def planned_time(aligner: EventTimeAligner, tp: TopicPartition) -> int | None:
    """``tp``'s event time in the aligner's last plan."""
    assert aligner.status is not None
    return aligner.status.partitions[tp].event_time_ms


def test_an_end_moving_over_aborted_transactions_only_is_not_read_back_again() -> None:
    """A producer whose transactions all abort (a crash loop) moves a quiet partition's end every plan with
    nothing to read: the read-back (up to about 1.27 x LAST_LOOK_BACK offsets) runs once, and its answer is
    carried to the new end, as a cold aligner asking the log would find it (review of issue 38)."""
    log = FakeLog({A0: [(100, True)] + [(200, False)] * 10, A1: [(t, True) for t in range(100, 5000, 10)]})
    aligner = still_aligner(log)
    latest = {A0: 11, A1: len(log.records[A1])}
    caps = aligner.cap({A0: 1, A1: 0}, latest, bounded=False, max_records=None)
    assert log.calls.count("last") == 1
    log.records[A0] += [(300, False)] * 10  # another aborted transaction, its marker alike
    start, latest = {A0: 11, A1: caps[A1]}, {A0: 21, A1: latest[A1]}
    planned = aligner.cap(start, latest, bounded=False, max_records=None)
    assert log.calls.count("last") == 1
    cold = still_aligner(FakeLog(dict(log.records)))
    assert planned == cold.cap(start, latest, bounded=False, max_records=None)
    assert aligner.status == cold.status
    assert planned_time(aligner, A0) == 100


def test_an_old_aborted_record_stamped_newest_does_not_make_every_end_move_read_back_again() -> None:
    """The newest record by timestamp an aborted one below the end, stamped ahead of the rest (a producer's
    clock ahead, the broker's stepping back): still one read-back while the end moves over aborted records
    only, and the answer a cold aligner gives (review of the carry)."""
    log = FakeLog({A0: [(100, True), (10_000, False)] + [(200, False)] * 4, A1: TICKS})
    aligner = still_aligner(log)
    latest = {A0: 6, A1: len(TICKS)}
    caps = aligner.cap({A0: 2, A1: 0}, latest, bounded=False, max_records=None)
    for _ in range(4):
        log.records[A0] += [(300, False)] * 3
        start, latest = {A0: latest[A0], A1: caps[A1]}, {A0: len(log.records[A0]), A1: latest[A1]}
        caps = aligner.cap(start, latest, bounded=False, max_records=None)
        cold = still_aligner(FakeLog({tp: list(r) for tp, r in log.records.items()}))
        assert caps == cold.cap(start, latest, bounded=False, max_records=None)
        assert aligner.status == cold.status
    assert log.calls.count("last") == 1
    assert planned_time(aligner, A0) == 100


def test_a_carried_last_record_further_back_than_the_look_back_is_gone_as_a_cold_aligner_finds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The carried answer obeys ``LAST_LOOK_BACK`` as the read-back does: once the end has moved more than
    that past the last record a reader reads, the partition is empty, warm or cold."""
    monkeypatch.setattr(alignment_module, "LAST_LOOK_BACK", 8)
    log = FakeLog({A0: [(100, True)] + [(200, False)] * 5, A1: [(t, True) for t in range(100, 5000, 10)]})
    aligner = still_aligner(log)
    latest = {A0: 6, A1: len(log.records[A1])}
    caps = aligner.cap({A0: 1, A1: 0}, latest, bounded=False, max_records=None)
    assert planned_time(aligner, A0) == 100
    for more in (2, 1):  # the end 8 offsets past the record (still found), then 9 (gone)
        log.records[A0] += [(300, False)] * more
        start, latest = {A0: latest[A0], A1: caps[A1]}, {A0: len(log.records[A0]), A1: latest[A1]}
        caps = aligner.cap(start, latest, bounded=False, max_records=None)
        cold = still_aligner(FakeLog(dict(log.records)))
        assert caps == cold.cap(start, latest, bounded=False, max_records=None)
        assert aligner.status == cold.status
    assert log.calls.count("last") == 1
    assert planned_time(aligner, A0) is None


def test_an_end_moving_over_a_record_to_read_is_asked_again() -> None:
    """No carry across a record a reader reads: a committed record among the aborted ones is the new last."""
    log = FakeLog({A0: [(100, True)] + [(200, False)] * 5, A1: [(t, True) for t in range(100, 5000, 10)]})
    aligner = still_aligner(log)
    latest = {A0: 6, A1: len(log.records[A1])}
    caps = aligner.cap({A0: 1, A1: 0}, latest, bounded=False, max_records=None)
    log.records[A0] += [(150, True)] + [(300, False)] * 3
    # Read to the new end (the batch read the record at 6): the partition is quiet again at 10.
    start, latest = {A0: 10, A1: caps[A1]}, {A0: 10, A1: latest[A1]}
    aligner.cap(start, latest, bounded=False, max_records=None)
    assert planned_time(aligner, A0) == 150
    assert log.calls.count("last") == 2


def test_a_recreated_partition_is_planned_from_its_new_log_not_from_what_was_known_of_the_old() -> None:
    """A topic recreated (or a log truncated) reuses offsets for other records: a warm aligner that kept the
    old log's answers held every partition (its old timestamp made it the slowest) where a cold one
    progresses; ``forget`` (called by the reader for data_loss's moved partitions) makes them plan alike."""
    old = FakeLog({A0: [(5 + i, True) for i in range(20)], A1: [(500 + i, True) for i in range(20)]})
    aligner = EventTimeAligner(old, drift_ms=10, idle_timeout_ms=None)
    aligner.cap({A0: 0, A1: 0}, {A0: 20, A1: 20}, bounded=False, max_records=None)
    old.records[A0] = [(1000 + i, True) for i in range(20)]  # the same log object, now the new topic's
    aligner.forget([A0])
    cold = EventTimeAligner(FakeLog(dict(old.records)), drift_ms=10, idle_timeout_ms=None)
    start, latest = {A0: 0, A1: 0}, {A0: 20, A1: 20}
    planned = aligner.cap(start, latest, bounded=False, max_records=None)
    assert planned == cold.cap(start, latest, bounded=False, max_records=None)
    assert planned[A1] > 0  # the slowest, A1, reads


def test_a_quiet_partition_becomes_idle_by_the_clock_while_the_whole_stream_is_quiet() -> None:
    """A0 read to its end (last record at 10:00), A1 with records at 10:00:30, 10:01:30, 10:02:30 to read,
    drift 1 min, idle timeout 5 min, and nothing new anywhere: by the stream's time alone A0 is never idle
    (no record is 5 minutes newer than its last), so A1 stayed held at 10:01:30 until one came. After 5
    minutes of the clock with A0's log unchanged, A0 is idle and A1 reads on (Flink's idleness)."""
    minute = 60_000
    log = FakeLog({A0: [(10 * minute, True)], A1: [(10 * minute + s * 1000, True) for s in (30, 90, 150)]})
    now = [0.0]
    aligner = EventTimeAligner(log, drift_ms=minute, idle_timeout_ms=5 * minute, clock=lambda: now[0])
    latest = {A0: 1, A1: 3}
    assert aligner.cap({A0: 1, A1: 0}, latest, bounded=False, max_records=None) == {A0: 1, A1: 1}
    now[0] += 299
    assert aligner.cap({A0: 1, A1: 1}, latest, bounded=False, max_records=None) == {A0: 1, A1: 1}  # held
    now[0] += 1
    assert aligner.cap({A0: 1, A1: 1}, latest, bounded=False, max_records=None) == {A0: 1, A1: 3}
    assert aligner.status is not None
    assert aligner.status.partitions[A0].state == "idle"


def test_status_round_trips_through_json() -> None:
    log = FakeLog({A0: [(100, True)], A1: [(500, True)] * 3, A2: []})
    aligner = EventTimeAligner(log, drift_ms=50, idle_timeout_ms=1000)
    aligner.cap({A0: 0, A1: 0, A2: 0}, {A0: 1, A1: 3, A2: 0}, bounded=False, max_records=None)
    status = aligner.status
    assert status is not None
    assert status.held == [A1]
    assert status.slowest == A0
    assert status.slowest_ms == 100
    assert AlignmentStatus.from_json(status.to_json()) == status


# --- open transactions (read_committed) -------------------------------------------------------------------

TICKS = [(100 + 10 * i, True) for i in range(81)]
"""A partition with a record every 10 ms from 100 to 900."""


@pytest.mark.parametrize(
    ("name", "records", "open_from", "start", "idle", "bounded", "quiet_s", "caps", "states"),
    [
        (
            "a partition behind an open transaction counts at its first pending record and holds the others",
            {A0: [(100 + i, True) for i in range(5)], A1: TICKS},
            {A0: 0},
            {A0: 0, A1: 0},
            None,
            False,
            0,
            {A0: 0, A1: 5},  # A1 stops before 150: the drift past A0's pending 100
            {A0: "active", A1: "held"},
        ),
        (
            "read up to its open transaction: it counts there, not as empty",
            {A0: [(100 + i, True) for i in range(10)] + [(200 + i, True) for i in range(5)], A1: TICKS},
            {A0: 10},
            {A0: 10, A1: 0},
            None,
            False,
            0,
            {A0: 10, A1: 15},  # A1 (the slowest, at 100) reads up to 250: the drift past A0's pending 200
            {A0: "active", A1: "active"},
        ),
        (
            "never idle by stream time: its pending records are not a partition gone quiet in the data",
            {A0: [(100, True), (400, True), (350, True), (360, True)], A1: TICKS},
            {A0: 2},
            {A0: 2, A1: 0},
            300,  # A0's newest readable record (400) is 500 behind A1's (900)
            False,
            0,
            {A0: 2, A1: 30},  # A1 stops before 400: the drift past A0's pending 350
            {A0: "active", A1: "active"},
        ),
        (
            "its last stable offset unchanged for less than partitionIdleTimeout: it still holds the others",
            {A0: [(100 + i, True) for i in range(5)], A1: TICKS},
            {A0: 0},
            {A0: 0, A1: 0},
            300_000,
            False,
            299,
            {A0: 0, A1: 5},
            {A0: "active", A1: "held"},
        ),
        (
            "its last stable offset unchanged for partitionIdleTimeout (the clock): idle, it holds no one",
            {A0: [(100 + i, True) for i in range(5)], A1: TICKS},
            {A0: 0},
            {A0: 0, A1: 0},
            300_000,
            False,
            300,
            {A0: 0, A1: 81},
            {A0: "idle", A1: "active"},
        ),
        (
            "availableNow: at the end of the run behind an open transaction, it is finished",
            {A0: [(100 + i, True) for i in range(5)], A1: TICKS},
            {A0: 0},
            {A0: 0, A1: 0},
            None,
            True,
            0,
            {A0: 0, A1: 81},
            {A0: "finished", A1: "active"},
        ),
    ],
)
def test_open_transactions_decision_table(
    name: str,
    records: dict[TopicPartition, list[tuple[int, bool]]],
    open_from: dict[TopicPartition, int],
    start: dict[TopicPartition, int],
    idle: int | None,
    bounded: bool,
    quiet_s: float,
    caps: dict[TopicPartition, int],
    states: dict[TopicPartition, str],
) -> None:
    """Drift 50; planned once, then again ``quiet_s`` seconds later with nothing new (the fake clock)."""
    log = FakeLog(records, open_from=open_from)
    now = [0.0]
    aligner = EventTimeAligner(log, drift_ms=50, idle_timeout_ms=idle, clock=lambda: now[0])
    latest = {tp: log.end(tp) for tp in records}
    aligner.cap(start, latest, bounded=bounded, max_records=None)
    now[0] += quiet_s
    assert aligner.cap(start, latest, bounded=bounded, max_records=None) == caps, name
    assert aligner.status is not None
    assert {tp: p.state for tp, p in aligner.status.partitions.items()} == states, name


def test_a_transaction_s_first_record_is_looked_up_once_per_last_stable_offset() -> None:
    """The record at an offset is a fact of the log; whether one exists past the end is asked every plan."""
    log = FakeLog({A0: [(100, True)] * 3, A1: TICKS, A2: [(100, True)]}, open_from={A0: 0})
    aligner = EventTimeAligner(log, drift_ms=50, idle_timeout_ms=None)
    start, latest = {A0: 0, A1: 0, A2: 1}, {A0: 0, A1: 81, A2: 1}
    aligner.cap(start, latest, bounded=False, max_records=None)
    log.calls.clear()
    aligner.cap(start, latest, bounded=False, max_records=None)
    assert log.calls == ["pending"]
    assert log.asked_pending[-1] == {A1, A2}  # nothing was pending there, something may be now
    assert aligner.status is not None
    assert aligner.status.slowest == A0
    assert aligner.status.slowest_pending
    hold = aligner.status.describe_hold() or ""
    assert "a-0 waits for a transaction left open" in hold
    assert "kafka-transactions.sh find-hanging" in hold  # the operator's remedy for a hanging one


def test_a_transaction_opening_past_an_idle_partition_leaves_it_idle_until_its_records_commit() -> None:
    """Idle by the clock (nothing new for 5 minutes), A0 holds no one; a transaction opening past its end is
    no new record (a producer whose transactions are all aborted delivers nothing), so A0 stays idle; once
    it commits, A0 has records to read and counts again, for 5 minutes after its last record to read."""
    log = FakeLog({A0: [(100, True)], A1: TICKS})
    now = [0.0]
    aligner = EventTimeAligner(log, drift_ms=50, idle_timeout_ms=300_000, clock=lambda: now[0])
    start = {A0: 1, A1: 0}

    def plan() -> tuple[int, str]:
        caps = aligner.cap(start, {tp: log.end(tp) for tp in log.records}, bounded=False, max_records=None)
        assert aligner.status is not None
        return caps[A1], aligner.status.partitions[A0].state

    assert plan() == (5, "active")  # A1 before 150: the drift past A0's newest, 100
    now[0] = 300
    assert plan() == (81, "idle")
    log.records[A0] += [(120, True), (130, True)]
    log.open_from[A0] = 1
    assert plan() == (81, "idle")
    del log.open_from[A0]  # committed: two records to read
    assert plan() == (8, "active")  # A1 before 180: the drift past where A0's batch ends, its last record 130
    start[A0] = 3
    now[0] = 599
    assert plan() == (8, "active")  # read to its end: counts at its last record, 130, for the timeout
    now[0] = 600
    assert plan() == (81, "idle")


def test_a_crash_looping_transactional_producer_leaves_its_partition_idle() -> None:
    """A0's producer opens a transaction with one record, which is aborted, then opens another, for ever (a
    crash loop): its latest offset and its open transaction move every plan, yet it delivers no record.
    Idle after partitionIdleTimeout (15 s, plans every 10 s) of no record to read: A1 reads on. Before, each
    moved end or transaction was news and A0 held A1 at its start for good (review of issue 38)."""
    a1 = [(2000 + i, True) for i in range(100)]
    log = FakeLog({A0: [(1000, True)] * 5, A1: a1})
    now = [0.0]
    aligner = EventTimeAligner(log, drift_ms=100, idle_timeout_ms=15_000, clock=lambda: now[0])
    start = {A0: 5, A1: 0}
    for _ in range(10):
        log.records[A0].append((1010, True))
        log.open_from[A0] = len(log.records[A0]) - 1  # a transaction opens at the end
        start = aligner.cap(start, {A0: log.end(A0), A1: len(a1)}, bounded=False, max_records=None)
        now[0] += 10.0
        aborted = log.open_from.pop(A0)
        log.records[A0][aborted] = (1010, False)
        log.records[A0].append((10**9, False))  # the ABORT marker (the broker's clock)
    assert start[A1] == len(a1)
    assert aligner.status is not None
    assert aligner.status.partitions[A0].state == "idle"


def test_a_slow_but_live_partition_is_not_idle_by_the_streams_time() -> None:
    """A0's producer writes a record every 2 s with event times an hour behind A1's backlog; idle timeout 30
    s. Idleness is by the clock only (Flink's: no record for that long): A0 counts, and A1 reads only to the
    drift past A0. Before, A0 was idle because its newest record was older than A1's newest by more than the
    timeout (the stream's time), and A1 raced ahead (review of issue 38)."""
    log = FakeLog({A0: [(1000, True)], A1: [(1000 + 40_000 * i, True) for i in range(101)]})
    now = [0.0]
    aligner = EventTimeAligner(log, drift_ms=100_000, idle_timeout_ms=30_000, clock=lambda: now[0])
    start = {A0: 0, A1: 0}
    for plan in range(6):
        if plan % 2 == 0:
            log.records[A0].append((1001 + plan, True))
        start = aligner.cap(
            start, {A0: len(log.records[A0]), A1: len(log.records[A1])}, bounded=False, max_records=None
        )
        now[0] += 1.0
    assert log.records[A1][start[A1] - 1][0] < 1005 + 100_000
    assert aligner.status is not None
    assert aligner.status.partitions[A0].state != "idle"


def test_a_commit_marker_newer_than_its_transaction_is_not_a_partitions_event_time() -> None:
    """A0 has read all of a committed transaction (event times up to 1100); its COMMIT marker, which a
    reader never sees but ListOffsets MAX_TIMESTAMP answers, carries the broker's clock, 100,000. A0 counts
    at its last record, 1100, so A1 (from 1500) waits. Before, A0 counted at the marker's time and A1 read
    all of its records, late for A0's next ones (review of issue 38)."""
    a0 = [(1000 + 10 * i, True) for i in range(11)] + [(100_000, False)]
    log = FakeLog({A0: a0, A1: [(1500 + 10 * i, True) for i in range(101)]})
    aligner = EventTimeAligner(log, drift_ms=100, idle_timeout_ms=None)
    caps = aligner.cap({A0: 12, A1: 0}, {A0: 12, A1: 101}, bounded=False, max_records=None)
    assert caps[A1] == 0
    assert aligner.status is not None
    assert aligner.status.partitions[A0].event_time_ms == 1100
    # The newest record a data record: taken as it is (one fetch at its offset), no read back.
    log = FakeLog({A0: [(1200, True), *a0[:-1]], A1: log.records[A1]})
    aligner = EventTimeAligner(log, drift_ms=100, idle_timeout_ms=None)
    aligner.cap({A0: 12, A1: 0}, {A0: 12, A1: 101}, bounded=False, max_records=None)
    assert aligner.status is not None
    assert aligner.status.partitions[A0].event_time_ms == 1200
    assert "last" not in log.calls


def test_a_partition_holding_only_markers_and_aborted_records_has_no_event_time() -> None:
    """Nothing a reader reads: no event time (``empty``), found by reading back from the end."""
    log = FakeLog({A0: [(5000, False), (9000, False)], A1: [(1500 + 10 * i, True) for i in range(101)]})
    aligner = EventTimeAligner(log, drift_ms=100, idle_timeout_ms=None)
    caps = aligner.cap({A0: 2, A1: 0}, {A0: 2, A1: 101}, bounded=False, max_records=None)
    assert caps[A1] == 101
    assert aligner.status is not None
    assert aligner.status.partitions[A0].state == "empty"


@dataclass
class OpeningLog(FakeLog):
    """A ``FakeLog`` in which a transaction opens past ``tp``'s end (its first records ``opened``) just
    before the lookup numbered ``before_call`` (0: the plan's first), as one may between any two requests."""

    tp: TopicPartition = A0
    opened: list[tuple[int, bool]] = field(default_factory=list)
    before_call: int = 0
    _made: int = 0

    def _tick(self) -> None:
        if self._made == self.before_call:
            self.open_from[self.tp] = len(self.records[self.tp])
            self.records[self.tp] += self.opened
        self._made += 1

    def newest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, TimestampedOffset | None]:
        self._tick()
        return super().newest(tps)

    def at_time(
        self, tps: Iterable[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, TimestampedOffset | None]:
        self._tick()
        return super().at_time(tps, timestamp_ms)

    def scan(
        self, ranges: Mapping[TopicPartition, tuple[int, int]], at_least_ms: int | None, max_records: int
    ) -> dict[TopicPartition, Scan]:
        self._tick()
        return super().scan(ranges, at_least_ms, max_records)

    def pending(self, ends: Mapping[TopicPartition, int]) -> dict[TopicPartition, TimestampedOffset | None]:
        self._tick()
        return super().pending(ends)


@pytest.mark.parametrize("before_call", range(6))
def test_a_transaction_opening_between_two_lookups_of_a_plan_never_lets_the_others_pass_it(
    before_call: int,
) -> None:
    """A0 read to its end (records at 100-104), A1 with a record every 10 ms from 100 to 900, drift 50; the
    driver looked up the ends (A0: 5) before a transaction opened past A0 with records at 120 and 130, newer
    than any A0 holds. Whichever lookup of the plan comes first after it opened, A0 counts at 104 (its
    newest, the transaction unseen) or at 120 (the transaction's first record): A1 reads nothing at or past
    170. Planned with the pending lookup before MAX_TIMESTAMP, a transaction opening between the two was
    missed by the first while the second answered nothing (the newest record past the last stable offset):
    A0 looked empty, and A1 read to 900."""
    log = OpeningLog(
        {A0: [(100 + i, True) for i in range(5)], A1: TICKS},
        opened=[(120, True), (130, True)],
        before_call=before_call,
    )
    aligner = EventTimeAligner(log, drift_ms=50, idle_timeout_ms=None)
    caps = aligner.cap({A0: 5, A1: 0}, {A0: 5, A1: 81}, bounded=False, max_records=None)
    assert caps[A0] == 5
    assert caps[A1] <= 7, log.calls  # TICKS[7] is at 170
    assert aligner.status is not None
    assert aligner.status.partitions[A0].state == "active"


def drain_open(
    log: FakeLog,
    aligner: EventTimeAligner,
    position: dict[TopicPartition, int],
    drift: int,
    idle: int | None,
    max_rows: int | None,
) -> list[list[int]]:
    """Plan and read batches until a plan moves nothing (the clock frozen: never idle by it); every plan
    checked against a cold aligner. ``position`` is moved."""
    latest = {tp: log.end(tp) for tp in log.records}
    batches: list[list[int]] = []
    for _ in range(500):
        capped = aligner.cap(position, latest, bounded=False, max_records=max_rows)
        cold = EventTimeAligner(replace(log, calls=[]), drift, idle, scan_limit=3, clock=lambda: 0.0)
        assert cold.cap(position, latest, bounded=False, max_records=max_rows) == capped
        end = apply_read_limit(position, capped, max_rows)
        if end == position:
            break
        batches.append(
            [ts for tp, s in position.items() for ts, visible in log.records[tp][s : end[tp]] if visible]
        )
        position.update(end)
    return batches


@settings(max_examples=300)
@given(
    data=st.data(),
    disorder=st.integers(0, 30),
    drift=st.integers(1, 120),
    idle=st.none() | st.integers(1, 300),
    max_rows=st.none() | st.integers(1, 12),
)
def test_an_open_transaction_s_records_are_not_late_when_it_ends(
    data: st.DataObject, disorder: int, drift: int, idle: int | None, max_rows: int | None
) -> None:
    """Transactions open past some partitions' last stable offsets while the query catches up, then end
    (each record committed or aborted as drawn): with withWatermark(drift + disorder) nothing is late."""
    records = data.draw(logs(disorder))
    open_from = {
        tp: data.draw(st.integers(0, len(r))) for tp, r in records.items() if data.draw(st.booleans())
    }
    log = FakeLog(records, open_from=dict(open_from))
    aligner = EventTimeAligner(log, drift, idle, scan_limit=3, clock=lambda: 0.0)
    position = dict.fromkeys(records, 0)
    batches = drain_open(log, aligner, position, drift, idle, max_rows)
    log.open_from.clear()  # the transactions end
    batches += drain_open(log, aligner, position, drift, idle, max_rows)
    assert watermark_drops(batches, drift + disorder) == []


# --- properties -----------------------------------------------------------------------------------------


@st.composite
def logs(draw: st.DrawFn, disorder: int) -> dict[TopicPartition, list[tuple[int, bool]]]:
    """1-4 partitions of 0-25 records, each at least the largest earlier timestamp minus ``disorder``;
    some aborted (invisible to reads), as transactions leave them."""
    out = {}
    for p in range(draw(st.integers(1, 4))):
        ts = draw(st.integers(0, 2000))
        top = ts
        recs = []
        for _ in range(draw(st.integers(0, 25))):
            ts = max(0, top + draw(st.integers(-disorder, 60)))
            top = max(top, ts)
            recs.append((ts, draw(st.booleans()) or draw(st.booleans())))
        out[TopicPartition("t", p)] = recs
    return out


def event_time(records: list[tuple[int, bool]], position: int) -> int:
    """The first readable record's timestamp at or after ``position``, else the newest of all."""
    return next((ts for ts, v in records[position:] if v), max(ts for ts, _ in records))


def watermark_drops(batches: list[list[int]], delay: int) -> list[int]:
    """Spark's rule: a row at or below the watermark is late; the watermark is the largest event time of
    earlier batches minus the delay (row-level: stricter than a window's end)."""
    watermark = None
    dropped = []
    for rows in batches:
        dropped += [ts for ts in rows if watermark is not None and ts <= watermark]
        if rows:
            candidate = max(rows) - delay
            watermark = candidate if watermark is None else max(watermark, candidate)
    return dropped


def still_clock() -> float:
    return 0.0


def run(
    log: FakeLog,
    drift: int,
    idle: int | None,
    max_rows: int | None,
    bounded: bool,
) -> tuple[list[list[int]], list[AlignmentStatus], dict[TopicPartition, int]]:
    """Plan and read batches until a plan moves nothing; every plan checked against a cold aligner.

    On a clock that stands still: idleness is by the driver's clock since a partition was first seen quiet,
    which a cold aligner cannot know, so a warm and a cold plan may differ once time passes (by design:
    replays take their ends from the offset log). Idleness has its own tests below."""
    aligner = EventTimeAligner(log, drift, idle, scan_limit=3, clock=still_clock)
    position = dict.fromkeys(log.records, 0)
    latest = {tp: log.end(tp) for tp in log.records}
    batches: list[list[int]] = []
    statuses: list[AlignmentStatus] = []
    for _ in range(500):
        capped = aligner.cap(position, latest, bounded=bounded, max_records=max_rows)
        cold = EventTimeAligner(FakeLog(log.records), drift, idle, scan_limit=3, clock=still_clock)
        cold_caps = cold.cap(position, latest, bounded=bounded, max_records=max_rows)
        assert cold_caps == capped  # deterministic from the checkpoint
        assert all(position[tp] <= capped[tp] <= latest[tp] for tp in position)
        end = apply_read_limit(position, capped, max_rows)
        assert aligner.status is not None
        statuses.append(aligner.status)
        if end == position:
            break
        rows = []
        status = aligner.status
        for tp, start in position.items():
            rows += [ts for ts, visible in log.records[tp][start : end[tp]] if visible]
            assert status.bound_ms is None or all(ts < status.bound_ms for ts in rows)
        if status.bound_ms is not None:
            # The bound is the drift past the slowest counted partition where the batch starts, or where
            # it ends (the next batch's start) when that is later.
            counted = [tp for tp, p in status.partitions.items() if p.state in ("active", "held")]
            after = min(event_time(log.records[tp], end[tp]) for tp in counted)
            assert status.bound_ms <= max(status.slowest_ms or 0, after) + drift
        batches.append(rows)
        position = end
    return batches, statuses, position


@settings(max_examples=300)
@given(
    data=st.data(),
    disorder=st.integers(0, 30),
    drift=st.integers(1, 120),
    idle=st.none() | st.integers(1, 300),
    max_rows=st.none() | st.integers(1, 12),
    bounded=st.booleans(),
)
def test_no_record_is_late_and_no_query_stalls(
    data: st.DataObject, disorder: int, drift: int, idle: int | None, max_rows: int | None, bounded: bool
) -> None:
    records = data.draw(logs(disorder))
    log = FakeLog(records)
    batches, statuses, position = run(log, drift, idle, max_rows, bounded)
    # No partition's range passes slowest + drift (checked in run), so with withWatermark(drift + disorder)
    # nothing is dropped as late.
    assert watermark_drops(batches, drift + disorder) == []
    for status in statuses:
        if status.slowest is not None:  # the slowest is a counted partition, lowest of all counted ones
            counted = [p.event_time_ms for p in status.partitions.values() if p.state in ("active", "held")]
            assert status.partitions[status.slowest].event_time_ms == min(counted)  # type: ignore[type-var]
            assert status.partitions[status.slowest].state in ("active", "held")
    unread = {tp for tp, recs in records.items() if any(v for _, v in recs[position[tp] :])}
    if unread:
        # Reading stops only behind a partition that counts and has nothing to read: never under
        # availableNow, never behind an idle one.
        last = statuses[-1]
        assert not bounded
        assert last.slowest is not None
        assert last.slowest not in unread
        assert last.partitions[last.slowest].state == "active"


def plan_once(
    records: dict[TopicPartition, list[tuple[int, bool]]],
    positions: dict[TopicPartition, int],
    drift: int,
    idle: int | None,
    scan_limit: int = 3,
) -> tuple[dict[TopicPartition, int], AlignmentStatus]:
    aligner = EventTimeAligner(FakeLog(records), drift, idle, scan_limit=scan_limit)
    ends = aligner.cap(positions, {tp: len(r) for tp, r in records.items()}, bounded=False, max_records=None)
    assert aligner.status is not None
    return ends, aligner.status


def has_records(records: list[tuple[int, bool]], position: int) -> bool:
    return any(visible for _, visible in records[position:])


@settings(max_examples=200)
@given(data=st.data(), drift=st.integers(1, 120), idle=st.integers(1, 300))
def test_idle_partitions_hold_no_one_and_held_ones_are_never_idle(
    data: st.DataObject, drift: int, idle: int
) -> None:
    records = data.draw(logs(0))
    positions = {tp: data.draw(st.integers(0, len(recs))) for tp, recs in records.items()}
    ends, status = plan_once(records, positions, drift, idle)
    idle_tps = [tp for tp, p in status.partitions.items() if p.state == "idle"]
    for tp, p in status.partitions.items():
        if p.state == "held":  # alignment stopped it before its records: it has some, so it is not idle
            assert has_records(records[tp], positions[tp])
        if p.state == "idle":
            assert not has_records(records[tp], positions[tp])
    # An idle partition's time does not matter to the others: make its records far older, same plan.
    older = {tp: [(ts - 10_000, v) for ts, v in r] if tp in idle_tps else r for tp, r in records.items()}
    older_ends, older_status = plan_once(older, positions, drift, idle)
    assert older_ends == ends
    assert [tp for tp, p in older_status.partitions.items() if p.state == "idle"] == idle_tps


@settings(max_examples=200)
@given(data=st.data(), drift=st.integers(1, 120), idle=st.none() | st.integers(1, 300))
def test_the_slowest_advances_whenever_it_has_records(
    data: st.DataObject, drift: int, idle: int | None
) -> None:
    records = data.draw(logs(30))
    positions = {tp: data.draw(st.integers(0, len(recs))) for tp, recs in records.items()}
    ends, status = plan_once(records, positions, drift, idle, scan_limit=1)
    if any(has_records(r, positions[tp]) for tp, r in records.items()):
        assert status.slowest is not None  # a partition with records to read always counts
    slowest = status.slowest
    if slowest is not None and has_records(records[slowest], positions[slowest]):
        first = next(o for o in range(positions[slowest], len(records[slowest])) if records[slowest][o][1])
        assert ends[slowest] > first  # its next record is in the batch


@settings(max_examples=150)
@given(
    data=st.data(),
    disorder=st.integers(0, 30),
    drift=st.integers(1, 120),
    look_back=st.integers(1, 6),
)
def test_a_warm_aligner_plans_as_a_cold_one_while_the_logs_grow(
    data: st.DataObject, disorder: int, drift: int, look_back: int
) -> None:
    """Between plans the logs grow by a few records, mostly aborted ones and markers (what a producer whose
    transactions fail leaves): every plan of the warm aligner, which carries what it knows from one end to
    the next, equals a cold aligner's, caps and status, with a short LAST_LOOK_BACK so that answers fall out
    of it."""
    records = data.draw(logs(disorder))
    log = FakeLog({tp: list(r) for tp, r in records.items()})
    aligner = EventTimeAligner(log, drift, None, scan_limit=3, clock=still_clock)
    position = dict.fromkeys(log.records, 0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(alignment_module, "LAST_LOOK_BACK", look_back)
        for _ in range(data.draw(st.integers(1, 10))):
            latest = {tp: log.end(tp) for tp in log.records}
            capped = aligner.cap(position, latest, bounded=False, max_records=None)
            fresh = FakeLog({tp: list(r) for tp, r in log.records.items()})
            cold = EventTimeAligner(fresh, drift, None, scan_limit=3, clock=still_clock)
            assert cold.cap(position, latest, bounded=False, max_records=None) == capped
            assert cold.status == aligner.status
            position = capped
            mostly_aborted = st.tuples(st.integers(0, 3000), st.sampled_from([False, False, True]))
            for tp in log.records:
                log.records[tp] += data.draw(st.lists(mostly_aborted, max_size=3))
