"""Small JSON files through which Spark-side processes report counters to the user's process.

Spark 4.3 gives Python data sources no custom-metrics hook (measured), and the source and sink run in
processes of their own, so counters go to files on the driver host, rewritten atomically on change.
"""

from __future__ import annotations

import json
import os
import tempfile
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["default_metrics_path", "read_json", "write_json_atomically"]


def default_metrics_path(kind: str, name: str) -> Path:
    """``$TMPDIR/sparkafka/metrics/<kind>-<name>.json`` with ``name`` made one safe file name."""
    safe = urllib.parse.quote(name, safe="") or "_"
    return Path(tempfile.gettempdir()) / "sparkafka" / "metrics" / f"{kind}-{safe}.json"


def write_json_atomically(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return data if isinstance(data, dict) else None
