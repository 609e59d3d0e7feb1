"""``sparkafka offsets show`` and ``reset`` against the broker, on a real query's checkpoint and group."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer

from sparkafka.cli import main
from sparkafka.structs import TopicPartition
from tests.support.kafka import group_offsets, produce
from tests.support.queries import memory_query, source
from tests.support.wait import wait_until

EARLY, LATE = 1_600_000_000_000, 1_700_000_000_000


@pytest.fixture
def finished_query(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], checkpoint: str
) -> tuple[str, str]:
    """A topic of 2 x 10 records (5 early and 5 late per partition) read to its end by a query whose
    group committed on stop: (topic, group)."""
    topic = new_topic(partitions=2)
    produce(kafka_conf, topic, [f"e{i}" for i in range(10)], 2, timestamp=EARLY)
    produce(kafka_conf, topic, [f"l{i}" for i in range(10)], 2, timestamp=LATE)
    group = f"g-{uuid.uuid4().hex[:8]}"
    df = source(spark, bootstrap, subscribe=topic, startingOffsets="earliest", **{"kafka.group.id": group})
    query = memory_query(df, f"q_{uuid.uuid4().hex[:8]}", checkpoint)
    try:
        query.processAllAvailable()
    finally:
        query.stop()  # the last batch's offsets go to the group on stop
    assert group_offsets(kafka_conf, group, topic, 2) == {
        TopicPartition(topic, 0): 10,
        TopicPartition(topic, 1): 10,
    }
    return topic, group


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_show_puts_checkpoint_group_and_log_side_by_side(
    finished_query: tuple[str, str], bootstrap: str, checkpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group = finished_query
    code, out = run(
        capsys,
        "offsets",
        "show",
        "--bootstrap-servers",
        bootstrap,
        "--checkpoint",
        checkpoint,
        "--group",
        group,
    )
    assert code == 0, out
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in out.splitlines() if line.startswith(topic)}
    # checkpoint, group, earliest, latest
    assert rows == {(topic, "0"): ["10", "10", "0", "10"], (topic, "1"): ["10", "10", "0", "10"]}
    assert "last committed batch" in out


def test_reset_is_a_dry_run_until_executed_and_takes_every_target(
    finished_query: tuple[str, str],
    kafka_conf: dict[str, str],
    bootstrap: str,
    checkpoint: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic, group = finished_query
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    base = ["offsets", "reset", "--bootstrap-servers", bootstrap, "--group", group]

    code, out = run(capsys, *base, "--to", "earliest")
    assert code == 0, out
    assert "dry run: nothing changed" in out
    assert group_offsets(kafka_conf, group, topic, 2) == {p0: 10, p1: 10}

    assert run(capsys, *base, "--to", "earliest", "--execute")[0] == 0
    assert group_offsets(kafka_conf, group, topic, 2) == {p0: 0, p1: 0}

    json_target = f'json:{{"{topic}": {{"1": 4}}}}'
    assert run(capsys, *base, "--to", json_target, "--execute")[0] == 0
    assert group_offsets(kafka_conf, group, topic, 2) == {p0: 0, p1: 4}  # only the named partition moved

    assert run(capsys, *base, "--to", f"checkpoint:{checkpoint}", "--execute")[0] == 0
    assert group_offsets(kafka_conf, group, topic, 2) == {p0: 10, p1: 10}

    code, out = run(capsys, *base, "--to", "latest", "--topic", topic)
    assert code == 0, out
    assert "dry run" in out


def test_reset_to_a_timestamp_takes_the_first_record_at_or_after_it(
    finished_query: tuple[str, str],
    kafka_conf: dict[str, str],
    bootstrap: str,
    capsys: pytest.CaptureFixture[str],
    require: Callable[[str], None],
) -> None:
    require("offsets_for_times")
    topic, group = finished_query
    base = ["offsets", "reset", "--bootstrap-servers", bootstrap, "--group", group, "--execute"]
    assert run(capsys, *base, "--to", f"timestamp:{LATE}")[0] == 0
    assert group_offsets(kafka_conf, group, topic, 2) == {
        TopicPartition(topic, 0): 5,
        TopicPartition(topic, 1): 5,
    }
    assert run(capsys, *base, "--to", f"timestamp:{LATE + 1}")[0] == 0  # no record that new: the end
    assert group_offsets(kafka_conf, group, topic, 2) == {
        TopicPartition(topic, 0): 10,
        TopicPartition(topic, 1): 10,
    }


def test_reset_is_refused_while_the_group_has_members(
    finished_query: tuple[str, str],
    kafka_conf: dict[str, str],
    bootstrap: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic, group = finished_query
    member: Any = Consumer(
        {**kafka_conf, "group.id": group, "session.timeout.ms": 6000, "enable.auto.commit": False}
    )
    member.subscribe([topic])
    try:
        wait_until(
            lambda: member.poll(0.1) is not None or bool(member.assignment()), 60, "the member to join"
        )
        base = ["offsets", "reset", "--bootstrap-servers", bootstrap, "--group", group, "--to", "earliest"]
        code, out = run(capsys, *base)
        assert code == 0, out
        assert "--execute would be refused" in out
        code, out = run(capsys, *base, "--execute")
        assert code == 1
        assert f"group {group!r} is Stable" in out
        assert "only be reset while the group is inactive" in out
        assert group_offsets(kafka_conf, group, topic, 2) == {
            TopicPartition(topic, 0): 10,
            TopicPartition(topic, 1): 10,
        }
    finally:
        member.close()


def test_reset_is_refused_while_a_query_commits_naming_its_application_and_driver(
    spark: Any,
    kafka_conf: dict[str, str],
    bootstrap: str,
    new_topic: Callable[..., str],
    checkpoint: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The query's commits are sent from Spark's Python source runner, a child of the driver's JVM the user
    never started: the refusal names what the user did start, the application and its driver, this process
    (``sparkafka.register`` ran here, in ``local_spark``; issue 50)."""
    topic = new_topic(partitions=1)
    produce(kafka_conf, topic, [f"v{i}" for i in range(10)])
    group = f"g-{uuid.uuid4().hex[:8]}"
    df = source(spark, bootstrap, subscribe=topic, startingOffsets="earliest", **{"kafka.group.id": group})
    query = memory_query(df, f"q_{uuid.uuid4().hex[:8]}", checkpoint)
    try:
        query.processAllAvailable()
        done = {TopicPartition(topic, 0): 10}
        wait_until(
            lambda: group_offsets(kafka_conf, group, topic, 1) == done, 60, "the running query's commit"
        )
        reset = ["offsets", "reset", "--bootstrap-servers", bootstrap, "--group", group, "--to", "earliest"]
        code, out = run(capsys, *reset, "--execute")
        assert code == 1, out
        app = f"application 'sparkafka-tests' ({spark.sparkContext.applicationId})"
        assert f"is committed to by a running sparkafka query ({app}, driver pid {os.getpid()} on " in out, (
            out
        )
        assert group_offsets(kafka_conf, group, topic, 1) == done
    finally:
        query.stop()


def test_bad_target_is_a_one_line_error(bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(
        capsys, "offsets", "reset", "--bootstrap-servers", bootstrap, "--group", "g", "--to", "first"
    )
    assert code == 1
    assert out.strip() == (
        "sparkafka offsets: --to 'first': use earliest, latest, timestamp:MS (epoch milliseconds), "
        "checkpoint:DIR or json:{...}"
    )
