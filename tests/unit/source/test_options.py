from __future__ import annotations

import contextlib
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkafka.errors import ConfigError, SparkafkaError
from sparkafka.source.options import parse_source_options
from sparkafka.structs import TopicPartition

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a,b"}


def parse(**extra: Any) -> Any:
    return parse_source_options({**BASE, **extra})


def test_defaults_without_group() -> None:
    o = parse()
    assert o.subscription.topics == ("a", "b")
    assert o.startup == "latest"
    assert o.kafka["enable.auto.commit"] == "false"
    assert o.kafka["isolation.level"] == "read_committed"
    assert o.strategy == "flink"
    assert o.discovery_interval_ms == 0  # every trigger, as Spark lists partitions
    assert o.fail_on_data_loss is True


def test_group_is_default_startup_with_group_id() -> None:
    assert parse(**{"kafka.group.id": "g"}).startup == "group"


def test_keys_are_case_insensitive() -> None:
    o = parse_source_options(
        {"kafka.bootstrap.servers": "h:1", "subscribepattern": "t-.*", "MAXRECORDSPERTRIGGER": "10"}
    )
    assert o.subscription.pattern == "t-.*"
    assert o.max_records_per_trigger == 10


def test_auto_commit_is_forced_off_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        o = parse(**{"kafka.enable.auto.commit": "true"})
    assert o.kafka["enable.auto.commit"] == "false"
    assert "enable.auto.commit=true is ignored" in caplog.text


def test_unknown_option_lists_valid_ones() -> None:
    with pytest.raises(
        ConfigError,
        match=r"unknown option\(s\).*: startingOfset \(did you mean startingOffsets\?\)$",  # no list dumped
    ):
        parse(startingOfset="earliest")  # shown as spelled (a pipeline file keeps the user's case)
    with pytest.raises(ConfigError, match=r"unknown option\(s\) for the sparkafka source: zzz\. Valid"):
        parse(zzz="1")  # nothing close: no guess


def test_every_spark_kafka_source_option_is_accepted() -> None:
    o = parse(
        minPartitions="10",
        maxRecordsPerPartition="500",
        minOffsetsPerTrigger="100",
        maxTriggerDelay="30s",
        maxOffsetsPerTrigger="1000",
        startingOffsetsByTimestamp='{"a": {"0": 1000, "1": 2000}}',
        startingOffsetsByTimestampStrategy="latest",
        endingTimestamp="5",  # a streaming read ignores it, as Spark does
        groupIdPrefix="acl-ok",
        **{
            "kafkaConsumer.pollTimeoutMs": "5000",
            "fetchOffset.numRetries": "5",
            "fetchOffset.retryIntervalMs": "20",
        },
    )
    assert (o.min_partitions, o.max_records_per_partition) == (10, 500)
    assert (o.min_offsets_per_trigger, o.max_trigger_delay_ms, o.max_records_per_trigger) == (
        100,
        30_000,
        1000,
    )
    assert o.startup == "timestamps"
    assert o.starting_timestamps == {TopicPartition("a", 0): 1000, TopicPartition("a", 1): 2000}
    assert o.timestamp_strategy == "latest"
    assert (o.reader_group_prefix, o.poll_timeout_ms, o.ending_timestamp) == ("acl-ok", 5000, None)


def test_spark_defaults() -> None:
    o = parse(startingTimestamp="5")
    assert (o.timestamp_strategy, o.max_trigger_delay_ms, o.poll_timeout_ms) == (
        "error",
        15 * 60_000,
        120_000,
    )
    assert parse(groupIdPrefix="p", **{"kafka.group.id": "g"}).reader_group_prefix is None  # as in Spark


def test_spark_precedence_among_starting_options(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        o = parse(
            startingOffsets="earliest", startingTimestamp="5", startingOffsetsByTimestamp='{"a": {"0": 1}}'
        )
    assert (o.startup, o.starting_timestamp) == ("timestamp", 5)
    assert (
        "startingTimestamp takes precedence over startingOffsetsByTimestamp, startingOffsets" in caplog.text
    )
    assert (
        parse(startingOffsets="earliest", startingOffsetsByTimestamp='{"a": {"0": 1}}').startup
        == "timestamps"
    )


def test_batch_ending_by_timestamp_and_its_precedence() -> None:
    o = parse_source_options({**BASE, "endingTimestamp": "7", "endingOffsets": "latest"}, batch=True)
    assert (o.ending_timestamp, o.ending_timestamps, o.ending_offsets) == (7, None, None)
    o = parse_source_options({**BASE, "endingOffsetsByTimestamp": '{"a": {"1": 9}}'}, batch=True)
    assert o.ending_timestamps == {TopicPartition("a", 1): 9}


def test_batch_reads_ignore_the_trigger_limits(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        o = parse_source_options(
            {**BASE, "maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "2"}, batch=True
        )
    assert (o.max_records_per_trigger, o.min_offsets_per_trigger) == (None, None)
    assert "ignored by a batch read" in caplog.text


@pytest.mark.parametrize(
    ("duration", "ms"), [("15m", 900_000), ("30s", 30_000), ("500ms", 500), ("250", 250), ("2h", 7_200_000)]
)
def test_max_trigger_delay_reads_spark_durations(duration: str, ms: int) -> None:
    assert parse(maxTriggerDelay=duration).max_trigger_delay_ms == ms


@pytest.mark.parametrize(
    ("duration", "ms"),
    [
        ("5 minutes", 300_000),  # as withWatermark writes it
        ("5m", 300_000),  # as Spark's options write durations
        ("1 hour 30 minutes", 5_400_000),
        ("interval 10 seconds", 10_000),
        ("1 MINUTE", 60_000),
        ("1.5 hours", 5_400_000),
    ],
)
def test_event_time_alignment_takes_watermark_and_spark_durations(duration: str, ms: int) -> None:
    o = parse(maxEventTimeDrift=duration, partitionIdleTimeout=duration)
    assert (o.max_event_time_drift_ms, o.partition_idle_timeout_ms) == (ms, ms)
    assert parse().max_event_time_drift_ms is None  # unset: no alignment, today's behaviour


def test_batch_reads_ignore_event_time_alignment(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        o = parse_source_options({**BASE, "maxEventTimeDrift": "5m"}, batch=True)
    assert o.max_event_time_drift_ms is None
    assert "maxEventTimeDrift and partitionIdleTimeout are ignored by a batch read" in caplog.text


def test_spark_kafka_options_with_the_same_meaning_are_accepted() -> None:
    o = parse(maxOffsetsPerTrigger="10", failOnDataLoss="false", includeHeaders="true")
    assert (o.max_records_per_trigger, o.fail_on_data_loss, o.include_headers) == (10, False, True)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": None}, "exactly one of the options subscribe"),
        ({"subscribePattern": "x"}, "exactly one of the options subscribe"),
        ({"kafka.bootstrap.servers": ""}, "kafka.bootstrap.servers is required"),
        ({"startingOffsets": "newest"}, "startingOffsets='newest' is not allowed"),
        ({"startingOffsets": "{bad"}, "startingOffsets is not valid JSON"),
        ({"startingOffsets": '{"a": {"x": 1}}'}, "partition 'x'"),
        ({"startingOffsets": '{"a": {"0": -5}}'}, "must be >= 0"),
        ({"startingOffsetsByTimestamp": '{"a": {"0": -3}}'}, "timestamp -3 of a-0 must be >= 0 epoch"),
        ({"startingTimestamp": "-3"}, "startingTimestamp=-3 must be >= -2"),
        ({"startingOffsetsByTimestampStrategy": "earliest"}, "use one of: error, latest"),
        ({"endingOffsetsByTimestamp": '{"a": {"0": 1}}'}, "batch reads"),
        ({"minPartitions": "0"}, "minPartitions=0 must be >= 1"),
        ({"maxRecordsPerPartition": "x"}, "maxRecordsPerPartition='x' must be a whole number"),
        ({"minPartitions": "4", "parallelism": "2"}, "minPartitions .* and parallelism .* conflict"),
        ({"maxRecordsPerPartition": "4", "assignmentStrategy": "range"}, "conflict: set only one kind"),
        ({"minOffsetsPerTrigger": "50", "maxOffsetsPerTrigger": "10"}, "above the maximum per micro-batch"),
        ({"maxTriggerDelay": "soon"}, "maxTriggerDelay='soon' is not a duration"),
        ({"maxTriggerDelay": "5 weeks"}, "is not a duration"),
        ({"pollTimeoutMs": "5", "kafkaConsumer.pollTimeoutMs": "5"}, "aliases"),
        ({"fetchOffset.numRetries": "-1"}, "must be >= 0"),
        ({"startingTimestamp": "soon"}, "startingTimestamp='soon' must be a whole number"),
        ({"startingOffsets": "group"}, "needs option kafka.group.id"),
        ({"partitionDiscoveryIntervalMs": "-2"}, "must be >= -1"),
        ({"parallelism": "0"}, "parallelism=0 must be >= 1"),
        ({"assignmentStrategy": "random"}, "use one of: flink, range, roundrobin, sticky"),
        ({"maxRecordsPerTrigger": "5", "maxOffsetsPerTrigger": "5"}, "aliases"),
        ({"failOnDataLoss": "maybe"}, "must be true or false"),
        ({"kafka.auto.offset.reset": "smallest"}, "use earliest, latest or error"),
        ({"kafka.isolation.level": "dirty"}, "read_committed or read_uncommitted"),
        ({"endingOffsets": "latest"}, "batch reads"),
        ({"maxEventTimeDrift": "0 minutes"}, "maxEventTimeDrift='0 minutes' must be longer than 0 ms"),
        ({"maxEventTimeDrift": "five minutes"}, "maxEventTimeDrift='five minutes' is not a duration"),
        ({"maxEventTimeDrift": "5 minutes 3"}, "is not a duration"),
        ({"partitionIdleTimeout": "1m"}, "partitionIdleTimeout applies to event-time alignment only"),
        ({"maxEventTimeDrift": "1m", "partitionIdleTimeout": "-1m"}, "partitionIdleTimeout='-1m' is not a"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, Any], message: str) -> None:
    raw = {**BASE, **options}
    raw = {k: v for k, v in raw.items() if v is not None}
    with pytest.raises(ConfigError, match=message):
        parse_source_options(raw)


def test_specific_offsets_and_assign() -> None:
    o = parse_source_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "assign": '{"a": [1, 0]}',
            "startingOffsets": '{"a": {"0": 23, "1": -2}}',
        }
    )
    assert o.subscription.partitions == (TopicPartition("a", 0), TopicPartition("a", 1))
    assert o.startup == "specific"
    assert o.specific_offsets == {TopicPartition("a", 0): 23, TopicPartition("a", 1): -2}


def test_batch_ending_offsets_and_default_earliest() -> None:
    o = parse_source_options({**BASE, "endingOffsets": '{"a": {"0": 5}}'}, batch=True)
    assert o.startup == "earliest"
    assert o.ending_offsets == {TopicPartition("a", 0): 5}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"startingOffsets": "LATEST"},
            r"startingOffsets=latest is not allowed in a batch read \(spark.read\)",
        ),
        (
            {"startingOffsets": '{"b": {"0": 4}, "a": {"1": -1, "0": -1}}'},
            "-1 \\(latest\\) for a-0, a-1, which a",
        ),
    ],
)
def test_a_batch_read_refuses_to_start_at_latest_as_spark_does(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_source_options({**BASE, **options}, batch=True)
    assert parse_source_options({**BASE, **options}).startup in ("latest", "specific")  # a stream may
    # The schema lookup at load() does not know a stream from a batch: the batch reader refuses instead.
    assert parse_source_options({**BASE, **options}, batch=True, quiet=True).startup in ("latest", "specific")


def test_pattern_must_compile() -> None:
    with pytest.raises(ConfigError, match="not a valid regex"):
        parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribePattern": "("})


KEYS = st.sampled_from(
    [
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "startingTimestamp",
        "parallelism",
        "assignmentStrategy",
        "maxRecordsPerTrigger",
        "failOnDataLoss",
        "partitionDiscoveryIntervalMs",
        "kafka.group.id",
        "kafka.auto.offset.reset",
        "bogus",
        "endingOffsets",
        "includeHeaders",
    ]
)
VALUES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["earliest", "latest", "group", "true", "-1", "0", "7", '{"a": {"0": 1}}', '{"a": [0]}']),
)


@given(st.dictionaries(KEYS, VALUES, max_size=6), st.booleans())
def test_random_option_maps_accept_or_raise_our_error(options: dict[str, str], batch: bool) -> None:
    raw = {"kafka.bootstrap.servers": "h:1", **options}
    with contextlib.suppress(SparkafkaError):
        parse_source_options(raw, batch=batch)


def test_commit_mode_defaults_follow_the_group_id() -> None:
    assert parse().commit_mode == "disabled"
    with_group = parse(**{"kafka.group.id": "g"})
    assert with_group.commit_mode == "on_checkpoint"
    assert with_group.commit_interval_ms == 5_000
    periodic = parse(
        **{"kafka.group.id": "g", "offsetCommitMode": "PERIODIC", "offsetCommitIntervalMs": "250"}
    )
    assert (periodic.commit_mode, periodic.commit_interval_ms) == ("periodic", 250)
    assert parse(**{"kafka.group.id": "g", "offsetCommitMode": "disabled"}).commit_mode == "disabled"


def test_commit_mode_errors_name_the_option() -> None:
    with pytest.raises(ConfigError, match=r"offsetCommitMode=on_checkpoint needs option kafka.group.id"):
        parse(offsetCommitMode="on_checkpoint")
    with pytest.raises(ConfigError, match=r"offsetCommitMode='sometimes' is not allowed.*on_checkpoint"):
        parse(**{"kafka.group.id": "g", "offsetCommitMode": "sometimes"})
    with pytest.raises(ConfigError, match=r"offsetCommitIntervalMs=-5 must be >= 0"):
        parse(**{"kafka.group.id": "g", "offsetCommitIntervalMs": "-5"})
    # Batch reads never commit (Spark's schema() call parses with batch=True, so this is not an error).
    batch = parse_source_options({**BASE, "kafka.group.id": "g", "offsetCommitMode": "periodic"}, batch=True)
    assert batch.commit_mode == "disabled"


def test_java_client_names_with_a_librdkafka_twin_are_renamed() -> None:
    o = parse(**{"kafka.fetch.max.wait.ms": "50", "kafka.receive.buffer.bytes": "65536"})
    assert o.kafka["fetch.wait.max.ms"] == "50"
    assert o.kafka["socket.receive.buffer.bytes"] == "65536"
    assert "fetch.max.wait.ms" not in o.kafka
    with pytest.raises(
        ConfigError, match=r"librdkafka equivalent: kafka\.sasl\.jaas\.config \(librdkafka has no JAAS"
    ):
        parse(**{"kafka.sasl.jaas.config": "x"})


def test_group_id_prefix_names_the_reader_tasks_group_as_in_spark() -> None:
    from sparkafka.source.reader import KafkaStreamReader

    reader = KafkaStreamReader(parse(groupIdPrefix="acl-team"))
    group = reader._planner._reader_kafka["group.id"]
    assert group.startswith("acl-team-")
    assert group.endswith("-executor")
    assert "group.id" not in KafkaStreamReader(parse())._planner._reader_kafka  # the reader's default


def test_the_schema_lookup_does_not_warn_of_trigger_limits(caplog: pytest.LogCaptureFixture) -> None:
    # Spark asks the data source for its schema for readStream too: a stream's limits are not "ignored".
    with caplog.at_level(logging.WARNING):
        parse_source_options({**BASE, "maxOffsetsPerTrigger": "5"}, batch=True, quiet=True)
    assert "ignored by a batch read" not in caplog.text


def test_kafkas_negative_timestamps_and_zero_trigger_minimum_are_accepted_as_in_spark() -> None:
    o = parse(startingTimestamp="-2", minOffsetsPerTrigger="0", maxOffsetsPerTrigger="5")
    assert (o.starting_timestamp, o.min_offsets_per_trigger) == (-2, 0)
    o = parse(startingOffsetsByTimestamp='{"a": {"0": -1, "1": 5}}')
    assert o.starting_timestamps == {TopicPartition("a", 0): -1, TopicPartition("a", 1): 5}
    assert parse_source_options({**BASE, "endingTimestamp": "-1"}, batch=True).ending_timestamp == -1
    with pytest.raises(ConfigError, match="maxOffsetsPerTrigger=0 must be >= 1"):
        parse(maxOffsetsPerTrigger="0")  # Spark's query would never read a record


@pytest.mark.parametrize(
    ("network_timeout", "ms"),
    [
        (None, 120_000),
        ("800s", 800_000),
        ("300", 300_000),
        ("10min", 600_000),
        ("2h", 7_200_000),
        ("x", 120_000),
    ],
)
def test_poll_timeout_defaults_to_spark_network_timeout_as_in_spark(
    monkeypatch: pytest.MonkeyPatch, network_timeout: str | None, ms: int
) -> None:
    """Spark's time string: a bare number is seconds (spark.network.timeout is a seconds setting)."""
    from sparkafka.source.options import NETWORK_TIMEOUT_ENV

    if network_timeout is None:
        monkeypatch.delenv(NETWORK_TIMEOUT_ENV, raising=False)
    else:
        monkeypatch.setenv(NETWORK_TIMEOUT_ENV, network_timeout)
    assert parse().poll_timeout_ms == ms
    assert parse(**{"kafkaConsumer.pollTimeoutMs": "5000"}).poll_timeout_ms == 5000
