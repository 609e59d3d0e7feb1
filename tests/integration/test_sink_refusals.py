"""Errors no retry can heal, met in a sink task: reported once, from the commit, with no task retried.

The session's master retries a failed task (``local[2,3]``: 3 attempts), as a cluster does. A task that
meets a permanent error (``sparkafka.errors.is_permanent``) returns it to the driver instead of failing,
and the commit raises it before anything of the batch is committed (``sparkafka.sink.writer``): no task
attempt fails, and Spark's ``abort`` aborts the transactions the other tasks flushed. Fixing the cause and
restarting replays the batch.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest

from tests.integration.test_sink import held_back
from tests.support.kafka import Kafka
from tests.support.queries import failed_attempts, spark_report

ERROR_CLASS = "sparkafka.errors."


def split_query(spark: Any, bootstrap: str, source: str, checkpoint: str, options: dict[str, str]) -> Any:
    """``source``'s partition 0 to topic ``options["out"]``, partition 1 to ``options["missing"]``, by a
    ``topic`` column: one task each (the source plans a task per partition); availableNow."""
    out, missing = options.pop("out"), options.pop("missing")
    df = (
        spark.readStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("value", f"IF(partition = 0, '{out}', '{missing}') AS topic")
    )
    writer = (
        df.writeStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("checkpointLocation", checkpoint)
        .options(**options)
    )
    return writer.trigger(availableNow=True).start()


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_a_topic_column_naming_a_missing_topic_fails_the_query_once_from_the_commit(
    spark: Any, kafka: Kafka, bootstrap: str, checkpoint: str, guarantee: str
) -> None:
    source, out = kafka.topic(partitions=2), kafka.topic(partitions=1)
    missing = f"missing-{uuid.uuid4().hex[:12]}"
    values = kafka.produce(source, [f"r{i}" for i in range(10)], partitions=2)
    to_out = Counter(v.encode() for i, v in enumerate(values) if i % 2 == 0)
    to_missing = Counter(v.encode() for i, v in enumerate(values) if i % 2 == 1)
    prefix = f"refuse-{uuid.uuid4().hex[:6]}"
    options = {"deliveryGuarantee": guarantee, "out": out, "missing": missing}
    if guarantee == "exactly_once":
        options["transactionalIdPrefix"] = prefix

    query = split_query(spark, bootstrap, source, checkpoint, dict(options))
    with pytest.raises(Exception, match=r"STREAM_FAILED") as caught:
        query.awaitTermination(300)
    sentence = f"topic {missing!r} does not exist (the sink does not create topics)"
    assert sentence in str(caught.value)
    report = spark_report(caught.value)
    assert report.count(ERROR_CLASS) == 1, report  # once, raised by the commit (not by a task)
    assert "in _commit\n" in report, report
    assert f"sparkafka.errors.BrokerError: {sentence}" in report, report
    assert failed_attempts(spark, str(query.runId)) == 0  # no task attempt failed, none was retried
    if guarantee == "exactly_once":
        # Task 0 wrote its rows to `out` in a transaction: aborted by Spark's abort, none visible, none open.
        assert kafka.committed_values(out) == Counter()
        assert held_back(kafka, out, 1) == 0
        assert kafka.open_transactions(prefix, 2) == []
    else:  # task 0 flushed its rows before reporting; the batch was not committed, so Spark replays it
        assert kafka.committed_values(out) == to_out

    kafka.create_topics([missing], 1)
    restarted = split_query(spark, bootstrap, source, checkpoint, dict(options))
    assert restarted.awaitTermination(300)
    assert restarted.exception() is None
    assert kafka.committed_values(missing) == to_missing
    # The replay of batch 0 wrote task 0's rows again: once in all under exactly_once, twice otherwise.
    assert kafka.committed_values(out) == (to_out if guarantee == "exactly_once" else to_out + to_out)


def test_a_batch_write_with_a_null_topic_fails_once_and_leaves_nothing_visible(
    spark: Any, kafka: Kafka, bootstrap: str
) -> None:
    out = kafka.topic(partitions=1)
    rows = [(f"v{i}", out) for i in range(6)] + [("lost", None)] + [(f"w{i}", out) for i in range(6)]
    df = spark.createDataFrame(rows, "value string, topic string").repartition(2)
    prefix = f"nulltopic-{uuid.uuid4().hex[:6]}"
    writer = (
        df.write.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("deliveryGuarantee", "exactly_once")
        .option("transactionalIdPrefix", prefix)
        .mode("append")
    )
    group = f"null-topic-{uuid.uuid4().hex[:6]}"
    sentence = "a row has a null topic and the sink has no option topic"
    spark.sparkContext.setJobGroup(group, "a batch write that a task refuses")
    try:
        with pytest.raises(Exception, match=sentence) as caught:
            writer.save()
    finally:  # the session's later jobs belong to no group (None removes a local property)
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        spark.sparkContext.setLocalProperty("spark.job.description", None)
    report = spark_report(caught.value)
    assert report.count(ERROR_CLASS) == 1, report  # once, raised by the commit
    assert "in _commit\n" in report, report
    assert failed_attempts(spark, group) == 0
    assert kafka.committed_values(out) == Counter()
    assert held_back(kafka, out, 1) == 0
    assert kafka.open_transactions(prefix, 2) == []


def test_a_batch_the_broker_refuses_while_the_task_produces_fails_once_naming_the_size(
    spark: Any, kafka: Kafka, bootstrap: str
) -> None:
    """The topic takes batches of 1 KB at most (``max.message.bytes``); each record is 100 bytes, so
    librdkafka's first batch (it fills up to ``kafka.batch.size``, 1 MB) is refused with MESSAGE_TOO_LARGE,
    and librdkafka does not split it. The task has 150,000 records: its local queue (100,000 records) fills
    and it waits for deliveries, so the answer arrives while it still produces, and the transaction being
    abortable, its next ``produce()`` raises _STATE. The refused batch is the cause: one sentence naming the
    size limits, raised by the commit, no task attempt failed (before: _STATE, an error a retry may heal,
    each of Spark's attempts failing the same way)."""
    out = kafka.topic(partitions=1, config={"max.message.bytes": "1024"})
    df = spark.range(150_000).selectExpr("repeat('x', 100) AS value").coalesce(1)
    prefix = f"toolarge-{uuid.uuid4().hex[:6]}"
    writer = (
        df.write.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("deliveryGuarantee", "exactly_once")
        .option("transactionalIdPrefix", prefix)
        .mode("append")
    )
    group = f"too-large-{uuid.uuid4().hex[:6]}"
    spark.sparkContext.setJobGroup(group, "a batch write whose records the broker refuses in batches")
    try:
        with pytest.raises(Exception, match=r"record batch larger than the topic's max\.message\.bytes") as e:
            writer.save()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        spark.sparkContext.setLocalProperty("spark.job.description", None)
    report = spark_report(e.value)
    assert "MSG_SIZE_TOO_LARGE" in report, report
    assert "_STATE" not in report, report
    assert report.count(ERROR_CLASS) == 1, report  # once, raised by the commit
    assert f"{ERROR_CLASS}DeliveryError" in report, report
    assert failed_attempts(spark, group) == 0
    assert kafka.committed_values(out) == Counter()
    assert kafka.open_transactions(prefix, 1) == []
