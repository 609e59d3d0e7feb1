"""The source's options, parsed once into a frozen dataclass (names are public API; see the README)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from sparkafka.clientconf import check_librdkafka_settings
from sparkafka.errors import ConfigError
from sparkafka.options import DEFAULT_METADATA_TIMEOUT_MS, OptionReader
from sparkafka.structs import INTERNAL_TOPIC_PREFIX, TopicPartition

__all__ = [
    "AssignmentStrategy",
    "SourceOptions",
    "StartupMode",
    "Subscription",
    "parse_source_options",
]

log = logging.getLogger(__name__)

AssignmentStrategy = Literal["flink", "range", "roundrobin", "sticky"]
StartupMode = Literal["group", "earliest", "latest", "specific", "timestamp"]
OffsetReset = Literal["earliest", "latest", "error"]
CommitMode = Literal["on_checkpoint", "periodic", "disabled"]
STRATEGIES: tuple[AssignmentStrategy, ...] = get_args(AssignmentStrategy)
OFFSET_RESETS: tuple[OffsetReset, ...] = get_args(OffsetReset)
COMMIT_MODES: tuple[CommitMode, ...] = get_args(CommitMode)
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
    "endingOffsets",
    "partitionDiscoveryIntervalMs",
    "parallelism",
    "assignmentStrategy",
    "maxRecordsPerTrigger",
    "maxOffsetsPerTrigger",
    "failOnDataLoss",
    "includeHeaders",
    "pollTimeoutMs",
    "metadataTimeoutMs",
    "offsetCommitMode",
    "offsetCommitIntervalMs",
    "metricsFile",
)


SPARK_KAFKA_INSTEAD = {
    "minOffsetsPerTrigger": "sparkafka sets no minimum per micro-batch; use a processing-time trigger "
    "interval to let records accumulate",
    "maxTriggerDelay": "sparkafka sets no minimum per micro-batch (minOffsetsPerTrigger), so there is no "
    "delay to bound; use a processing-time trigger interval",
    "startingOffsetsByTimestamp": "use startingTimestamp (one epoch-ms timestamp for every partition)",
    "startingOffsetsByTimestampStrategy": "not needed: with startingTimestamp, a partition without a record "
    "at or after it starts at latest (Spark's strategy latest, Flink's behaviour)",
    "endingOffsetsByTimestamp": "use endingOffsets (JSON offsets per partition, or latest)",
    "endingTimestamp": "use endingOffsets (JSON offsets per partition, or latest)",
    "groupIdPrefix": "sparkafka's readers join no consumer group; set kafka.group.id to commit offsets to a "
    "group (offsetCommitMode) and to start from its offsets",
    "minPartitions": "use parallelism (reader tasks per micro-batch); sparkafka never splits a Kafka "
    "partition across tasks",
    "kafkaConsumer.pollTimeoutMs": "use pollTimeoutMs",
    "fetchOffset.numRetries": "retries of offset lookups are bounded by metadataTimeoutMs",
    "fetchOffset.retryIntervalMs": "retries of offset lookups are bounded by metadataTimeoutMs",
}
"""Spark's Kafka source options whose meaning sparkafka does not share, each with what to use instead."""


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
    ending_offsets: Mapping[TopicPartition, int] | None = None
    """Batch reads only; None means latest."""
    offset_reset: OffsetReset = "latest"
    discovery_interval_ms: int = 30_000
    parallelism: int | None = None
    strategy: AssignmentStrategy = "flink"
    max_records_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    metadata_timeout_ms: int = DEFAULT_METADATA_TIMEOUT_MS
    """Bound on each driver-side metadata and offset request: an unreachable broker fails within it."""
    commit_mode: CommitMode = "disabled"
    """When completed batches' offsets go back to the consumer group (see ``sparkafka.source.commits``)."""
    commit_interval_ms: int = 5_000
    metrics_file: str | None = None
    """Where the source runner writes its commit metrics; None means the default for the group."""


def _parse_offsets_json(reader: OptionReader, key: str) -> dict[TopicPartition, int]:
    data = reader.get_json(key)
    shape = f'option {reader.name(key)} must look like {{"topic": {{"0": 23, "1": -2}}}}'
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
                raise ConfigError(
                    f"{shape}; offset {offset!r} of {topic}-{p} must be >= 0, or -2 (earliest) / -1 (latest)"
                )
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


def parse_source_options(options: Mapping[str, Any], batch: bool = False) -> SourceOptions:
    """Validate the source's options; raise ConfigError naming the option and what is allowed."""
    reader = OptionReader(options, SOURCE_OPTIONS, "sparkafka source", SPARK_KAFKA_INSTEAD)
    kafka, reset = _kafka_settings(reader)
    group_id = kafka.get("group.id") or None
    subscription = _parse_subscription(reader)
    startup, specific, timestamp = _startup(reader, group_id, batch)
    ending = _ending(reader, batch)
    if reader.has("maxRecordsPerTrigger") and reader.has("maxOffsetsPerTrigger"):
        raise ConfigError("options maxRecordsPerTrigger and maxOffsetsPerTrigger are aliases: set only one")
    max_records = reader.optional_int("maxRecordsPerTrigger", minimum=1)
    if max_records is None:
        max_records = reader.optional_int("maxOffsetsPerTrigger", minimum=1)
    default_mode: CommitMode = "on_checkpoint" if group_id else "disabled"
    commit_mode = reader.choice("offsetCommitMode", COMMIT_MODES, default_mode)
    if commit_mode != "disabled" and not group_id:
        raise ConfigError(
            f"offsetCommitMode={commit_mode} needs option kafka.group.id (the consumer group to commit to); "
            "set it, or use offsetCommitMode=disabled"
        )
    check_librdkafka_settings(kafka)  # the values, after our own checks of those we interpret

    return SourceOptions(
        kafka=kafka,
        subscription=subscription,
        group_id=group_id,
        startup=startup,
        specific_offsets=specific,
        starting_timestamp=timestamp,
        ending_offsets=ending,
        offset_reset=reset,
        discovery_interval_ms=reader.get_int("partitionDiscoveryIntervalMs", 30_000, minimum=-1),
        parallelism=reader.optional_int("parallelism", minimum=1),
        strategy=reader.choice("assignmentStrategy", STRATEGIES, "flink"),
        max_records_per_trigger=max_records,
        fail_on_data_loss=reader.get_bool("failOnDataLoss", True),
        include_headers=reader.get_bool("includeHeaders", False),
        poll_timeout_ms=reader.get_int("pollTimeoutMs", 120_000, minimum=1),
        metadata_timeout_ms=reader.get_int("metadataTimeoutMs", DEFAULT_METADATA_TIMEOUT_MS, minimum=1),
        commit_mode="disabled" if batch else commit_mode,
        commit_interval_ms=reader.get_int("offsetCommitIntervalMs", 5_000, minimum=0),
        metrics_file=reader.get_str("metricsFile"),
    )


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
) -> tuple[StartupMode, dict[TopicPartition, int], int | None]:
    """(startup mode, specific offsets, starting timestamp) from startingOffsets / startingTimestamp."""
    has_ts = reader.has("startingTimestamp")
    starting = reader.get_str("startingOffsets")
    if has_ts and starting is not None:
        raise ConfigError("options startingOffsets and startingTimestamp conflict: set only one")
    specific: dict[TopicPartition, int] = {}
    timestamp: int | None = None
    startup: StartupMode
    if has_ts:
        startup = "timestamp"
        timestamp = reader.get_int("startingTimestamp", 0, minimum=0)
    elif starting is None:
        startup = "group" if group_id else ("earliest" if batch else "latest")
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
    return startup, specific, timestamp


def _ending(reader: OptionReader, batch: bool) -> dict[TopicPartition, int] | None:
    """The parsed ``endingOffsets`` of a batch read (exclusive ends, -1 for latest); None for latest."""
    ending: dict[TopicPartition, int] | None = None
    ending_text = reader.get_str("endingOffsets")
    if ending_text is not None:
        if not batch:
            raise ConfigError("option endingOffsets is for batch reads (spark.read) only")
        if ending_text.lower() == "latest":
            ending = None
        elif ending_text.lstrip().startswith("{"):
            ending = _parse_offsets_json(reader, "endingOffsets")
            if any(v == EARLIEST for v in ending.values()):
                raise ConfigError("option endingOffsets cannot use -2 (earliest)")
        else:
            raise ConfigError(f"option endingOffsets={ending_text!r}: use latest or a JSON offsets map")
    return ending
