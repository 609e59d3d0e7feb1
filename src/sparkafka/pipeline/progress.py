"""What the pipeline runner shows per micro-batch, derived from Spark's progress and sparkafka's counters.

Pure functions of Spark's progress dicts and the counters files, run in the runner's (driver) process. A
terminal gets a rich status table refreshed in place; anything else (a pipe, a log file) one plain line
per batch, never cut to a width. JSON lines (``--log-json``) carry the same fields: those ending in
``_total`` count since the runner started, all others are this batch's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from sparkafka.ops.query_progress import MALFORMED_METRIC, behind_latest
from sparkafka.source.alignment_status import AlignmentStatus

__all__ = [
    "BatchLine",
    "alignment_line",
    "batch_line",
    "plain_line",
    "plain_summary",
    "render_status",
    "render_summary",
]


@dataclass(frozen=True)
class BatchLine:
    """The runner's status line for one batch that ran, as shown and as written to ``--log-json``."""

    batch: int
    input_rows: int
    input_per_s: float
    processed_per_s: float
    duration_ms: int
    behind: int | None
    commits_succeeded_total: int | None
    """Group offset commits that succeeded since the runner started (``runner.GroupCommitsSinceStart``)."""
    commits_failed_total: int | None
    transactions_total: int | None
    """Transactions committed by the exactly-once sink since the runner started."""
    records_out_total: int | None
    """Records in those transactions since the runner started."""
    records_out: int | None = None
    """Records the exactly-once sink committed for this batch."""
    out_per_s: float | None = None
    """Records the sink committed for this batch, per second of the batch's duration."""
    malformed: int | None = None
    """Undecodable values in this batch (skipped, dead-lettered or failing it); None under ``flag``."""

    def to_json(self) -> str:
        """This line as one JSON object, keys sorted (a ``--log-json`` line)."""
        return json.dumps(asdict(self), sort_keys=True)


def batch_line(
    progress: Mapping[str, Any],
    source_metrics: Any | None,
    sink_since_start: Mapping[str, int] | None,
    previous: BatchLine | None = None,
) -> BatchLine:
    """The status line of a batch's progress event (driver, the runner's poll loop).

    ``source_metrics`` are the group's source metrics (None without a group), ``sink_since_start`` the
    exactly-once sink's counters since the runner started (None without that sink), and ``previous`` the
    line before, from whose total this batch's records out are counted.
    """
    sources = progress.get("sources") or [{}]
    duration_ms = int((progress.get("durationMs") or {}).get("triggerExecution", 0))
    total = None if sink_since_start is None else sink_since_start.get("records", 0)
    records_out = out_per_s = None
    if total is not None:
        before = previous.records_out_total if previous is not None else None
        records_out = total - (before or 0)
        out_per_s = records_out * 1000 / duration_ms if duration_ms > 0 else None
    return BatchLine(
        batch=int(progress.get("batchId", -1)),
        input_rows=int(progress.get("numInputRows", 0)),
        input_per_s=float(progress.get("inputRowsPerSecond") or 0.0),
        processed_per_s=float(progress.get("processedRowsPerSecond") or 0.0),
        duration_ms=duration_ms,
        behind=behind_latest(sources[0]),
        commits_succeeded_total=None if source_metrics is None else source_metrics.commits_succeeded,
        commits_failed_total=None if source_metrics is None else source_metrics.commits_failed,
        transactions_total=None if sink_since_start is None else sink_since_start.get("transactions", 0),
        records_out_total=total,
        records_out=records_out,
        out_per_s=out_per_s,
        malformed=_observed_count(progress, MALFORMED_METRIC),
    )


def alignment_line(shown: AlignmentStatus | None, now: AlignmentStatus | None) -> str | None:
    """The runner's line when what event-time alignment holds back changes (``AlignmentStatus.hold``);
    None when nothing changed since ``shown``, the status last seen."""
    if now is None or (shown.hold if shown is not None else ()) == now.hold:
        return None
    return now.describe_hold() or "event-time alignment holds no partition back any more"


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
    """The runner's live rich table: pipeline ``name`` in ``state`` and its latest batch line (or dashes)."""
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
        "txns committed": "transactions_total",
        "records out": "records_out_total",
        "malformed": "malformed",
    }
    for title in columns:
        table.add_column(title, justify="right")
    if line is None:
        table.add_row(*(["-"] * len(columns)))
        return table
    commits = f"{_show(line.commits_succeeded_total)}/{_show(line.commits_failed_total)}"
    table.add_row(*[commits if attr is None else _show(getattr(line, attr)) for attr in columns.values()])
    return table


def render_summary(name: str, lines: list[BatchLine]) -> Any:
    """The rich table the runner prints at the end: a summary of the batches that ran."""
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
        _show(last.transactions_total if last else None),
        _show(last.records_out_total if last else None),
        _show(sum(counted) if counted else None),
    )
    return table


def plain_line(line: BatchLine) -> str:
    """One batch as one line, for output that is not a terminal."""
    s = _show
    return (
        f"batch {line.batch}: in {s(line.input_rows)} rows ({s(line.input_per_s)}/s), processed "
        f"{s(line.processed_per_s)}/s, out {s(line.records_out)} records ({s(line.out_per_s)}/s), "
        f"{s(line.duration_ms)} ms, behind latest {s(line.behind)}, malformed {s(line.malformed)}; "
        f"since start: txns {s(line.transactions_total)}, records out {s(line.records_out_total)}, "
        f"group commits ok/failed {s(line.commits_succeeded_total)}/{s(line.commits_failed_total)}"
    )


def plain_summary(name: str, lines: list[BatchLine]) -> str:
    """The summary as one line, for output that is not a terminal."""
    last = lines[-1] if lines else None
    counted = [x.malformed for x in lines if x.malformed is not None]
    mean = sum(x.duration_ms for x in lines) / len(lines) if lines else 0.0
    parts = [
        f"{len(lines)} batches",
        f"{_show(sum(x.input_rows for x in lines))} input rows",
        f"mean batch {_show(mean)} ms",
        f"behind latest at end {_show(last.behind if last else None)}",
        f"txns {_show(last.transactions_total if last else None)}",
        f"records out {_show(last.records_out_total if last else None)}",
        f"malformed {_show(sum(counted) if counted else None)}",
    ]
    return f"summary: pipeline {name}: " + ", ".join(parts)
