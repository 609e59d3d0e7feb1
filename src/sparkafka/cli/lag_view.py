"""How ``sparkafka lag`` shows lag: a rich table (live with ``--watch``), plain lines into pipes, a PNG plot.

Runs in the CLI's process; the readings come from ``sparkafka.ops.lag`` (Kafka lookups, no rendering).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, TextIO

from sparkafka.errors import ConfigError
from sparkafka.ops.lag import GroupLag, PartitionLag
from sparkafka.source.alignment_status import describe_duration, describe_time

__all__ = ["plain", "plot_lag", "render", "watch_lag"]


def render(lag: GroupLag) -> Any:
    """A rich table of one lag reading."""
    from rich.table import Table

    table = Table(title=f"group {lag.group_id}", caption=_alignment_caption(lag))
    aligned = lag.alignment is not None
    names = ["topic", "partition", "committed", "log end", "lag", "behind open txn"]
    for name in [*names, "event time", "alignment"] if aligned else names:
        table.add_column(name, justify="left" if name in ("topic", "event time", "alignment") else "right")
    for p in lag.partitions:
        committed = "-" if p.committed is None else str(p.committed)
        lag_text = "-" if p.lag is None else str(p.lag)
        row = [p.tp.topic, str(p.tp.partition), committed, str(p.log_end), lag_text, str(p.held)]
        table.add_row(*row, *(_event_time_cells(p) if aligned else []))
    committed_total = sum(p.committed or 0 for p in lag.partitions)
    ends_total = sum(p.log_end for p in lag.partitions)
    held = sum(p.held for p in lag.partitions)
    totals = ["total", "", str(committed_total), str(ends_total), str(lag.total_lag), str(held)]
    table.add_row(*totals, *(["", ""] if aligned else []), style="bold")
    return table


def _event_time_cells(p: PartitionLag) -> list[str]:
    if p.event_time is None:
        return ["-", "-"]
    return [describe_time(p.event_time.event_time_ms), p.event_time.state]


def _alignment_caption(lag: GroupLag) -> str | None:
    """What alignment holds, under the table (from the source's metrics file on this host)."""
    status = lag.alignment
    if status is None:
        return None
    return status.describe_hold() or (
        f"event-time alignment (maxEventTimeDrift {describe_duration(status.drift_ms)}) holds nothing back"
    )


def watch_lag(
    first: GroupLag,
    read: Callable[[], GroupLag],
    out: TextIO,
    *,
    interval_s: float | None,
    count: int | None,
    sleep: Callable[[float], None] = time.sleep,
    wall: Callable[[], float] = time.time,
) -> list[tuple[float, int]]:
    """Print ``first`` (just read); with ``interval_s``, a fresh ``read()`` in place until ``count`` readings
    or Ctrl-C. Runs in the CLI's process.

    Into a pipe or a file each reading's header names its wall-clock time (``wall``, epoch seconds).
    Returns (seconds since the first reading, total lag) per reading, for ``plot_lag``.
    """
    from rich.console import Console
    from rich.live import Live

    console = Console(file=out)
    started = time.monotonic()
    history: list[tuple[float, int]] = [(0.0, first.total_lag)]
    if not out.isatty():  # a pipe or a file: every reading as plain lines, as it is taken
        print(plain(first, wall()), file=out, flush=True)
        try:
            while interval_s is not None and (count is None or len(history) < count):
                sleep(interval_s)
                reading = read()
                history.append((time.monotonic() - started, reading.total_lag))
                print(plain(reading, wall()), file=out, flush=True)
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


def plain(lag: GroupLag, taken_at: float) -> str:
    """One reading as plain lines, for pipes and files: a header naming the group, the reading's local
    wall-clock time (``taken_at``, epoch seconds) and the total, then a line per partition."""
    when = datetime.fromtimestamp(taken_at).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    rows = [f"group {lag.group_id} at {when}: total lag {lag.total_lag}"]
    for p in lag.partitions:
        committed = "-" if p.committed is None else str(p.committed)
        lag_text = "-" if p.lag is None else str(p.lag)
        aligned = ", event time {}, {}".format(*_event_time_cells(p)) if lag.alignment is not None else ""
        rows.append(
            f"  {p.tp.topic} {p.tp.partition}: committed {committed}, log end {p.log_end}, lag {lag_text}, "
            f"behind open txn {p.held}{aligned}"
        )
    caption = _alignment_caption(lag)
    return "\n".join([*rows, f"  {caption}"] if caption else rows)


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
