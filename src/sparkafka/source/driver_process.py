"""The process a query's user knows as its driver, named in the marks of the source's group commits.

The source commits its group's offsets from Spark's Python source runner (``python_streaming_source_runner``),
a process the driver's JVM starts and the user never sees. ``sparkafka offsets reset`` refuses to reset a
group while a query commits to it, naming the query by its commits' marks (``commits.CommitMark``); so the
marks name what the user started: the driver's Python process (``python job.py``, ``spark-submit job.py``,
``sparkafka run``) and the Spark application's name and id. ``sparkafka.register`` passes those to the
runner through the worker environment (``DRIVER_PID_ENV``, ``APP_NAME_ENV``, ``APP_ID_ENV``;
``sparkafka.driver_facts``). Without them (a data source Spark found by itself, Spark Connect) the runner's
ancestors are read: its parent is the driver's JVM, and the JVM's parent, when it is a Python, is the script
that started it (PySpark starts the JVM for a script run by ``python``); otherwise the JVM itself was what
was started (``spark-submit``, a Spark Connect server).

Runs in the source runner, once per run of a query (``driver_of``); the process facts are injectable.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["APP_ID_ENV", "APP_NAME_ENV", "DRIVER_PID_ENV", "ProcessFacts", "QueryDriver", "driver_of"]

DRIVER_PID_ENV = "SPARKAFKA_DRIVER_PID"
"""The pid of the driver's Python process (where ``sparkafka.register`` ran), for the Python workers."""
APP_NAME_ENV = "SPARKAFKA_APP_NAME"
"""The Spark application's name (``spark.app.name``), for the Python workers."""
APP_ID_ENV = "SPARKAFKA_APP_ID"
"""The Spark application's id (``local-1764...``, ``application_...`` on YARN), for the Python workers."""

MAX_APP_NAME = 200
"""An application name is cut to this many characters: a mark must stay well under Kafka's 4096 bytes of
commit metadata (``offset.metadata.max.bytes``)."""


class ProcessFacts(NamedTuple):
    """What the refusal needs to know of a process: its parent and its program."""

    parent: int
    """The parent's pid (0 or 1: none the user started)."""
    program: str
    """The program's name as the kernel has it (``/proc/PID/stat``'s comm: ``python3.11``, ``java``)."""


@dataclass(frozen=True)
class QueryDriver:
    """The driver of the query a source runs in, as its user knows it."""

    pid: int | None
    """The driver's Python process, or the driver's JVM when no Python started it; None: unknown."""
    app_name: str | None = None
    app_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields a commit's mark holds (those known): ``pid``, ``app``, ``appId``."""
        given = {"pid": self.pid, "app": self.app_name, "appId": self.app_id}
        return {k: v for k, v in given.items() if v is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QueryDriver:
        """Read back from ``to_json``'s form (raises ValueError, TypeError on a pid that is not a number)."""
        return cls(
            int(data["pid"]) if data.get("pid") is not None else None,
            str(data["app"]) if data.get("app") else None,
            str(data["appId"]) if data.get("appId") else None,
        )


def read_process(pid: int) -> ProcessFacts | None:
    """``pid``'s parent and program from ``/proc`` (Linux); None where there is no such file."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
    except OSError:
        return None
    # "PID (COMM) STATE PPID ...": the program's name may hold spaces and parentheses.
    head, _, tail = text.rpartition(")")
    fields = tail.split()
    if len(fields) < 2 or not fields[1].isdigit():
        return None
    return ProcessFacts(int(fields[1]), head.partition("(")[2])


def driver_of(
    environ: Mapping[str, str] = os.environ,
    runner_pid: int | None = None,
    process: Callable[[int], ProcessFacts | None] = read_process,
) -> QueryDriver:
    """The driver of the query whose source runs in ``runner_pid`` (default: this process).

    ``environ`` first (what ``sparkafka.register`` passed); else the runner's ancestors (see the module
    docstring): the JVM's parent when that is a Python, else the JVM. None as the pid when neither is known.
    """
    name = environ.get(APP_NAME_ENV, "").strip()[:MAX_APP_NAME] or None
    app_id = environ.get(APP_ID_ENV, "").strip() or None
    given = environ.get(DRIVER_PID_ENV, "").strip()
    if given.isdigit():
        return QueryDriver(int(given), name, app_id)
    runner = process(runner_pid if runner_pid is not None else os.getpid())
    if runner is None or runner.parent <= 1:
        return QueryDriver(None, name, app_id)
    jvm = process(runner.parent)
    if jvm is not None and jvm.parent > 1:
        starter = process(jvm.parent)
        if starter is not None and starter.program.startswith("python"):
            return QueryDriver(jvm.parent, name, app_id)
    return QueryDriver(runner.parent, name, app_id)
