"""Shared by the benchmarks: rates of a finished Spark streaming query, from the durations Spark reports."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rates:
    """A finished query's batches: ``rate`` over all of them, ``later_rate`` without the first.

    A query's first batch also pays once-per-query costs (Python workers started and importing, the sink's
    writer set up), so ``later_rate`` is the steady state a long-running query sees.
    """

    rate: float
    batches: int
    seconds: float
    first_s: float
    later_rate: float | None
    later_median_s: float | None = None
    """The median duration of the batches after the first (a steady batch)."""


def query_rates(query: Any, total: int, what: str) -> Rates:
    """Rows per second over the summed batch durations Spark reports; checks every row was processed."""
    query.awaitTermination()
    if query.exception():
        raise RuntimeError(query.exception())
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    if rows != total:
        raise RuntimeError(f"{what}: {rows} rows, expected {total}")
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
    later_rows = rows - progress[0]["numInputRows"]
    later = later_rows / sum(durations[1:]) if len(durations) > 1 else None
    median = statistics.median(durations[1:]) if len(durations) > 1 else None
    return Rates(rows / sum(durations), len(progress), sum(durations), durations[0], later, median)


def steady_rate(query: Any, total: int, what: str) -> tuple[float, int, float]:
    """(rows/s, batches, seconds) over all batches: see ``query_rates``."""
    r = query_rates(query, total, what)
    return r.rate, r.batches, r.seconds
