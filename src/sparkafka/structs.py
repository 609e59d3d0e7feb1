"""Value types shared across the package.

Offsets in this project mean "the next record to read" unless a name says otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

__all__ = [
    "INTERNAL_TOPIC_PREFIX",
    "KAFKA_INTERNAL_TOPICS",
    "GroupOffset",
    "TimestampedOffset",
    "TopicPartition",
    "committed_offsets",
    "group_commits",
]

INTERNAL_TOPIC_PREFIX = "_sparkafka-"
"""Topics sparkafka creates for itself (the sink's commit-intent logs); a ``subscribePattern`` never matches
them, as Kafka's consumers leave out ``__consumer_offsets``."""

KAFKA_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
"""Kafka's internal topics (``org.apache.kafka.common.internals.Topic.INTERNAL_TOPICS``): the only topics
Spark's connector and Kafka's ``listTopics`` leave out. A user topic named ``__orders`` is not one."""


class TopicPartition(NamedTuple):
    """One partition of one Kafka topic.

    Ordering is by topic name, then partition number, which is the order Kafka's assignors list partitions in.
    """

    topic: str
    """Topic name, exactly as the broker spells it."""
    partition: int
    """Partition number, from 0."""

    def __str__(self) -> str:
        """``topic-partition``, as Kafka's tools write it."""
        return f"{self.topic}-{self.partition}"


class TimestampedOffset(NamedTuple):
    """One record's place and time in a partition, as ListOffsets by timestamp or a fetch tells them."""

    offset: int
    """The record's offset."""
    timestamp_ms: int
    """The record's Kafka timestamp (CreateTime or LogAppendTime, as the topic says), epoch ms."""


def committed_offsets(partitions: Iterable[Any]) -> dict[TopicPartition, int | None]:
    """A group's committed offsets from confluent-kafka TopicPartitions; None where it has none (or error)."""
    return {
        TopicPartition(p.topic, p.partition): (int(p.offset) if p.error is None and p.offset >= 0 else None)
        for p in partitions
    }


class GroupOffset(NamedTuple):
    """A consumer group's commit for one partition: the offset, and the metadata string committed with it."""

    offset: int
    """The next record to read."""
    metadata: str = ""
    """Whatever the committer wrote beside it (a sparkafka source writes a ``CommitMark``)."""


def group_commits(partitions: Iterable[Any]) -> dict[TopicPartition, GroupOffset | None]:
    """A group's commits from confluent-kafka TopicPartitions; None where it has none (or error)."""
    return {
        TopicPartition(p.topic, p.partition): (
            GroupOffset(int(p.offset), str(p.metadata or "")) if p.error is None and p.offset >= 0 else None
        )
        for p in partitions
    }
