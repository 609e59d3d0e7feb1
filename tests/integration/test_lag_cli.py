"""``sparkafka lag`` against the real broker, as a user runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTopicPartition

from sparkafka.local.procs import GroupProcess
from tests.support.kafka import produce

SPARKAFKA = [sys.executable, "-m", "sparkafka.cli"]


def clean_env(columns: str) -> dict[str, str]:
    """A user's shell, bare: a terminal width and PATH; PYTHONPATH kept, so that a tree put first with it
    (a git worktree beside the editable install) is the code that runs."""
    kept = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}
    return {"COLUMNS": columns, "PATH": "/usr/bin:/bin", **kept}


def lag(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SPARKAFKA, "lag", "--bootstrap-servers", bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=clean_env("120"),
    )


def test_lag_per_partition_with_totals_watch_and_plot(
    kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    produce(kafka_conf, topic, (f"l{i}" for i in range(30)), 2)  # 15 per partition
    group = f"lag-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({**kafka_conf, "group.id": group, "enable.auto.commit": False})
    consumer.commit(
        offsets=[CTopicPartition(topic, 0, 10), CTopicPartition(topic, 1, 15)], asynchronous=False
    )
    consumer.close()

    result = lag(bootstrap, "--group", group, "--topic", topic)
    assert result.returncode == 0, result.stderr
    # Into a pipe: plain lines, nothing cut to a terminal's width.
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert f"{topic} 0: committed 10, log end 15, lag 5, behind open txn 0" in lines
    assert f"{topic} 1: committed 15, log end 15, lag 0, behind open txn 0" in lines
    # Headed by the reading's wall-clock time (local), not by seconds since the command started.
    header = rf"group {group} at \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d \S+: total lag 5"
    assert any(re.fullmatch(header, line) for line in lines), lines

    # Without --topic: every topic the group committed.
    every = [line.strip() for line in lag(bootstrap, "--group", group).stdout.splitlines()]
    assert f"{topic} 0: committed 10, log end 15, lag 5, behind open txn 0" in every

    png = tmp_path / "lag.png"
    watched = lag(
        bootstrap, "--group", group, "--topic", topic, "--watch", "0.1", "--count", "3", "--plot", str(png)
    )
    assert watched.returncode == 0, watched.stderr
    assert "wrote" in watched.stdout
    assert "(3 readings)" in watched.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_lag_explains_a_group_without_commits_and_an_unknown_topic(
    bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)
    nobody = f"nobody-{uuid.uuid4().hex[:8]}"
    none = lag(bootstrap, "--group", nobody, "--topic", topic)
    assert none.returncode == 1
    # One line, prefixed as every command's error (docs/cli.md), and nothing of librdkafka's.
    assert none.stderr == (
        f"sparkafka lag: group {nobody!r} has no committed offsets on topic {topic} (nothing committed "
        "yet, or a different group id)\n"
    )
    absent = f"absent-{uuid.uuid4().hex[:8]}"
    missing = lag(bootstrap, "--group", "g", "--topic", absent)
    assert missing.returncode == 1
    assert missing.stderr == f"sparkafka lag: topic {absent!r} does not exist on {bootstrap}\n"


def doctor(bootstrap: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """``sparkafka doctor``'s exit, output and each probe's verdict."""
    result = subprocess.run(
        [*SPARKAFKA, "doctor", "--bootstrap-servers", bootstrap],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=clean_env("250"),
    )
    rows = {}
    for line in result.stdout.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 3 and cells[2] in ("PASS", "FAIL"):
            rows[cells[1]] = cells[2]
    assert set(rows) == {
        "api_versions",
        "create_partitions",
        "list_offsets_latest",
        "offsets_for_times",
        "transactions",
        "read_committed",
        "transaction_timeout",
        "group_commit_assign",
        "message_size_limit",
    }, result.stdout
    failed = sorted(name for name, verdict in rows.items() if verdict == "FAIL")
    assert result.returncode == (1 if failed else 0)
    assert f"{len(rows) - len(failed)} passed, {len(failed)} failed" in result.stdout
    return result, rows


@pytest.mark.lines
def test_doctor_passes_every_probe_on_apache_kafka(bootstrap: str) -> None:
    """The suite's broker is Apache Kafka (or, with SPARKAFKA_TEST_BOOTSTRAP, a cluster named for it)."""
    result, rows = doctor(bootstrap)
    assert sorted(rows.values()) == ["PASS"] * 9, result.stdout
    assert "9 passed, 0 failed" in result.stdout


def test_doctor_reports_tansus_gaps_truthfully(tansu_conf: dict[str, str]) -> None:
    result, rows = doctor(tansu_conf["bootstrap.servers"])
    for needed in ("api_versions", "transactions", "group_commit_assign"):
        assert rows[needed] == "PASS", result.stdout
    # The embedded tansu's measured gaps (see the broker notes).
    assert sorted(name for name, verdict in rows.items() if verdict == "FAIL") == [
        "create_partitions",
        "list_offsets_latest",
        "message_size_limit",
        "offsets_for_times",
        "read_committed",
        "transaction_timeout",
    ], result.stdout


def test_lag_watch_into_a_pipe_streams_and_sigterm_still_plots(
    kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    import signal

    topic = new_topic(partitions=1)
    produce(kafka_conf, topic, ["a", "b"])
    group = f"lag-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({**kafka_conf, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[CTopicPartition(topic, 0, 1)], asynchronous=False)
    consumer.close()
    png = tmp_path / "lag.png"
    args = ["--group", group, "--topic", topic, "--watch", "0.2", "--plot", str(png)]
    cmd = [*SPARKAFKA, "lag", "--bootstrap-servers", bootstrap, *args]
    with GroupProcess(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        headers = []
        while len(headers) < 3:  # readings arrive through the pipe while the watch goes on
            line = proc.readline()
            assert line, "lag --watch ended early"
            if "total lag" in line:
                headers.append(line)
        assert "total lag 1" in headers[0]
        rest = proc.interrupt(signal.SIGTERM, timeout_s=60)
    assert proc.returncode == 0
    assert "wrote" in rest
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
