"""Value types shared across the package.

Offsets in this project mean "the next record to read" unless a name says otherwise.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition"]


class TopicPartition(NamedTuple):
    """One partition of one Kafka topic.

    Ordering is by topic name, then partition number, which is the order Kafka's assignors list partitions in.
    """

    topic: str
    """Topic name, exactly as the broker spells it."""
    partition: int
    """Partition number, from 0."""

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
