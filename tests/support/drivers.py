"""What the tests' driver scripts (``tests/integration/*_driver.py``) share: how a query's end is told.

A driver runs a streaming query in its own process so that a test can kill it; the test reads its exit code
and output. Runs in that process, after the query started.
"""

from __future__ import annotations

from typing import Any

QUERY_FAILED_EXIT = 3


def await_query(query: Any, done: str = "DONE") -> int:
    """Wait for ``query`` to end: print ``done`` and return 0, or print ``QUERY FAILED: <the whole error>``
    and return ``QUERY_FAILED_EXIT`` when it failed (the test matches that line)."""
    try:
        query.awaitTermination()
    except Exception as e:  # noqa: BLE001 - any query failure is reported to the test as exit 3
        print(f"QUERY FAILED: {e}", flush=True)
        return QUERY_FAILED_EXIT
    print(done, flush=True)
    return 0
