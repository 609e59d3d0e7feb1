"""Which process a query's commits name as its driver: what ``register`` passed, else the runner's ancestors
read from injected process facts (``driver_of``), and the words ``sparkafka offsets reset`` refuses in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparkafka.ops.group_offsets import running_query_refusal
from sparkafka.source.commits import CommitMark, OffsetCommitter
from sparkafka.source.driver_process import (
    APP_ID_ENV,
    APP_NAME_ENV,
    DRIVER_PID_ENV,
    MAX_APP_NAME,
    ProcessFacts,
    QueryDriver,
    driver_of,
    read_process,
)
from sparkafka.structs import TopicPartition
from tests.unit.source.test_commits import A0, FakeClient
from tests.unit.test_cli_offsets import MARKED_BY_A_REGISTERED_DRIVER

RUNNER, JVM, SCRIPT, SHELL = 300, 200, 100, 50

REGISTERED = {DRIVER_PID_ENV: str(SCRIPT), APP_NAME_ENV: "orders-etl", APP_ID_ENV: "local-1764000000000"}


def tree(jvm_parent: ProcessFacts | None) -> dict[int, ProcessFacts]:
    """The source runner under the driver's JVM, the JVM under ``jvm_parent`` (pid SCRIPT)."""
    facts = {RUNNER: ProcessFacts(JVM, "python3.11"), JVM: ProcessFacts(SCRIPT if jvm_parent else 1, "java")}
    if jvm_parent is not None:
        facts[SCRIPT] = jvm_parent
    return facts


@pytest.mark.parametrize(
    ("environ", "facts", "want"),
    [
        # register passed the driver's facts: they win, whatever the process tree says.
        (
            REGISTERED,
            tree(ProcessFacts(SHELL, "bash")),
            QueryDriver(SCRIPT, "orders-etl", "local-1764000000000"),
        ),
        # python job.py without register: PySpark started the JVM, the script is the JVM's parent.
        ({}, tree(ProcessFacts(SHELL, "python3.11")), QueryDriver(SCRIPT)),
        ({}, tree(ProcessFacts(SHELL, "python")), QueryDriver(SCRIPT)),
        # spark-submit job.py (its JVM started the Python driver) or a Spark Connect server: the JVM.
        ({}, tree(ProcessFacts(SHELL, "bash")), QueryDriver(JVM)),
        ({}, tree(None), QueryDriver(JVM)),  # the JVM's parent is gone (init adopted it)
        ({}, {RUNNER: ProcessFacts(JVM, "python3")}, QueryDriver(JVM)),  # the JVM not readable
        ({}, {}, QueryDriver(None)),  # no /proc (macOS): unknown, never the runner itself
        ({DRIVER_PID_ENV: "not a pid"}, tree(ProcessFacts(SHELL, "python")), QueryDriver(SCRIPT)),
        ({APP_NAME_ENV: "n" * 500}, {}, QueryDriver(None, "n" * MAX_APP_NAME)),
    ],
)
def test_the_driver_is_what_register_passed_else_the_python_or_jvm_above_the_runner(
    environ: dict[str, str], facts: dict[int, ProcessFacts], want: QueryDriver
) -> None:
    assert driver_of(environ, RUNNER, facts.get) == want


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads Linux's /proc")
def test_process_facts_are_read_from_proc() -> None:
    me = read_process(os.getpid())
    assert me is not None
    assert me.parent == os.getppid()
    assert me.program.startswith(("python", "pytest"))
    assert read_process(2**22 + 1) is None  # above Linux's pid_max: no such process


NOW = 1_800_000_000_000
TP0 = TopicPartition("t", 0)


def test_a_mark_names_the_driver_in_the_form_the_reset_tool_reads() -> None:
    driver = QueryDriver(SCRIPT, "orders-etl", "local-1764000000000")
    mark = CommitMark("r1", "host-a", RUNNER, NOW - 12_000, driver=driver)
    assert mark.to_metadata() == MARKED_BY_A_REGISTERED_DRIVER
    assert CommitMark.from_metadata(MARKED_BY_A_REGISTERED_DRIVER) == mark


@pytest.mark.parametrize(
    ("driver", "named"),
    [
        (
            QueryDriver(SCRIPT, "orders-etl", "local-1"),
            "application 'orders-etl' (local-1), driver pid 100 on h",
        ),
        (QueryDriver(SCRIPT, "orders-etl"), "application 'orders-etl', driver pid 100 on h"),
        (QueryDriver(JVM), "driver pid 200 on h"),
        (QueryDriver(None, "orders-etl"), "application 'orders-etl' on h"),
        (QueryDriver(None), "a driver on h"),
    ],
)
def test_a_reset_refusal_names_what_the_mark_knows_of_the_driver(driver: QueryDriver, named: str) -> None:
    mark = CommitMark("r1", "h", RUNNER, NOW - 1_000, driver=driver).to_metadata()
    refusal = running_query_refusal("g", {TP0: mark}, NOW) or ""
    assert f"running sparkafka query ({named}, last commit 1 s ago)" in refusal
    assert str(RUNNER) not in refusal


def test_a_mark_of_an_earlier_version_is_named_as_what_its_pid_is() -> None:
    earlier = '{"at":1799999990000,"host":"host-b","pid":42,"run":"r0"}'  # no driver: the runner's pid
    refusal = running_query_refusal("g", {TP0: f"sparkafka {earlier}"}, NOW)
    assert "(Spark's source runner pid 42 on host-b, last commit 10 s ago)" in (refusal or "")


def test_the_committer_marks_every_commit_with_its_driver() -> None:
    client = FakeClient()
    driver = QueryDriver(SCRIPT, "orders-etl", "local-1764000000000")
    committer = OffsetCommitter(lambda: client, "g", mode="on_checkpoint", driver=driver)
    committer.completed({A0: 10})
    committer.close()
    marks = [CommitMark.from_metadata(m) for m in client.metadata]
    assert [(m.driver, m.stopped) for m in marks if m is not None] == [(driver, False), (driver, True)]
