"""``KafkaMetadata`` for planning and ``EventTimeLog`` for alignment: the client layer's ``AdminMetadata``
plus the subscription's partitions and record timestamps by fetching."""

from __future__ import annotations

from collections.abc import Mapping

from sparkafka.client.metadata import AdminMetadata
from sparkafka.client.record_times import scan_times
from sparkafka.source.alignment import Scan
from sparkafka.source.options import Subscription
from sparkafka.source.planning import Discovery
from sparkafka.structs import TopicPartition

__all__ = ["SourceMetadata"]


class SourceMetadata(AdminMetadata):
    """Cluster lookups for the source's planner (driver side), retried within ``metadataTimeoutMs``."""

    def discover(self, subscription: Subscription) -> Discovery:
        """The partitions that exist now and belong to the subscription, and their topics' ids (those the
        broker has: Kafka 2.8 and later).

        One DescribeTopics request for ``subscribe`` and ``assign``; a pattern lists the topics first.
        """
        if subscription.pattern is not None:
            names = [t for t in self.topics() if subscription.matches(t)]
        else:
            names = [tp.topic for tp in subscription.partitions] or list(subscription.topics)
        topics = self.describe_topics(t for t in names if not t.startswith("__"))
        ids = {t: info.topic_id for t, info in topics.items() if info.topic_id}
        if subscription.partitions:
            counts = {t: info.partitions for t, info in topics.items()}
            return Discovery(
                {tp for tp in subscription.partitions if tp.partition < counts.get(tp.topic, 0)}, ids
            )
        return Discovery(
            {TopicPartition(t, p) for t, info in topics.items() for p in range(info.partitions)}, ids
        )

    def scan(
        self, ranges: Mapping[TopicPartition, tuple[int, int]], at_least_ms: int | None, max_records: int
    ) -> dict[TopicPartition, Scan]:
        """``EventTimeLog.scan``: fetches with this isolation level, within ``metadataTimeoutMs``."""
        found = scan_times(self._conf, ranges, at_least_ms, max_records, self._timeout_s)
        return {tp: Scan(record, scanned_to) for tp, (record, scanned_to) in found.items()}
