"""Fault injection for the sink's crash tests, off unless the test environment variables are set.

``SPARKAFKA_TEST_FAULT=<point>:<action>`` with ``SPARKAFKA_TEST_FAULT_MARKER=<file>``: the first time the
code reaches ``<point>`` (the marker file does not exist yet), it creates the marker holding its process id
(so a test can find the process, or the Spark worker running it) and then either
``pause``s (sleeps until the test kills the process group: a crash at exactly that point) or ``raise``s.
Points: ``commit_start`` (tasks flushed, driver commit not begun), ``after_intent``,
``after_intent_with_records`` (the same, for the first batch that wrote records: the demo's crash),
``after_first_txn``, ``commit_end`` (all committed, before Spark writes its commit log), ``task_mid_write``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from sparkafka.errors import SparkafkaError

__all__ = ["InjectedFaultError", "fault_point"]


class InjectedFaultError(SparkafkaError):
    """Raised by a ``raise`` fault point; only ever seen in tests."""


def fault_point(name: str) -> None:
    """Fault point ``name``: pause or raise here if the test environment asks for it, else nothing.

    Acts once per marker file, across processes (see the module docstring).
    """
    spec = os.environ.get("SPARKAFKA_TEST_FAULT")
    if not spec:
        return
    point, _, action = spec.partition(":")
    if point != name:
        return
    marker = Path(os.environ.get("SPARKAFKA_TEST_FAULT_MARKER", "sparkafka-fault.marker"))
    try:
        with marker.open("x") as f:  # once per marker, across processes
            f.write(str(os.getpid()))
    except FileExistsError:
        return
    if action == "pause":
        time.sleep(600)
    raise InjectedFaultError(f"injected fault at {name}")
