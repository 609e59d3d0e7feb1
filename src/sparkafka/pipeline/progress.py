"""What the pipeline runner shows per micro-batch, derived from Spark's progress and sparkafka's counters."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["BatchLine", "batch_line", "behind_latest", "render_status", "render_summary"]


def _offsets(text: Any) -> dict[str, dict[str, int]]:
    if not text:
        return {}
    data = json.loads(text) if isinstance(text, str) else text
    return data if isinstance(data, dict) else {}


def behind_latest(source: Mapping[str, Any]) -> int | None:
    """Records between the batch's end and the latest offsets the source saw (summed over partitions)."""
    latest, end = _offsets(source.get("latestOffset")), _offsets(source.get("endOffset"))
    if not latest or not end:
        return None
    total = 0
    for topic, parts in latest.items():
        for partition, offset in parts.items():
            total += max(0, int(offset) - int(end.get(topic, {}).get(partition, offset)))
    return total


MALFORMED_METRIC = "sparkafka_malformed"
"""The observed metric (``observedMetrics`` in a batch's progress) counting undecodable values."""


@dataclass(frozen=True)
class BatchLine:
    batch: int
    input_rows: int
    input_per_s: float
    processed_per_s: float
    duration_ms: int
    behind: int | None
    commits_succeeded: int | None
    commits_failed: int | None
    transactions: int | None
    """Transactions committed by the exactly-once sink since the runner started."""
    records_out: int | None
    """Records in those transactions since the runner started."""
    out_per_s: float | None = None
    """Records the sink committed for this batch, per second of the batch's duration."""
    malformed: int | None = None
    """Undecodable values in this batch (skipped, dead-lettered or failing it); None under ``flag``."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def batch_line(
    progress: Mapping[str, Any],
    source_metrics: Any | None,
    sink_since_start: Mapping[str, int] | None,
    previous: BatchLine | None = None,
) -> BatchLine:
    sources = progress.get("sources") or [{}]
    duration_ms = int((progress.get("durationMs") or {}).get("triggerExecution", 0))
    records_out = None if sink_since_start is None else sink_since_start.get("records", 0)
    out_per_s = None
    if records_out is not None and duration_ms > 0:
        before = previous.records_out if previous is not None and previous.records_out is not None else 0
        out_per_s = (records_out - before) * 1000 / duration_ms
    return BatchLine(
        batch=int(progress.get("batchId", -1)),
        input_rows=int(progress.get("numInputRows", 0)),
        input_per_s=float(progress.get("inputRowsPerSecond") or 0.0),
        processed_per_s=float(progress.get("processedRowsPerSecond") or 0.0),
        duration_ms=duration_ms,
        behind=behind_latest(sources[0]),
        commits_succeeded=None if source_metrics is None else source_metrics.commits_succeeded,
        commits_failed=None if source_metrics is None else source_metrics.commits_failed,
        transactions=None if sink_since_start is None else sink_since_start.get("transactions", 0),
        records_out=records_out,
        out_per_s=out_per_s,
        malformed=_observed_count(progress, MALFORMED_METRIC),
    )


def _observed_count(progress: Mapping[str, Any], name: str) -> int | None:
    observed = progress.get("observedMetrics") or {}
    row = observed.get(name)
    if row is None:
        return None
    value = row.get("n") if isinstance(row, Mapping) else getattr(row, "n", None)
    return None if value is None else int(value)


def _show(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def render_status(name: str, line: BatchLine | None, state: str) -> Any:
    from rich.table import Table

    table = Table(title=f"sparkafka pipeline {name}: {state}", show_header=True)
    columns = {
        "batch": "batch",
        "in rows/s": "input_per_s",
        "processed rows/s": "processed_per_s",
        "out records/s": "out_per_s",
        "batch ms": "duration_ms",
        "behind latest": "behind",
        "group commits ok/failed": None,
        "txns committed": "transactions",
        "records out": "records_out",
        "malformed": "malformed",
    }
    for title in columns:
        table.add_column(title, justify="right")
    if line is None:
        table.add_row(*(["-"] * len(columns)))
        return table
    commits = f"{_show(line.commits_succeeded)}/{_show(line.commits_failed)}"
    table.add_row(*[commits if attr is None else _show(getattr(line, attr)) for attr in columns.values()])
    return table


def render_summary(name: str, lines: list[BatchLine]) -> Any:
    from rich.table import Table

    table = Table(title=f"pipeline {name}: summary")
    table.add_column("batches", justify="right")
    table.add_column("input rows", justify="right")
    table.add_column("mean batch ms", justify="right")
    table.add_column("behind latest at end", justify="right")
    table.add_column("txns committed", justify="right")
    table.add_column("records out", justify="right")
    table.add_column("malformed", justify="right")
    last = lines[-1] if lines else None
    counted = [x.malformed for x in lines if x.malformed is not None]
    mean = sum(x.duration_ms for x in lines) / len(lines) if lines else 0
    table.add_row(
        _show(len(lines)),
        _show(sum(x.input_rows for x in lines)),
        _show(float(mean)),
        _show(last.behind if last else None),
        _show(last.transactions if last else None),
        _show(last.records_out if last else None),
        _show(sum(counted) if counted else None),
    )
    return table
