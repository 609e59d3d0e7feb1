"""The source's options: declared once (``SOURCE_OPTIONS``, the docs' reference is made from it), parsed once
into a frozen dataclass."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, get_args, overload

from sparkafka.client.conf import check_librdkafka_settings
from sparkafka.errors import ConfigError
from sparkafka.kafka.java_regex import JavaRegexError, java_regex
from sparkafka.options import DEFAULT_METADATA_TIMEOUT_MS, Option, OptionReader, names
from sparkafka.structs import INTERNAL_TOPIC_PREFIX, TopicPartition

__all__ = [
    "SOURCE_KAFKA_SETTINGS",
    "SOURCE_OPTIONS",
    "AssignmentStrategy",
    "FetcherChoice",
    "SourceOptions",
    "StartupMode",
    "Subscription",
    "duration_ms",
    "network_timeout_ms",
    "parse_source_options",
]

log = logging.getLogger(__name__)

AssignmentStrategy = Literal["flink", "range", "roundrobin", "sticky"]
StartupMode = Literal["group", "earliest", "latest", "specific", "timestamp", "timestamps"]
OffsetReset = Literal["earliest", "latest", "error"]
CommitMode = Literal["on_checkpoint", "periodic", "disabled"]
TimestampStrategy = Literal["error", "latest"]
FetcherChoice = Literal["auto", "native", "python"]
"""Option ``fetcher``: how reader tasks take records off Kafka (``source.fetch``): ``auto`` (sparkafka's
native extension when installed and it takes the settings, else confluent-kafka), ``native`` (fail if it
cannot be used), ``python`` (confluent-kafka)."""
STRATEGIES: tuple[AssignmentStrategy, ...] = get_args(AssignmentStrategy)
OFFSET_RESETS: tuple[OffsetReset, ...] = get_args(OffsetReset)
COMMIT_MODES: tuple[CommitMode, ...] = get_args(CommitMode)
TIMESTAMP_STRATEGIES: tuple[TimestampStrategy, ...] = get_args(TimestampStrategy)
FETCHERS: tuple[FetcherChoice, ...] = get_args(FetcherChoice)
NAMED_STARTS: dict[str, StartupMode] = {"group": "group", "earliest": "earliest", "latest": "latest"}

# Kafka's sentinels inside an offsets JSON, as in Spark's Kafka source.
EARLIEST = -2
LATEST = -1

_JSON_OFFSETS = 'JSON `{"topic": {"0": 23}}`'

SOURCE_OPTIONS: tuple[Option, ...] = (
    Option(
        "subscribe",
        "Comma-separated topics to read. One of `subscribe`, `subscribePattern` and `assign` is required. "
        "A topic that does not exist fails `load()` (and a `subscribePattern` that matches none, an `assign` "
        "topic none of whose partitions exists).",
        spark="",
    ),
    Option(
        "subscribePattern",
        "A Java regular expression searched for in topic names, as Spark's `findFirstIn` does: `orders` "
        "also reads `orders-dlq` and `old-orders`; write `^orders$` for the one topic. Java-only syntax "
        r"(`\Q...\E`, `\p{Alpha}`, `(?<name>...)`) is translated; what Python's `re` cannot express "
        "(class union or intersection, `\\G`, `\\R`) is refused. It never matches sparkafka's "
        "`_sparkafka-` topics nor Kafka's internal ones (`__consumer_offsets`, `__transaction_state`, "
        "`__share_group_state`). Topics created later are found by partition discovery.",
        spark="The same meaning and dialect; it also never matches sparkafka's own `_sparkafka-` topics (the "
        "sink's intent logs), which Spark would read.",
    ),
    Option(
        "assign",
        'JSON `{"topic": [0, 1]}`: exactly these partitions, never more.',
        spark="",
    ),
    Option(
        "startingOffsets",
        "Where a query without a checkpoint starts (a restarted query continues from its checkpoint): "
        "`group` (the committed offsets of `kafka.group.id`; `kafka.auto.offset.reset` for partitions "
        f"without one), `earliest`, `latest`, or {_JSON_OFFSETS} with the next offset to read per "
        "partition (`-2` earliest, `-1` latest). The JSON names exactly the partitions the query reads, "
        "checked when a query without a checkpoint starts (a resumed query ignores this option); with "
        "`kafka.group.id` it may leave some out, and they start as with `group`. A batch read refuses "
        "`latest` and `-1`.",
        default_note="streaming: `group` with `kafka.group.id`, else `latest`; batch: `earliest`",
        spark="Spark has no `group`: with `kafka.group.id` set, a streaming query here starts from the "
        "group's offsets (Flink's GROUP_OFFSETS), where Spark starts at `latest`; set "
        "`startingOffsets=latest` for Spark's start. A JSON map that leaves partitions out is refused as "
        "in Spark, unless `kafka.group.id` is set (Spark refuses it then too). `latest` and `-1` in a batch "
        "read are refused, as in Spark.",
    ),
    Option(
        "startingTimestamp",
        "Epoch milliseconds: each partition starts at its first record with a timestamp at or after it "
        "(Kafka's `-2` means earliest, `-1` latest, as in Spark). "
        "Takes precedence over `startingOffsetsByTimestamp`, which takes precedence over "
        "`startingOffsets` (Spark's order).",
        spark="",
    ),
    Option(
        "startingOffsetsByTimestamp",
        'JSON `{"topic": {"0": 1700000000000}}`: a starting timestamp per partition, naming exactly the '
        "partitions the query reads; with `kafka.group.id` it may leave some out, as a JSON "
        "`startingOffsets` may.",
        spark="Spark requires every assigned partition in the map; here too, unless `kafka.group.id` is set.",
    ),
    Option(
        "startingOffsetsByTimestampStrategy",
        "A partition with no record at or after its starting timestamp fails the query (`error`) or "
        "starts at its latest offset (`latest`, Flink's TIMESTAMP mode).",
        default="error",
        allowed=TIMESTAMP_STRATEGIES,
        spark="",
    ),
    Option(
        "endingOffsets",
        f"Batch reads only: where each partition ends, `latest` or {_JSON_OFFSETS} (`-1` latest) naming "
        "exactly the partitions the query reads (checked at `load()`). A streaming read refuses it.",
        default="latest",
        spark="",
    ),
    Option(
        "endingTimestamp",
        "Batch reads only: each partition ends before its first record at or after this epoch-ms "
        "timestamp, or at latest when it has none. A streaming read ignores it (a warning), as Spark does.",
        spark="",
    ),
    Option(
        "endingOffsetsByTimestamp",
        "Batch reads only: `endingTimestamp` per partition, as JSON like `startingOffsetsByTimestamp` "
        "naming exactly the partitions the query reads. A streaming read refuses it.",
        spark="",
    ),
    Option(
        "partitionDiscoveryIntervalMs",
        "How often the driver looks for new partitions and topics (Flink's "
        "`partition.discovery.interval.ms`): `0` (the default, as Spark does) at every trigger, `-1` only "
        "at start. New partitions start at earliest, read from the batch after the one that found them; "
        "a subscription with no partition at start is an error.",
        default="0",
    ),
    Option(
        "parallelism",
        "Reader tasks per micro-batch (Flink's subtasks), each reading its partitions with one client; "
        "partitions are given to tasks by `assignmentStrategy`. The default is Spark's "
        "`defaultParallelism` when `sparkafka.register(spark)` ran (set `spark.default.parallelism` to "
        "change it), kept with each batch's offsets so that a replayed batch has the same tasks: a task "
        "of a Python data source costs Spark 30-60 ms, so one per partition made a 200-partition batch "
        "5 s slower.",
        default_note="Spark's cores, at most the partitions (one per partition on Spark Connect)",
    ),
    Option(
        "assignmentStrategy",
        "How partitions are given to reader tasks: `flink` (Flink's KafkaTopicPartitionAssigner), "
        "`range`, `roundrobin`, or `sticky` (Kafka's sticky balance, planned from the batch's offsets "
        "alone, so a restarted query plans a batch alike). The mapping is logged when it changes.",
        default="flink",
        allowed=STRATEGIES,
    ),
    Option(
        "minPartitions",
        "Split large offset ranges so a batch has about this many tasks (Spark's "
        "KafkaOffsetRangeCalculator). Then every piece is one task, and `parallelism` and "
        "`assignmentStrategy` may not be set.",
        spark="",
    ),
    Option(
        "maxRecordsPerPartition",
        "Cut any offset range longer than this into equal pieces first (with `minPartitions`' rules).",
        spark="",
    ),
    Option(
        "maxRecordsPerTrigger",
        "At most this many offsets per micro-batch, shared over partitions in proportion to their "
        "backlog, none starved. It counts offsets, not records: transaction markers and compacted or "
        "aborted gaps use part of it. Batch reads ignore it (a warning).",
    ),
    Option(
        "maxOffsetsPerTrigger",
        "Spark's name for `maxRecordsPerTrigger`.",
        alias_of="maxRecordsPerTrigger",
        spark="Spark floors each partition's share and rounds shares under one up, so its batches can "
        "pass the limit; here a batch never does (largest remainder first). `0` is refused here: Spark "
        "accepts it and its query never reads a record (each partition's share rounds to none).",
    ),
    Option(
        "minOffsetsPerTrigger",
        "A micro-batch waits until this many new offsets are there (over all partitions), or until "
        "`maxTriggerDelay` has passed since the last batch ran; never under `Trigger.AvailableNow`.",
        spark="",
    ),
    Option(
        "maxTriggerDelay",
        "The longest `minOffsetsPerTrigger` may hold a batch back: `500ms`, `30s`, `15m`, `1h` (a bare "
        "number is milliseconds).",
        default="15m",
        spark="",
    ),
    Option(
        "failOnDataLoss",
        "Offsets that are gone fail the query, naming topic, partition and offsets: retention passing the "
        "query's position, a deleted or recreated topic, a partition whose log ends below the position (an "
        "unclean election that truncated it), a new partition that does not start at 0. With `false` the "
        "query skips ahead with a warning saying what is skipped.",
        default="true",
        spark="Spark's rules (its `KafkaDataConsumer` and offset reader), and batch `earliest`/`latest` "
        "bound when the task starts, as Spark does. Beyond Spark: each topic's id is kept beside the "
        "offsets (`@topicIds` in the progress's offsets), so a recreated topic is data loss even once its "
        "new log has passed the query's position, and with `false` it is read from its first record "
        "(Spark goes on from the old position). A failure's sentence starts with Spark's error class for "
        "the case (`[KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED] Some data may have been lost: ...`): a "
        "Python data source passes Spark only text, so it is in no exception's `getCondition()`, where "
        "Spark's connector puts it on a JVM cause; `sparkafka.data_loss_condition(e)` reads either.",
    ),
    Option(
        "includeHeaders",
        "Add the `headers` column, `array<struct<key string, value binary>>`.",
        default="false",
        spark="",
    ),
    Option(
        "groupIdPrefix",
        "The reader tasks' consumers use `<prefix>-<uuid>-executor` as `group.id` (for group ACLs; they "
        "never join the group). Ignored when `kafka.group.id` is set.",
        spark="Without it the reader tasks' group id is `sparkafka-reader`, where Spark's is "
        "`spark-kafka-source-<uuid>-...-executor`: group ACLs written for Spark's default need this "
        "option.",
    ),
    Option(
        "pollTimeoutMs",
        "A reader task that gets no record for this long fails, naming its partitions and offsets.",
        default_note="`spark.network.timeout` in ms (120000 unless raised; `sparkafka.register` reads it)",
    ),
    Option(
        "kafkaConsumer.pollTimeoutMs",
        "Spark's name for `pollTimeoutMs`.",
        alias_of="pollTimeoutMs",
        spark="The same default, `spark.network.timeout`, when `sparkafka.register(spark)` ran in the "
        "driver (it tells the Python workers); without it (Spark Connect) 120000 ms.",
    ),
    Option(
        "fetchOffset.numRetries",
        "Accepted and checked for Spark's sake; driver-side lookups retry Kafka's retriable errors with "
        "backoff within `metadataTimeoutMs`, which outlasts Spark's 3 attempts 1 s apart.",
        default="3",
        spark="Checked, then unused (see `metadataTimeoutMs`).",
    ),
    Option(
        "fetchOffset.retryIntervalMs",
        "As `fetchOffset.numRetries`.",
        default="1000",
        spark="Checked, then unused (see `metadataTimeoutMs`).",
    ),
    Option(
        "metadataTimeoutMs",
        "The bound on each driver-side metadata and offset request, retries included: Kafka's retriable "
        "errors (leaders not yet known, a coordinator moving, a broker restarting) are retried within it. "
        "When no broker answers at all, `load()` fails within 5 s, or within this option when it is set.",
        default=str(DEFAULT_METADATA_TIMEOUT_MS),
    ),
    Option(
        "offsetCommitMode",
        "When a streaming query's offsets go back to its consumer group: `on_checkpoint` (each "
        "micro-batch's end offsets, once the batch is in Spark's commit log), `periodic` (the newest "
        "completed batch's, at most every `offsetCommitIntervalMs`) or `disabled`.",
        default_note="`on_checkpoint` with `kafka.group.id`, else `disabled`",
        allowed=COMMIT_MODES,
    ),
    Option(
        "offsetCommitIntervalMs",
        "The `periodic` commit interval, and the wait before retrying offsets whose commit failed.",
        default="5000",
    ),
    Option(
        "metricsFile",
        "Where the source writes its commit counters (read by `sparkafka.source_metrics`).",
        default_note="`$TMPDIR/sparkafka/metrics/source-<group>.json`",
    ),
    Option(
        "maxEventTimeDrift",
        "Event-time alignment (Flink's watermark alignment): no micro-batch reads a record this much past "
        "the slowest non-idle partition's event time (the record's Kafka timestamp). A duration as "
        "`withWatermark` writes it (`5 minutes`) or Spark's short form (`5m`). With `withWatermark(delay)` "
        "at least the drift, no record is dropped as late during a catch-up. Streaming only.",
        spark="None in Spark: its watermark is the largest event time seen, so a lagging partition's "
        "records are dropped as late (see the event-time page).",
    ),
    Option(
        "partitionIdleTimeout",
        "With `maxEventTimeDrift`: a partition with no new records for this long stops holding the others "
        "back, and rejoins when records arrive; a partition held back by alignment is never idle.",
        spark="None in Spark.",
    ),
    Option(
        "fetcher",
        "How reader tasks take records off Kafka: `native` (sparkafka's librdkafka extension, no Python "
        "object per record), `python` (confluent-kafka), or `auto`: native when it is installed and takes "
        "the `kafka.*` settings, else confluent-kafka, saying why in one INFO line.",
        default="auto",
        allowed=FETCHERS,
    ),
)
"""Every option of the source. Every option of Spark's Kafka source is here (``spark`` says how it
differs), beside sparkafka's own (Flink's assigner, startup from the group, group commits)."""

SOURCE_KAFKA_SETTINGS: tuple[Option, ...] = (
    Option(
        "kafka.bootstrap.servers",
        "The brokers, `host:port[,host:port...]`. Required.",
        spark="",
    ),
    Option(
        "kafka.group.id",
        "The consumer group: where `startingOffsets=group` starts and where `offsetCommitMode` commits. "
        "Reader tasks never join it.",
        spark="Spark only names its consumers with it; here it also sets the start (`group`) and the "
        "offset commits. Leave it out for Spark's behaviour, or set `startingOffsets` and "
        "`offsetCommitMode=disabled`.",
    ),
    Option(
        "kafka.isolation.level",
        "`read_committed` reads up to the last stable offset (a partition with an open transaction holds "
        "later records back); `read_uncommitted` shows aborted and in-flight records.",
        default="read_committed",
        allowed=("read_committed", "read_uncommitted"),
        spark="The Java client's default is `read_uncommitted`.",
    ),
    Option(
        "kafka.auto.offset.reset",
        "The start of a partition without a committed group offset, under `startingOffsets=group`.",
        default="latest",
        allowed=OFFSET_RESETS,
        spark="Spark refuses it.",
    ),
    Option(
        "kafka.enable.auto.commit",
        "Always off: offsets live in Spark's checkpoint (a warning if you set it true).",
        spark="Spark refuses it.",
    ),
)
"""The ``kafka.*`` settings the source interprets; every other one goes to librdkafka as given."""

NETWORK_TIMEOUT_ENV = "SPARKAFKA_SPARK_NETWORK_TIMEOUT"
"""The driver's ``spark.network.timeout``, passed to the Python workers by ``sparkafka.register`` (the
workers cannot read Spark's configuration): ``pollTimeoutMs``'s default, as in Spark's connector."""

DEFAULT_POLL_TIMEOUT_MS = 120_000
"""Spark's default ``spark.network.timeout`` (120s), for a worker that was not told the driver's."""

DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000
"""Spark's default ``maxTriggerDelay`` (15m)."""

_TIME_UNITS_MS = {
    **dict.fromkeys(("us", "usec", "microsecond", "microseconds"), 0.001),
    **dict.fromkeys(("ms", "msec", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1000),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3_600_000),
    **dict.fromkeys(("d", "day", "days"), 86_400_000),
}
"""Units of a duration option: Spark's short forms (``15m``, JavaUtils.timeStringAsMs) and the words of
its interval strings (``10 minutes``, as ``withWatermark`` takes them)."""


@dataclass(frozen=True)
class Subscription:
    """What the source reads: exactly one of fixed topics, a pattern, or explicit partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()

    @cached_property
    def _regex(self) -> re.Pattern[str] | None:
        """The pattern in Python's dialect (``kafka.java_regex``), compiled once per process."""
        return None if self.pattern is None else re.compile(java_regex(self.pattern))

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` belongs to this subscription. A pattern is searched for in the name, as Spark's
        ``findFirstIn`` does: ``orders`` matches ``orders-dlq`` too; ``^orders$`` matches only ``orders``.

        A pattern never matches sparkafka's internal topics: ``.*`` must not read the sink's intent logs.
        """
        if self._regex is not None:
            internal = topic.startswith(INTERNAL_TOPIC_PREFIX)
            return not internal and self._regex.search(topic) is not None
        if self.partitions:
            return any(tp.topic == topic for tp in self.partitions)
        return topic in self.topics

    def describe(self) -> str:
        """The subscription as its option spells it (``subscribe=a,b``, ``assign=...``), for messages."""
        if self.pattern is not None:
            return f"subscribePattern={self.pattern!r}"
        if self.partitions:
            return "assign=" + ",".join(str(tp) for tp in self.partitions)
        return "subscribe=" + ",".join(self.topics)


@dataclass(frozen=True)
class SourceOptions:
    """Everything the source needs, validated."""

    kafka: Mapping[str, str]
    """Settings for librdkafka (``kafka.*`` without the prefix), auto-commit forced off."""
    subscription: Subscription
    group_id: str | None
    startup: StartupMode
    specific_offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    starting_timestamp: int | None = None
    """``startingTimestamp``: one epoch-ms timestamp for every partition (startup ``timestamp``)."""
    starting_timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)
    """``startingOffsetsByTimestamp``: an epoch-ms timestamp per partition (startup ``timestamps``)."""
    timestamp_strategy: TimestampStrategy = "error"
    """``startingOffsetsByTimestampStrategy``: a partition with no record at or after its starting
    timestamp fails the query (``error``, Spark's default) or starts at its latest offset (``latest``)."""
    ending_offsets: Mapping[TopicPartition, int] | None = None
    """Batch reads only; None means latest."""
    ending_timestamp: int | None = None
    """``endingTimestamp`` (batch): every partition ends at its first record at or after it, else latest."""
    ending_timestamps: Mapping[TopicPartition, int] | None = None
    """``endingOffsetsByTimestamp`` (batch): the same per partition."""
    offset_reset: OffsetReset = "latest"
    discovery_interval_ms: int = 0
    parallelism: int | None = None
    strategy: AssignmentStrategy = "flink"
    min_partitions: int | None = None
    """``minPartitions``: split large offset ranges so a batch has about this many tasks (Spark's
    KafkaOffsetRangeCalculator; see ``planning.split_ranges``)."""
    max_records_per_partition: int | None = None
    """``maxRecordsPerPartition``: split any offset range longer than this."""
    max_records_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    """``minOffsetsPerTrigger``: a micro-batch waits until this many new offsets are there, or until
    ``max_trigger_delay_ms`` has passed since the last batch that ran (Spark's delayBatch)."""
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    reader_group_prefix: str | None = None
    """``groupIdPrefix``: the reader tasks' consumers use ``<prefix>-<uuid>-executor`` as group.id (for
    group ACLs; they never join the group). Ignored when kafka.group.id is set, as in Spark."""
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    fetcher: FetcherChoice = "auto"
    metadata_timeout_ms: int = DEFAULT_METADATA_TIMEOUT_MS
    """Bound on each driver-side metadata and offset request: an unreachable broker fails within it."""
    commit_mode: CommitMode = "disabled"
    """When completed batches' offsets go back to the consumer group (see ``sparkafka.source.commits``)."""
    commit_interval_ms: int = 5_000
    metrics_file: str | None = None
    """Where the source runner writes its commit metrics; None means the default for the group."""
    max_event_time_drift_ms: int | None = None
    """``maxEventTimeDrift``: no batch reads a record this much or more past the slowest partition's event
    time (``source.alignment``); None: no alignment."""
    partition_idle_timeout_ms: int | None = None
    """``partitionIdleTimeout``: a partition with nothing to read that has had no new record to read for
    this long by the driver's clock does not hold the others back; None: never idle."""


def _parse_offsets_json(reader: OptionReader, key: str, what: str = "offset") -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23}}`` per partition: offsets (-2 earliest, -1 latest) or epoch-ms timestamps."""
    data = reader.get_json(key)
    example = '{"topic": {"0": 23, "1": -2}}' if what == "offset" else '{"topic": {"0": 1700000000000}}'
    shape = f"option {reader.name(key)} must look like {example}"
    if not isinstance(data, dict):
        raise ConfigError(shape)
    out: dict[TopicPartition, int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise ConfigError(f"{shape}; topic {topic!r} maps to {parts!r}")
        for partition, offset in parts.items():
            try:
                p = int(partition)
            except ValueError:
                raise ConfigError(f"{shape}; partition {partition!r} of {topic!r} is not a number") from None
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < EARLIEST:
                allowed = "" if what == "offset" else " epoch milliseconds"
                raise ConfigError(
                    f"{shape}; {what} {offset!r} of {topic}-{p} must be >= 0{allowed}, or -2 (earliest) / "
                    "-1 (latest)"
                )
            out[TopicPartition(str(topic), p)] = offset
    return out


def _parse_subscription(reader: OptionReader) -> Subscription:
    given = [k for k in ("subscribe", "subscribePattern", "assign") if reader.has(k)]
    if len(given) != 1:
        raise ConfigError(
            "set exactly one of the options subscribe (comma-separated topics), subscribePattern (a Java "
            'regex searched for in topic names) or assign (JSON such as {"topic": [0, 1]}); '
            f"got {', '.join(given) if given else 'none'}"
        )
    if given[0] == "subscribe":
        topics = tuple(t.strip() for t in (reader.get_str("subscribe") or "").split(",") if t.strip())
        if not topics:
            raise ConfigError("option subscribe lists no topic")
        return Subscription(topics=topics)
    if given[0] == "subscribePattern":
        pattern = reader.required("subscribePattern").strip()
        try:
            re.compile(java_regex(pattern))
        except JavaRegexError as e:
            raise ConfigError(
                f"option subscribePattern={pattern!r} uses Java regex syntax Python cannot express: {e}; "
                "write it without that construct"
            ) from None
        except re.error as e:
            raise ConfigError(f"option subscribePattern={pattern!r} is not a valid regex: {e}") from None
        return Subscription(pattern=pattern)
    data = reader.get_json("assign")
    if not isinstance(data, dict) or not all(
        isinstance(v, list) and all(isinstance(p, int) and p >= 0 for p in v) for v in data.values()
    ):
        raise ConfigError('option assign must look like {"topic": [0, 1]}')
    parts = tuple(sorted(TopicPartition(t, p) for t, ps in data.items() for p in ps))
    if not parts:
        raise ConfigError("option assign lists no partition")
    return Subscription(partitions=parts)


def parse_source_options(
    options: Mapping[str, Any], batch: bool = False, quiet: bool = False
) -> SourceOptions:
    """Validate the source's options; raise ConfigError naming the option and what is allowed.

    ``batch``: for ``spark.read`` (trigger limits dropped, offsets never committed). ``quiet``: for the data
    source's ``schema()``, which Spark asks for streams and batches alike: no warning about options a batch
    read ignores, and no refusal of what only a batch read refuses (a start at latest; ``reader()`` does).
    """
    reader = OptionReader(options, names(SOURCE_OPTIONS), "sparkafka source", client="consumer")
    kafka, reset = _kafka_settings(reader)
    group_id = kafka.get("group.id") or None
    subscription = _parse_subscription(reader)
    startup, specific, timestamp, timestamps = _startup(reader, group_id, batch, batch_only_checks=not quiet)
    ending, ending_ts, ending_by_ts = _ending(reader, batch)
    max_records = _alias_int(reader, "maxRecordsPerTrigger", "maxOffsetsPerTrigger", minimum=1)
    min_offsets = reader.optional_int("minOffsetsPerTrigger", minimum=0)
    if min_offsets is not None and max_records is not None and min_offsets > max_records:
        raise ConfigError(
            f"option minOffsetsPerTrigger={min_offsets} is above the maximum per micro-batch "
            f"({max_records}); set it at or below maxOffsetsPerTrigger"
        )
    if batch and not quiet and (max_records is not None or min_offsets is not None):
        log.warning("maxOffsetsPerTrigger and minOffsetsPerTrigger are ignored by a batch read (spark.read)")
    split = {k: reader.optional_int(k, minimum=1) for k in ("minPartitions", "maxRecordsPerPartition")}
    if any(v is not None for v in split.values()):
        clash = [k for k in ("parallelism", "assignmentStrategy") if reader.has(k)]
        if clash:
            given = [k for k, v in split.items() if v is not None]
            raise ConfigError(
                f"options {' and '.join(given)} (Spark's split of offset ranges into tasks) and "
                f"{' and '.join(clash)} (Flink's partition-to-task assigner) conflict: set only one kind"
            )
    default_mode: CommitMode = "on_checkpoint" if group_id else "disabled"
    commit_mode = reader.choice("offsetCommitMode", COMMIT_MODES, default_mode)
    if commit_mode != "disabled" and not group_id:
        raise ConfigError(
            f"offsetCommitMode={commit_mode} needs option kafka.group.id (the consumer group to commit to); "
            "set it, or use offsetCommitMode=disabled"
        )
    # Spark's driver-side lookup retries: sparkafka retries retriable errors with backoff within
    # metadataTimeoutMs instead, which outlasts Spark's default 3 attempts 1 s apart. Checked, then kept.
    reader.optional_int("fetchOffset.numRetries", minimum=0)
    reader.optional_int("fetchOffset.retryIntervalMs", minimum=0)
    drift, idle_timeout = _event_time(reader, batch, quiet)
    check_librdkafka_settings(kafka)  # the values, after our own checks of those we interpret

    return SourceOptions(
        kafka=kafka,
        subscription=subscription,
        group_id=group_id,
        startup=startup,
        specific_offsets=specific,
        starting_timestamp=timestamp,
        starting_timestamps=timestamps,
        timestamp_strategy=reader.choice("startingOffsetsByTimestampStrategy", TIMESTAMP_STRATEGIES, "error"),
        ending_offsets=ending,
        ending_timestamp=ending_ts,
        ending_timestamps=ending_by_ts,
        offset_reset=reset,
        discovery_interval_ms=reader.get_int("partitionDiscoveryIntervalMs", 0, minimum=-1),
        parallelism=reader.optional_int("parallelism", minimum=1),
        strategy=reader.choice("assignmentStrategy", STRATEGIES, "flink"),
        min_partitions=split["minPartitions"],
        max_records_per_partition=split["maxRecordsPerPartition"],
        max_records_per_trigger=None if batch else max_records,
        min_offsets_per_trigger=None if batch else min_offsets,
        max_trigger_delay_ms=_duration_ms(reader, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS),
        reader_group_prefix=None if group_id else reader.get_str("groupIdPrefix"),
        fail_on_data_loss=reader.get_bool("failOnDataLoss", True),
        include_headers=reader.get_bool("includeHeaders", False),
        poll_timeout_ms=_alias_int(reader, "pollTimeoutMs", "kafkaConsumer.pollTimeoutMs", minimum=1)
        or network_timeout_ms(),
        fetcher=reader.choice("fetcher", FETCHERS, "auto"),
        metadata_timeout_ms=reader.get_int("metadataTimeoutMs", DEFAULT_METADATA_TIMEOUT_MS, minimum=1),
        commit_mode="disabled" if batch else commit_mode,
        commit_interval_ms=reader.get_int("offsetCommitIntervalMs", 5_000, minimum=0),
        metrics_file=reader.get_str("metricsFile"),
        max_event_time_drift_ms=drift,
        partition_idle_timeout_ms=idle_timeout,
    )


def _event_time(reader: OptionReader, batch: bool, quiet: bool) -> tuple[int | None, int | None]:
    """(``maxEventTimeDrift``, ``partitionIdleTimeout``) in ms; both None for a batch read (a warning)."""
    drift = _duration_ms(reader, "maxEventTimeDrift", None, positive=True)
    idle = _duration_ms(reader, "partitionIdleTimeout", None, positive=True)
    if idle is not None and drift is None:
        raise ConfigError(
            "option partitionIdleTimeout applies to event-time alignment only: set maxEventTimeDrift too "
            "(such as '5 minutes'), or leave partitionIdleTimeout out"
        )
    if batch and drift is not None:
        if not quiet:
            log.warning("maxEventTimeDrift and partitionIdleTimeout are ignored by a batch read (spark.read)")
        return None, None
    return drift, idle


def _alias_int(reader: OptionReader, name: str, alias: str, minimum: int) -> int | None:
    """The whole number given under ``name`` or its alias (Spark's name); both given is an error."""
    if reader.has(name) and reader.has(alias):
        raise ConfigError(f"options {name} and {alias} are aliases: set only one")
    value = reader.optional_int(name, minimum=minimum)
    return value if value is not None else reader.optional_int(alias, minimum=minimum)


def network_timeout_ms() -> int:
    """``spark.network.timeout`` in ms as ``NETWORK_TIMEOUT_ENV`` gives it (Spark's time string: a bare
    number is seconds), else Spark's default 120 s. Read where the options are parsed (a Python worker)."""
    text = os.environ.get(NETWORK_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_POLL_TIMEOUT_MS
    ms = int(float(text) * 1000) if re.fullmatch(r"\d+(\.\d+)?", text) else duration_ms(text)
    if ms is None or ms <= 0:
        log.warning("spark.network.timeout=%r is not a duration: pollTimeoutMs defaults to 120000", text)
        return DEFAULT_POLL_TIMEOUT_MS
    return ms


def duration_ms(text: str) -> int | None:
    """A duration as Spark writes it, in ms: ``15m``, ``30s``, ``500ms`` (a bare number is ms), or an
    interval as ``withWatermark`` takes it (``10 minutes``, ``1 hour 30 minutes``, ``interval 2 hours``).
    None when ``text`` is not one."""
    words = text.lower().split()
    if words[:1] == ["interval"]:
        words = words[1:]
    joined = " ".join(words)
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", joined)
    if (
        re.fullmatch(r"(\s*\d+(?:\.\d+)?\s*[a-z]*\s*)+", joined) is None
        or any(unit not in _TIME_UNITS_MS for _, unit in parts if unit)
        or (len(parts) > 1 and any(not unit for _, unit in parts))
    ):
        return None
    return int(sum(float(n) * _TIME_UNITS_MS[unit or "ms"] for n, unit in parts))


@overload
def _duration_ms(reader: OptionReader, key: str, default: int, *, positive: bool = False) -> int: ...
@overload
def _duration_ms(reader: OptionReader, key: str, default: None, *, positive: bool = False) -> int | None: ...
def _duration_ms(
    reader: OptionReader, key: str, default: int | None, *, positive: bool = False
) -> int | None:
    """Option ``key`` as a duration in ms (``duration_ms``); ``default`` when it is not set."""
    text = reader.get_str(key)
    if text is None:
        return default
    ms = duration_ms(text)
    if ms is None:
        raise ConfigError(
            f"option {reader.name(key)}={text!r} is not a duration; use a number with a unit, such as "
            "'10 minutes' (as withWatermark takes it), 15m, 30s or 500ms"
        )
    if positive and ms <= 0:
        raise ConfigError(f"option {reader.name(key)}={text!r} must be longer than 0 ms")
    return ms


def _kafka_settings(reader: OptionReader) -> tuple[dict[str, str], OffsetReset]:
    """The ``kafka.*`` settings for the reader tasks' consumers, and ``auto.offset.reset`` taken out."""
    kafka = reader.kafka()
    if not kafka.get("bootstrap.servers"):
        raise ConfigError("option kafka.bootstrap.servers is required (host:port[,host:port...])")
    if kafka.get("enable.auto.commit", "false").lower() == "true":
        log.warning(
            "kafka.enable.auto.commit=true is ignored: sparkafka keeps offsets in Spark's checkpoint "
            "(the framework owns offsets)"
        )
    kafka["enable.auto.commit"] = "false"
    kafka.setdefault("isolation.level", "read_committed")
    if kafka["isolation.level"] not in ("read_committed", "read_uncommitted"):
        raise ConfigError(
            f"option kafka.isolation.level={kafka['isolation.level']!r}: "
            "use read_committed or read_uncommitted"
        )
    reset_text = kafka.pop("auto.offset.reset", "latest").lower()
    reset = next((r for r in OFFSET_RESETS if r == reset_text), None)
    if reset is None:
        raise ConfigError(f"option kafka.auto.offset.reset={reset_text!r}: use earliest, latest or error")
    return kafka, reset


def _startup(
    reader: OptionReader, group_id: str | None, batch: bool, batch_only_checks: bool = True
) -> tuple[StartupMode, dict[TopicPartition, int], int | None, dict[TopicPartition, int]]:
    """(startup mode, specific offsets, starting timestamp, timestamps per partition).

    Spark's precedence, with no conflict error: ``startingTimestamp``, then ``startingOffsetsByTimestamp``,
    then ``startingOffsets``; the options it overrides are logged as ignored.
    """
    given = [
        k for k in ("startingTimestamp", "startingOffsetsByTimestamp", "startingOffsets") if reader.has(k)
    ]
    if len(given) > 1:
        log.warning("%s takes precedence over %s (Spark's order)", given[0], ", ".join(given[1:]))
    specific: dict[TopicPartition, int] = {}
    if given and given[0] == "startingTimestamp":
        return "timestamp", specific, reader.get_int("startingTimestamp", 0, minimum=EARLIEST), {}
    if given and given[0] == "startingOffsetsByTimestamp":
        return (
            "timestamps",
            specific,
            None,
            _parse_offsets_json(reader, "startingOffsetsByTimestamp", "timestamp"),
        )
    starting = reader.get_str("startingOffsets")
    startup: StartupMode
    if starting is None:
        # Streaming with a group starts from it (Flink's GROUP_OFFSETS); a batch read starts at earliest
        # as in Spark, whatever kafka.group.id says (it commits nothing).
        startup = "earliest" if batch else ("group" if group_id else "latest")
    elif starting.lower() in ("group", "earliest", "latest"):
        startup = NAMED_STARTS[starting.lower()]
    elif starting.lstrip().startswith("{"):
        startup = "specific"
        specific = _parse_offsets_json(reader, "startingOffsets")
    else:
        raise ConfigError(
            f"option startingOffsets={starting!r} is not allowed; use group, earliest, latest, "
            'or JSON such as {"topic": {"0": 23}}'
        )
    if startup == "group" and not group_id:
        raise ConfigError(
            "startingOffsets=group needs option kafka.group.id (the consumer group to start from)"
        )
    if batch and batch_only_checks and startup == "latest":
        raise ConfigError(
            "option startingOffsets=latest is not allowed in a batch read (spark.read), as in Spark: "
            "it would read nothing; use earliest, group, or JSON offsets"
        )
    at_latest = sorted(tp for tp, o in specific.items() if o == LATEST)
    if batch and batch_only_checks and at_latest:
        raise ConfigError(
            f"option startingOffsets gives -1 (latest) for {', '.join(map(str, at_latest))}, which a batch "
            "read (spark.read) does not allow, as in Spark; use -2 (earliest) or an offset"
        )
    return startup, specific, None, {}


def _ending(
    reader: OptionReader, batch: bool
) -> tuple[dict[TopicPartition, int] | None, int | None, dict[TopicPartition, int] | None]:
    """A batch read's end: (endingOffsets, endingTimestamp, endingOffsetsByTimestamp); None for latest.

    Spark's precedence: ``endingTimestamp``, then ``endingOffsetsByTimestamp``, then ``endingOffsets``.
    A streaming read refuses endingOffsets and endingOffsetsByTimestamp and ignores endingTimestamp, as
    Spark does.
    """
    if not batch:
        for key in ("endingOffsets", "endingOffsetsByTimestamp"):
            if reader.has(key):
                raise ConfigError(f"option {key} is for batch reads (spark.read) only")
        if reader.has("endingTimestamp"):
            log.warning("endingTimestamp is ignored by a streaming read (as in Spark)")
        return None, None, None
    if reader.has("endingTimestamp"):
        return None, reader.get_int("endingTimestamp", 0, minimum=EARLIEST), None
    if reader.has("endingOffsetsByTimestamp"):
        return None, None, _parse_offsets_json(reader, "endingOffsetsByTimestamp", "timestamp")
    ending: dict[TopicPartition, int] | None = None
    ending_text = reader.get_str("endingOffsets")
    if ending_text is not None:
        if ending_text.lower() == "latest":
            ending = None
        elif ending_text.lstrip().startswith("{"):
            ending = _parse_offsets_json(reader, "endingOffsets")
            if any(v == EARLIEST for v in ending.values()):
                raise ConfigError("option endingOffsets cannot use -2 (earliest)")
        else:
            raise ConfigError(f"option endingOffsets={ending_text!r}: use latest or a JSON offsets map")
    return ending, None, None
