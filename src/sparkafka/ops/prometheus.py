"""Prometheus metrics for queries that read or write with sparkafka.

Runs on the driver, in the process that owns the SparkSession: ``sparkafka run --metrics-port`` feeds each
batch's progress to an ``Exporter`` from its own progress loop; a script calls ``serve(spark, port)``,
which does the same from a StreamingQueryListener. Spark's progress gives rows, durations and the source's
offsets; the sink's counters come from the files its commit runner writes (``metrics_files``), and the
group's commit counters and event-time alignment (per partition its event time and state) from the
source's metrics file, when the exporter knows the group.

Names follow Prometheus conventions: ``sparkafka_`` prefix, ``_total`` counters, seconds, a ``query``
label (the query's name, else its id).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sparkafka.errors import ConfigError
from sparkafka.metrics_files import query_sink_path, read_json
from sparkafka.ops.query_progress import MALFORMED_METRIC, behind_by_partition, offsets_of, ran_batch
from sparkafka.source.alignment_status import ALIGNMENT_STATES, AlignmentStatus

__all__ = ["Exporter", "MetricsServer", "serve", "start_server"]

log = logging.getLogger(__name__)

PHASES = ("latestOffset", "getBatch", "queryPlanning", "walCommit", "addBatch", "commitOffsets")
SINK_COUNTERS = {
    "records": ("sparkafka_output_records", "Records the sparkafka sink wrote (committed, exactly once)."),
    "transactions": (
        "sparkafka_transactions_committed",
        "Kafka transactions the exactly-once sink committed.",
    ),
    "recovered": ("sparkafka_batches_recovered", "Batches the exactly-once sink finished from their intent."),
    "replays": ("sparkafka_replays_skipped", "Replayed batches the exactly-once sink did not write again."),
    "aborted": (
        "sparkafka_transactions_aborted",
        "Kafka transactions the exactly-once sink aborted (replays, batches Spark gave up on, refused ones).",
    ),
}


def _sink_counters(query_id: str) -> dict[str, int]:
    data = read_json(query_sink_path(query_id)) or {}
    return {k: int(data.get(k, 0)) for k in SINK_COUNTERS}


def _kafka_shaped(value: Any) -> bool:
    try:
        data = offsets_of(value)
    except ValueError:
        return False
    return bool(data) and all(
        isinstance(parts, dict) and all(str(p).isdigit() and isinstance(o, int) for p, o in parts.items())
        for parts in data.values()
    )


def is_sparkafka(
    progress: Mapping[str, Any], wrote: Callable[[str], bool] = lambda qid: query_sink_path(qid).exists()
) -> bool:
    """Whether a query reads or writes with sparkafka.

    Spark describes a Python data source only by its class (``...datasources.v2.python.PythonMicroBatch
    Stream...``), so a source counts when it is a Python one whose offsets are Kafka's ``{"topic":
    {"0": 42}}``, and a sink when the sparkafka sink has counted output for the query (``wrote``).
    """
    for source in progress.get("sources") or []:
        python = ".python." in str(source.get("description", ""))
        if python and _kafka_shaped(source.get("endOffset") or source.get("latestOffset")):
            return True
    return wrote(str(progress.get("id", "")))


@dataclass
class _Seen:
    """Counter values last seen in the files, per query: increments are taken from there on."""

    sink: dict[str, int]
    commits: dict[str, int] | None = None


class Exporter:
    """Turns progress events into metrics in ``registry``. Not thread-safe: one caller at a time.

    Args:
        registry: where the metrics live (default: a new one).
        sink_counters: query id -> the sink's counters (default: its counters file).
        source_metrics: group id -> the source's metrics or None (default: its metrics file).
        groups: query name or id -> the source's ``kafka.group.id``, for the group-commit counters.
        malformed_action: the ``action`` label of malformed records (a pipeline's ``on_malformed``).
        labels: query name -> the ``query`` label to show instead (a pipeline's name as written, where
            its Spark query name had to differ).
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        sink_counters: Callable[[str], Mapping[str, int]] = _sink_counters,
        source_metrics: Callable[[str], Any] | None = None,
        groups: Mapping[str, str] | None = None,
        malformed_action: str = "skip",
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """Create the metrics in ``registry``; nothing is observed yet."""
        from sparkafka.source.commits import read_source_metrics

        self.registry = registry or CollectorRegistry()
        self._sink_counters = sink_counters
        self._source_metrics = source_metrics or read_source_metrics
        self._groups = dict(groups or {})
        self._malformed_action = malformed_action
        self._labels = dict(labels or {})
        self._seen: dict[str, _Seen] = {}
        r, q = self.registry, ["query"]
        self.batches = Counter("sparkafka_batches", "Micro-batches that ran.", q, registry=r)
        self.input_records = Counter("sparkafka_input_records", "Rows the query read.", q, registry=r)
        self.input_rate = Gauge(
            "sparkafka_processed_rows_per_second",
            "Rows per second of the last batch's duration.",
            q,
            registry=r,
        )
        self.duration = Histogram(
            "sparkafka_batch_duration_seconds",
            "Duration of each micro-batch (Spark's triggerExecution).",
            q,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
            registry=r,
        )
        self.phase = Gauge(
            "sparkafka_batch_phase_seconds", "The last batch's duration by phase.", [*q, "phase"], registry=r
        )
        self.behind = Gauge(
            "sparkafka_records_behind_latest",
            "Records between the end of the last batch and the latest offsets the source saw.",
            [*q, "topic", "partition"],
            registry=r,
        )
        self.malformed = Counter(
            "sparkafka_malformed_records",
            "Undecodable values, by what became of them (on_malformed: skip, dead_letter or fail).",
            [*q, "action"],
            registry=r,
        )
        self.sink = {key: Counter(name, text, q, registry=r) for key, (name, text) in SINK_COUNTERS.items()}
        self.commits = Counter(
            "sparkafka_group_commits",
            "Offset commits to the consumer group.",
            [*q, "group", "result"],
            registry=r,
        )
        self.committed = Gauge(
            "sparkafka_group_committed_offset",
            "The consumer group's last committed offset, per partition.",
            [*q, "group", "topic", "partition"],
            registry=r,
        )
        self.event_time = Gauge(
            "sparkafka_partition_event_time_seconds",
            "Event-time alignment (maxEventTimeDrift): the timestamp of the partition's next record, or of "
            "its newest when it has nothing to read, at the last plan.",
            [*q, "group", "topic", "partition"],
            registry=r,
        )
        self.alignment = Gauge(
            "sparkafka_partition_alignment",
            "Event-time alignment: 1 for the partition's state at the last plan (active, held: waits for the "
            "slowest, idle, finished, empty), 0 for the others.",
            [*q, "group", "topic", "partition", "state"],
            registry=r,
        )
        self.held = Gauge(
            "sparkafka_partitions_held",
            "Event-time alignment: partitions held back at the last plan, waiting for the slowest.",
            [*q, "group"],
            registry=r,
        )

    def begin(self, query_id: str, name: str | None = None) -> None:
        """A query starts: what its counters files hold now (earlier runs) is not this run's.

        The sink's counters and the source's group commits are both totals over every run
        (``sparkafka.sink_metrics``, ``sparkafka.source_metrics``): each is taken as the baseline.
        """
        seen = self._seen[query_id] = _Seen(dict(self._sink_counters(query_id)))
        group = self._groups.get(name or "") or self._groups.get(query_id)
        metrics = self._source_metrics(group) if group else None
        if metrics is not None:
            seen.commits = {"ok": int(metrics.commits_succeeded), "failed": int(metrics.commits_failed)}

    def observe_all(self, events: Iterable[Mapping[str, Any]]) -> None:
        """``observe`` each event, oldest first."""
        for progress in events:
            self.observe(progress)

    def observe(self, progress: Mapping[str, Any]) -> None:
        """One progress event (Spark's ``StreamingQueryProgress`` as a dict); idle triggers count no batch."""
        query_id = str(progress.get("id", ""))
        name = str(progress.get("name") or query_id)
        query = self._labels.get(name, name)
        seen = self._seen.setdefault(query_id, _Seen({}))
        if ran_batch(progress):
            self.batches.labels(query).inc()
            self.input_records.labels(query).inc(int(progress.get("numInputRows", 0)))
            self.input_rate.labels(query).set(float(progress.get("processedRowsPerSecond") or 0.0))
            durations = progress.get("durationMs") or {}
            self.duration.labels(query).observe(int(durations.get("triggerExecution", 0)) / 1000)
            for phase in PHASES:
                if phase in durations:
                    self.phase.labels(query, phase).set(int(durations[phase]) / 1000)
            observed = (progress.get("observedMetrics") or {}).get(MALFORMED_METRIC)
            if isinstance(observed, Mapping) and observed.get("n"):
                self.malformed.labels(query, self._malformed_action).inc(int(observed["n"]))
        for source in progress.get("sources") or []:
            for (topic, partition), behind in (behind_by_partition(source) or {}).items():
                self.behind.labels(query, topic, partition).set(behind)
        now = self._sink_counters(query_id)
        for key, counter in self.sink.items():
            delta = int(now.get(key, 0)) - seen.sink.get(key, 0)
            if delta > 0:
                counter.labels(query).inc(delta)
                seen.sink[key] = int(now.get(key, 0))
        group = self._groups.get(name) or self._groups.get(query_id)
        if group:
            self._observe_group(query, group, seen)

    def _observe_group(self, query: str, group: str, seen: _Seen) -> None:
        metrics = self._source_metrics(group)
        if metrics is None:
            return
        now = {"ok": int(metrics.commits_succeeded), "failed": int(metrics.commits_failed)}
        before = seen.commits if seen.commits is not None else {"ok": 0, "failed": 0}
        for result, total in now.items():
            self.commits.labels(query, group, result).inc(max(0, total - before.get(result, 0)))
        seen.commits = now
        for tp, offset in metrics.committed.items():
            self.committed.labels(query, group, tp.topic, str(tp.partition)).set(offset)
        status = getattr(metrics, "event_time", None)
        if status is not None:
            self._observe_alignment(query, group, status)

    def _observe_alignment(self, query: str, group: str, status: AlignmentStatus) -> None:
        self.held.labels(query, group).set(len(status.held))
        for tp, p in status.partitions.items():
            labels = (query, group, tp.topic, str(tp.partition))
            if p.event_time_ms is not None:
                self.event_time.labels(*labels).set(p.event_time_ms / 1000)
            for state in ALIGNMENT_STATES:
                self.alignment.labels(*labels, state).set(1 if state == p.state else 0)


@dataclass
class MetricsServer:
    """A running ``/metrics`` endpoint; ``close()`` stops it (and the listener ``serve`` added)."""

    exporter: Exporter
    host: str
    port: int
    _server: Any
    _spark: Any = None
    _listener: Any = None

    def close(self) -> None:
        """Stop serving, close the socket and remove the listener ``serve`` added, if any."""
        self._server.shutdown()
        self._server.server_close()
        if self._spark is not None and self._listener is not None:
            self._spark.streams.removeListener(self._listener)


def start_server(exporter: Exporter, port: int, host: str = "127.0.0.1") -> MetricsServer:
    """Serve ``exporter``'s registry on ``http://host:port/metrics`` from a daemon thread.

    Raises:
        ConfigError: the port cannot be bound (in use, or not allowed), naming it.
    """
    from prometheus_client import start_http_server

    try:
        server, _thread = start_http_server(port, addr=host, registry=exporter.registry)
    except OSError as e:
        raise ConfigError(f"metrics port {port} on {host} cannot be used: {e.strerror or e}") from None
    bound = int(server.server_address[1])
    log.info("Prometheus metrics on http://%s:%d/metrics", host, bound)
    return MetricsServer(exporter, host, bound, server)


def serve(
    spark: Any, port: int, host: str = "127.0.0.1", groups: Mapping[str, str] | None = None
) -> MetricsServer:
    """Export every sparkafka query of ``spark`` on ``http://host:port/metrics`` until ``close()``.

    Registers a StreamingQueryListener (progress events arrive on the driver, in this process). ``groups``
    maps a query's name to its source's ``kafka.group.id`` for the group-commit metrics.
    """
    from pyspark.sql.streaming.listener import StreamingQueryListener

    exporter = Exporter(groups=groups)
    server = start_server(exporter, port, host)

    class _Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            exporter.begin(str(event.id), event.name)

        def onQueryProgress(self, event: Any) -> None:
            progress = json.loads(event.progress.json)
            if is_sparkafka(progress):
                exporter.observe(progress)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    listener = _Listener()
    spark.streams.addListener(listener)
    server._spark, server._listener = spark, listener
    return server
