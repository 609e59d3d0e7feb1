"""Spark-facing adapters for reading: a thin layer over planning, assignment and fetch.

Process model (measured, PySpark 4.3): the streaming reader lives in Spark's Python source runner, one
long-lived process per query, so state kept between ``latestOffset`` calls survives; ``read`` runs in
worker processes on a separately pickled copy, so nothing set after construction is visible there.

Errors: every method Spark calls in its own Python processes on the driver side (the stream reader's, in
the source runner; the batch reader's ``partitions``, in the planner) goes through
``spark_lines.sentence_errors``, so a ``SparkafkaError`` reaches the user as its sentence, without the Python
traceback. ``read`` does not: it runs in tasks and returns an iterator, which fails after it returned
(``sparkafka.spark_errors`` words that).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from sparkafka.errors import ConfigError
from sparkafka.source import shutdown
from sparkafka.source.admin import SourceMetadata, discover_initial
from sparkafka.source.alignment import EventTimeAligner
from sparkafka.source.assignment import assign_tasks, default_task_count, spark_cores
from sparkafka.source.commits import (
    KafkaCommitClient,
    OffsetCommitter,
    SourceMetrics,
    default_metrics_file,
    write_source_metrics,
)
from sparkafka.source.data_loss import next_positions
from sparkafka.source.fetch import OffsetRange, read_ranges
from sparkafka.source.options import SourceOptions
from sparkafka.source.planning import (
    Discovery,
    Offsets,
    TaskPlan,
    apply_read_limit,
    bound_when_read,
    delay_batch,
    ending_offsets,
    offsets_from_json,
    offsets_to_json,
    plan_from_json,
    resolve_startup,
    split_ranges,
    topic_ids_from_json,
)
from sparkafka.spark_lines import (
    ADMISSION_CONTROL,
    PYSPARK_VERSION,
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
    sentence_errors,
)
from sparkafka.structs import TopicPartition

__all__ = ["KafkaBatchReader", "KafkaInputPartition", "KafkaStreamReader"]

log = logging.getLogger(__name__)


class KafkaInputPartition(InputPartition):
    """What one reader task reads: its index and its offset ranges."""

    def __init__(self, task: int, ranges: list[OffsetRange]) -> None:
        """Task ``task`` reads ``ranges``; pickled to the Python worker that runs it."""
        super().__init__(task)
        self.task = task
        self.ranges = ranges

    def __repr__(self) -> str:
        """The task index and its ranges, for logs."""
        return f"KafkaInputPartition(task={self.task}, ranges={self.ranges})"


class _Planner:
    """Shared by the batch and the streaming reader: discovery, metadata and task planning."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._metadata: SourceMetadata | None = None
        self._last_tasks: list[list[TopicPartition]] | None = None
        self._reader_kafka = dict(options.kafka)
        if options.reader_group_prefix:
            # Spark's executor group id for groupIdPrefix: made once per query, on the driver.
            self._reader_kafka["group.id"] = f"{options.reader_group_prefix}-{uuid.uuid4()}-executor"

    def __getstate__(self) -> dict[str, Any]:
        # Kafka clients do not pickle; workers rebuild what they need from the options.
        state = dict(self.__dict__)
        state["_metadata"] = None
        return state

    @property
    def metadata(self) -> SourceMetadata:
        if self._metadata is None:
            self._metadata = SourceMetadata(self.options.kafka, self.options.metadata_timeout_ms / 1000)
        return self._metadata

    def discover(self) -> Discovery:
        return self.metadata.discover(self.options.subscription)

    def discover_initial(self) -> Discovery:
        """Partitions at start, the ACLs and the topics checked (``admin.discover_initial``)."""
        return discover_initial(self.metadata, self.options)

    def task_plan(self, partitions: int, cores: bool = True) -> TaskPlan:
        """How a batch of ``partitions`` partitions becomes reader tasks under the options: Spark's split
        (``minPartitions``, ``maxRecordsPerPartition``), else Flink's assigner over ``parallelism`` tasks,
        or by default one task per Spark core (``assignment.default_task_count``; ``cores`` False: one
        per partition, as a batch planned before plans were recorded)."""
        o = self.options
        if o.min_partitions is not None or o.max_records_per_partition is not None:
            return TaskPlan(
                min_partitions=o.min_partitions, max_records_per_partition=o.max_records_per_partition
            )
        tasks = o.parallelism or (default_task_count(partitions, spark_cores()) if cores else None)
        return TaskPlan(tasks=tasks or partitions, strategy=o.strategy)

    def plan(
        self,
        start: Offsets,
        end: Offsets,
        late: tuple[set[TopicPartition], set[TopicPartition]] = (set(), set()),
        recorded: TaskPlan | None = None,
    ) -> list[KafkaInputPartition]:
        """The read tasks for ``[start, end)``; ``late``: the partitions whose start and whose end a batch
        read binds when its task starts (``planning.bound_when_read``), read even when empty now;
        ``recorded``: the plan kept with the batch's end (``planning.PLAN_KEY``), which decides over the
        options (None: a batch ended before plans were kept, planned from the options as it was then)."""
        earliest, latest = late
        ranges = {
            tp: OffsetRange(tp, start[tp], end[tp], tp in earliest, tp in latest)
            for tp in end
            if tp in start and (end[tp] > start[tp] or tp in latest)
        }
        if not ranges:
            return []
        plan = recorded or self.task_plan(len(end), cores=False)
        if recorded is not None and recorded != self.task_plan(len(end)):
            log.info(
                "this batch keeps the task plan it was ended with, %s; the options' apply from the next",
                recorded,
            )
        if plan.splits:
            # Spark's meaning: every (piece of a) range is one task; Flink's assigner is not used. As in
            # Spark, a partition's first piece keeps a late start and its last piece a late end.
            pieces = split_ranges(
                [(r.tp, r.start, r.end) for _, r in sorted(ranges.items())],
                plan.min_partitions,
                plan.max_records_per_partition,
            )
            return [
                KafkaInputPartition(
                    i,
                    [OffsetRange(tp, s, e, s == start[tp] and tp in earliest, e == end[tp] and tp in latest)],
                )
                for i, (tp, s, e) in enumerate(pieces)
            ]
        parallelism = plan.tasks or len(end)
        # A batch's tasks depend on its offsets and the plan kept with them (``planning.PLAN_KEY``) alone,
        # never on what this process planned before (``sticky`` gets no previous mapping) nor on options
        # changed since: a restarted query replays a batch with the same rows per task index, which the
        # exactly-once sink's replay of a partial batch relies on.
        assigned = assign_tasks(end, parallelism, plan.strategy)
        if assigned != self._last_tasks:
            mapping = "; ".join(
                f"task {i}: {', '.join(map(str, ps)) or '-'}" for i, ps in enumerate(assigned)
            )
            log.info("partition assignment (%s, parallelism %d): %s", plan.strategy, parallelism, mapping)
            self._last_tasks = assigned
        return [
            KafkaInputPartition(i, [ranges[tp] for tp in ps if tp in ranges])
            for i, ps in enumerate(assigned)
            if any(tp in ranges for tp in ps)
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Read one task's ranges (in Spark's Python workers).

        When ``plan`` found nothing to read, Spark still runs one task with a plain ``InputPartition(None)``
        (PySpark's plan_data_source_read): it reads nothing.
        """
        if not isinstance(partition, KafkaInputPartition):
            return iter(())
        o = self.options
        return read_ranges(
            self._reader_kafka,
            partition.ranges,
            o.include_headers,
            o.fail_on_data_loss,
            o.poll_timeout_ms,
            fetcher=o.fetcher,
        )


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("sparkafka")``: FlinkKafkaConsumer's behaviour in micro-batches."""

    def __init__(self, options: SourceOptions) -> None:
        """Keep the options; nothing is asked of Kafka yet."""
        self._planner = _Planner(options)
        self._options = options
        self._known: Discovery | None = None
        self._last_discovery = 0.0
        self._target: Offsets | None = None
        self._reported: Offsets | None = None
        self._reported_ids: dict[str, str] = {}
        self._committer: OffsetCommitter | None = None
        self._last_trigger_ms = 0.0
        """When the last micro-batch that ran was planned (minOffsetsPerTrigger); 0: the first runs."""
        self._aligner: EventTimeAligner | None = None
        self._metrics: SourceMetrics | None = None
        """The metrics file's contents when no committer writes it (event-time status only)."""
        self._last_end: dict[str, Any] | None = None
        """The end of the batch planned last, where Spark gives ``latestOffset`` no start (PySpark 4.0, 4.1:
        ``spark_lines.ADMISSION_CONTROL``): from ``initialOffset``, ``partitions`` and ``latestOffset``."""
        if not ADMISSION_CONTROL and options.max_records_per_trigger:
            _warn_available_now_once(options.max_records_per_trigger)

    def __getstate__(self) -> dict[str, Any]:
        """The state pickled for the workers, without the driver-side parts that hold Kafka clients."""
        state = dict(self.__dict__)
        state["_committer"] = None
        state["_aligner"] = None
        return state

    def _metrics_path(self) -> Path | None:
        """Where the source's metrics go: option metricsFile, else the group's default; None without both."""
        o = self._options
        if o.metrics_file:
            return Path(o.metrics_file)
        return default_metrics_file(o.group_id) if o.group_id else None

    @property
    def committer(self) -> OffsetCommitter | None:
        """Group commits of completed batches; lives in Spark's source runner process (the driver side)."""
        o = self._options
        if self._committer is None and o.commit_mode != "disabled" and o.group_id:
            group = o.group_id
            self._committer = OffsetCommitter(
                lambda: KafkaCommitClient(o.kafka, group, o.metadata_timeout_ms / 1000),
                group,
                mode=o.commit_mode,
                interval_ms=o.commit_interval_ms,
                metrics_file=self._metrics_path(),
                topics_exist=lambda topics: self._planner.metadata.describe_topics(topics).keys(),
            )
            shutdown.guard.install_in_runner()
        return self._committer

    def _partitions_now(self, force: bool = False) -> Discovery:
        """The last discovery, or a new one when due (every ``partitionDiscoveryIntervalMs``) or forced."""
        interval = self._options.discovery_interval_ms
        now = time.monotonic()
        due = self._known is None or (interval >= 0 and (now - self._last_discovery) * 1000 >= interval)
        due = due or force
        if due:
            found = self._planner.discover_initial() if self._known is None else self._planner.discover()
            if self._known is not None and found.partitions - self._known.partitions:
                added = sorted(found.partitions - self._known.partitions)
                log.info("discovered new partitions: %s", ", ".join(map(str, added)))
            self._known = found
            self._last_discovery = now
            if self.committer is not None:
                topics = {tp.topic for tp in found.partitions}
                self.committer.topics_now(topics, found.topic_ids, found.cluster_id)
        assert self._known is not None
        return self._known

    @sentence_errors
    def initialOffset(self) -> dict[str, Any]:
        found = self._partitions_now()
        start = resolve_startup(
            self._options, self._planner.metadata, found.partitions, found.topic_ids, found.cluster_id
        )
        initial = offsets_to_json(start, found.topic_ids)
        self._last_end = self._last_end or initial
        return initial

    @sentence_errors
    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self._options.max_records_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    @sentence_errors
    def prepareForTriggerAvailableNow(self) -> None:
        tps = self._partitions_now().partitions
        self._target = self._planner.metadata.latest(tps)
        log.info("Trigger.AvailableNow: reading up to %s", offsets_to_json(self._target))

    @sentence_errors
    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, Any]:
        """The next batch's end. PySpark 4.2 and later give the start (the end of the batch last committed)
        and the read limit; 4.0 and 4.1 give neither (``spark_lines``): the start is then the end of the
        batch this reader planned last, which Spark runs to its commit before asking again, and the limit
        the source's own (``maxOffsetsPerTrigger``)."""
        if start is None:
            start = self._last_end if self._last_end is not None else self.initialOffset()
        if limit is None:
            limit = self.getDefaultReadLimit()
        with shutdown.guard.critical():
            end = self._latest_offset(start, limit)
        self._last_end = end
        return end

    def _latest_offset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        committer = self.committer
        if committer is not None:
            # Spark asks for the next batch only after the batch ending at `start` is in its commit log
            # (and keeps asking while idle), so `start` is the newest offsets that can never be re-read.
            # The topics' ids first: a restart's `start` may be from a log since deleted (a recreated topic).
            self._partitions_now()
            committer.completed(offsets_from_json(start), topic_ids_from_json(start))
        metadata = self._planner.metadata

        def discovered(force: bool = False) -> Discovery:
            found = self._partitions_now(force)
            if self._target is None:
                return found
            return Discovery(found.partitions & set(self._target), found.topic_ids)

        # Partitions that enter (new ones at their earliest offset) or move (data_loss) get no records this
        # batch, so the checkpoint always holds concrete offsets and a re-run plans exactly the same ranges.
        kept, latest, moved, ids = next_positions(
            offsets_from_json(start),
            topic_ids_from_json(start),
            discovered(),
            metadata,
            lambda: discovered(force=True),
            subscription=self._options.subscription,
            fail_on_data_loss=self._options.fail_on_data_loss,
            group_id_set=self._options.group_id is not None,
            confirm_gone=metadata.confirm_gone,
        )
        if self._target is not None:
            latest = {tp: min(o, self._target.get(tp, kept[tp])) for tp, o in latest.items()}
        self._reported = {**latest, **moved}
        self._reported_ids = ids
        if moved and self._aligner is not None:
            self._aligner.forget(moved)
        if moved and committer is not None:
            committer.partitions_moved(moved)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        latest = self._align(kept, latest, max_rows)
        min_offsets = self._options.min_offsets_per_trigger
        if min_offsets is not None and self._target is None:
            skip, self._last_trigger_ms = delay_batch(
                kept,
                latest,
                min_offsets=min_offsets,
                max_delay_ms=self._options.max_trigger_delay_ms,
                now_ms=time.time() * 1000,
                last_trigger_ms=self._last_trigger_ms,
            )
            if skip:
                return offsets_to_json({**kept, **moved}, ids, plan_from_json(start))
        end = apply_read_limit(kept, latest, max_rows)
        end.update(moved)
        # The batch's task plan goes with its end (``planning.PLAN_KEY``); an end with no new offsets keeps
        # the start's, so that it equals the start and no batch runs for the plan alone.
        plan = plan_from_json(start) if end == kept else self._planner.task_plan(len(end))
        return offsets_to_json(end, ids, plan)

    def _align(self, start: Offsets, latest: Offsets, max_rows: int | None) -> Offsets:
        """``latest`` lowered by event-time alignment (``source.alignment``), for a batch that the read
        limit ``max_rows`` ends; ``latest`` as it is without the option.

        A changed status goes to the source's metrics file.
        """
        o = self._options
        if o.max_event_time_drift_ms is None:
            return latest
        if self._aligner is None:
            self._aligner = EventTimeAligner(
                self._planner.metadata, o.max_event_time_drift_ms, o.partition_idle_timeout_ms
            )
        before = self._aligner.status
        capped = self._aligner.cap(start, latest, bounded=self._target is not None, max_records=max_rows)
        status = self._aligner.status
        if status is None or status == before:
            return capped
        committer = self.committer
        if committer is not None:
            committer.metrics.event_time = status
            committer.publish()
        elif (path := self._metrics_path()) is not None:
            self._metrics = self._metrics or SourceMetrics(group_id=o.group_id or "", mode=o.commit_mode)
            self._metrics.event_time = status
            write_source_metrics(path, self._metrics)
        return capped

    @sentence_errors
    def reportLatestOffset(self) -> dict[str, Any] | None:
        return offsets_to_json(self._reported, self._reported_ids) if self._reported is not None else None

    @sentence_errors
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        # PySpark 4.0/4.1 tell a restarted reader where the query stands this way (partitions(last, last)),
        # and replay an uncommitted batch: the start of the next latestOffset() when Spark gives none.
        self._last_end = end
        return self._planner.plan(
            offsets_from_json(start), offsets_from_json(end), recorded=plan_from_json(end)
        )

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return self._planner.read(partition)

    @sentence_errors
    def commit(self, end: dict[str, Any]) -> None:
        """Called one batch late (when the next batch is planned); ``latestOffset`` saw these already."""
        if self._committer is not None:
            with shutdown.guard.critical():
                self._committer.completed(offsets_from_json(end), topic_ids_from_json(end))

    @sentence_errors
    def stop(self) -> None:
        if self._committer is not None:
            self._committer.close()
            log.info("source stopped; group commits: %s", self._committer.metrics.to_json())
        else:
            log.info("source stopped")


_warned_available_now = False


def _warn_available_now_once(max_records: int) -> None:
    """On a PySpark without admission control, say once per process what ``Trigger.AvailableNow`` does."""
    global _warned_available_now  # noqa: PLW0603 - once per process, as librdkafka's own warnings are
    if _warned_available_now:
        return
    _warned_available_now = True
    log.warning(
        "PySpark %s runs Trigger.AvailableNow for a Python source as a single batch (as Trigger.Once), "
        "which maxOffsetsPerTrigger=%d caps: such a query reads at most that many records and ends; "
        "processingTime triggers keep the cap batch by batch. PySpark 4.2 runs AvailableNow to the end",
        PYSPARK_VERSION,
        max_records,
    )


class KafkaBatchReader(DataSourceReader):
    """``spark.read.format("sparkafka")``: one bounded read from the starting to the ending offsets."""

    def __init__(self, options: SourceOptions) -> None:
        """Resolve the start and end offsets now; an end before its start raises ConfigError."""
        self._planner = _Planner(options)
        metadata = self._planner.metadata
        found = self._planner.discover_initial()
        tps = found.partitions
        self._start = resolve_startup(options, metadata, tps, found.topic_ids, found.cluster_id)
        latest = metadata.latest(tps)
        self._end = ending_offsets(options, metadata, tps, latest)
        for tp, end in self._end.items():
            if end < self._start.get(tp, end):
                raise ConfigError(
                    f"endingOffsets for {tp} ({end}) is before its starting offset ({self._start[tp]})"
                )
        earliest, at_latest = bound_when_read(options, tps, self._end, latest)
        # A task's own end lookup is right only where ListOffsets(latest) is (broker_gaps).
        self._late = (earliest, at_latest if metadata.latest_is_exact() else set())

    @sentence_errors
    def partitions(self) -> Sequence[InputPartition]:
        return self._planner.plan(
            self._start, self._end, self._late, recorded=self._planner.task_plan(len(self._end))
        )

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return self._planner.read(partition)
