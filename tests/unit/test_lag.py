from __future__ import annotations

import io
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkafka import cli
from sparkafka.cli import commands
from sparkafka.cli.lag_view import plot_lag, render, watch_lag
from sparkafka.client.log import LIBRDKAFKA_LOG
from sparkafka.ops import lag as lag_ops
from sparkafka.ops.lag import compute_lag
from sparkafka.source.alignment_status import AlignmentStatus, PartitionEventTime
from sparkafka.structs import TopicPartition

A0, A1, A2 = (TopicPartition("a", p) for p in range(3))


def test_lag_per_partition_and_total() -> None:
    lag = compute_lag("g", {A0: 10, A1: 15, A2: None}, {A0: 15, A1: 15, A2: 7})
    assert [(p.tp, p.committed, p.log_end, p.lag) for p in lag.partitions] == [
        (A0, 10, 15, 5),
        (A1, 15, 15, 0),
        (A2, None, 7, None),
    ]
    assert lag.total_lag == 5
    assert lag.has_commits
    assert not compute_lag("g", {}, {A0: 3}).has_commits


def test_watch_refreshes_until_count_and_records_history(tmp_path: Path) -> None:
    readings = iter([compute_lag("g", {A0: c}, {A0: 10}) for c in (0, 4, 10)])
    slept: list[float] = []
    out = io.StringIO()
    history = watch_lag(
        next(readings), lambda: next(readings), out, interval_s=0.5, count=3, sleep=slept.append
    )
    assert [lag for _, lag in history] == [10, 6, 0]
    assert slept == [0.5, 0.5]
    plot_lag(history, "g", str(tmp_path / "lag.png"))
    assert (tmp_path / "lag.png").read_bytes()[:4] == b"\x89PNG"


def test_single_reading_prints_a_table() -> None:
    out = io.StringIO()
    reading = compute_lag("g", {A0: 1}, {A0: 3})
    watch_lag(reading, lambda: reading, out, interval_s=None, count=None)
    text = out.getvalue()
    assert "group g" in text
    assert "total" in text


def test_watch_into_a_pipe_prints_each_reading_as_it_is_taken() -> None:
    out = io.StringIO()
    seen_before_next: list[str] = []
    readings = iter([compute_lag("g", {A0: c}, {A0: 10}) for c in (0, 4, 10)])

    def sleep(_s: float) -> None:
        seen_before_next.append(out.getvalue())  # what a reader of the pipe has so far

    watch_lag(next(readings), lambda: next(readings), out, interval_s=1.0, count=3, sleep=sleep)
    assert "total lag 10" in seen_before_next[0]
    assert "total lag 6" in seen_before_next[1]
    assert "a 0: committed 10, log end 10, lag 0, behind open txn 0" in out.getvalue()


def test_event_time_alignment_columns_when_the_source_aligns() -> None:
    status = AlignmentStatus(
        bound_ms=1_700_000_600_000,
        slowest=A0,
        partitions={
            A0: PartitionEventTime(1_700_000_000_000, "active"),
            A1: PartitionEventTime(1_700_000_900_000, "held"),
        },
        drift_ms=600_000,
    )
    lag = compute_lag("g", {A0: 1, A1: 2}, {A0: 3, A1: 9}, alignment=status)
    out = io.StringIO()
    watch_lag(lag, lambda: lag, out, interval_s=None, count=None)
    assert (
        "a 0: committed 1, log end 3, lag 2, behind open txn 0, "
        "event time 2023-11-14 22:13:20.000 UTC, active" in out.getvalue()
    )
    assert (
        "a 1: committed 2, log end 9, lag 7, behind open txn 0, "
        "event time 2023-11-14 22:28:20.000 UTC, held" in out.getvalue()
    )
    assert "event-time alignment holds a-1 at 2023-11-14 22:23:20.000 UTC (slowest a-0" in out.getvalue()
    table = render(lag)
    assert [c.header for c in table.columns][-2:] == ["event time", "alignment"]
    assert "holds a-1" in str(table.caption)
    assert [c.header for c in render(compute_lag("g", {A0: 1}, {A0: 3})).columns][-1] == "behind open txn"


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_each_reading_into_a_pipe_is_headed_by_its_wall_clock_time(utc: None) -> None:
    """Not seconds since the command started (the first reading said "at 0.0 s")."""
    readings = iter([compute_lag("g", {A0: c}, {A0: 10}) for c in (0, 4)])
    taken = iter([1_700_000_000.4, 1_700_000_005.0])
    out = io.StringIO()
    watch_lag(
        next(readings),
        lambda: next(readings),
        out,
        interval_s=5,
        count=2,
        sleep=lambda _: None,
        wall=lambda: next(taken),
    )
    headers = [line for line in out.getvalue().splitlines() if not line.startswith(" ")]
    assert headers == [
        "group g at 2023-11-14 22:13:20 UTC: total lag 10",
        "group g at 2023-11-14 22:13:25 UTC: total lag 6",
    ]


@pytest.mark.parametrize("verbose", [False, True])
def test_lag_says_what_failed_in_its_own_prefixed_sentence_and_librdkafka_only_with_verbose(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    verbose: bool,
) -> None:
    """A group without commits: one line, ``sparkafka lag: <the sentence>``, as every command's error. A
    line librdkafka logs meanwhile (a fresh broker's answer to a producer-id request) shows with -v only."""

    getpid = "Failed to acquire idempotence PID from broker 127.0.0.1:9092/1: Broker: Coordinator load in "

    def no_commits(conf: object, group: str, *_: object, **__: object) -> lag_ops.GroupLag:
        # As confluent-kafka hands librdkafka's lines to a client's logger (client.log).
        LIBRDKAFKA_LOG.warning("%s [%s] %s", "GETPID", "rdkafka#producer-2", getpid + "progress: retrying")
        return compute_lag(group, {}, {A0: 3})

    monkeypatch.setattr(commands, "_settings", lambda _args: {"bootstrap.servers": "b:1"})
    monkeypatch.setattr(lag_ops, "fetch_group_lag", no_commits)
    caplog.set_level(logging.INFO)
    argv = ["lag", "--bootstrap-servers", "b:1", "--group", "g", "--topic", "a"]
    assert cli.main(["-v", *argv] if verbose else argv) == 1
    assert capsys.readouterr().err == (
        "sparkafka lag: group 'g' has no committed offsets on topic a (nothing committed yet, or a different "
        "group id)\n"
    )
    shown = [r.getMessage() for r in caplog.records if r.name == LIBRDKAFKA_LOG.name]
    assert shown == ([f"GETPID [rdkafka#producer-2] {getpid}progress: retrying"] if verbose else [])
    assert LIBRDKAFKA_LOG.level == logging.NOTSET  # as it was: a caller in the same process is unaffected
