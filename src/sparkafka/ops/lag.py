"""Consumer-group lag: committed offset, log end and lag per partition (``sparkafka lag``).

The command's tables, watch loop and plot are in ``sparkafka.cli.lag_view``.

The log end is what Kafka's own ``kafka-consumer-groups --describe`` shows (ListOffsets latest, read
uncommitted), so the numbers here match the standard tools on a real cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sparkafka.client.metadata import AdminMetadata
from sparkafka.errors import ConfigError
from sparkafka.options import DEFAULT_METADATA_TIMEOUT_MS
from sparkafka.source.alignment_status import AlignmentStatus, PartitionEventTime
from sparkafka.source.commits import read_source_metrics
from sparkafka.structs import TopicPartition

__all__ = ["GroupLag", "PartitionLag", "compute_lag", "fetch_group_lag"]


@dataclass(frozen=True)
class PartitionLag:
    """One partition's committed offset, log end and last stable offset, as ``sparkafka lag`` shows them."""

    tp: TopicPartition
    committed: int | None
    """The group's committed offset (the next record it will read); None when it has none."""
    log_end: int
    stable: int | None = None
    """The last stable offset: a read_committed reader waits here while a transaction is open."""
    event_time: PartitionEventTime | None = None
    """Event-time alignment at the source's last plan (``maxEventTimeDrift``), from its metrics file."""

    @property
    def lag(self) -> int | None:
        """Offsets from the committed offset to the log end (at least 0); None without a commit."""
        return None if self.committed is None else max(0, self.log_end - self.committed)

    @property
    def held(self) -> int:
        """Offsets behind an open transaction (log end less last stable offset): data and markers."""
        return 0 if self.stable is None else max(0, self.log_end - self.stable)


@dataclass(frozen=True)
class GroupLag:
    """A consumer group's lag, one row per partition in topic and partition order."""

    group_id: str
    partitions: tuple[PartitionLag, ...]
    alignment: AlignmentStatus | None = None
    """The source's event-time alignment, when it aligns and runs on this host (its metrics file)."""

    @property
    def total_lag(self) -> int:
        """The sum of the partitions' lag; partitions without a commit count 0."""
        return sum(p.lag or 0 for p in self.partitions)

    @property
    def has_commits(self) -> bool:
        """Whether the group has committed an offset for any of the partitions."""
        return any(p.committed is not None for p in self.partitions)


def compute_lag(
    group_id: str,
    committed: Mapping[TopicPartition, int | None],
    log_ends: Mapping[TopicPartition, int],
    stable: Mapping[TopicPartition, int] | None = None,
    alignment: AlignmentStatus | None = None,
) -> GroupLag:
    """Join committed offsets with log ends (and the source's event-time alignment, when given);
    partitions without a commit count no lag (unknown)."""
    times = alignment.partitions if alignment is not None else {}
    rows = tuple(
        PartitionLag(tp, committed.get(tp), end, (stable or {}).get(tp), times.get(tp))
        for tp, end in sorted(log_ends.items())
    )
    return GroupLag(group_id, rows, alignment)


def fetch_group_lag(
    conf: Mapping[str, str],
    group_id: str,
    topic: str | None = None,
    timeout_s: float = DEFAULT_METADATA_TIMEOUT_MS / 1000,
    metrics_file: str | None = None,
) -> GroupLag:
    """The lag of ``group_id`` on ``topic`` (or on every topic it has committed offsets for).

    Each lookup goes through the client layer (retried within ``timeout_s``). Two ends per partition: the
    log end (read uncommitted, what Kafka's tools show) and the last stable offset, where a read_committed
    reader stops while a transaction is open. A sparkafka source of the group that aligns by event time and
    runs on this host adds its alignment from its metrics file (``metrics_file``: its option metricsFile).
    """
    plain = AdminMetadata({**conf, "isolation.level": "read_uncommitted"}, timeout_s)
    stable_view = AdminMetadata({**conf, "isolation.level": "read_committed"}, timeout_s)
    tps: list[TopicPartition] | None = None
    if topic is not None:
        # All topics, not Metadata for one: some brokers create a topic that is asked for by name.
        partitions = plain.topics().get(topic)
        if not partitions:
            raise ConfigError(f"topic {topic!r} does not exist on {conf.get('bootstrap.servers')}")
        tps = [TopicPartition(topic, p) for p in range(partitions)]
    committed = plain.committed(group_id, tps)
    wanted = list(committed) if tps is None else tps
    ends = plain.latest(wanted)
    stable = stable_view.latest(wanted)
    metrics = read_source_metrics(group_id, metrics_file)
    return compute_lag(group_id, committed, ends, stable, metrics.event_time if metrics is not None else None)
