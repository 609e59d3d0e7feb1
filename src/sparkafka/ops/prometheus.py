"""Prometheus metrics for queries that read or write with sparkafka.

Runs on the driver, in the process that owns the SparkSession: ``sparkafka run --metrics-port`` feeds each
batch's progress to an ``Exporter`` from its own progress loop; a script calls ``serve(spark, port)``,
which does the same from a StreamingQueryListener. Spark's progress gives rows, durations and the source's
offsets; the sink's counters come from the files its commit runner writes (``metrics_files``), and the
group's commit counters, committed offsets, partitions moved by hand and event-time alignment (per
partition its event time and state) from the source's metrics file, when the exporter knows the group:
``serve`` reads each query's groups from its plan (``query_groups``), ``groups`` names them.

Names follow Prometheus conventions: ``sparkafka_`` prefix, ``_total`` counters, seconds, a ``query``
label (the query's name, else its id).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sparkafka.errors import ConfigError
from sparkafka.metrics_files import query_sink_path, read_json
from sparkafka.ops.query_groups import SourceGroup, session_groups
from sparkafka.ops.query_progress import MALFORMED_METRIC, behind_by_partition, offsets_of, ran_batch
from sparkafka.source.alignment_status import ALIGNMENT_STATES, AlignmentStatus
from sparkafka.structs import TopicPartition

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
    commits: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per group: its commit counters when last seen (none yet: counted from 0)."""
    moved: set[tuple[str, TopicPartition]] = field(default_factory=set)
    """(group, partition) shown as moved by hand."""
    name: str | None = None
    """The query's name (else its id) at its last progress event; None before one."""


class Exporter:
    """Turns progress events into metrics in ``registry``. Not thread-safe: one caller at a time.

    Args:
        registry: where the metrics live (default: a new one).
        sink_counters: query id -> the sink's counters (default: its counters file).
        source_metrics: group id -> the source's metrics or None (default: its metrics file, where the
            query's source put it: ``SourceGroup.metrics_file``).
        groups: query name or id -> the source's ``kafka.group.id``, for the group-commit metrics; it wins
            over ``discover`` for the queries it names.
        discover: query id -> the groups of its sparkafka sources (``query_groups.session_groups``), asked
            once per run of a query (at ``begin``, else at its first event).
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
        discover: Callable[[str], Iterable[SourceGroup]] | None = None,
        malformed_action: str = "skip",
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """Create the metrics in ``registry``; nothing is observed yet."""
        self.registry = registry or CollectorRegistry()
        self._sink_counters = sink_counters
        self._source_metrics = source_metrics
        self._groups = dict(groups or {})
        self._discover = discover
        self._found: dict[str, tuple[SourceGroup, ...]] = {}
        """Query id -> the groups ``discover`` gave for its current run."""
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
            "The consumer group's last committed offset, per partition (for a partition moved by hand, the "
            "offset it was moved to).",
            [*q, "group", "topic", "partition"],
            registry=r,
        )
        self.moved_by_hand = Gauge(
            "sparkafka_group_partition_moved_by_hand",
            "1 for a partition whose group offset another client moved (or deleted) while the query "
            "committed to it: that run of the query commits nothing of it again (a restart does).",
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
        before = self._seen.get(query_id)
        seen = self._seen[query_id] = _Seen(dict(self._sink_counters(query_id)))
        if before is not None:
            seen.moved = before.moved  # shown for the run before: cleared once the file no longer lists them
        self._found.pop(query_id, None)  # a new run: its options may differ
        for source in self._groups_of(query_id, name):
            metrics = self._metrics_of(source)
            if metrics is not None:
                seen.commits[source.group] = {
                    "ok": int(metrics.commits_succeeded),
                    "failed": int(metrics.commits_failed),
                }

    def _groups_of(self, query_id: str, name: str | None) -> tuple[SourceGroup, ...]:
        """The query's groups: as ``groups`` names them, else as ``discover`` finds them (once a run)."""
        named = self._groups.get(name or "") or self._groups.get(query_id)
        if named:
            return (SourceGroup(named),)
        if self._discover is None:
            return ()
        if query_id not in self._found:
            self._found[query_id] = tuple(self._discover(query_id))
        return self._found[query_id]

    def _metrics_of(self, source: SourceGroup) -> Any:
        if self._source_metrics is not None:
            return self._source_metrics(source.group)
        from sparkafka.source.commits import read_source_metrics

        return read_source_metrics(source.group, source.metrics_file)

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
        seen.name = name
        self._observe_files(query_id, seen)

    def idle(self, query_id: str) -> None:
        """A query with nothing to read (Spark's ``QueryIdleEvent``, sent at most every
        ``spark.sql.streaming.noDataProgressEventInterval``, 10 s, where progress events stop): its counters
        files are read again. The source commits a batch's offsets to the group after that batch's progress
        event, so the group's last commit is seen here. A query never observed (not known to be a
        sparkafka one) is left out."""
        seen = self._seen.get(query_id)
        if seen is not None and seen.name is not None:
            self._observe_files(query_id, seen)

    def _observe_files(self, query_id: str, seen: _Seen) -> None:
        """The sink's counters and the groups' metrics, from the files the query's processes write."""
        assert seen.name is not None
        query = self._labels.get(seen.name, seen.name)
        now = self._sink_counters(query_id)
        for key, counter in self.sink.items():
            delta = int(now.get(key, 0)) - seen.sink.get(key, 0)
            if delta > 0:
                counter.labels(query).inc(delta)
                seen.sink[key] = int(now.get(key, 0))
        for source in self._groups_of(query_id, seen.name):
            self._observe_group(query, source, seen)

    def _observe_group(self, query: str, source: SourceGroup, seen: _Seen) -> None:
        group = source.group
        metrics = self._metrics_of(source)
        if metrics is None:
            return
        now = {"ok": int(metrics.commits_succeeded), "failed": int(metrics.commits_failed)}
        before = seen.commits.get(group, {"ok": 0, "failed": 0})
        for result, total in now.items():
            self.commits.labels(query, group, result).inc(max(0, total - before.get(result, 0)))
        seen.commits[group] = now
        for tp, offset in metrics.committed.items():
            self.committed.labels(query, group, tp.topic, str(tp.partition)).set(offset)
        self._observe_moved(query, group, getattr(metrics, "moved_by_hand", None) or {}, seen)
        status = getattr(metrics, "event_time", None)
        if status is not None:
            self._observe_alignment(query, group, status)

    def _observe_moved(
        self, query: str, group: str, moved: Mapping[TopicPartition, Any], seen: _Seen
    ) -> None:
        """Partitions moved by hand: flagged, their committed offset the one they were moved to."""
        for tp, m in moved.items():
            labels = (query, group, tp.topic, str(tp.partition))
            self.moved_by_hand.labels(*labels).set(1)
            if m.group_offset is None:  # deleted: the group has no offset there
                with contextlib.suppress(KeyError):
                    self.committed.remove(*labels)
            else:
                self.committed.labels(*labels).set(m.group_offset)
            seen.moved.add((group, tp))
        for g, tp in [(g, tp) for g, tp in seen.moved if g == group and tp not in moved]:
            self.moved_by_hand.labels(query, g, tp.topic, str(tp.partition)).set(0)
            seen.moved.discard((g, tp))

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

    Registers a StreamingQueryListener (progress events arrive on the driver, in this process). The
    group-commit metrics of a query come from its sparkafka sources' metrics files (on this host), found
    by the groups its sources were given (``kafka.group.id``, and ``metricsFile``): read from each query's
    plan in a classic session (``query_groups``). ``groups`` maps a query's name (or id) to its group
    instead, for the queries it names: with Spark Connect, whose plans are on the server, it is the only
    way.
    """
    from pyspark.sql.streaming.listener import StreamingQueryListener

    exporter = Exporter(groups=groups, discover=session_groups(spark))
    server = start_server(exporter, port, host)

    class _Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            exporter.begin(str(event.id), event.name)

        def onQueryProgress(self, event: Any) -> None:
            progress = json.loads(event.progress.json)
            if is_sparkafka(progress):
                exporter.observe(progress)

        def onQueryIdle(self, event: Any) -> None:
            exporter.idle(str(event.id))

        def onQueryTerminated(self, event: Any) -> None:
            pass

    listener = _Listener()
    spark.streams.addListener(listener)
    server._spark, server._listener = spark, listener
    return server
