"""``KafkaMetadata`` for planning: the client layer's ``AdminMetadata`` plus the subscription's partitions."""

from __future__ import annotations

from collections.abc import Iterable

from sparkafka.client.metadata import AdminMetadata
from sparkafka.client.security import Access, authenticated
from sparkafka.source.options import SourceOptions, Subscription
from sparkafka.structs import TopicPartition

__all__ = ["SourceMetadata", "source_access"]


def source_access(options: SourceOptions, topics: Iterable[str]) -> list[Access]:
    """The ACLs a query needs from the start: READ on each topic it reads, READ on the group it commits to.

    READ includes DESCRIBE (metadata, ListOffsets); READ on the group covers fetching its offsets and
    committing them, and the readers' coordinator lookup under ``kafka.group.id`` (``client.security``).
    """
    needed = [Access("READ", "topic", t) for t in sorted(set(topics))]
    if options.commit_mode != "disabled" and options.group_id:
        needed.append(Access("READ", "group", options.group_id))
    return needed


class SourceMetadata(AdminMetadata):
    """Cluster lookups for the source's planner (driver side), retried within ``metadataTimeoutMs``."""

    def require_source_access(self, options: SourceOptions, found: Iterable[TopicPartition]) -> None:
        """On a cluster that knows who the client is: raise for the first ACL ``source_access`` lacks.

        ``found``: the partitions discovered; topics named by the subscription are checked even when not
        found (a topic the user may not DESCRIBE is missing from every listing).
        """
        if authenticated(self._conf):
            sub = options.subscription
            named = {*sub.topics, *(tp.topic for tp in sub.partitions)}
            self.require(source_access(options, named | {tp.topic for tp in found}))  # a new group: unchecked

    def partitions(self, subscription: Subscription) -> set[TopicPartition]:
        """The partitions that exist now and belong to the subscription."""
        topics = self.topics()
        if subscription.partitions:
            return {tp for tp in subscription.partitions if tp.partition < topics.get(tp.topic, 0)}
        return {TopicPartition(t, p) for t, n in topics.items() if subscription.matches(t) for p in range(n)}
