"""Consumer-group lag: committed offset, log end and lag per partition (``sparkafka lag``).

The log end is what Kafka's own ``kafka-consumer-groups --describe`` shows (ListOffsets latest, read
uncommitted), so the numbers here match the standard tools on a real cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from sparkafka.errors import BrokerError, ConfigError
from sparkafka.structs import TopicPartition, committed_offsets

__all__ = ["GroupLag", "PartitionLag", "compute_lag", "fetch_group_lag", "plot_lag", "watch_lag"]


@dataclass(frozen=True)
class PartitionLag:
    tp: TopicPartition
    committed: int | None
    """The group's committed offset (the next record it will read); None when it has none."""
    log_end: int

    @property
    def lag(self) -> int | None:
        return None if self.committed is None else max(0, self.log_end - self.committed)


@dataclass(frozen=True)
class GroupLag:
    group_id: str
    partitions: tuple[PartitionLag, ...]

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)

    @property
    def has_commits(self) -> bool:
        return any(p.committed is not None for p in self.partitions)


def compute_lag(
    group_id: str, committed: Mapping[TopicPartition, int | None], log_ends: Mapping[TopicPartition, int]
) -> GroupLag:
    """Join committed offsets with log ends; partitions without a commit count no lag (unknown)."""
    rows = tuple(PartitionLag(tp, committed.get(tp), end) for tp, end in sorted(log_ends.items()))
    return GroupLag(group_id, rows)


def fetch_group_lag(conf: Mapping[str, str], group_id: str, topic: str | None = None) -> GroupLag:
    """The lag of ``group_id`` on ``topic`` (or on every topic it has committed offsets for)."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka import TopicPartition as CTopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient(dict(conf))
    servers = conf.get("bootstrap.servers")
    wanted: list[Any] | None = None
    if topic is not None:
        try:
            # All topics, not Metadata for one: some brokers create a topic that is asked for by name.
            meta = admin.list_topics(timeout=10).topics.get(topic)
        except Exception as e:
            raise BrokerError(f"listing topics on {servers} failed: {e}") from e
        if meta is None or meta.error is not None or not meta.partitions:
            raise ConfigError(f"topic {topic!r} does not exist on {servers}")
        wanted = [CTopicPartition(topic, p) for p in sorted(meta.partitions)]
    try:
        request = ConsumerGroupTopicPartitions(group_id, wanted)
        future = admin.list_consumer_group_offsets([request], request_timeout=10)[group_id]
        result = future.result(15)
        committed = committed_offsets(result.topic_partitions)
        tps = list(committed) if topic is None else [TopicPartition(topic, p.partition) for p in wanted or []]
        ends: dict[TopicPartition, int] = {}
        if tps:
            futures = admin.list_offsets(
                {CTopicPartition(tp.topic, tp.partition): OffsetSpec.latest() for tp in tps},
                request_timeout=10,
            )
            ends = {
                TopicPartition(c.topic, c.partition): int(f.result(15).offset) for c, f in futures.items()
            }
    except Exception as e:
        raise BrokerError(f"reading the lag of group {group_id!r} from {servers} failed: {e}") from e
    return compute_lag(group_id, committed, ends)


def render(lag: GroupLag) -> Any:
    """A rich table of one lag reading."""
    from rich.table import Table

    table = Table(title=f"group {lag.group_id}")
    for name in ("topic", "partition", "committed", "log end", "lag"):
        table.add_column(name, justify="left" if name == "topic" else "right")
    for p in lag.partitions:
        committed = "-" if p.committed is None else str(p.committed)
        lag_text = "-" if p.lag is None else str(p.lag)
        table.add_row(p.tp.topic, str(p.tp.partition), committed, str(p.log_end), lag_text)
    committed_total = sum(p.committed or 0 for p in lag.partitions)
    ends_total = sum(p.log_end for p in lag.partitions)
    table.add_row("total", "", str(committed_total), str(ends_total), str(lag.total_lag), style="bold")
    return table


def watch_lag(
    first: GroupLag,
    read: Callable[[], GroupLag],
    out: TextIO,
    *,
    interval_s: float | None,
    count: int | None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[tuple[float, int]]:
    """Print ``first``; with ``interval_s``, a fresh ``read()`` in place until ``count`` readings or Ctrl-C.

    Returns (seconds since start, total lag) per reading, for ``plot_lag``.
    """
    from rich.console import Console
    from rich.live import Live

    console = Console(file=out)
    started = time.monotonic()
    history: list[tuple[float, int]] = [(0.0, first.total_lag)]
    if interval_s is None:
        console.print(render(first))
        return history
    with Live(render(first), console=console, auto_refresh=False) as live:
        try:
            while count is None or len(history) < count:
                sleep(interval_s)
                reading = read()
                history.append((time.monotonic() - started, reading.total_lag))
                live.update(render(reading), refresh=True)
        except KeyboardInterrupt:
            pass
    return history


def plot_lag(history: list[tuple[float, int]], group_id: str, path: str) -> None:
    """Write a PNG of total lag over the watched period."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("--plot needs matplotlib: pip install 'sparkafka[plot]'") from None
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot([t for t, _ in history], [lag for _, lag in history], marker="o")
    ax.set_xlabel("seconds")
    ax.set_ylabel("total lag (records)")
    ax.set_title(f"consumer lag of group {group_id}")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
