"""``KafkaMetadata`` for planning: the client layer's ``AdminMetadata`` plus the subscription's partitions."""

from __future__ import annotations

from sparkafka.client.metadata import AdminMetadata
from sparkafka.source.options import Subscription
from sparkafka.structs import TopicPartition

__all__ = ["SourceMetadata"]


class SourceMetadata(AdminMetadata):
    """Cluster lookups for the source's planner (driver side), retried within ``metadataTimeoutMs``."""

    def partitions(self, subscription: Subscription) -> set[TopicPartition]:
        """The partitions that exist now and belong to the subscription."""
        topics = self.topics()
        if subscription.partitions:
            return {tp for tp in subscription.partitions if tp.partition < topics.get(tp.topic, 0)}
        return {TopicPartition(t, p) for t, n in topics.items() if subscription.matches(t) for p in range(n)}
