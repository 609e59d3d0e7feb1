"""Consumer-group lag: committed offset, log end and lag per partition (``sparkafka lag``).

The log end is what Kafka's own ``kafka-consumer-groups --describe`` shows (ListOffsets latest, read
uncommitted), so the numbers here match the standard tools on a real cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from sparkafka.clients import AdminMetadata
from sparkafka.errors import ConfigError
from sparkafka.options import DEFAULT_METADATA_TIMEOUT_MS
from sparkafka.structs import TopicPartition

__all__ = ["GroupLag", "PartitionLag", "compute_lag", "fetch_group_lag", "plot_lag", "watch_lag"]


@dataclass(frozen=True)
class PartitionLag:
    tp: TopicPartition
    committed: int | None
    """The group's committed offset (the next record it will read); None when it has none."""
    log_end: int
    stable: int | None = None
    """The last stable offset: a read_committed reader waits here while a transaction is open."""

    @property
    def lag(self) -> int | None:
        return None if self.committed is None else max(0, self.log_end - self.committed)

    @property
    def held(self) -> int:
        """Offsets behind an open transaction (log end less last stable offset): data and markers."""
        return 0 if self.stable is None else max(0, self.log_end - self.stable)


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
    group_id: str,
    committed: Mapping[TopicPartition, int | None],
    log_ends: Mapping[TopicPartition, int],
    stable: Mapping[TopicPartition, int] | None = None,
) -> GroupLag:
    """Join committed offsets with log ends; partitions without a commit count no lag (unknown)."""
    rows = tuple(
        PartitionLag(tp, committed.get(tp), end, (stable or {}).get(tp))
        for tp, end in sorted(log_ends.items())
    )
    return GroupLag(group_id, rows)


def fetch_group_lag(
    conf: Mapping[str, str],
    group_id: str,
    topic: str | None = None,
    timeout_s: float = DEFAULT_METADATA_TIMEOUT_MS / 1000,
) -> GroupLag:
    """The lag of ``group_id`` on ``topic`` (or on every topic it has committed offsets for).

    Each lookup goes through the client layer (retried within ``timeout_s``). Two ends per partition: the
    log end (read uncommitted, what Kafka's tools show) and the last stable offset, where a read_committed
    reader stops while a transaction is open.
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
    return compute_lag(group_id, committed, ends, stable)


def render(lag: GroupLag) -> Any:
    """A rich table of one lag reading."""
    from rich.table import Table

    table = Table(title=f"group {lag.group_id}")
    for name in ("topic", "partition", "committed", "log end", "lag", "behind open txn"):
        table.add_column(name, justify="left" if name == "topic" else "right")
    for p in lag.partitions:
        committed = "-" if p.committed is None else str(p.committed)
        lag_text = "-" if p.lag is None else str(p.lag)
        table.add_row(p.tp.topic, str(p.tp.partition), committed, str(p.log_end), lag_text, str(p.held))
    committed_total = sum(p.committed or 0 for p in lag.partitions)
    ends_total = sum(p.log_end for p in lag.partitions)
    held = sum(p.held for p in lag.partitions)
    table.add_row(
        "total", "", str(committed_total), str(ends_total), str(lag.total_lag), str(held), style="bold"
    )
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
    if not out.isatty():  # a pipe or a file: every reading as plain lines, as it is taken
        print(plain(first, 0.0), file=out, flush=True)
        try:
            while interval_s is not None and (count is None or len(history) < count):
                sleep(interval_s)
                reading = read()
                history.append((time.monotonic() - started, reading.total_lag))
                print(plain(reading, history[-1][0]), file=out, flush=True)
        except KeyboardInterrupt:
            pass
        return history
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


def plain(lag: GroupLag, at_s: float) -> str:
    """One reading as plain lines (a header per reading, a line per partition), for pipes and files."""
    rows = [f"group {lag.group_id} at {at_s:.1f} s: total lag {lag.total_lag}"]
    for p in lag.partitions:
        committed = "-" if p.committed is None else str(p.committed)
        lag_text = "-" if p.lag is None else str(p.lag)
        rows.append(
            f"  {p.tp.topic} {p.tp.partition}: committed {committed}, log end {p.log_end}, lag {lag_text}, "
            f"behind open txn {p.held}"
        )
    return "\n".join(rows)


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
