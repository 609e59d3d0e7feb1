"""``sparkafka run``'s status line counts group commits since the run started, as it does transactions.

The source's metrics file holds totals over every run of the group's source (the rule the sink's counters
follow too): what it holds at start is earlier runs', and the status line shows the difference. No Spark,
no broker: a fake query and real metrics files under a temporary directory.
"""

from __future__ import annotations

import io
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from sparkafka.metrics_files import write_json_atomically
from sparkafka.pipeline import runner
from sparkafka.source.commits import SourceMetrics, default_metrics_file


def metrics(pid: int, ok: int, failed: int = 0) -> SourceMetrics:
    return SourceMetrics("g", "on_checkpoint", commits_succeeded=ok, commits_failed=failed, pid=pid)


class Reads:
    """What the metrics file holds at each read, in turn (the last one repeats)."""

    def __init__(self, *states: SourceMetrics | None) -> None:
        self.states = list(states)

    def __call__(self) -> SourceMetrics | None:
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]


def test_earlier_runs_counts_are_not_shown() -> None:
    last_run = metrics(pid=100, ok=7)
    commits = runner.GroupCommitsSinceStart(Reads(last_run, last_run, metrics(200, 8), metrics(200, 9, 1)))
    assert commits.now() == (0, 0)  # the file still holds the earlier runs' 7: none of this run's
    assert commits.now() == (1, 0)  # the new source's first commit, added to the total
    assert commits.now() == (2, 1)


def test_no_file_is_unknown_until_a_source_writes_it() -> None:
    commits = runner.GroupCommitsSinceStart(Reads(None, None, metrics(200, 3)))
    assert commits.now() is None
    assert commits.now() == (3, 0)


def test_a_source_process_replaced_within_the_run_goes_on_from_the_total() -> None:
    reads = Reads(None, metrics(200, 4), metrics(300, 5), metrics(300, 6))
    commits = runner.GroupCommitsSinceStart(reads)
    assert [commits.now() for _ in range(3)] == [(4, 0), (5, 0), (6, 0)]


def test_a_retired_file_begun_again_counts_from_zero() -> None:
    commits = runner.GroupCommitsSinceStart(Reads(metrics(100, 7), metrics(100, 9), metrics(300, 1)))
    assert commits.now() == (2, 0)
    assert commits.now() == (1, 0)  # the totals fell: the file was removed (sparkafka metrics retire)


class FakeQuery:
    """A StreamingQuery whose batches run one per poll; ``on_poll`` runs before each batch shows."""

    id = "q-1"

    def __init__(self, batches: int, on_poll: Any) -> None:
        self.left, self.on_poll = list(range(batches)), on_poll
        self.recentProgress: list[dict[str, Any]] = []
        self.isActive = True
        self.status = {"isTriggerActive": False}

    def awaitTermination(self, timeout: float) -> bool:
        if not self.left:
            self.isActive = False
            return True
        batch = self.left.pop(0)
        self.on_poll(batch)
        self.recentProgress = [
            {
                "batchId": batch,
                "numInputRows": 5,
                "durationMs": {"triggerExecution": 100, "addBatch": 60},
                "sources": [{}],
                "timestamp": f"2026-11-23T10:00:{batch:02d}.000Z",
            }
        ]
        return False

    def stop(self) -> None:
        self.isActive = False


def test_the_status_line_after_a_restart_counts_since_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sparkafka.pipeline.config import load_pipeline

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the metrics files' directory
    path = tmp_path / "p.toml"
    path.write_text(
        'checkpoint = "ck"\n[source]\noptions = { "kafka.bootstrap.servers" = "b:9092", subscribe = "in", '
        '"kafka.group.id" = "g" }\n'
        '[sink]\noptions = { "kafka.bootstrap.servers" = "b:9092", topic = "out" }\n'
    )
    cfg = load_pipeline(path)
    file = default_metrics_file("g")
    write_json_atomically(file, metrics(pid=100, ok=7).to_json())  # the last run's source wrote this
    commits = runner._group_commits(cfg)  # the runner starts counting before the query starts

    def source_commits(batch: int) -> None:  # this run's source commits the batch before, as it does
        if batch > 0:
            write_json_atomically(file, metrics(pid=200, ok=batch).to_json())

    out = io.StringIO()
    screen = runner._Screen(out, "p", None)
    query = FakeQuery(3, source_commits)
    runner._watch(query, cfg, screen, None, stop=threading.Event(), poll_s=0, commits=commits)
    shown = [line.rpartition("group commits ok/failed ")[2] for line in out.getvalue().splitlines()]
    assert shown == ["0/0", "1/0", "2/0"]
    assert [x.commits_succeeded_total for x in screen.lines] == [0, 1, 2]
