"""The source's options, parsed once into a frozen dataclass (names are public API; see the README)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, overload

from sparkafka.client.conf import check_librdkafka_settings
from sparkafka.errors import ConfigError
from sparkafka.options import DEFAULT_METADATA_TIMEOUT_MS, OptionReader
from sparkafka.structs import INTERNAL_TOPIC_PREFIX, TopicPartition

__all__ = [
    "AssignmentStrategy",
    "FetcherChoice",
    "SourceOptions",
    "StartupMode",
    "Subscription",
    "duration_ms",
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

SOURCE_OPTIONS = (
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingOffsets",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "partitionDiscoveryIntervalMs",
    "parallelism",
    "assignmentStrategy",
    "minPartitions",
    "maxRecordsPerPartition",
    "maxRecordsPerTrigger",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "failOnDataLoss",
    "includeHeaders",
    "groupIdPrefix",
    "pollTimeoutMs",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "metadataTimeoutMs",
    "offsetCommitMode",
    "offsetCommitIntervalMs",
    "metricsFile",
    "fetcher",
    "maxEventTimeDrift",
    "partitionIdleTimeout",
)
"""Every option of Spark's Kafka source is here with Spark's meaning (docs/spark-kafka-connector.md),
beside sparkafka's own (Flink's assigner, startup from the group, group commits)."""

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

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` belongs to this subscription (for a pattern: a full match).

        A pattern never matches sparkafka's internal topics: ``.*`` must not read the sink's intent logs.
        """
        if self.pattern is not None:
            internal = topic.startswith(INTERNAL_TOPIC_PREFIX)
            return not internal and re.fullmatch(self.pattern, topic) is not None
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
    discovery_interval_ms: int = 30_000
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
    poll_timeout_ms: int = 120_000
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
    """``partitionIdleTimeout``: a partition with nothing to read whose newest record is this much older
    than the newest of any partition does not hold the others back; None: never idle."""


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
            lowest = EARLIEST if what == "offset" else 0
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < lowest:
                allowed = ", or -2 (earliest) / -1 (latest)" if what == "offset" else " (epoch milliseconds)"
                raise ConfigError(f"{shape}; {what} {offset!r} of {topic}-{p} must be >= 0{allowed}")
            out[TopicPartition(str(topic), p)] = offset
    return out


def _parse_subscription(reader: OptionReader) -> Subscription:
    given = [k for k in ("subscribe", "subscribePattern", "assign") if reader.has(k)]
    if len(given) != 1:
        raise ConfigError(
            "set exactly one of the options subscribe (comma-separated topics), subscribePattern (a regex "
            'matched in full against topic names) or assign (JSON such as {"topic": [0, 1]}); '
            f"got {', '.join(given) if given else 'none'}"
        )
    if given[0] == "subscribe":
        topics = tuple(t.strip() for t in (reader.get_str("subscribe") or "").split(",") if t.strip())
        if not topics:
            raise ConfigError("option subscribe lists no topic")
        return Subscription(topics=topics)
    if given[0] == "subscribePattern":
        pattern = reader.required("subscribePattern")
        try:
            re.compile(pattern)
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

    ``batch``: for ``spark.read`` (trigger limits dropped, offsets never committed). ``quiet``: no warning
    about options a batch read ignores (the data source's ``schema()``, asked for streams and batches alike).
    """
    reader = OptionReader(options, SOURCE_OPTIONS, "sparkafka source", client="consumer")
    kafka, reset = _kafka_settings(reader)
    group_id = kafka.get("group.id") or None
    subscription = _parse_subscription(reader)
    startup, specific, timestamp, timestamps = _startup(reader, group_id, batch)
    ending, ending_ts, ending_by_ts = _ending(reader, batch)
    max_records = _alias_int(reader, "maxRecordsPerTrigger", "maxOffsetsPerTrigger", minimum=1)
    min_offsets = reader.optional_int("minOffsetsPerTrigger", minimum=1)
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
        discovery_interval_ms=reader.get_int("partitionDiscoveryIntervalMs", 30_000, minimum=-1),
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
        or 120_000,
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
    reader: OptionReader, group_id: str | None, batch: bool
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
        return "timestamp", specific, reader.get_int("startingTimestamp", 0, minimum=0), {}
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
        return None, reader.get_int("endingTimestamp", 0, minimum=0), None
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
