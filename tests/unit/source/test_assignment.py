from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkafka.kafka import flink_subtask_for
from sparkafka.source.assignment import assign_tasks, task_name
from sparkafka.structs import TopicPartition

tps_st = st.sets(st.builds(TopicPartition, st.sampled_from(["a", "b", "orders"]), st.integers(0, 20)))


@pytest.mark.parametrize("strategy", ["flink", "range", "roundrobin", "sticky"])
@given(tps=tps_st, n=st.integers(1, 9))
def test_every_partition_read_by_exactly_one_task(strategy, tps, n) -> None:  # type: ignore[no-untyped-def]
    tasks = assign_tasks(tps, n, strategy)
    assert len(tasks) == n
    flat = [tp for task in tasks for tp in task]
    assert sorted(flat) == sorted(tps)
    assert assign_tasks(tps, n, strategy) == tasks


def test_flink_strategy_uses_flinks_assigner() -> None:
    tps = {TopicPartition("orders", p) for p in range(6)}
    tasks = assign_tasks(tps, 4, "flink")
    for i, task in enumerate(tasks):
        assert all(flink_subtask_for(tp.topic, tp.partition, 4) == i for tp in task)


def test_kafka_assignors_work_on_sparse_partitions() -> None:
    # A checkpoint may hold partitions 0, 2, 5 of a topic: the range assignor still splits them evenly.
    tps = {TopicPartition("a", p) for p in (0, 2, 5)}
    assert assign_tasks(tps, 2, "range") == [
        [TopicPartition("a", 0), TopicPartition("a", 2)],
        [TopicPartition("a", 5)],
    ]


def test_sticky_keeps_partitions_when_a_task_is_added() -> None:
    tps = {TopicPartition("a", p) for p in range(6)}
    before = assign_tasks(tps, 2, "sticky")
    after = assign_tasks(tps, 3, "sticky", {task_name(i): ps for i, ps in enumerate(before)})
    kept = sum(len(set(after[i]) & set(before[i])) for i in range(2))
    assert kept == 4


@pytest.mark.parametrize("strategy", ["flink", "range", "roundrobin", "sticky"])
@given(
    batches=st.lists(st.sets(st.integers(0, 7), min_size=1), min_size=2, max_size=5),
    n=st.integers(1, 4),
)
def test_a_batch_is_planned_alike_by_a_running_planner_and_by_a_restarted_one(  # type: ignore[no-untyped-def]
    strategy, batches, n
) -> None:
    """The exactly-once sink replays a partly committed batch by task index: a restarted query must plan
    the batch's tasks exactly as the run that first planned it, whatever that run planned before."""
    from sparkafka.source.options import parse_source_options
    from sparkafka.source.reader import _Planner

    options = parse_source_options(
        {
            "kafka.bootstrap.servers": "b:9092",
            "subscribe": "a",
            "assignmentStrategy": strategy,
            "parallelism": str(n),
        }
    )
    running = _Planner(options)
    plans = []
    for partitions in batches:
        tps = {TopicPartition("a", p) for p in partitions}
        start, end = dict.fromkeys(tps, 0), dict.fromkeys(tps, 10)
        plans.append((start, end, running.plan(start, end)))
    for start, end, planned in plans:
        again = _Planner(options).plan(start, end)
        assert [(p.task, p.ranges) for p in again] == [(p.task, p.ranges) for p in planned]
