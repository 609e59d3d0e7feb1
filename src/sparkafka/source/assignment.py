"""Which reader task reads which Kafka partitions (Flink's subtasks, mapped onto Spark tasks)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sparkafka.kafka import flink_subtask_for, range_assign, round_robin_assign, sticky_assign
from sparkafka.source.options import AssignmentStrategy
from sparkafka.structs import TopicPartition

__all__ = ["assign_tasks", "task_name"]


def task_name(index: int) -> str:
    """Member id of a reader task for Kafka's assignors; zero-padded so that sorting keeps task order."""
    return f"task-{index:05d}"


def assign_tasks(
    tps: Iterable[TopicPartition],
    parallelism: int,
    strategy: AssignmentStrategy,
    previous: Mapping[str, Iterable[TopicPartition]] | None = None,
) -> list[list[TopicPartition]]:
    """Partitions per reader task, ``parallelism`` lists (some possibly empty), each sorted.

    Deterministic: the same partitions, parallelism and strategy always give the same mapping (``sticky``
    also depends on ``previous``, the last mapping by task name; the source passes none, so that a batch's
    plan depends on its offsets alone).
    """
    if parallelism < 1:
        raise ValueError(f"parallelism must be >= 1, got {parallelism}")
    parts = sorted(set(tps))
    if strategy == "flink":
        tasks: list[list[TopicPartition]] = [[] for _ in range(parallelism)]
        for tp in parts:
            tasks[flink_subtask_for(tp.topic, tp.partition, parallelism)].append(tp)
        return tasks
    # Kafka's assignors take a partition count per topic; give them exactly the partitions we have by
    # assigning a dense range and mapping back (a checkpoint may hold a subset of a topic's partitions).
    per_topic: dict[str, list[int]] = {}
    for tp in parts:
        per_topic.setdefault(tp.topic, []).append(tp.partition)
    counts = {t: len(ps) for t, ps in per_topic.items()}
    members = {task_name(i): list(per_topic) for i in range(parallelism)}
    if strategy == "range":
        dense = range_assign(counts, members)
    elif strategy == "roundrobin":
        dense = round_robin_assign(counts, members)
    else:
        index = {tp: TopicPartition(tp.topic, per_topic[tp.topic].index(tp.partition)) for tp in parts}
        prev_dense = {m: [index[tp] for tp in ps if tp in index] for m, ps in (previous or {}).items()}
        dense = sticky_assign(counts, members, prev_dense)
    return [
        sorted(TopicPartition(tp.topic, per_topic[tp.topic][tp.partition]) for tp in dense[task_name(i)])
        for i in range(parallelism)
    ]
