"""Producer-side partitioners that choose the partition a Java Kafka client would choose.

librdkafka's default partitioner hashes keys with CRC32, so records keyed by a Python producer would land
on other partitions than the same keys from a Java producer. The sink therefore computes the partition
itself with these functions and passes it explicitly.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from sparkafka.kafka.hashing import murmur2, to_positive

__all__ = ["RoundRobinPartitioner", "StickyPartitioner", "partition_for_key"]


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Kafka's keyed partitioning (``BuiltInPartitioner.partitionForKey``).

    ``toPositive(murmur2(key)) % numPartitions``: the partition Java's default partitioner picks for a record
    with this serialized key.
    """
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


class RoundRobinPartitioner:
    """Kafka's ``RoundRobinPartitioner`` for records without a key.

    A counter per topic; record ``i`` of a topic goes to ``available[toPositive(i) % len(available)]``, or,
    when no partition is available, to ``toPositive(i) % num_partitions``. Not thread-safe: use one instance
    per writer.
    """

    def __init__(self) -> None:
        """Start every topic's counter at 0."""
        self._counters: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int, available: Sequence[int] | None = None) -> int:
        """The partition for the next unkeyed record of ``topic``."""
        if num_partitions <= 0:
            raise ValueError(f"num_partitions must be positive, got {num_partitions}")
        n = self._counters.get(topic, 0)
        # Java's AtomicInteger wraps; toPositive keeps the index non-negative after the wrap.
        self._counters[topic] = (n + 1) & 0xFFFFFFFF
        if available:
            return available[to_positive(n) % len(available)]
        return to_positive(n) % num_partitions


class StickyPartitioner:
    """Uniform sticky partitioning for records without a key (Kafka 3.3+, KIP-794).

    All unkeyed records of a topic go to one partition until ``batch_size`` bytes have been sent to it,
    then a different partition is chosen at random. Large batches amortise request overhead while load
    still spreads evenly over time. Pass a seeded ``rng`` for reproducible choices. Not thread-safe.
    """

    def __init__(self, batch_size: int = 16384, rng: random.Random | None = None) -> None:
        """Switch partitions after ``batch_size`` bytes; ``rng`` picks them (default an unseeded one)."""
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self._batch_size = batch_size
        self._rng = rng or random.Random()
        self._current: dict[str, int] = {}
        self._bytes: dict[str, int] = {}

    def partition(
        self,
        topic: str,
        num_partitions: int,
        record_size: int = 1,
        available: Sequence[int] | None = None,
    ) -> int:
        """The partition for the next unkeyed record of ``topic``, which takes ``record_size`` bytes."""
        if num_partitions <= 0:
            raise ValueError(f"num_partitions must be positive, got {num_partitions}")
        choices = list(available) if available else list(range(num_partitions))
        current = self._current.get(topic)
        if current is None or current not in choices or self._bytes.get(topic, 0) >= self._batch_size:
            current = self._next(current, choices)
            self._current[topic] = current
            self._bytes[topic] = 0
        self._bytes[topic] += max(record_size, 1)
        return current

    def partitions(self, topic: str, num_partitions: int, record_sizes: Sequence[int]) -> list[int]:
        """``partition`` for consecutive records (all partitions available), in one call.

        Runs in the sink's writer tasks for every unkeyed batch, so it works per run, not per record: with
        prefix sums of the sizes, a run's end is one binary search (a run ends with the record that
        brings its partition to ``batch_size`` bytes, or with the input).
        """
        import numpy as np

        n = len(record_sizes)
        sizes = np.maximum(np.asarray(record_sizes, dtype=np.int64), 1)
        sums = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=sums[1:])
        out: list[int] = []
        start = 0
        while start < n:
            current = self.partition(topic, num_partitions, int(sizes[start]))
            used = self._bytes[topic]  # includes record ``start``
            if used >= self._batch_size:
                stop = start + 1
            else:  # sums are non-decreasing, so the first index reaching the target is past start + 1
                target = self._batch_size - used + int(sums[start + 1])
                stop = min(int(np.searchsorted(sums, target, side="left")), n)
            self._bytes[topic] = used + int(sums[stop] - sums[start + 1])
            out.extend([current] * (stop - start))
            start = stop
        return out

    def _next(self, previous: int | None, choices: list[int]) -> int:
        # Switch to a different partition when there is one, as Kafka's sticky partitioner does.
        others = [p for p in choices if p != previous] or choices
        return others[self._rng.randrange(len(others))]
