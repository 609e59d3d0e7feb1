"""Choosing each record's partition as the Java client (or Flink's FlinkFixedPartitioner) would."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sparkafka.kafka.partitioners import RoundRobinPartitioner, StickyPartitioner, partition_for_key
from sparkafka.sink.options import Partitioner

__all__ = ["Router"]


class Router:
    """Per writer task: ``partition(topic, key, size)`` for records without an explicit partition.

    Args:
        partitioner: ``default`` (keyed: murmur2 like Java's default partitioner; unkeyed: sticky),
            ``fixed`` (Flink's FlinkFixedPartitioner: writer task i writes to partition i mod n) or
            ``roundrobin`` (Kafka's RoundRobinPartitioner).
        task: the writer task's index (Spark partition id).
        partition_count: number of partitions of a topic (cached by the caller).
    """

    def __init__(self, partitioner: Partitioner, task: int, partition_count: Callable[[str], int]) -> None:
        """Start with fresh sticky and round-robin state: it is this writer task's own."""
        self._kind = partitioner
        self._task = task
        self._count = partition_count
        self._sticky = StickyPartitioner()
        self._round_robin = RoundRobinPartitioner()

    def partition(self, topic: str, key: bytes | None, size: int) -> int:
        """The partition of ``topic`` for one record with ``key`` (None: unkeyed) of ``size`` bytes."""
        n = self._count(topic)
        if self._kind == "fixed":
            return self._task % n
        if self._kind == "roundrobin":
            return self._round_robin.partition(topic, n)
        if key is not None:
            return partition_for_key(key, n)
        return self._sticky.partition(topic, n, size)

    def partitions(self, topic: str, keys: Sequence[bytes | None], sizes: Sequence[int]) -> list[int]:
        """``partition`` for many records, with a quick path for the common all-unkeyed sticky case."""
        if self._kind == "default" and all(k is None for k in keys):
            return self._sticky.partitions(topic, self._count(topic), sizes)
        return [self.partition(topic, k, s) for k, s in zip(keys, sizes, strict=True)]
