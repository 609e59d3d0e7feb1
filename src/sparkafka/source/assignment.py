"""Which reader task reads which Kafka partitions (Flink's subtasks, mapped onto Spark tasks), and how many
reader tasks a batch has."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from sparkafka.kafka import flink_subtask_for, range_assign, round_robin_assign, sticky_assign
from sparkafka.source.options import AssignmentStrategy
from sparkafka.structs import TopicPartition

__all__ = ["CORES_ENV", "assign_tasks", "default_task_count", "spark_cores", "task_name"]

CORES_ENV = "SPARKAFKA_SPARK_CORES"
"""Spark's ``defaultParallelism`` (its cores, or ``spark.default.parallelism``) when ``sparkafka.register``
ran, passed to the data source's Python processes through the context's worker environment: Spark's source
runner, where a batch is planned, has no SparkContext to ask."""


def spark_cores(environ: Mapping[str, str] = os.environ) -> int | None:
    """Spark's cores as ``register`` passed them (``CORES_ENV``); None when it did not (Spark Connect, a
    data source registered by hand) or the value is not a positive number."""
    try:
        cores = int(environ.get(CORES_ENV, ""))
    except ValueError:
        return None
    return cores if cores > 0 else None


def default_task_count(partitions: int, cores: int | None) -> int | None:
    """How many reader tasks a batch of ``partitions`` partitions gets when no option says (``parallelism``,
    ``minPartitions``, ``maxRecordsPerPartition``): one per core Spark has, each reading its partitions
    with one client, never more than there are partitions; None (one task per partition, as Spark's
    connector has) when the cores are not known.

    Why not one task per partition: each task of a Python data source costs Spark 30-60 ms (scheduling, a
    round trip to a Python worker, the task's pickled plan), and each costs the exactly-once sink
    downstream a transaction; at 200 partitions that was most of a batch (``bench/PARTITIONS.md``). More
    tasks than cores run in waves and read no faster.
    """
    if cores is None:
        return None
    return max(1, min(partitions, cores))


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
