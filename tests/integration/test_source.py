"""The source against a real broker and a real SparkSession."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from pyspark.errors import StreamingQueryException

from tests.support.kafka import Kafka, produce
from tests.support.queries import memory_query, memory_values, read_values, run_to_parquet, source


def test_batch_read_earliest_to_latest_with_ending_offsets(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=3)
    values = produce(kafka_conf, topic, (f"v{i}" for i in range(90)), partitions=3)
    df = (
        spark.read.format("sparkafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    )
    rows = df.load().collect()
    assert sorted(r["value"].decode() for r in rows) == sorted(values)
    assert {r["timestampType"] for r in rows} == {0}
    assert all(r["key"].startswith(b"k") for r in rows)
    ending = df.option("endingOffsets", f'{{"{topic}": {{"0": 10, "1": 5, "2": -1}}}}').load()
    assert Counter(r["partition"] for r in ending.collect()) == {0: 10, 1: 5, 2: 30}


def test_streaming_earliest_reads_everything_once_with_headers(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], checkpoint: str
) -> None:
    topic = new_topic(partitions=2)
    values = produce(kafka_conf, topic, (f"h{i}" for i in range(40)), 2, headers=[("trace", b"abc")])
    df = source(spark, bootstrap, subscribe=topic, startingOffsets="earliest", includeHeaders="true")
    name = f"q_{uuid.uuid4().hex[:8]}"
    query = memory_query(df, name, checkpoint)
    try:
        query.processAllAvailable()
        rows = spark.sql(f"select value, headers from {name}").collect()
    finally:
        query.stop()
    assert sorted(r["value"] for r in rows) == sorted(values)
    assert all([(h["key"], bytes(h["value"])) for h in r["headers"]] == [("trace", b"abc")] for r in rows)


def test_latest_reads_only_new_records(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], checkpoint: str
) -> None:
    topic = new_topic(partitions=2)
    produce(kafka_conf, topic, (f"old{i}" for i in range(20)), 2)
    name = f"q_{uuid.uuid4().hex[:8]}"
    query = memory_query(
        source(spark, bootstrap, subscribe=topic, startingOffsets="latest"), name, checkpoint
    )
    try:
        query.processAllAvailable()
        new = produce(kafka_conf, topic, (f"new{i}" for i in range(10)), 2)
        query.processAllAvailable()
        assert sorted(memory_values(spark, name)) == sorted(new)
    finally:
        query.stop()


def _commit_group(conf: dict[str, str], group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False, "session.timeout.ms": 6000})
    consumer.commit(offsets=[CTopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    consumer.close()


def test_group_offsets_with_reset_fallback(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    produce(kafka_conf, topic, (f"g{i}" for i in range(20)), 2)  # 10 per partition: g0, g2, ... on 0
    group = f"grp-{uuid.uuid4().hex[:8]}"
    _commit_group(kafka_conf, group, {(topic, 0): 7})
    df = source(
        spark, bootstrap, subscribe=topic, **{"kafka.group.id": group, "kafka.auto.offset.reset": "earliest"}
    )
    run_to_parquet(df, str(tmp_path / "out"), str(tmp_path / "ck"))
    got = read_values(spark, str(tmp_path / "out"))
    # Partition 0 from its committed offset 7 (g14, g16, g18); partition 1 has no commit: earliest.
    assert sorted(got) == sorted(["g14", "g16", "g18"] + [f"g{i}" for i in range(1, 20, 2)])


def test_specific_offsets_fall_back_to_group(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=3)
    produce(kafka_conf, topic, (f"s{i}" for i in range(30)), 3)
    group = f"grp-{uuid.uuid4().hex[:8]}"
    _commit_group(kafka_conf, group, {(topic, 1): 8})
    df = source(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsets=f'{{"{topic}": {{"0": 9, "2": -2}}}}',
        **{"kafka.group.id": group},
    )
    run_to_parquet(df, str(tmp_path / "out"), str(tmp_path / "ck"))
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert Counter(r["partition"] for r in rows) == {0: 1, 1: 2, 2: 10}


def test_timestamp_startup(
    spark: Any,
    kafka_conf: dict[str, str],
    bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    require: Callable[[str], None],
) -> None:
    require("offsets_for_times")
    topic = new_topic(partitions=2)
    produce(kafka_conf, topic, ["early-a", "early-b"], 2, timestamp=1_000_000)
    produce(kafka_conf, topic, ["late-a"], 1, timestamp=3_000_000)
    df = source(
        spark,
        bootstrap,
        subscribe=topic,
        startingTimestamp=2_000_000,
        startingOffsetsByTimestampStrategy="latest",
    )
    run_to_parquet(df, str(tmp_path / "out"), str(tmp_path / "ck"))
    # Partition 1 has no record at or after the timestamp: with the strategy latest it starts at latest.
    assert read_values(spark, str(tmp_path / "out")) == ["late-a"]
    # Spark's default strategy, error, fails the query naming the partition.
    with pytest.raises(
        StreamingQueryException, match=f"no offset matched the starting timestamp for {topic}-1"
    ):
        run_to_parquet(
            source(spark, bootstrap, subscribe=topic, startingTimestamp=2_000_000),
            str(tmp_path / "out2"),
            str(tmp_path / "ck2"),
        )


def test_min_offsets_per_trigger_holds_a_batch_back_until_enough_records(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], checkpoint: str
) -> None:
    topic = new_topic(partitions=2)
    first = produce(kafka_conf, topic, (f"a{i}" for i in range(5)), 2)
    df = source(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        minOffsetsPerTrigger=8,
        maxTriggerDelay="1h",
    )
    name = f"q_{uuid.uuid4().hex[:8]}"
    query = memory_query(df, name, checkpoint)
    try:
        query.processAllAvailable()  # the first trigger always runs (Spark's delayBatch)
        assert sorted(memory_values(spark, name)) == sorted(first)
        few = produce(kafka_conf, topic, (f"b{i}" for i in range(3)), 2)
        query.processAllAvailable()  # 3 new offsets < 8: the batch waits (up to maxTriggerDelay)
        assert sorted(memory_values(spark, name)) == sorted(first)
        more = produce(kafka_conf, topic, (f"c{i}" for i in range(6)), 2)
        query.processAllAvailable()  # 9 >= 8: one batch with all of them
        assert sorted(memory_values(spark, name)) == sorted(first + few + more)
        assert len([p for p in query.recentProgress if p["numInputRows"] > 0]) == 2
    finally:
        query.stop()


def test_restore_and_rescale_lose_and_duplicate_nothing(
    spark: Any,
    kafka_conf: dict[str, str],
    bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    fetcher: str,
) -> None:
    topic = new_topic(partitions=5)
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    expected: list[str] = []
    for run, (parallelism, strategy) in enumerate([(2, "flink"), (3, "range"), (1, "sticky")]):
        expected += produce(kafka_conf, topic, (f"r{run}-{i}" for i in range(50)), 5)
        df = source(
            spark,
            bootstrap,
            subscribe=topic,
            startingOffsets="earliest",
            parallelism=parallelism,
            assignmentStrategy=strategy,
            maxRecordsPerTrigger=20,
            fetcher=fetcher,
        )
        run_to_parquet(df, out, ck)
        got = read_values(spark, out)
        assert Counter(got) == Counter(expected), f"after run {run}"


def test_max_records_per_trigger_and_available_now(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=3)
    values = produce(kafka_conf, topic, (f"m{i}" for i in range(100)), 3)
    df = source(spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=30)
    query = run_to_parquet(df, str(tmp_path / "out"), str(tmp_path / "ck"))
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert max(sizes) <= 30
    assert sum(sizes) == 100
    assert sorted(read_values(spark, str(tmp_path / "out"))) == sorted(values)


def test_a_batch_has_a_reader_task_per_spark_core(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    # sparkafka.register passes Spark's defaultParallelism to the source runner: a batch of 8 partitions gets
    # that many reader tasks (no more than the partitions), its count kept with the batch's end offsets.
    topic = new_topic(partitions=8)
    values = produce(kafka_conf, topic, (f"c{i}" for i in range(80)), 8)
    cores = min(8, spark.sparkContext.defaultParallelism)
    df = source(spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=40)
    out = tmp_path / "out"
    query = run_to_parquet(df, str(out), str(tmp_path / "ck"))
    ends = [json.loads(p["sources"][0]["endOffset"]) for p in query.recentProgress if p["numInputRows"]]
    assert len(ends) == 2
    assert {e["@plan"]["tasks"] for e in ends} == {cores}
    assert len(list(out.glob("part-*.parquet"))) == 2 * cores  # the file sink writes a file per task
    assert sorted(read_values(spark, str(out))) == sorted(values)


def test_pattern_discovery_picks_up_new_topic_while_running(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, checkpoint: str
) -> None:
    prefix = f"pat{uuid.uuid4().hex[:6]}"
    admin = AdminClient(kafka_conf)
    for f in admin.create_topics([NewTopic(f"{prefix}-a", 2, 1)]).values():
        f.result(30)
    first = produce(kafka_conf, f"{prefix}-a", (f"a{i}" for i in range(10)), 2)
    df = source(
        spark,
        bootstrap,
        subscribePattern=f"{prefix}-.*",
        startingOffsets="earliest",
        partitionDiscoveryIntervalMs=0,
    )
    name = f"q_{uuid.uuid4().hex[:8]}"
    query = memory_query(df, name, checkpoint)
    try:
        query.processAllAvailable()
        assert sorted(memory_values(spark, name)) == sorted(first)
        for f in admin.create_topics(
            [NewTopic(f"{prefix}-b", 3, 1), NewTopic(f"other{prefix}", 1, 1)]
        ).values():
            f.result(30)
        produce(kafka_conf, f"other{prefix}", ["not-matching"], 1)
        second = produce(kafka_conf, f"{prefix}-b", (f"b{i}" for i in range(9)), 3)
        query.processAllAvailable()
        assert sorted(memory_values(spark, name)) == sorted(first + second)
    finally:
        query.stop()


def test_new_partitions_of_a_growing_topic_start_at_earliest(
    spark: Any,
    kafka_conf: dict[str, str],
    bootstrap: str,
    new_topic: Callable[..., str],
    checkpoint: str,
    require: Callable[[str], None],
) -> None:
    require("create_partitions")
    topic = new_topic(partitions=1)
    produce(kafka_conf, topic, ["x0", "x1"], 1)  # before the start: not read (startingOffsets=latest)
    df = source(spark, bootstrap, subscribe=topic, startingOffsets="latest", partitionDiscoveryIntervalMs=0)
    name = f"q_{uuid.uuid4().hex[:8]}"
    query = memory_query(df, name, checkpoint)
    try:
        query.processAllAvailable()
        admin = AdminClient(kafka_conf)  # referenced until its futures resolve (else: _DESTROY)
        for f in admin.create_partitions([NewPartitions(topic, 3)]).values():
            f.result(30)
        from confluent_kafka import Producer

        p = Producer(kafka_conf)
        for part in (1, 2):
            p.produce(topic, f"new-{part}".encode(), partition=part)
        p.flush(30)
        query.processAllAvailable()
        assert sorted(memory_values(spark, name)) == ["new-1", "new-2"]
    finally:
        query.stop()


@pytest.mark.parametrize(
    ("fail_on_data_loss", "discovery_ms"),
    [(True, "0"), (False, "0"), (True, "-1"), (False, "-1")],
)
def test_deleted_topic_and_fail_on_data_loss(
    spark: Any,
    kafka_conf: dict[str, str],
    bootstrap: str,
    checkpoint: str,
    fail_on_data_loss: bool,
    discovery_ms: str,
    fetcher: str,
) -> None:
    """A topic deleted under a running query, found by discovery ("0": every batch) or, with discovery
    off ("-1"), by the offset lookup itself (Apache Kafka: UNKNOWN_TOPIC_OR_PARTITION; tansu: offset 0)."""
    prefix = f"loss{uuid.uuid4().hex[:6]}"
    admin = AdminClient(kafka_conf)
    for f in admin.create_topics([NewTopic(f"{prefix}-a", 1, 1), NewTopic(f"{prefix}-b", 1, 1)]).values():
        f.result(30)
    produce(kafka_conf, f"{prefix}-a", ["a0"], 1)
    produce(kafka_conf, f"{prefix}-b", ["b0"], 1)
    df = source(
        spark,
        bootstrap,
        subscribePattern=f"{prefix}-.*",
        startingOffsets="earliest",
        partitionDiscoveryIntervalMs=discovery_ms,
        failOnDataLoss=str(fail_on_data_loss).lower(),
        fetcher=fetcher,
    )
    name = f"q_{uuid.uuid4().hex[:8]}"
    query = memory_query(df, name, checkpoint)
    try:
        query.processAllAvailable()
        for f in admin.delete_topics([f"{prefix}-b"]).values():
            f.result(30)
        # A deleted topic still matches the pattern: it is data loss, not an unsubscribed topic.
        produce(kafka_conf, f"{prefix}-a", ["a1"], 1)
        if fail_on_data_loss:
            with pytest.raises(Exception, match=r"no longer exists but is still subscribed"):
                query.processAllAvailable()
        else:
            query.processAllAvailable()
            assert sorted(memory_values(spark, name)) == ["a0", "a1", "b0"]
    finally:
        query.stop()


def test_a_stream_reads_each_committed_record_once_past_aborted_transactions(
    spark: Any, kafka: Kafka, bootstrap: str, checkpoint: str, fetcher: str
) -> None:
    """Exactly-once input: a topic written in transactions, every third aborted, streamed read_committed
    in batches of 5 offsets, so that ranges start and end on commit and abort markers and some hold only an
    aborted transaction's records: each committed record once, at its offset."""
    topic = kafka.topic(partitions=1)
    kafka.transactions(topic, 6, 5, aborted=lambda n: n % 3 == 1)  # transaction n: offsets 6n .. 6n + 4
    df = source(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger=5,
        fetcher=fetcher,
        **{"kafka.isolation.level": "read_committed"},
    )
    name = f"q_{uuid.uuid4().hex[:8]}"
    query = memory_query(df, name, checkpoint)
    try:
        query.processAllAvailable()
        rows = spark.sql(f"select offset, value from {name} order by offset").collect()
        ranges = [
            (p["sources"][0]["startOffset"], p["sources"][0]["endOffset"]) for p in query.recentProgress
        ]
    finally:
        query.stop()
    committed = [n for n in range(6) if n % 3 != 1]
    assert [(r["offset"], r["value"]) for r in rows] == [
        (6 * n + i, f"t{n}-{i}") for n in committed for i in range(5)
    ]
    assert len([r for r in ranges if r[0] != r[1]]) == 8  # 30 records and 6 markers, 5 offsets a batch


def test_missing_topic_and_bad_options_fail_at_load(spark: Any, bootstrap: str, checkpoint: str) -> None:
    from sparkafka.datasource import source_schema

    missing = f"missing-{uuid.uuid4().hex}"
    # A topic that does not exist fails at load(), before any query starts (in 2 lines:
    # test_first_errors.py). Given a schema, Spark does not ask the data source for one at load(): the
    # reader's first discovery says the same when the query starts.
    with pytest.raises(Exception, match=f"Unable to retrieve any partitions for topic\\(s\\) {missing}"):
        source(spark, bootstrap, subscribe=missing)
    given = spark.readStream.format("sparkafka").schema(source_schema(False))
    df = given.option("kafka.bootstrap.servers", bootstrap).option("subscribe", missing).load()
    with pytest.raises(
        StreamingQueryException, match=f"Unable to retrieve any partitions for topic.* {missing}"
    ):
        df.writeStream.format("noop").option("checkpointLocation", checkpoint).start().processAllAvailable()
    # Bad options fail at load() too.
    with pytest.raises(Exception, match="assignmentStrategy='random' is not allowed"):
        source(spark, bootstrap, subscribe="x", assignmentStrategy="random")
    with pytest.raises(Exception, match="startingOffsets is not valid JSON"):
        source(spark, bootstrap, subscribe="x", startingOffsets="{oops")


def test_unreachable_broker_fails_naming_the_address(spark: Any) -> None:
    from sparkafka.local.broker import free_port

    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    # Fails at load(), at the first contact (within metadataTimeoutMs): no query is started, none hangs.
    with pytest.raises(Exception, match=f"listing topics failed against bootstrap servers {address}"):
        source(spark, address, subscribe="orders", metadataTimeoutMs=2000)


def test_restore_drops_partitions_no_longer_subscribed(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    keep, drop = new_topic(partitions=2), new_topic(partitions=1)
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    first = produce(kafka_conf, keep, ["k0", "k1"], 2) + produce(kafka_conf, drop, ["d0"], 1)
    run_to_parquet(source(spark, bootstrap, subscribe=f"{keep},{drop}", startingOffsets="earliest"), out, ck)
    assert sorted(read_values(spark, out)) == sorted(first)
    later = produce(kafka_conf, keep, ["k2", "k3"], 2)
    produce(kafka_conf, drop, ["d1"], 1)
    # Restored offsets win over startingOffsets=latest; the dropped topic is data loss (Spark's rule:
    # test_data_loss.py), left out with a warning under failOnDataLoss=false.
    restored = source(spark, bootstrap, subscribe=keep, startingOffsets="latest", failOnDataLoss="false")
    run_to_parquet(restored, out, ck)
    assert sorted(read_values(spark, out)) == sorted(first + later)


def test_default_producer_records_are_all_read_and_counted_by_lag(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], checkpoint: str
) -> None:
    """An ordinary producer batches records; every one is read and counted, even on the embedded broker
    (whose ListOffsets(latest) sees only the first record of a batch: sparkafka.client.broker_gaps)."""
    from confluent_kafka import Producer

    from sparkafka.ops.lag import fetch_group_lag

    topic = new_topic(partitions=2)
    producer = Producer(kafka_conf)  # default settings: linger and batching as users have them
    for i in range(500):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    group = f"g-{uuid.uuid4().hex[:8]}"
    df = source(spark, bootstrap, subscribe=topic, startingOffsets="earliest", **{"kafka.group.id": group})
    name = f"q_{uuid.uuid4().hex[:8]}"
    query = memory_query(df, name, checkpoint)
    try:
        query.processAllAvailable()
        assert sorted(memory_values(spark, name)) == sorted(f"v{i}" for i in range(500))
    finally:
        query.stop()  # the last batch's offsets go to the group on stop
    lag = fetch_group_lag(kafka_conf, group, topic)
    assert sum(p.log_end for p in lag.partitions) == 500
    assert sum(p.committed or 0 for p in lag.partitions) == 500
    assert lag.total_lag == 0


def test_batch_read_of_an_empty_range_counts_zero(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2)
    produce(kafka_conf, topic, ["a", "b"], 2)
    reader = (
        spark.read.format("sparkafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    )
    empty = f'{{"{topic}": {{"0": 0, "1": 0}}}}'
    assert reader.option("startingOffsets", empty).option("endingOffsets", empty).load().count() == 0
    everything = f'{{"{topic}": {{"0": -2, "1": -2}}}}'
    assert reader.option("startingOffsets", everything).option("endingOffsets", "latest").load().count() == 2
