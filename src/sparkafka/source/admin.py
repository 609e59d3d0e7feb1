"""``KafkaMetadata`` over confluent-kafka's AdminClient: discovery, offset lookups, group offsets."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from sparkafka.clientconf import against_servers
from sparkafka.errors import BrokerError
from sparkafka.source.options import Subscription
from sparkafka.source.planning import Offsets
from sparkafka.structs import TopicPartition, committed_offsets

__all__ = ["AdminMetadata"]

log = logging.getLogger(__name__)

# librdkafka settings that only consumers or producers accept; AdminClient warns about them.
_ADMIN_DROP = {
    "enable.auto.commit",
    "isolation.level",
    "group.id",
    "auto.offset.reset",
    "enable.partition.eof",
    "transactional.id",
    "transaction.timeout.ms",
}


class AdminMetadata:
    """Cluster lookups for planning. Not picklable on purpose: create it where it is used.

    Args:
        conf: librdkafka settings (``kafka.*`` options without the prefix).
        timeout_s: bound on every request; an unreachable broker fails within it, naming the address.
    """

    def __init__(self, conf: Mapping[str, str], timeout_s: float = 30.0) -> None:
        from confluent_kafka.admin import AdminClient

        self._conf = dict(conf)
        self._timeout_s = timeout_s
        self._read_committed = conf.get("isolation.level", "read_committed") == "read_committed"
        admin_conf = {k: v for k, v in conf.items() if k not in _ADMIN_DROP}
        self._admin = AdminClient(admin_conf)

    def _fail(self, what: str, error: BaseException) -> BrokerError:
        return BrokerError(f"{what} failed {against_servers(self._conf)}: {error}")

    def topics(self) -> dict[str, int]:
        """Every topic the cluster has, with its partition count (internal ``__`` topics left out)."""
        try:
            metadata = self._admin.list_topics(timeout=self._timeout_s)
        except Exception as e:
            raise self._fail("listing topics", e) from e
        out: dict[str, int] = {}
        for name, topic in metadata.topics.items():
            if name.startswith("__") or topic.error is not None:
                continue
            out[name] = len(topic.partitions)
        return out

    def partitions(self, subscription: Subscription) -> set[TopicPartition]:
        topics = self.topics()
        if subscription.partitions:
            return {tp for tp in subscription.partitions if tp.partition < topics.get(tp.topic, 0)}
        return {TopicPartition(t, p) for t, n in topics.items() if subscription.matches(t) for p in range(n)}

    def _list_offsets(self, specs: dict[TopicPartition, Any], what: str) -> Offsets:
        if not specs:
            return {}
        from confluent_kafka import IsolationLevel
        from confluent_kafka import TopicPartition as CTopicPartition

        level = IsolationLevel.READ_COMMITTED if self._read_committed else IsolationLevel.READ_UNCOMMITTED
        request = {CTopicPartition(tp.topic, tp.partition): spec for tp, spec in specs.items()}
        try:
            futures = self._admin.list_offsets(
                request, isolation_level=level, request_timeout=self._timeout_s
            )
            return {
                TopicPartition(ctp.topic, ctp.partition): int(f.result(self._timeout_s).offset)
                for ctp, f in futures.items()
            }
        except Exception as e:
            raise self._fail(f"looking up {what} offsets", e) from e

    def earliest(self, tps: Iterable[TopicPartition]) -> Offsets:
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets({tp: OffsetSpec.earliest() for tp in tps}, "earliest")

    def latest(self, tps: Iterable[TopicPartition]) -> Offsets:
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets({tp: OffsetSpec.latest() for tp in tps}, "latest")

    def for_timestamp(self, tps: Iterable[TopicPartition], timestamp_ms: int) -> Offsets:
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets({tp: OffsetSpec.for_timestamp(timestamp_ms) for tp in tps}, "timestamp")

    def committed(self, group_id: str, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka import TopicPartition as CTopicPartition

        wanted = [CTopicPartition(tp.topic, tp.partition) for tp in tps]
        if not wanted:
            return {}
        try:
            futures = self._admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group_id, wanted)], request_timeout=self._timeout_s
            )
            result = next(iter(futures.values())).result(self._timeout_s)
        except Exception as e:
            raise self._fail(f"reading committed offsets of group {group_id!r}", e) from e
        return committed_offsets(result.topic_partitions)
