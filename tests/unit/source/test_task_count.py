"""How many reader tasks a batch gets (``assignment.default_task_count``), and that the count goes with the
batch's end offsets with the rest of its plan (``planning.PLAN_KEY``) so that a replayed batch is planned
the same after a restart, whatever the cores or the options then.

A fake cluster stands in for Kafka; Spark's cores come through ``assignment.CORES_ENV``, as
``sparkafka.register`` passes them to Spark's source runner.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkafka.ops.query_progress import offsets_of
from sparkafka.source.assignment import CORES_ENV, assign_tasks, default_task_count, spark_cores
from sparkafka.source.options import parse_source_options
from sparkafka.source.planning import (
    PLAN_KEY,
    TaskPlan,
    offsets_from_json,
    offsets_to_json,
    plan_from_json,
)
from sparkafka.source.reader import KafkaInputPartition, KafkaStreamReader, _Planner
from sparkafka.spark_lines import ReadAllAvailable, ReadMaxRows
from sparkafka.structs import TopicPartition
from tests.unit.source.test_data_loss import Cluster as DataLossCluster


class Cluster(DataLossCluster):
    """Topic ``t`` with ``partitions`` partitions, each log ``[0, records)`` (``test_data_loss``'s fake)."""

    def __init__(self, partitions: int, records: int = 10) -> None:
        super().__init__({TopicPartition("t", p): (0, records) for p in range(partitions)}, {})
        self.ends = {tp: end for tp, (_, end) in self.logs.items()}


def stream(cluster: Cluster, **options: str) -> KafkaStreamReader:
    opts = parse_source_options(
        {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "startingOffsets": "earliest", **options}
    )
    reader = KafkaStreamReader(opts)
    reader._planner._metadata = cluster  # type: ignore[assignment]
    return reader


def ranges_of(tasks: Iterable[Any]) -> list[tuple[TopicPartition, int, int]]:
    return sorted((r.tp, r.start, r.end) for task in tasks for r in task.ranges)


@pytest.mark.parametrize(
    ("partitions", "cores", "tasks"),
    [(200, 2, 2), (1, 8, 1), (8, 8, 8), (3, 16, 3), (0, 2, 1), (5, None, None)],
)
def test_one_task_per_core_never_more_than_partitions(
    partitions: int, cores: int | None, tasks: int | None
) -> None:
    assert default_task_count(partitions, cores) == tasks


@pytest.mark.parametrize(
    ("value", "cores"), [("4", 4), ("", None), ("0", None), ("-2", None), ("four", None)]
)
def test_spark_cores_come_from_the_environment(value: str, cores: int | None) -> None:
    assert spark_cores({CORES_ENV: value}) == cores
    assert spark_cores({}) is None


@pytest.mark.parametrize(
    ("plan", "kept"),
    [
        (TaskPlan(tasks=2), {"tasks": 2, "strategy": "flink"}),
        (TaskPlan(tasks=5, strategy="sticky"), {"tasks": 5, "strategy": "sticky"}),
        (TaskPlan(min_partitions=8), {"minPartitions": 8, "maxRecordsPerPartition": None}),
        (TaskPlan(max_records_per_partition=100), {"minPartitions": None, "maxRecordsPerPartition": 100}),
    ],
)
def test_the_task_plan_sits_beside_the_offsets(plan: TaskPlan, kept: dict[str, Any]) -> None:
    offsets = {TopicPartition("t", 0): 5, TopicPartition("t", 1): 7}
    data = offsets_to_json(offsets, {"t": "id-t"}, plan)
    assert data == {"t": {"0": 5, "1": 7}, "@topicIds": {"t": "id-t"}, PLAN_KEY: kept}
    assert offsets_from_json(data) == offsets
    assert plan_from_json(json.loads(json.dumps(data))) == plan
    assert PLAN_KEY not in offsets_to_json(offsets)
    assert plan_from_json(offsets_to_json(offsets)) is None
    assert offsets_of(json.dumps(data)) == {"t": {"0": 5, "1": 7}}  # what lag and Prometheus read


def test_a_batch_of_200_partitions_gets_a_task_per_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CORES_ENV, "2")
    reader = stream(Cluster(200))
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(1000))
    assert end[PLAN_KEY] == {"tasks": 2, "strategy": "flink"}
    tasks = reader.partitions(start, end)
    assert len(tasks) == 2
    assert all(isinstance(t, KafkaInputPartition) for t in tasks)
    # Flink's assigner at parallelism 2, and every partition's exact range read once.
    expected = assign_tasks(offsets_from_json(end), 2, "flink")
    assert [[r.tp for r in t.ranges] for t in tasks] == expected  # type: ignore[attr-defined]
    s, e = offsets_from_json(start), offsets_from_json(end)
    assert ranges_of(tasks) == sorted((tp, s[tp], e[tp]) for tp in e)
    assert sum(e[tp] - s[tp] for tp in e) == 1000


def test_a_replayed_batch_keeps_its_tasks_when_the_cores_change(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CORES_ENV, "2")
    first = stream(Cluster(12))
    start = first.initialOffset()
    end = first.latestOffset(start, ReadAllAvailable())
    planned = first.partitions(start, end)
    monkeypatch.setenv(
        CORES_ENV, "8"
    )  # restarted with more cores: Spark replays the batch from its offset log
    replayed = stream(Cluster(12)).partitions(start, end)
    assert [t.ranges for t in replayed] == [t.ranges for t in planned]  # type: ignore[attr-defined]
    assert len(replayed) == 2


def test_a_batch_planned_before_the_count_was_kept_replays_a_task_per_partition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CORES_ENV, "2")
    reader = stream(Cluster(6))
    start = offsets_to_json(dict.fromkeys(Cluster(6).ends, 0))
    end = offsets_to_json(Cluster(6).ends)  # an old checkpoint's end: no PLAN_KEY
    assert len(reader.partitions(start, end)) == 6


@pytest.mark.parametrize("recorded", [None, TaskPlan(tasks=2)])
def test_nothing_new_keeps_the_start_so_no_batch_runs(
    monkeypatch: pytest.MonkeyPatch, recorded: TaskPlan | None
) -> None:
    # Spark runs a batch when the end's JSON differs from the start's: a new plan alone must not make one.
    monkeypatch.setenv(CORES_ENV, "4")
    cluster = Cluster(6)
    start = offsets_to_json(cluster.ends, plan=recorded)
    assert stream(cluster).latestOffset(start, ReadAllAvailable()) == start


@pytest.mark.parametrize(
    ("options", "tasks", "plan"),
    [
        ({"parallelism": "3"}, 3, {"tasks": 3, "strategy": "flink"}),
        ({"minPartitions": "12"}, 12, {"minPartitions": 12, "maxRecordsPerPartition": None}),
        ({"maxRecordsPerPartition": "5"}, 12, {"minPartitions": None, "maxRecordsPerPartition": 5}),
        ({}, 6, {"tasks": 6, "strategy": "flink"}),
    ],
)
def test_options_decide_before_the_cores(
    monkeypatch: pytest.MonkeyPatch, options: dict[str, str], tasks: int, plan: dict[str, Any]
) -> None:
    # parallelism: Flink's assigner over that many tasks; minPartitions / maxRecordsPerPartition: Spark's
    # splitting (6 partitions of 10 records into 12 pieces); neither and no cores known: one per partition.
    if options:
        monkeypatch.setenv(CORES_ENV, "2")
    else:
        monkeypatch.delenv(CORES_ENV, raising=False)
    reader = stream(Cluster(6), **options)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end[PLAN_KEY] == plan
    assert len(reader.partitions(start, end)) == tasks


@pytest.mark.parametrize(
    "changed",
    [
        {"assignmentStrategy": "range"},
        {"parallelism": "4"},
        {"parallelism": "2", "assignmentStrategy": "roundrobin"},
        {"minPartitions": "4"},
        {"maxRecordsPerPartition": "3"},
    ],
)
def test_a_replayed_batch_keeps_its_tasks_when_the_options_change(
    monkeypatch: pytest.MonkeyPatch, changed: dict[str, str]
) -> None:
    """A batch partly committed by the exactly-once sink is replayed after a restart with other options:
    its tasks must read what they read before, or the sink's replay, which matches tasks by index and
    count, publishes one task's partitions twice and another's never (review finding: 4 partitions on 2
    cores, task 0 {p0, p2} committed; with assignmentStrategy=range the replay's task 0 was {p0, p1})."""
    monkeypatch.setenv(CORES_ENV, "2")
    first = stream(Cluster(4))
    start = first.initialOffset()
    end = first.latestOffset(start, ReadAllAvailable())
    planned = first.partitions(start, end)
    replayed = stream(Cluster(4), **changed).partitions(start, end)
    assert [t.ranges for t in replayed] == [t.ranges for t in planned]  # type: ignore[attr-defined]
    assert len(planned) == 2


@given(
    partitions=st.sets(
        st.builds(TopicPartition, st.sampled_from(["a", "b"]), st.integers(0, 40)), min_size=1
    ),
    cores=st.integers(1, 16),
    data=st.data(),
)
def test_every_range_is_read_exactly_once_by_a_task_per_core(
    partitions: set[TopicPartition], cores: int, data: st.DataObject
) -> None:
    planner = _Planner(parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a,b"}))
    start = {tp: data.draw(st.integers(0, 5)) for tp in partitions}
    end = {tp: start[tp] + data.draw(st.integers(0, 5)) for tp in partitions}
    plan = TaskPlan(tasks=default_task_count(len(end), cores))
    tasks = planner.plan(start, end, recorded=plan)
    assert len(tasks) <= cores
    assert ranges_of(tasks) == sorted((tp, start[tp], end[tp]) for tp in end if end[tp] > start[tp])
    again = planner.plan(start, end, recorded=plan)
    assert [t.ranges for t in again] == [t.ranges for t in tasks]  # deterministic
