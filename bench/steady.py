"""Shared by the benchmarks: the steady-state rate of a finished Spark streaming query."""

from __future__ import annotations

from typing import Any


def steady_rate(query: Any, total: int, what: str) -> tuple[float, int, float]:
    """Rows per second over the summed batch durations Spark reports; checks every row was processed.

    Returns (rows/s, batches, seconds).
    """
    query.awaitTermination()
    if query.exception():
        raise RuntimeError(query.exception())
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    if rows != total:
        raise RuntimeError(f"{what}: {rows} rows, expected {total}")
    seconds = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    return rows / seconds, len(progress), seconds
