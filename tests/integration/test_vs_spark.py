"""Side by side with Spark's own Kafka connector: the same topics, read and written by ``format("kafka")``
and ``format("sparkafka")`` in one SparkSession, give the same rows and the same records.

Spark's connector (4.2.0, the newest on Maven Central; see ``sparkafka.local.spark_kafka_dist``) is on the
session's ``spark.jars``. Each test changes only the format's name between the two reads or writes, as a
user switching would (plus ``.mode("append")`` for a batch write: Spark refuses Python data sources in
its default ErrorIfExists mode).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CTopicPartition

from sparkafka.spark_lines import ADMISSION_CONTROL
from tests.support.kafka import Kafka
from tests.support.wait import wait_until

Row = tuple[Any, ...]


def _normal(value: Any) -> Any:
    """A collected value as plain Python: bytearray -> bytes, Rows and lists -> tuples."""
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, list | tuple):
        return tuple(_normal(v) for v in value)
    return value


def rows(df: Any) -> list[Row]:
    """All of ``df``'s rows, as sorted tuples of its columns in order."""
    return sorted((tuple(_normal(v) for v in r) for r in df.collect()), key=repr)


def both(spark: Any, bootstrap: str, stream: bool = False, **options: Any) -> tuple[Any, Any]:
    """The same read with Spark's connector and with sparkafka: (theirs, ours), not yet loaded."""
    out = []
    for fmt in ("kafka", "sparkafka"):
        reader = (spark.readStream if stream else spark.read).format(fmt)
        reader = reader.option("kafka.bootstrap.servers", bootstrap)
        for key, value in options.items():
            reader = reader.option(key, str(value))
        out.append(reader)
    return out[0], out[1]


def produce_varied(conf: dict[str, str], topic: str, partitions: int, n: int, t0: int = 0) -> None:
    """``n`` records over ``partitions``: keys and null keys, null values, no/one/two headers (one null),
    and, with ``t0``, timestamps ``t0 + i`` (1 ms apart) for the lookups by time."""
    producer = Producer(conf)
    for i in range(n):
        headers: list[tuple[str, bytes | None]] = [[], [("a", b"1")], [("a", b"2"), ("b", None)]][i % 3]
        producer.produce(
            topic,
            value=None if i % 11 == 5 else f"value-{i}".encode(),
            key=None if i % 4 == 0 else f"key-{i % 7}".encode(),
            partition=i % partitions,
            headers=headers or None,
            **({"timestamp": t0 + i} if t0 else {}),
        )
    assert producer.flush(30) == 0


@pytest.mark.lines
@pytest.mark.parametrize("fetcher", ["native", "python"])
def test_batch_reads_give_the_same_rows_earliest_to_latest_with_headers(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, kafka: Kafka, fetcher: str
) -> None:
    topic = kafka.topic(partitions=3)
    produce_varied(kafka_conf, topic, 3, 120)
    appended = kafka.topic(partitions=2, config={"message.timestamp.type": "LogAppendTime"})
    produce_varied(kafka_conf, appended, 2, 30)
    theirs, ours = both(spark, bootstrap, subscribe=f"{topic},{appended}", includeHeaders="true")
    ours = ours.option("fetcher", fetcher)  # sparkafka's native fetch, and its pure-Python one
    expected = rows(theirs.load())
    assert len(expected) == 150
    assert {r[6] for r in expected} == {0, 1}  # CreateTime and LogAppendTime both covered
    assert theirs.load().schema == ours.load().schema
    assert rows(ours.load()) == expected
    # Without headers, and by pattern: the same again.
    theirs, ours = both(spark, bootstrap, subscribePattern=f"{topic}|{appended}")
    assert rows(ours.option("fetcher", fetcher).load()) == rows(theirs.load())


def test_batch_reads_with_json_offsets_and_by_timestamp_give_the_same_rows(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, kafka: Kafka
) -> None:
    topic = kafka.topic(partitions=2)
    t0 = 1_700_000_000_000
    produce_varied(kafka_conf, topic, 2, 60, t0=t0)  # partition p holds t0 + p, t0 + p + 2, ...
    cases: list[dict[str, str]] = [
        {
            "startingOffsets": f'{{"{topic}": {{"0": 3, "1": -2}}}}',
            "endingOffsets": f'{{"{topic}": {{"0": 20, "1": -1}}}}',
        },
        {"assign": f'{{"{topic}": [1]}}', "startingOffsets": f'{{"{topic}": {{"1": 7}}}}'},
        {"startingTimestamp": str(t0 + 21)},
        {"startingTimestamp": str(t0 + 10), "endingTimestamp": str(t0 + 40)},
        {
            "startingOffsetsByTimestamp": f'{{"{topic}": {{"0": {t0 + 30}, "1": {t0 + 5}}}}}',
            "endingOffsetsByTimestamp": f'{{"{topic}": {{"0": {t0 + 50}, "1": {t0 + 45}}}}}',
        },
        # A timestamp past every record: Spark's default strategy fails, "latest" reads nothing there.
        {
            "startingOffsetsByTimestamp": f'{{"{topic}": {{"0": {t0 + 999}, "1": {t0}}}}}',
            "startingOffsetsByTimestampStrategy": "latest",
        },
    ]
    for options in cases:
        subscribe = {} if "assign" in options else {"subscribe": topic}
        theirs, ours = both(spark, bootstrap, includeHeaders="true", **subscribe, **options)
        expected = rows(theirs.load())
        assert expected, options
        assert rows(ours.load()) == expected, options


def test_min_partitions_and_max_records_per_partition_split_like_spark(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, kafka: Kafka, tmp_path: Any
) -> None:
    """Spark's KafkaOffsetRangeCalculator, both ways: the same number of tasks and the same rows.

    ``maxRecordsPerPartition`` alone is compared in a stream: Spark 4.2's batch read ignores it unless
    ``minPartitions`` is set too (measured: 2 tasks of 400 and 100 records where its stream makes 7 of at
    most 90), against its documentation; sparkafka splits in both.
    """
    topic = kafka.topic(partitions=2)
    producer = Producer(kafka_conf)
    for i in range(500):  # skewed: partition 0 holds 400, partition 1 holds 100
        producer.produce(topic, f"v{i}".encode(), partition=0 if i % 5 else 1)
    assert producer.flush(30) == 0
    for options in (
        {"minPartitions": "5"},
        {"minPartitions": "7"},
        {"minPartitions": "3", "maxRecordsPerPartition": "90"},
    ):
        theirs, ours = both(spark, bootstrap, subscribe=topic, **options)
        their_df, our_df = theirs.load(), ours.load()
        assert our_df.rdd.getNumPartitions() == their_df.rdd.getNumPartitions(), options
        assert rows(our_df) == rows(their_df), options
    tasks: dict[str, list[list[int]]] = {}
    for name, reader in zip(
        ("theirs", "ours"),
        both(
            spark,
            bootstrap,
            stream=True,
            subscribe=topic,
            startingOffsets="earliest",
            maxRecordsPerPartition=90,
        ),
        strict=True,
    ):
        sizes: list[list[int]] = []
        query = (
            reader.load()
            .writeStream.foreachBatch(
                lambda df, _, sizes=sizes: sizes.append(sorted(df.rdd.glom().map(len).collect()))
            )
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180), "query did not finish"
        assert query.exception() is None, str(query.exception())
        tasks[name] = sizes
    assert tasks["ours"] == tasks["theirs"] == [[50, 50, 80, 80, 80, 80, 80]]


def _stream_rows(
    spark: Any, reader: Any, checkpoint: str, trigger: dict[str, Any], until: int | None = None
) -> tuple[list[Row], int]:
    """Run ``reader`` into a memory table until it ends (availableNow), or until it holds ``until`` rows;
    its rows and its batch count."""
    name = f"vs_{uuid.uuid4().hex[:10]}"
    query = (
        reader.load()
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", checkpoint)
        .trigger(**trigger)
        .start()
    )
    try:
        if until is None:
            assert query.awaitTermination(180), "query did not finish"
        else:
            wait_until(lambda: spark.table(name).count() >= until, 180, f"{until} rows")
        assert query.exception() is None, str(query.exception())
        batches = sum(1 for p in query.recentProgress if p["numInputRows"] > 0)
        return rows(spark.table(name)), batches
    finally:
        query.stop()


@pytest.mark.lines
def test_streaming_reads_give_the_same_rows_available_now_and_rate_limited(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, kafka: Kafka, tmp_path: Any
) -> None:
    topic = kafka.topic(partitions=3)
    produce_varied(kafka_conf, topic, 3, 300)
    for i, options in enumerate(({}, {"maxOffsetsPerTrigger": "70"})):
        theirs, ours = both(
            spark,
            bootstrap,
            stream=True,
            subscribe=topic,
            startingOffsets="earliest",
            includeHeaders="true",
            **options,
        )
        trigger = {"availableNow": True}
        expected, their_batches = _stream_rows(spark, theirs, str(tmp_path / f"theirs{i}"), trigger)
        got, our_batches = _stream_rows(spark, ours, str(tmp_path / f"ours{i}"), trigger)
        assert len(expected) == 300
        if options and not ADMISSION_CONTROL:
            # PySpark 4.0/4.1 run AvailableNow for a Python source as one batch, which the cap holds to 70
            # (spark_lines); batch by batch, a processing-time trigger reads the rest, 70 at most a batch.
            assert (len(got), our_batches) == (70, 1)
            assert set(got) <= set(expected)
            got, our_batches = _stream_rows(
                spark, ours, str(tmp_path / f"ours-pt{i}"), {"processingTime": "100 milliseconds"}, until=300
            )
        assert got == expected
        if options:  # 300 records at most 70 a batch: both take at least 5 batches
            assert min(their_batches, our_batches) >= 5


@pytest.mark.lines
@pytest.mark.parametrize("fetcher", ["native", "python"])
def test_read_committed_skips_the_same_aborted_records(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, kafka: Kafka, fetcher: str
) -> None:
    topic = kafka.topic(partitions=1)
    kafka.transactions(topic, 6, 10, aborted=lambda n: n % 3 == 1)
    for isolation in ("read_committed", "read_uncommitted"):
        theirs, ours = both(spark, bootstrap, subscribe=topic, **{"kafka.isolation.level": isolation})
        expected = rows(theirs.load())
        assert len(expected) == (40 if isolation == "read_committed" else 60)
        assert rows(ours.option("fetcher", fetcher).load()) == expected


def _first_of_each_value(records: list[Row]) -> list[Row]:
    """``records`` (partition, key, value, headers) without any whose value came before."""
    first: dict[Any, Row] = {}
    for record in records:
        first.setdefault(record[2], record)
    return list(first.values())


def _records(conf: dict[str, str], topics: list[str]) -> dict[str, list[Row]]:
    """Every record of ``topics`` as a plain read_committed consumer sees it: by topic, in (partition,
    offset) order, as (partition, key, value, headers)."""
    consumer = Consumer(
        {
            **conf,
            "group.id": f"vs-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
            "isolation.level": "read_committed",
        }
    )
    try:
        parts = [
            CTopicPartition(t, p, 0)
            for t in topics
            for p in consumer.list_topics(t, timeout=30).topics[t].partitions
        ]
        consumer.assign(parts)
        pending = {(tp.topic, tp.partition) for tp in parts}
        got: dict[str, list[tuple[int, int, Row]]] = {t: [] for t in topics}
        while pending:
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is not None:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    pending.discard((msg.topic(), msg.partition()))
                    continue
                headers = tuple((k, v) for k, v in (msg.headers() or []))
                got[msg.topic()].append(
                    (msg.partition(), msg.offset(), (msg.partition(), msg.key(), msg.value(), headers))
                )
    finally:
        consumer.close()
    return {t: [r for _, _, r in sorted(records)] for t, records in got.items()}


@pytest.mark.lines
@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
def test_both_sinks_write_the_same_records(
    spark: Any,
    kafka_conf: dict[str, str],
    bootstrap: str,
    kafka: Kafka,
    delivery: str,
    new_topic: Callable[..., str],
) -> None:
    """Key, value, a topic column, a partition column, headers and null keys: written by Spark's sink and
    by ours, the records are the same, and keyed records without a partition land where Java's murmur2
    puts them (Spark's sink is the Java client)."""
    base = spark.range(400).selectExpr(
        "case when id % 5 = 0 then null else cast(concat('key-', id % 37) as binary) end as key",
        "cast(concat('value-', id) as binary) as value",
        "id % 2 as dest",
        "case when id % 3 = 0 then cast(id % 4 as int) end as partition",
        "case when id % 2 = 0 then array(named_struct('key', 'h', 'value', cast(id as string)))"
        " else array() end as headers",
    )
    written: dict[str, list[str]] = {}
    for fmt in ("kafka", "sparkafka"):
        topics = [new_topic(partitions=4), new_topic(partitions=4)]
        written[fmt] = topics
        df = base.selectExpr(
            "key",
            "value",
            f"case when dest = 0 then '{topics[0]}' else '{topics[1]}' end as topic",
            "partition",
            "cast(headers as array<struct<key:string,value:binary>>) as headers",
        )
        writer = df.write.format(fmt).mode("append").option("kafka.bootstrap.servers", bootstrap)
        if fmt == "sparkafka":
            writer = writer.option("deliveryGuarantee", delivery)
            if delivery == "exactly_once":
                writer = writer.option("transactionalIdPrefix", f"vs-{uuid.uuid4().hex[:8]}")
        writer.save()
    # Spark's sink is at least once: a task that failed (measured on a loaded machine: its producer expired
    # records after 120 s) is run again and writes its records twice, a keyless one maybe to another
    # partition. Each value (unique) counts once on its side, where it was first written; ours as written.
    theirs = {t: _first_of_each_value(rs) for t, rs in _records(kafka_conf, written["kafka"]).items()}
    ours = _records(kafka_conf, written["sparkafka"])
    for their_topic, our_topic in zip(written["kafka"], written["sparkafka"], strict=True):
        assert len(theirs[their_topic]) == 200
        # Order within a partition can differ between tasks' writes; the records per partition may not,
        # except where no key and no partition column decide it (both producers pick any partition).
        assert _placed(ours[our_topic]) == _placed(theirs[their_topic])
    keyed = [r for rs in theirs.values() for r in rs if r[1] is not None]
    assert len({r[0] for r in keyed}) == 4  # keyed records spread over every partition


def _placed(records: list[Row]) -> list[Row]:
    """Records with the partition kept where a key or the partition column decided it (value-<id> with
    id % 3 == 0 had a partition column), sorted."""
    out = []
    for partition, key, value, headers in records:
        decided = key is not None or int(value.split(b"-")[1]) % 3 == 0
        out.append((partition if decided else None, key, value, headers))
    return sorted(out, key=repr)
