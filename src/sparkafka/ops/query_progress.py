"""Reading Spark's streaming query progress: offsets, how far behind, fresh batches, observed metrics.

Pure functions of Spark's progress dicts (``StreamingQuery.recentProgress``), run in whatever driver-side
process watches a query: the Prometheus exporter (``ops.prometheus``) and the pipeline runner's status
lines (``pipeline.progress``).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MALFORMED_METRIC",
    "Fresh",
    "behind_by_partition",
    "behind_latest",
    "fresh_progress",
    "offsets_of",
    "ran_batch",
]


def offsets_of(text: Any) -> dict[str, dict[str, int]]:
    """A source's offsets in a progress event (JSON text or already parsed); {} when absent or not a map.

    What a sparkafka source keeps beside its offsets (keys starting with ``@``: ``source.planning``'s
    ``TOPIC_IDS_KEY`` and ``PLAN_KEY``) is left out: what is left has the shape of Spark's connector's
    offsets, ``{"topic": {"0": 42}}``.
    """
    if not text:
        return {}
    data = _parsed(text) if isinstance(text, str) else text
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if not k.startswith("@")}


def _parsed(text: str) -> Any:
    """An offsets text as Spark's progress gives it: JSON, or on PySpark 4.0 and 4.1 the Python repr of the
    parsed JSON (their ``SourceProgress`` keeps ``str()`` of it); None when it is neither."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def behind_by_partition(source: Mapping[str, Any]) -> dict[tuple[str, str], int] | None:
    """Per (topic, partition): records between the batch's end and the latest offsets the source saw."""
    latest, end = offsets_of(source.get("latestOffset")), offsets_of(source.get("endOffset"))
    if not latest or not end:
        return None
    return {
        (topic, str(partition)): max(0, int(offset) - int(end.get(topic, {}).get(partition, offset)))
        for topic, parts in latest.items()
        for partition, offset in parts.items()
    }


def behind_latest(source: Mapping[str, Any]) -> int | None:
    """``behind_by_partition`` summed over partitions."""
    behind = behind_by_partition(source)
    return None if behind is None else sum(behind.values())


MALFORMED_METRIC = "sparkafka_malformed"
"""The observed metric (``observedMetrics`` in a batch's progress) counting undecodable values."""


@dataclass(frozen=True)
class Fresh:
    """What a poll of ``query.recentProgress`` brings that the runner has not handled yet."""

    to_export: list[Mapping[str, Any]]
    """Every new progress event, idle triggers included (the metrics exporter wants them all)."""
    batches: list[Mapping[str, Any]]
    """New progress events of batches that ran: one status line each."""
    seen: int
    """The newest batch id in ``batches`` (or the one given): pass it to the next call."""
    exported: str
    """The newest timestamp in ``to_export`` (or the one given): pass it to the next call."""


def fresh_progress(recent: Sequence[Mapping[str, Any]], seen: int = -1, exported: str = "") -> Fresh:
    """The part of ``recent`` after batch ``seen`` and timestamp ``exported``.

    ``recent`` is Spark's recentProgress: oldest first, a sliding window that repeats events across polls.
    Pure: the runner's loop calls it on every poll.
    """
    to_export, batches = [], []
    for progress in recent:
        stamp = str(progress.get("timestamp", ""))
        if stamp > exported:
            exported = stamp
            to_export.append(progress)
        if progress["batchId"] > seen and ran_batch(progress):
            seen = progress["batchId"]
            batches.append(progress)
    return Fresh(to_export, batches, seen, exported)


def ran_batch(progress: Mapping[str, Any]) -> bool:
    """Whether a progress event reports a batch that ran, not an idle trigger that found no data.

    A batch that read nothing but wrote, such as a window closing on a watermark, counts as one that ran.
    """
    return "addBatch" in (progress.get("durationMs") or {})
