"""Running a pipeline file: start the planned query, show progress, stop on Ctrl-C, resume on rerun.

Runs in the driver (``sparkafka run``). What the query is lives in ``plan``; what a batch's progress shows
lives in ``progress`` (pure functions, unit-tested); this module is the loop between them and Spark.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from pyspark.errors import PySparkException

from sparkafka.errors import ConfigError, RegistryError
from sparkafka.ops.query_progress import Fresh, fresh_progress
from sparkafka.pipeline.config import PipelineConfig
from sparkafka.pipeline.plan import build_query, first_line
from sparkafka.pipeline.progress import (
    BatchLine,
    alignment_line,
    batch_line,
    plain_line,
    plain_summary,
    render_status,
    render_summary,
)

if TYPE_CHECKING:
    from sparkafka.ops.prometheus import Exporter
    from sparkafka.source.alignment_status import AlignmentStatus

__all__ = [
    "SUBMITTED_LOG_LEVEL",
    "GroupCommits",
    "GroupCommitsSinceStart",
    "quiet_submitted_spark",
    "run_pipeline",
]

log = logging.getLogger(__name__)


def _sink_delta(cfg: PipelineConfig, query_id: str, start: Mapping[str, int] | None) -> dict[str, int] | None:
    """This query's exactly-once sink counters since the runner started.

    Other queries of the prefix, and earlier runs, are not counted.
    """
    from sparkafka.metrics_files import read_sink_metrics

    prefix = cfg.sink.transactional_id_prefix
    if prefix is None or start is None:
        return None
    now = read_sink_metrics(prefix, query_id)
    return {k: now[k] - start.get(k, 0) for k in now}


class GroupCommits(NamedTuple):
    """Group offset commits counted since the runner started (what ``batch_line`` reads of the source)."""

    commits_succeeded: int
    commits_failed: int


class GroupCommitsSinceStart:
    """The source's group-commit counters since this run started, read from its metrics file.

    The file holds totals over every run of the group's source (``source.commits``, the rule
    ``sparkafka.sink_metrics`` follows too): what it holds at start is the baseline, and the counts since
    start are the difference, as the sink's transactions and records on the same line are.

    Args:
        read: the group's metrics as the file holds them now (``sparkafka.source_metrics``), None before
            any source wrote it.
    """

    def __init__(self, read: Callable[[], Any]) -> None:
        """Read the file once now: what it holds is earlier runs', not this one's."""
        self._read = read
        start = read()
        self._baseline = GroupCommits(0, 0) if start is None else self._counts(start)

    @staticmethod
    def _counts(metrics: Any) -> GroupCommits:
        return GroupCommits(int(metrics.commits_succeeded), int(metrics.commits_failed))

    def now(self) -> GroupCommits | None:
        """Commits since start; None while no source of the group has ever written its file."""
        metrics = self._read()
        if metrics is None:
            return None
        counts = self._counts(metrics)
        if counts[0] < self._baseline[0] or counts[1] < self._baseline[1]:
            self._baseline = GroupCommits(0, 0)  # the file was retired (removed) and begun again
        return GroupCommits(counts[0] - self._baseline[0], counts[1] - self._baseline[1])


def run_pipeline(cfg: PipelineConfig, out: TextIO, log_json: str | None = None, poll_s: float = 0.5) -> int:
    """Run until the query ends (availableNow) or Ctrl-C / SIGTERM (stops between batches).

    Returns 0 on success, 1 when the query failed, 2 when the pipeline cannot be planned. On a terminal the
    status table refreshes in place; otherwise one plain line per batch. The last line of a failure is
    sparkafka's own one-sentence error.
    """
    from sparkafka.pipeline.session import pipeline_spark, stop_spark, submitted

    screen = _Screen(out, cfg.name, log_json)
    stop = threading.Event()
    for warning in (cfg.timeout_warning(), cfg.alignment_warning()):
        if warning:
            screen.say(f"warning: {warning}", "yellow")
    try:
        exporter, server = _start_metrics(cfg, screen)  # before Spark starts: a port in use fails at once
    except ConfigError as e:
        print(f"sparkafka run: {cfg.path}: metrics.port: {e}", file=out, flush=True)
        screen.close()
        return 2
    if submitted():
        quiet_submitted_spark()
    spark = pipeline_spark(cfg)
    # After Spark starts: SparkContext installs a SIGINT handler (cancel all jobs) that this replaces, so
    # Ctrl-C only asks for a stop between batches. The JVM ignores SIGINT (PySpark starts it so).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    query = None
    failure: str | None = None
    code = 0
    commits = _group_commits(cfg)  # before the query starts: the file then holds only earlier runs' counts
    alignment = _alignment_status(cfg)  # the same: only what this run's source writes counts
    try:
        query = build_query(spark, cfg)
        if exporter is not None:
            exporter.begin(query.id, cfg.query_name)
        screen.say(f"pipeline {cfg.name} started; checkpoint {cfg.checkpoint}; Ctrl-C stops after the batch")
        with screen.live():
            _watch(
                query, cfg, screen, exporter, stop=stop, poll_s=poll_s, commits=commits, alignment=alignment
            )
        if query.exception() is not None:
            failure, code = f"query failed: {first_line(str(query.exception()))}", 1
    except (ConfigError, RegistryError) as e:  # the plan is wrong (SQL, schema, columns, registry)
        failure, code = str(e), 2
    except PySparkException as e:  # rendered now: once Spark has stopped, str() of it fails
        failure, code = f"query failed: {first_line(str(e))}", 1
    finally:
        if query is not None and query.isActive:
            query.stop()
        stop_spark(spark)
        screen.close()
        if server is not None:
            server.close()
    screen.summary(failure)
    return code


SUBMITTED_LOG_LEVEL = "WARN"
"""Spark's log level for a pipeline run under spark-submit, unless ``spark.log.level`` says otherwise."""


def quiet_submitted_spark(level: str = SUBMITTED_LOG_LEVEL) -> None:
    """Under spark-submit, have the SparkContext about to start log at ``level``, not INFO.

    ``sparkafka run`` on its own starts a local Spark that logs errors only (``session.local_session``).
    spark-submit starts the JVM first, with Spark's default log4j profile: INFO to the console, so a
    one-batch pipeline printed 190 lines around its 3 status lines, each batch's full progress JSON among
    them (measured, Spark 4.3, ``--master local[1]``). Here ``spark.log.level`` is set as a JVM system
    property before the context exists (spark-submit hands its ``--conf`` settings over the same way, and
    SparkContext applies this one first thing), unless the user set it: ``--conf spark.log.level=INFO``
    or ``"spark.log.level"`` in the file's ``[spark.config]`` restores Spark's own logging. The few lines
    spark-submit prints before Python starts are not Python's to change.
    """
    from pyspark import SparkContext

    SparkContext._ensure_initialized()  # under spark-submit: the gateway to the JVM that is already running
    jvm = SparkContext._jvm
    assert jvm is not None
    system = jvm.java.lang.System
    if system.getProperty("spark.log.level") is None:
        system.setProperty("spark.log.level", level)


def _start_metrics(cfg: PipelineConfig, screen: _Screen) -> tuple[Exporter | None, Any]:
    """The Prometheus exporter and its HTTP server, or (None, None) without ``[metrics] port``."""
    if cfg.metrics_port is None:
        return None, None
    from sparkafka.ops.prometheus import Exporter, start_server

    group = cfg.source.group_id
    exporter = Exporter(
        groups={cfg.query_name: group} if group else None,
        malformed_action=cfg.on_malformed,
        labels={cfg.query_name: cfg.name},  # metrics show the pipeline's name as written
    )
    server = start_server(exporter, cfg.metrics_port, cfg.metrics_host)
    screen.say(f"Prometheus metrics on http://{server.host}:{server.port}/metrics")
    return exporter, server


def _group_commits(cfg: PipelineConfig) -> GroupCommitsSinceStart | None:
    """The source's group-commit counters since now; None when the source commits to no group."""
    from sparkafka.source.commits import read_source_metrics

    group = cfg.source.group_id
    return GroupCommitsSinceStart(lambda: read_source_metrics(group)) if group else None


def _alignment_status(cfg: PipelineConfig) -> Callable[[], AlignmentStatus | None] | None:
    """The source's event-time alignment as its metrics file says it, written since now; None without it."""
    from sparkafka.source.commits import read_source_metrics

    if cfg.source.max_event_time_drift_ms is None:
        return None
    since_ms = int(time.time() * 1000)
    group, metrics_file = cfg.source.group_id or "", cfg.source.metrics_file

    def read() -> AlignmentStatus | None:
        metrics = read_source_metrics(group, metrics_file)
        return metrics.event_time if metrics is not None and metrics.updated_ms >= since_ms else None

    return read


def _watch(
    query: Any,
    cfg: PipelineConfig,
    screen: _Screen,
    exporter: Exporter | None,
    *,
    stop: Any,
    poll_s: float,
    commits: GroupCommitsSinceStart | None = None,
    alignment: Callable[[], AlignmentStatus | None] | None = None,
) -> None:
    """Poll the query's progress until it ends or ``stop`` is set (then stop it between batches).

    ``commits``: the group's commit counters, started before the query (default: started now).
    ``alignment``: the source's event-time alignment (``_alignment_status``; default: from now on). A
    line is shown whenever what it holds back changes, between batches too: while it holds every
    partition, no batch runs.
    """
    from sparkafka.metrics_files import read_sink_metrics

    prefix = cfg.sink.transactional_id_prefix
    sink_start = read_sink_metrics(prefix, query.id) if prefix else None
    if commits is None:
        commits = _group_commits(cfg)
    fresh = Fresh([], [], -1, "")
    if alignment is None:
        alignment = _alignment_status(cfg)
    shown: AlignmentStatus | None = None

    def report_batches() -> None:
        nonlocal fresh
        fresh = fresh_progress(query.recentProgress, fresh.seen, fresh.exported)
        if exporter is not None:
            exporter.observe_all(fresh.to_export)
        for progress in fresh.batches:
            screen.batch(
                batch_line(
                    progress,
                    commits.now() if commits is not None else None,
                    _sink_delta(cfg, query.id, sink_start),
                    screen.last,
                )
            )

    while query.isActive and not stop.is_set():
        try:
            query.awaitTermination(poll_s)
        except Exception:  # noqa: BLE001 - the query failed; reported from query.exception()
            break
        report_batches()
        now = alignment() if alignment is not None else None
        line = alignment_line(shown, now)
        if line is not None:
            screen.say(line)
        shown = now or shown
        screen.status("running")
    if stop.is_set() and query.isActive:
        screen.status("stopping")
        _stop_between_batches(query)
    # The batches that ended since the last poll (a Ctrl-C, or an end, within poll_s of them) are shown too.
    report_batches()


class _Screen:
    """Where the runner reports: a live rich table on a terminal, one plain line per batch otherwise.

    It also appends ``--log-json`` lines. The last line printed is always the failure's sentence, if any.
    """

    def __init__(self, out: TextIO, name: str, log_json: str | None) -> None:
        from rich.console import Console

        self.out, self.name, self.tty = out, name, out.isatty()
        self.console = Console(file=out)
        self.lines: list[BatchLine] = []
        self.json_file = Path(log_json).open("a") if log_json else None  # noqa: SIM115 - closed in close()
        self._live: Any = None

    @property
    def last(self) -> BatchLine | None:
        return self.lines[-1] if self.lines else None

    def say(self, text: str, style: str = "") -> None:
        from rich.markup import escape

        if self.tty:
            self.console.print(f"[{style}]{escape(text)}[/{style}]" if style else escape(text))
        else:
            print(text, file=self.out, flush=True)

    @contextlib.contextmanager
    def live(self) -> Iterator[None]:
        """The refreshing status table on a terminal; nothing otherwise."""
        if not self.tty:
            yield
            return
        from rich.live import Live

        with Live(
            render_status(self.name, None, "starting"), console=self.console, auto_refresh=False
        ) as live:
            self._live = live
            try:
                yield
            finally:
                self._live = None

    def status(self, state: str) -> None:
        if self._live is not None:
            self._live.update(render_status(self.name, self.last, state), refresh=True)

    def batch(self, line: BatchLine) -> None:
        self.lines.append(line)
        if not self.tty:
            print(plain_line(line), file=self.out, flush=True)
        if self.json_file is not None:
            self.json_file.write(line.to_json() + "\n")
            self.json_file.flush()

    def close(self) -> None:
        if self.json_file is not None:
            self.json_file.close()
            self.json_file = None

    def summary(self, failure: str | None) -> None:
        if self.tty:
            self.console.print(render_summary(self.name, self.lines))
        else:
            print(plain_summary(self.name, self.lines), file=self.out, flush=True)
        if failure:
            print(
                f"sparkafka run: {failure}", file=self.out, flush=True
            )  # the last line, whatever came before


def _stop_between_batches(query: Any, timeout_s: float = 120.0) -> None:
    """Let the running micro-batch finish (offsets and transactions stay consistent), then stop."""
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.1)
    query.stop()
