"""Options whose meaning once differed silently from Spark's ``format("kafka")``, side by side with it in one
SparkSession (the divergences of issue 40): where Spark refuses, sparkafka refuses with its own sentence;
where Spark reads, sparkafka reads the same rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from sparkafka import data_loss_condition
from sparkafka.spark_errors import last_sentence
from sparkafka.structs import TopicPartition
from tests.integration.test_data_loss import delete_before, stream_once
from tests.integration.test_vs_spark import _records, both, rows
from tests.support.kafka import Kafka


def _produce(conf: dict[str, str], topic: str, partitions: int, n: int, t0: int = 0) -> None:
    producer = Producer(conf)
    for i in range(n):
        producer.produce(
            topic, f"v{i}".encode(), partition=i % partitions, **({"timestamp": t0 + i} if t0 else {})
        )
    assert producer.flush(30) == 0


def _failure(reader: Any) -> str:
    """The text of ``reader``'s failure to load and collect (the read must fail)."""
    with pytest.raises(Exception) as raised:  # noqa: PT011 - Spark's and PySpark's classes differ; text checked
        reader.load().collect()
    return str(raised.value)


def test_batch_reads_refuse_a_latest_start_and_partial_offset_maps_as_spark_does(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, kafka: Kafka
) -> None:
    topic = kafka.topic(partitions=2)
    t0 = 1_700_000_000_000
    _produce(kafka_conf, topic, 2, 10, t0=t0)
    one = f'{{"{topic}": {{"0": 1}}}}'  # partition 1 left out
    cases: list[tuple[dict[str, str], str, str]] = [
        (
            {"startingOffsets": "latest"},
            "starting offset can't be latest",
            "startingOffsets=latest is not allowed",
        ),
        (
            {"startingOffsets": f'{{"{topic}": {{"0": 0, "1": -1}}}}'},
            "can't be latest for batch queries",
            f"startingOffsets gives -1 (latest) for {topic}-1, which a batch read",
        ),
        ({"startingOffsets": one}, "don't match what are assigned", f"it leaves out {topic}-1"),
        (
            {"endingOffsets": f'{{"{topic}": {{"0": 3, "1": 3, "2": 3}}}}'},
            "don't match what are assigned",
            f"subscribe={topic} does not read {topic}-2",
        ),
        (
            {"startingOffsetsByTimestamp": f'{{"{topic}": {{"1": {t0}}}}}'},
            "don't match what are assigned",
            f"startingOffsetsByTimestamp must name exactly the partitions the query reads, as in Spark: "
            f"it leaves out {topic}-0",
        ),
        (
            {"endingOffsetsByTimestamp": f'{{"{topic}": {{"0": {t0 + 5}}}}}'},
            "don't match what are assigned",
            f"endingOffsetsByTimestamp must name exactly the partitions the query reads, as in Spark: "
            f"it leaves out {topic}-1",
        ),
    ]
    for options, theirs_say, ours_say in cases:
        theirs, ours = both(spark, bootstrap, subscribe=topic, **options)
        assert theirs_say in _failure(theirs), options
        assert ours_say in _failure(ours), options
    # The same maps naming every partition read the same rows.
    start, end = f'{{"{topic}": {{"0": 1, "1": -2}}}}', f'{{"{topic}": {{"0": -1, "1": 4}}}}'
    theirs, ours = both(spark, bootstrap, subscribe=topic, startingOffsets=start, endingOffsets=end)
    expected = rows(theirs.load())
    assert len(expected) == 8
    assert rows(ours.load()) == expected


def test_subscribe_pattern_searches_topic_names_in_java_regex_as_spark_does(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, kafka: Kafka
) -> None:
    base = kafka.topic()
    kafka.create_topics([f"{base}-dlq", f"old-{base}"], 1)
    for topic in (base, f"{base}-dlq", f"old-{base}"):
        _produce(kafka_conf, topic, 1, 3)
    for pattern, topics in (
        (base, 3),  # a search: the -dlq and old- topics too
        (f"^{base}$", 1),
        (rf"^\p{{Lower}}+-\Q{base}\E", 1),  # Java-only syntax, translated
    ):
        theirs, ours = both(spark, bootstrap, subscribePattern=pattern)
        expected = rows(theirs.load())
        assert len({r[2] for r in expected}) == topics, pattern
        assert rows(ours.load()) == expected, pattern


def test_sinks_match_column_names_exactly_and_ignore_columns_spark_ignores(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, kafka: Kafka
) -> None:
    """``Key`` and ``Partition`` are not ``key`` and ``partition`` to Spark's sink; a bigint ``topic`` under
    the ``topic`` option and a string ``timestamp`` are never read. Both sinks write the same records."""
    df = spark.range(20).selectExpr(
        "cast(concat('value-', id) as binary) as value",
        "cast(concat('key-', id) as binary) as Key",
        "cast(1 as int) as Partition",
        "id as topic",
        "cast(id as string) as timestamp",
    )
    written = {}
    for fmt in ("kafka", "sparkafka"):
        written[fmt] = kafka.topic(partitions=2)
        df.write.format(fmt).mode("append").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", written[fmt]
        ).save()
    theirs, ours = (_records(kafka_conf, [t])[t] for t in (written["kafka"], written["sparkafka"]))
    assert len(theirs) == 20
    assert {r[1] for r in theirs} == {None}  # no key: Key is not key
    assert sorted(r[1:] for r in ours) == sorted(r[1:] for r in theirs)  # partitions: no key decides them


def test_kafkas_timestamp_sentinels_read_the_same_rows_and_a_zero_limit_stalls_spark(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, kafka: Kafka, tmp_path: Path
) -> None:
    topic = kafka.topic(partitions=2)
    t0 = 1_700_000_000_000
    _produce(kafka_conf, topic, 2, 10, t0=t0)
    for options in (
        {"startingTimestamp": "-2", "endingTimestamp": "-1"},
        {"startingOffsetsByTimestamp": f'{{"{topic}": {{"0": -2, "1": {t0 + 5}}}}}'},
    ):
        theirs, ours = both(spark, bootstrap, subscribe=topic, **options)
        expected = rows(theirs.load())
        assert expected, options
        assert rows(ours.load()) == expected, options
    # Why sparkafka refuses maxOffsetsPerTrigger=0: Spark's query accepts it and never reads a record.
    assert (
        stream_once(
            spark,
            "kafka",
            bootstrap,
            tmp_path,
            subscribe=topic,
            startingOffsets="earliest",
            maxOffsetsPerTrigger=0,
        )
        == []
    )


def test_the_workers_are_told_spark_network_timeout_for_the_poll_timeout_default(spark: Any) -> None:
    from sparkafka.source.options import NETWORK_TIMEOUT_ENV

    conf = spark.sparkContext.getConf().get("spark.network.timeout", "120s")
    assert spark.sparkContext.environment[NETWORK_TIMEOUT_ENV] == conf


def _stream_failure(spark: Any, fmt: str, bootstrap: str, checkpoint: Path, **options: Any) -> Any:
    """Run a ``fmt`` stream into Spark's noop sink from ``checkpoint`` to the end of what is there
    (availableNow): what ``awaitTermination`` raised, or None."""
    reader = spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    query = (
        reader.load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(180), "query did not finish"
    except Exception as e:  # noqa: BLE001 - the query's failure is the result under test
        return e
    finally:
        query.stop()
    return None


def _jvm_conditions(error: Any) -> Iterator[str]:
    """The conditions (error classes) of ``error``'s JVM exception and its causes, as code written for
    Spark's connector reaches them from PySpark (through the JVM exception PySpark keeps)."""
    from py4j.protocol import Py4JError

    origin = error._origin
    while origin is not None:
        condition = None
        with contextlib.suppress(Py4JError):  # not a SparkThrowable
            condition = str(origin.getCondition())
        if condition is not None:
            yield condition
        origin = origin.getCause()


def test_data_loss_names_sparks_error_class_where_a_python_source_can(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    """What a user's ``except`` sees from each connector for the same data loss, found by the driver (a
    start past the log's end: PARTITION_OFFSET_CHANGED) and by a task (records removed by retention between
    two runs: COULD_NOT_READ_OFFSET_RANGE).

    The same for both: ``StreamingQueryException``, whose ``getCondition()`` is ``STREAM_FAILED`` and
    ``getSqlState()`` ``XXKST``, and the words "Some data may have been lost". The class differs in where it
    is: Spark's is the condition of a JVM cause (SQLSTATE 22000) and nowhere in the text; a Python data
    source can pass Spark only text (wrapped as ``PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR`` on the
    driver, a ``PythonException`` in a task), so sparkafka's sentence starts with the class in brackets.
    ``sparkafka.data_loss_condition`` reads it from either.
    """
    from pyspark.errors import StreamingQueryException

    past = kafka.topic(partitions=1)
    kafka.produce(past, [f"v{i}" for i in range(10)])
    retained = kafka.topic(partitions=1)
    kafka.produce(retained, [f"v{i}" for i in range(10)])
    for fmt in ("kafka", "sparkafka"):
        ck = tmp_path / f"{fmt}-retained"
        assert (
            _stream_failure(spark, fmt, bootstrap, ck, subscribe=retained, startingOffsets="earliest") is None
        )
    kafka.produce(retained, [f"w{i}" for i in range(10)])
    delete_before(kafka, TopicPartition(retained, 0), 15)  # the next batch is [10, 20): 10..14 are gone

    cases = [
        (
            "PARTITION_OFFSET_CHANGED",
            "changed",
            {"subscribe": past, "startingOffsets": f'{{"{past}": {{"0": 50}}}}'},
        ),
        ("COULD_NOT_READ_OFFSET_RANGE", "retained", {"subscribe": retained}),
    ]
    for condition, name, options in cases:
        failed = {
            fmt: _stream_failure(spark, fmt, bootstrap, tmp_path / f"{fmt}-{name}", **options)
            for fmt in ("kafka", "sparkafka")
        }
        for fmt, error in failed.items():
            assert isinstance(error, StreamingQueryException), (fmt, error)
            assert (error.getCondition(), error.getSqlState()) == ("STREAM_FAILED", "XXKST"), fmt
            assert "Some data may have been lost" in str(error), (fmt, str(error)[-2000:])
            assert data_loss_condition(error) == f"KAFKA_DATA_LOSS.{condition}", (fmt, str(error)[-2000:])
        theirs, ours = failed["kafka"], failed["sparkafka"]
        assert "KAFKA_DATA_LOSS" not in str(theirs)
        assert f"KAFKA_DATA_LOSS.{condition}" in list(_jvm_conditions(theirs))
        found = last_sentence(str(ours))  # what register() makes the exception's last line
        assert found is not None
        assert found[0] == "DataLossError"
        assert found[1].startswith(f"[KAFKA_DATA_LOSS.{condition}] Some data may have been lost")
        assert not any(c.startswith("KAFKA_DATA_LOSS") for c in _jvm_conditions(ours))
