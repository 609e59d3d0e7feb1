"""The runner's loop without Spark: a fake query's progress becomes one line per batch, the exporter sees
every event, a stop request stops the query between batches, and a failure is the last line printed."""

from __future__ import annotations

import io
import itertools
import json
import threading
from pathlib import Path
from typing import Any

from sparkafka.pipeline import runner


class FakeQuery:
    """What ``_watch`` uses of a StreamingQuery: progress arrives over polls, as Spark's sliding window."""

    id = "q-1"

    def __init__(self, polls: list[list[dict[str, Any]]], stop_after: threading.Event | None = None) -> None:
        self.polls, self.recentProgress = polls, []
        self.isActive, self.stopped, self.stop_after = True, False, stop_after
        self.status = {"isTriggerActive": False}

    def awaitTermination(self, timeout: float) -> bool:
        if not self.polls:
            if self.stop_after is not None:
                self.stop_after.set()  # Ctrl-C while the query runs
            else:
                self.isActive = False  # availableNow ended
            return True
        self.recentProgress = self.polls.pop(0)
        return False

    def stop(self) -> None:
        self.stopped, self.isActive = True, False


def event(batch: int, second: int, rows: int = 3, ran: bool = True) -> dict[str, Any]:
    duration = {"triggerExecution": 100, **({"addBatch": 60} if ran else {})}
    return {
        "batchId": batch,
        "numInputRows": rows,
        "durationMs": duration,
        "sources": [{}],
        "timestamp": f"2026-11-23T10:00:{second:02d}.000Z",
    }


class Recorder:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def observe_all(self, events: list[dict[str, Any]]) -> None:
        self.seen += [e["timestamp"] for e in events]


def config(tmp_path: Path) -> Any:
    from sparkafka.pipeline.config import load_pipeline

    path = tmp_path / "p.toml"
    path.write_text(
        'checkpoint = "ck"\n[source]\noptions = { "kafka.bootstrap.servers" = "b:9092", subscribe = "in" }\n'
        '[sink]\noptions = { "kafka.bootstrap.servers" = "b:9092", topic = "out" }\n'
    )
    return load_pipeline(path)


def test_each_batch_is_one_line_once_and_the_exporter_sees_idle_triggers(tmp_path: Path) -> None:
    out, log = io.StringIO(), tmp_path / "batches.jsonl"
    screen = runner._Screen(out, "p", str(log))
    polls = [[event(0, 1)], [event(0, 1), event(0, 2, ran=False), event(1, 3)], [event(1, 3)]]
    query, exporter = FakeQuery(polls), Recorder()
    runner._watch(query, config(tmp_path), screen, exporter, stop=threading.Event(), poll_s=0)
    screen.close()
    lines = out.getvalue().splitlines()
    assert [line.split(":")[0] for line in lines] == ["batch 0", "batch 1"]
    assert [json.loads(x)["batch"] for x in log.read_text().splitlines()] == [0, 1]
    assert [t[-7:-5] for t in exporter.seen] == ["01", "02", "03"]
    assert not query.stopped  # it ended by itself


def test_a_stop_request_stops_the_query_between_batches_and_a_failure_is_the_last_line(
    tmp_path: Path,
) -> None:
    out = io.StringIO()
    screen = runner._Screen(out, "p", None)
    stop = threading.Event()
    query = FakeQuery([[event(0, 1)]], stop_after=stop)
    runner._watch(query, config(tmp_path), screen, None, stop=stop, poll_s=0)
    assert query.stopped
    screen.summary("query failed: something named")
    printed = out.getvalue().splitlines()
    assert printed[-1] == "sparkafka run: query failed: something named"
    assert printed[-2].startswith("summary: pipeline p: 1 batches")


def test_batches_that_ended_after_the_last_poll_are_shown_when_a_stop_comes_first(tmp_path: Path) -> None:
    """A Ctrl-C within ``poll_s`` of the batches it follows: they ran (their output is committed), so the
    runner shows them before its summary, not nothing (seen in CI on a loaded machine)."""
    out = io.StringIO()
    screen = runner._Screen(out, "p", None)
    stop = threading.Event()
    query = FakeQuery([])
    query.recentProgress = [event(0, 1), event(1, 2)]
    stop.set()
    runner._watch(query, config(tmp_path), screen, None, stop=stop, poll_s=0)
    assert query.stopped
    assert [line.split(":")[0] for line in out.getvalue().splitlines()] == ["batch 0", "batch 1"]


def test_a_line_when_alignment_starts_changes_and_stops_holding_partitions_back(tmp_path: Path) -> None:
    from sparkafka.source.alignment_status import AlignmentStatus, PartitionEventTime
    from sparkafka.structs import TopicPartition

    t0, t1, t2 = (TopicPartition("in", p) for p in range(3))

    def status(held: list[TopicPartition], quiet: bool = False) -> AlignmentStatus:
        states = {
            tp: PartitionEventTime(1_700_000_000_000, "held" if tp in held else "active")
            for tp in (t0, t1, t2)
        }
        return AlignmentStatus(1_700_000_600_000, t0, states, drift_ms=600_000, slowest_quiet=quiet)

    # Per poll: none yet, the same hold twice, another partition held, the slowest quiet, then none held.
    polled = [None, status([t1]), status([t1]), status([t1, t2]), status([t1, t2], quiet=True)]
    readings = itertools.chain(polled, itertools.repeat(status([])))
    out = io.StringIO()
    screen = runner._Screen(out, "p", None)
    query = FakeQuery([[] for _ in range(6)])
    watch = runner._watch
    watch(
        query,
        config(tmp_path),
        screen,
        None,
        stop=threading.Event(),
        poll_s=0,
        alignment=lambda: next(readings),
    )
    at = "at 2023-11-14 22:23:20.000 UTC (slowest in-0 at 2023-11-14 22:13:20.000 UTC, maxEventTimeDrift 10m)"
    quiet = "in-0 has no new records: set partitionIdleTimeout so that a quiet partition stops holding the "
    assert out.getvalue().splitlines() == [
        f"event-time alignment holds in-1 {at}",
        f"event-time alignment holds in-1, in-2 {at}",
        f"event-time alignment holds in-1, in-2 {at}; {quiet}others back",
        "event-time alignment holds no partition back any more",
    ]
