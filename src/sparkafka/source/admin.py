"""``KafkaMetadata`` for planning and ``EventTimeLog`` for alignment: the client layer's ``AdminMetadata``
plus the subscription's partitions and record timestamps by fetching."""

from __future__ import annotations

from collections.abc import Mapping

from sparkafka.client.metadata import AdminMetadata
from sparkafka.client.record_times import scan_times
from sparkafka.source.alignment import Scan
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

    def scan(
        self, ranges: Mapping[TopicPartition, tuple[int, int]], at_least_ms: int | None, max_records: int
    ) -> dict[TopicPartition, Scan]:
        """``EventTimeLog.scan``: fetches with this isolation level, within ``metadataTimeoutMs``."""
        found = scan_times(self._conf, ranges, at_least_ms, max_records, self._timeout_s)
        return {tp: Scan(record, scanned_to) for tp, (record, scanned_to) in found.items()}
