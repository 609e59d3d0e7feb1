"""Small JSON files through which Spark-side processes report counters to the user's process.

Spark 4.3 gives Python data sources no custom-metrics hook (measured), and the source and sink run in
processes of their own, so counters go to files on the driver host, rewritten atomically on change.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "SINK_METRICS",
    "add_counts",
    "default_metrics_path",
    "metrics_dir",
    "query_sink_path",
    "read_json",
    "read_sink_metrics",
    "write_json_atomically",
]

log = logging.getLogger(__name__)


def metrics_dir() -> Path:
    """Where metrics files are written on this host: ``$TMPDIR/sparkafka/metrics`` (``sparkafka metrics
    retire`` removes old ones)."""
    return Path(tempfile.gettempdir()) / "sparkafka" / "metrics"


def default_metrics_path(kind: str, name: str) -> Path:
    """``$TMPDIR/sparkafka/metrics/<kind>-<name>.json`` with ``name`` made one safe file name."""
    safe = urllib.parse.quote(name, safe="") or "_"
    return metrics_dir() / f"{kind}-{safe}.json"


def write_json_atomically(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file and a rename: readers never see half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when the file does not exist or holds no object."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return data if isinstance(data, dict) else None


def query_sink_path(query_id: str) -> Path:
    """The counters of everything a streaming query's sparkafka sink wrote, whatever its delivery."""
    return default_metrics_path("sink-query", query_id)


def add_counts(path: Path, increments: Mapping[str, int], query_id: str | None = None) -> None:
    """Add ``increments`` to the counters in ``path`` (and to ``queries[query_id]`` in it).

    Zeros are left out. A file that cannot be read or written only warns: counters never fail a batch.

    Read-modify-write: one writer per file at a time (the driver's commit runs one batch at a time).
    """
    increments = {k: n for k, n in increments.items() if n}
    if not increments:
        return
    try:
        data = read_json(path) or {}
        mine = data.setdefault("queries", {}).setdefault(query_id, {}) if query_id is not None else None
        for key, n in increments.items():
            data[key] = int(data.get(key, 0)) + n
            if mine is not None:
                mine[key] = int(mine.get(key, 0)) + n
        write_json_atomically(path, data)
    except (OSError, ValueError) as e:
        log.warning("could not update counters %s: %s", path, e)


SINK_METRICS = (
    "batches",
    "transactions",
    "records",
    "replays",
    "recovered",
    "partial",
    "abandoned",
    "aborted",
)
"""The counters ``read_sink_metrics`` returns (``sparkafka.sink_metrics`` documents them)."""


def read_sink_metrics(transactional_id_prefix: str, query_id: str | None = None) -> dict[str, int]:
    """The exactly-once sink's counters for this prefix on this host: all queries', or ``query_id``'s.

    Read wherever asked (the user's process, the pipeline runner); ``sparkafka.sink_metrics`` is this.
    """
    data = read_json(default_metrics_path("sink", transactional_id_prefix)) or {}
    if query_id is not None:
        data = (data.get("queries") or {}).get(query_id, {})
    return {k: int(data.get(k, 0)) for k in SINK_METRICS}
