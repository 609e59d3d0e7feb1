"""failOnDataLoss on Apache Kafka, side by side with Spark's connector where the two can be compared.

Each scenario loses data the way production does (a topic deleted and recreated under a stopped query, a
log that ends below the query's position, a partition added with its first records already gone, a topic
dropped from the subscription, retention between planning and the task, retention during a read) and
runs both values of ``failOnDataLoss``. Where Spark's ``format("kafka")`` decides, sparkafka fails where
it fails and reads the rows it reads; where offsets alone cannot tell (a recreated topic whose new log has
passed the query's position), sparkafka tells by the topic's id.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import NewTopic

from sparkafka.client.core import admin_client
from sparkafka.errors import DataLossError
from sparkafka.source import fetch
from sparkafka.source.fetch import OffsetRange, read_ranges
from sparkafka.structs import TopicPartition
from tests.support.kafka import Kafka
from tests.support.wait import wait_until

FORMATS = ("kafka", "sparkafka")
"""Spark's connector, then sparkafka."""

Row = tuple[Any, ...]


def stream_once(
    spark: Any, fmt: str, bootstrap: str, checkpoint: Path, fail: bool = True, **options: Any
) -> list[Row] | str:
    """Run a ``fmt`` stream from ``checkpoint`` to the end of what is there (availableNow): the rows it
    read as sorted (topic, partition, offset), or its failure's text. (``foreachBatch``: the memory sink
    cannot restart from a checkpoint.)"""
    reader = spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for key, value in {"failOnDataLoss": str(fail).lower(), **options}.items():
        reader = reader.option(key, str(value))
    read: list[Row] = []
    query = (
        reader.load()
        .selectExpr("topic", "partition", "offset")
        .writeStream.foreachBatch(lambda df, _: read.extend(tuple(r) for r in df.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(180), "query did not finish"
    except Exception as e:  # noqa: BLE001 - the query's failure is the result under test
        return str(e)
    finally:
        query.stop()
    return sorted(read)


def offsets(read: list[Row] | str) -> list[int]:
    """The offsets a successful ``stream_once`` read, in order."""
    assert not isinstance(read, str), read
    return [r[2] for r in read]


def recreate(kafka: Kafka, topic: str, partitions: int) -> None:
    """Delete ``topic`` and create it again, empty, once the broker has finished deleting it."""
    admin = admin_client(kafka.conf)
    for future in admin.delete_topics([topic]).values():
        future.result(30)

    def created() -> bool:
        try:
            for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
                future.result(30)
        except KafkaException as e:
            if e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:  # still being deleted
                return False
            raise
        return True

    wait_until(created, 60, f"{topic} created again after its deletion")


def delete_before(kafka: Kafka, tp: TopicPartition, offset: int) -> None:
    """Move ``tp``'s log start to ``offset`` (DeleteRecords), as retention does."""
    admin = admin_client(kafka.conf)
    for future in admin.delete_records([CTopicPartition(tp.topic, tp.partition, offset)]).values():
        future.result(30)


def test_a_topic_recreated_under_a_stopped_query_is_data_loss(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    """The issue's scenario, smaller: 100 records read to the end, the topic deleted and recreated with 30.

    Spark fails at the restart ("offset was changed from 100 to 30"), and again once the new log has passed
    100 (its offset log holds the failed batch's end, 30). sparkafka fails both times: the second time only
    the topic's id can tell. With failOnDataLoss=false Spark carries on from 30; sparkafka knows it is a new
    topic and reads it from its first record.
    """
    topic = kafka.topic(partitions=1)
    kafka.produce(topic, [f"a{i}" for i in range(100)])
    for fmt in FORMATS:
        read = stream_once(spark, fmt, bootstrap, tmp_path / fmt, subscribe=topic, startingOffsets="earliest")
        assert offsets(read) == list(range(100)), fmt
    recreate(kafka, topic, 1)
    kafka.produce(topic, [f"b{i}" for i in range(30)])
    for fmt in FORMATS:
        failed = stream_once(spark, fmt, bootstrap, tmp_path / fmt, subscribe=topic)
        assert isinstance(failed, str), (fmt, failed)
        assert "failOnDataLoss" in failed, failed
    kafka.produce(topic, [f"b{i}" for i in range(30, 110)])  # the new log passes the query's 100
    for fmt in FORMATS:
        failed = stream_once(spark, fmt, bootstrap, tmp_path / fmt, subscribe=topic)
        assert isinstance(failed, str), (fmt, failed)
    assert "recreated" in failed, failed
    theirs = stream_once(spark, "kafka", bootstrap, tmp_path / "kafka", fail=False, subscribe=topic)
    assert offsets(theirs) == list(range(30, 110))
    ours = stream_once(spark, "sparkafka", bootstrap, tmp_path / "sparkafka", fail=False, subscribe=topic)
    assert offsets(ours) == list(range(110))


def test_a_start_past_the_log_end_is_data_loss_and_the_query_carries_on_from_the_end(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    """A log that ends below the query's position (an unclean leader election truncating it, or a JSON
    start past the end) is Spark's "offset was changed"; with failOnDataLoss=false both carry on from the
    log's end."""
    topic = kafka.topic(partitions=1)
    kafka.produce(topic, [f"v{i}" for i in range(10)])
    start = {"subscribe": topic, "startingOffsets": f'{{"{topic}": {{"0": 50}}}}'}
    for fmt in FORMATS:
        failed = stream_once(spark, fmt, bootstrap, tmp_path / f"{fmt}-fail", **start)
        assert isinstance(failed, str), (fmt, failed)
        assert "from 50 to 10" in failed, failed
        assert offsets(stream_once(spark, fmt, bootstrap, tmp_path / fmt, fail=False, **start)) == [], fmt
    kafka.produce(topic, [f"v{i}" for i in range(10, 15)])
    for fmt in FORMATS:
        read = stream_once(spark, fmt, bootstrap, tmp_path / fmt, fail=False, **start)
        assert offsets(read) == list(range(10, 15)), fmt


def test_a_new_partition_whose_first_records_are_gone_is_data_loss(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    """A topic added to a pattern with its first records already deleted: Spark's "Added partition ...
    starts from 4 instead of 0"; with failOnDataLoss=false both read what is left."""
    prefix = f"dl{uuid.uuid4().hex[:8]}"
    kafka.create_topics([f"{prefix}-a"], 1)
    kafka.produce(f"{prefix}-a", ["a0", "a1"])
    pattern = {"subscribePattern": f"{prefix}-.*", "startingOffsets": "earliest"}
    for fmt in FORMATS:
        assert len(offsets(stream_once(spark, fmt, bootstrap, tmp_path / fmt, **pattern))) == 2, fmt
    kafka.create_topics([f"{prefix}-b"], 1)
    kafka.produce(f"{prefix}-b", [f"b{i}" for i in range(10)])
    delete_before(kafka, TopicPartition(f"{prefix}-b", 0), 4)
    for fmt in FORMATS:
        failed = stream_once(spark, fmt, bootstrap, tmp_path / fmt, **pattern)
        assert isinstance(failed, str), (fmt, failed)
        assert f"{prefix}-b-0" in failed, failed
        read = stream_once(spark, fmt, bootstrap, tmp_path / fmt, fail=False, **pattern)
        assert read == [(f"{prefix}-b", 0, o) for o in range(4, 10)], fmt


def test_a_partition_dropped_from_the_subscription_is_data_loss(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    """A restart with a topic left out of ``subscribe``: Spark's "... are gone"; with failOnDataLoss=false
    both drop it and read on."""
    keep, drop = kafka.topic(partitions=1), kafka.topic(partitions=1)
    kafka.produce(keep, ["k0"])
    kafka.produce(drop, ["d0"])
    for fmt in FORMATS:
        both = stream_once(
            spark, fmt, bootstrap, tmp_path / fmt, subscribe=f"{keep},{drop}", startingOffsets="earliest"
        )
        assert len(offsets(both)) == 2, fmt
    kafka.produce(keep, ["k1"])
    for fmt in FORMATS:
        failed = stream_once(spark, fmt, bootstrap, tmp_path / fmt, subscribe=keep)
        assert isinstance(failed, str), (fmt, failed)
        assert f"{drop}-0" in failed, failed
        read = stream_once(spark, fmt, bootstrap, tmp_path / fmt, fail=False, subscribe=keep)
        assert read == [(keep, 0, 1)], fmt


def test_batch_earliest_and_latest_are_bound_when_the_task_starts(
    spark: Any, kafka: Kafka, kafka_conf: dict[str, str], bootstrap: str
) -> None:
    """A default batch read (earliest to latest) whose tasks start after retention moved the log start and
    more records arrived: Spark binds both ends on the executor and reads from the new start to the new
    end, with no data loss. The move happens in the first tasks of the same job (a union's first side: two
    tasks on the session's two cores), so every Kafka task starts after it."""
    read: dict[str, list[Row]] = {}
    for fmt in FORMATS:
        topic = kafka.topic(partitions=2)
        kafka.produce(topic, [f"v{i}" for i in range(20)], partitions=1)  # partition 1 empty at planning
        move = _retention_then_more_records(kafka_conf, topic)
        before = spark.range(0, 2, 1, 2).mapInArrow(move, "topic string, partition int, offset long")
        kafka_side = (
            spark.read.format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .load()
            .selectExpr("topic", "partition", "offset")
        )
        rows = sorted(tuple(r) for r in before.union(kafka_side).collect())
        read[fmt] = [(p, o) for t, p, o in rows if t == topic]
    assert read["kafka"] == [(0, o) for o in range(8, 25)] + [(1, o) for o in range(3)]
    assert read["sparkafka"] == read["kafka"]


def _retention_then_more_records(conf: dict[str, str], topic: str) -> Any:
    """A ``mapInArrow`` function for a Spark task: task 0 deletes partition 0's records below 8 and
    produces 5 more there and 3 into partition 1; every task waits until the broker shows it, then
    returns no rows."""

    def move(batches: Any) -> Any:
        from confluent_kafka import Consumer, Producer
        from confluent_kafka import TopicPartition as CTopicPartition
        from confluent_kafka.admin import AdminClient
        from pyspark import TaskContext

        from sparkafka.local.procs import poll_until

        for _ in batches:
            pass
        context = TaskContext.get()
        if context is not None and context.partitionId() == 0:
            admin = AdminClient(conf)
            for future in admin.delete_records([CTopicPartition(topic, 0, 8)]).values():
                future.result(30)
            producer = Producer(conf)
            for i in range(8):
                producer.produce(topic, f"late{i}".encode(), partition=0 if i < 5 else 1)
            assert producer.flush(30) == 0
        probe = Consumer({**conf, "group.id": "dl-probe", "isolation.level": "read_uncommitted"})
        try:
            assert poll_until(
                lambda: (
                    probe.get_watermark_offsets(CTopicPartition(topic, 0), timeout=10) == (8, 25)
                    and probe.get_watermark_offsets(CTopicPartition(topic, 1), timeout=10)[1] == 3
                ),
                60,
                0.1,
            ), "the log start did not move"
        finally:
            probe.close()
        return iter(())

    return move


@pytest.mark.parametrize("fetcher", ["native", "python"])
@pytest.mark.parametrize("fail", [True, False], ids=["fail", "skip"])
def test_offsets_out_of_range_during_a_read_skip_to_the_earliest_only_when_allowed(
    kafka: Kafka, kafka_conf: dict[str, str], fetcher: str, fail: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention that overtakes a task while it reads (Spark: ``KafkaDataConsumer`` skips to the earliest
    available offset when failOnDataLoss=false). The read pauses after its first 20 records with librdkafka's
    prefetch bounded to 100 KB (10 records of 10 KB), the log start moves to 350, then the read goes on."""
    topic = kafka.topic(partitions=1)
    tp = TopicPartition(topic, 0)
    kafka.produce(topic, ["x" * 10_000] * 400)
    monkeypatch.setattr(fetch, "ROWS_PER_BATCH", 20)
    conf = {**kafka_conf, "queued.max.messages.kbytes": "100", "max.partition.fetch.bytes": "20000"}
    read = read_ranges(conf, [OffsetRange(tp, 0, 400)], fail_on_data_loss=fail, fetcher=fetcher)
    first = next(read)["offset"].to_pylist()
    assert first == list(range(20))
    delete_before(kafka, tp, 350)
    if fail:
        with pytest.raises(DataLossError, match=rf"{topic}-0.*350.*failOnDataLoss=false"):
            list(read)
        return
    got = first + [o for batch in read for o in batch["offset"].to_pylist()]
    before = [o for o in got if o < 350]
    assert before == list(range(len(before)))  # what was read before the move, in order
    assert len(before) < 350  # then a skip
    assert [o for o in got if o >= 350] == list(range(350, 400))


@pytest.mark.parametrize("fetcher", ["native", "python"])
def test_a_range_past_the_log_end_is_data_loss_after_the_poll_timeout(
    kafka: Kafka, kafka_conf: dict[str, str], fetcher: str
) -> None:
    """A log that ends below a range, at the very offset the read reaches (a log truncated, or a topic
    recreated, between planning and the task): no fetch is out of range and no record comes. After
    ``pollTimeoutMs`` Spark's reader finds the offset at the log's end and reports data loss (with
    failOnDataLoss=false it skips the rest of the range), not a timeout."""
    topic = kafka.topic(partitions=1)
    kafka.produce(topic, ["x"] * 3)
    past = [OffsetRange(TopicPartition(topic, 0), 0, 10)]
    with pytest.raises(DataLossError, match=rf"{topic}-0: offset 3 .*up to 10.*failOnDataLoss=false"):
        list(read_ranges(kafka_conf, past, poll_timeout_ms=1500, fetcher=fetcher))
    read = read_ranges(kafka_conf, past, fail_on_data_loss=False, poll_timeout_ms=1500, fetcher=fetcher)
    assert [o for batch in read for o in batch["offset"].to_pylist()] == [0, 1, 2]
