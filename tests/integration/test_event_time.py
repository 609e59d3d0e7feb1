"""Event-time alignment beside Spark's connector: a skewed backlog into a windowed count with a watermark.

4 partitions: partition 0 holds three hours of records, partitions 1-3 only the last ten minutes. Read from
earliest with ``maxOffsetsPerTrigger`` into a 1-minute windowed count with a 10-minute watermark, Spark's
``format("kafka")`` races partitions 1-3 ahead and drops most of partition 0 as late; ``format("sparkafka")``
with ``maxEventTimeDrift`` of 10 minutes drops nothing, and a restart in the middle of the catch-up plans the
same ranges and gives the same windows.
"""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import Producer

from sparkafka.client.metadata import AdminMetadata
from sparkafka.source.commits import read_source_metrics
from sparkafka.spark_lines import ADMISSION_CONTROL
from sparkafka.structs import TopicPartition
from tests.support.kafka import Kafka, Offsets
from tests.support.queries import checkpoint_batches, source
from tests.support.wait import wait_until

HOUR, MINUTE = 3_600_000, 60_000
T = 1_700_000_000_000 // HOUR * HOUR  # the end of the data (2023), on an hour
SKEWED = 360 + 3 * 60
"""Partition 0: one record every 30 s for three hours; partitions 1-3: one every 10 s for ten minutes."""


def produce(conf: dict[str, str], topic: str, records: list[tuple[int, int]]) -> None:
    """``(partition, timestamp)`` records, in order."""
    producer = Producer(conf)
    for i, (partition, timestamp) in enumerate(records):
        producer.produce(topic, f"v{i}".encode(), partition=partition, timestamp=timestamp)
    assert producer.flush(30) == 0


def skewed_records() -> list[tuple[int, int]]:
    records = [(0, T - 3 * HOUR + i * 30_000) for i in range(360)]
    return records + [(p, T - 10 * MINUTE + i * 10_000 + p) for p in (1, 2, 3) for i in range(60)]


def window_counts(df: Any) -> Any:
    from pyspark.sql.functions import window

    return df.groupBy(window("timestamp", "1 minute")).count().selectExpr("window.start AS start", "count")


def dropped_by_watermark(query: Any) -> int:
    """``numRowsDroppedByWatermark`` over the query's progress reports."""
    return sum(
        op.get("numRowsDroppedByWatermark", 0)
        for progress in query.recentProgress
        for op in progress.get("stateOperators", [])
    )


class Windows:
    """A windowed count with a 10-minute watermark, run availableNow in update mode, collected per window."""

    def __init__(self) -> None:
        self.counts: dict[dt.datetime, int] = {}
        self.dropped = 0
        self.batches = 0
        self._fail_at: int | None = None

    def run(self, df: Any, checkpoint: str, fail_at: int | None = None) -> None:
        """Until the end; ``fail_at``: the foreachBatch of that batch fails once (a crash mid-catch-up),
        and the query is started again from its checkpoint."""
        self._fail_at = fail_at
        counted = window_counts(df.withWatermark("timestamp", "10 minutes"))
        if fail_at is not None:
            with pytest.raises(Exception, match="crash mid-catch-up"):
                self._start(counted, checkpoint)
        self._start(counted, checkpoint)

    def start(self, df: Any, checkpoint: str) -> Any:
        """The same count on the default trigger, collected here: the caller drives the query it returns
        (``processAllAvailable``) and stops it."""
        return self._writer(window_counts(df.withWatermark("timestamp", "10 minutes")), checkpoint).start()

    def _writer(self, counted: Any, checkpoint: str) -> Any:
        return (
            counted.writeStream.outputMode("update")
            .foreachBatch(self._collect)
            .option("checkpointLocation", checkpoint)
        )

    def _start(self, counted: Any, checkpoint: str) -> None:
        if not ADMISSION_CONTROL:
            # PySpark 4.0/4.1 run AvailableNow for a Python source as one capped batch (spark_lines): to the
            # end batch by batch on the default trigger instead.
            query = self._writer(counted, checkpoint).start()
            try:
                query.processAllAvailable()
            finally:
                query.stop()
                self.dropped += dropped_by_watermark(query)
            return
        query = self._writer(counted, checkpoint).trigger(availableNow=True).start()
        try:
            assert query.awaitTermination(300), "query did not finish"
        finally:
            self.dropped += dropped_by_watermark(query)

    def _collect(self, batch: Any, batch_id: int) -> None:
        if batch_id == self._fail_at:
            self._fail_at = None
            raise RuntimeError("crash mid-catch-up")
        self.batches += 1
        for row in batch.collect():
            self.counts[row["start"]] = row["count"]


class Skewed(NamedTuple):
    topic: str
    expected: dict[dt.datetime, int]
    """Per window start, the count of a batch read of the topic."""
    aligned: Windows
    """sparkafka's aligned, uninterrupted run."""
    offsets: dict[int, Offsets]
    """Its end offsets per batch, from its checkpoint."""


@pytest.fixture(scope="module")
def skewed(kafka_conf: dict[str, str], spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Skewed:
    """The skewed topic, what a batch count of it gives, and sparkafka's aligned run of it (run once)."""
    topic = Kafka(kafka_conf).topic(partitions=4)
    produce(kafka_conf, topic, skewed_records())
    bootstrap = kafka_conf["bootstrap.servers"]
    batch = (
        spark.read.format("sparkafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    )
    expected = {r["start"]: r["count"] for r in window_counts(batch.load()).collect()}
    assert sum(expected.values()) == SKEWED
    checkpoint = str(tmp_path_factory.mktemp("aligned") / "checkpoint")
    ours = Windows()
    ours.run(aligned(spark, bootstrap, topic), checkpoint)
    return Skewed(topic, expected, ours, checkpoint_batches(checkpoint)[0])


def aligned(spark: Any, bootstrap: str, topic: str) -> Any:
    return source(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger=100,
        maxEventTimeDrift="10 minutes",
    )


@pytest.mark.lines
def test_spark_drops_a_lagging_partition_as_late_and_aligned_sparkafka_drops_nothing(
    spark: Any, bootstrap: str, skewed: Skewed, tmp_path: Path
) -> None:
    ours = skewed.aligned
    theirs = Windows()
    df = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", skewed.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 100)
        .load()
    )
    theirs.run(df, str(tmp_path / "theirs"))
    counted = sum(theirs.counts.values())
    print(
        f"\nSpark's format('kafka'): {counted} of {SKEWED} records counted, {SKEWED - counted} dropped as "
        f"late (numRowsDroppedByWatermark {theirs.dropped}) in {theirs.batches} batches; sparkafka aligned: "
        f"{sum(ours.counts.values())} counted, numRowsDroppedByWatermark {ours.dropped}, "
        f"{ours.batches} batches"
    )
    assert counted < SKEWED - 100  # most of partition 0's three hours are late for Spark
    assert ours.counts == skewed.expected  # every window equals the batch count of the same records
    assert ours.dropped == 0


def test_a_restart_mid_catch_up_plans_the_same_ranges_and_gives_the_same_windows(
    spark: Any, bootstrap: str, skewed: Skewed, checkpoint: str
) -> None:
    assert len(skewed.offsets) >= 6  # a catch-up of several batches
    restarted = Windows()
    restarted.run(aligned(spark, bootstrap, skewed.topic), checkpoint, fail_at=3)
    assert restarted.counts == skewed.expected
    assert restarted.dropped == 0
    assert (
        checkpoint_batches(checkpoint)[0] == skewed.offsets
    )  # the restarted source planned every batch the same


@pytest.mark.parametrize("idle_timeout", [None, "2 seconds"])
def test_quiet_partitions_hold_the_others_until_they_are_idle(
    spark: Any,
    kafka_conf: dict[str, str],
    bootstrap: str,
    kafka: Kafka,
    tmp_path: Path,
    idle_timeout: str | None,
) -> None:
    """Partitions 1-3 get one record each and go quiet; partition 0 has three hours of records. Idleness is
    by the driver's clock: with ``partitionIdleTimeout``, once partitions 1-3 have had nothing new to read for
    that long, partition 0 is read to its end."""
    topic = kafka.topic(partitions=4)
    produce(kafka_conf, topic, [(0, T - 3 * HOUR + i * MINUTE) for i in range(180)])
    produce(kafka_conf, topic, [(p, T - 3 * HOUR + 30_000) for p in (1, 2, 3)])
    metrics = str(tmp_path / "metrics.json")
    options = {"partitionIdleTimeout": idle_timeout} if idle_timeout else {}
    df = source(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        maxEventTimeDrift="10 minutes",
        metricsFile=metrics,
        **options,
    )
    name = f"idle_{uuid.uuid4().hex[:10]}"
    query = (
        df.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )

    def per_partition() -> dict[int, int]:
        rows = spark.sql(f"SELECT partition, count(*) n FROM {name} GROUP BY 1").collect()
        return {r["partition"]: r["n"] for r in rows}

    try:
        query.processAllAvailable()
        if idle_timeout is None:
            counted = per_partition()
        else:  # the query polls on; a plan after the timeout finds partitions 1-3 idle
            wait_until(lambda: per_partition().get(0) == 180, 120, "partition 0 read to its end")
            query.processAllAvailable()
            counted = per_partition()
    finally:
        query.stop()
    status = read_source_metrics("", metrics)
    assert status is not None
    assert status.event_time is not None
    states = {tp.partition: p.state for tp, p in status.event_time.partitions.items()}
    if idle_timeout is None:  # Flink's rule: a quiet partition holds the others back
        assert counted == {0: 11, 1: 1, 2: 1, 3: 1}  # up to 10 min 30 s past the quiet ones
        assert states == {0: "held", 1: "active", 2: "active", 3: "active"}
        assert status.event_time.slowest_quiet
    else:  # nothing new for longer than the timeout: idle, and partition 0 is read to the end
        assert counted == {0: 180, 1: 1, 2: 1, 3: 1}
        # Partition 0, read to its end, is idle too once the timeout passes again: not asserted.
        assert {p: s for p, s in states.items() if p} == {1: "idle", 2: "idle", 3: "idle"}


def test_a_partition_behind_an_open_transaction_holds_the_others_and_none_of_its_records_are_late(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, kafka: Kafka, tmp_path: Path
) -> None:
    """Partition 0: ten committed records from 70 minutes before T, then a transaction left open with sixty
    records from 60 minutes before T; partitions 1-3: one record every 30 s from 65 minutes before T to T.
    Read committed, a partition past whose last stable offset a transaction is open has no newest record
    Kafka names: it was taken for empty, partitions 1-3 ran to T, and when the transaction committed its
    records were an hour behind the watermark. It now counts at its first pending record; once the
    transaction commits and is read, at its last record (not at its commit marker's time, the broker's
    clock), so partitions 1-3 wait within the drift of it."""
    topic = kafka.topic(partitions=4)
    produce(kafka_conf, topic, [(0, T - 70 * MINUTE + i * 30_000) for i in range(10)])
    txn = Producer({**kafka_conf, "transactional.id": f"open-{uuid.uuid4().hex[:8]}"})
    txn.init_transactions(30)
    txn.begin_transaction()
    pending = [T - HOUR + i * 10_000 for i in range(60)]
    for i, timestamp in enumerate(pending):
        txn.produce(topic, f"txn{i}".encode(), partition=0, timestamp=timestamp)
    assert txn.flush(30) == 0
    others = [(p, T - 65 * MINUTE + i * 30_000 + p) for p in (1, 2, 3) for i in range(131)]
    produce(kafka_conf, topic, others)
    metrics, ck = str(tmp_path / "metrics.json"), str(tmp_path / "ck")
    df = source(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        maxEventTimeDrift="10 minutes",
        metricsFile=metrics,
    )
    windows = Windows()
    query = windows.start(df, ck)
    try:
        query.processAllAvailable()
        ends = checkpoint_batches(ck)[0]
        # Partitions 1-3 read every record below the drift past the pending record, and none at or above.
        bound = pending[0] + 10 * MINUTE
        below = {TopicPartition(topic, q): sum(p == q and ts < bound for p, ts in others) for q in (1, 2, 3)}
        assert ends[max(ends)] == {TopicPartition(topic, 0): 10, **below}
        status = read_source_metrics("", metrics)
        assert status is not None
        assert status.event_time is not None
        assert status.event_time.slowest == TopicPartition(topic, 0)
        assert status.event_time.slowest_ms == pending[0]
        assert status.event_time.slowest_pending
        assert status.event_time.bound_ms == bound
        states = {tp.partition: p.state for tp, p in status.event_time.partitions.items()}
        assert states == {0: "active", 1: "held", 2: "held", 3: "held"}

        txn.commit_transaction(30)
        p0 = TopicPartition(topic, 0)
        metadata = AdminMetadata(kafka_conf)  # read_committed: the last stable offset
        wait_until(lambda: metadata.latest([p0])[p0] > 10 + len(pending), 30, "the commit marker")
        query.processAllAvailable()
        # Partition 0 read to its end counts at its last record (not its commit marker, stamped with the
        # broker's clock): partitions 1-3 read below the drift past it, and wait there.
        after = pending[-1] + 10 * MINUTE
        below = {TopicPartition(topic, q): sum(p == q and ts < after for p, ts in others) for q in (1, 2, 3)}
        ends = checkpoint_batches(ck)[0]
        assert ends[max(ends)] == {p0: 10 + len(pending) + 1, **below}
    finally:
        query.stop()
    dropped = sum(
        op.get("numRowsDroppedByWatermark", 0)
        for progress in query.recentProgress
        for op in progress.get("stateOperators", [])
    )
    batch = (
        spark.read.format("sparkafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    )
    read = batch.load().where(f"partition = 0 OR timestamp < timestamp_millis({after})")
    expected = {r["start"]: r["count"] for r in window_counts(read).collect()}
    assert sum(expected.values()) == 10 + len(pending) + sum(below.values())  # what was produced, committed
    assert windows.counts == expected
    assert dropped == 0


def test_a_commit_marker_newer_than_its_records_does_not_let_the_others_race_ahead(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, kafka: Kafka, tmp_path: Path
) -> None:
    """Partition 0: thirty records stamped an hour before T, committed in a transaction, whose COMMIT marker
    carries the broker's clock (now, years after T); partition 1: a backlog from 50 minutes before T to T.
    Read with a drift of 10 minutes into a windowed count with a 10-minute watermark, partition 0 is read to
    its end at once; ListOffsets MAX_TIMESTAMP answers its marker, and taken as its event time partition 1
    read to T, so partition 0's next transaction (55 minutes before T) was an hour behind the watermark:
    all late. It now counts at its last record, and partition 1 waits within the drift of it."""
    topic = kafka.topic(partitions=2)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    txn = Producer({**kafka_conf, "transactional.id": f"old-{uuid.uuid4().hex[:8]}"})
    txn.init_transactions(30)
    metadata = AdminMetadata(kafka_conf)  # read_committed: the last stable offset

    def commit(timestamps: list[int], end: int) -> None:
        """A transaction of ``timestamps``, committed; ``end``: the last stable offset after its marker."""
        txn.begin_transaction()
        for timestamp in timestamps:
            txn.produce(topic, b"v", partition=0, timestamp=timestamp)
        txn.commit_transaction(30)
        wait_until(lambda: metadata.latest([p0])[p0] >= end, 30, "the commit marker")

    first = [T - HOUR + i * 10_000 for i in range(30)]  # to 55 min 10 s before T
    commit(first, 31)
    backlog = [T - 50 * MINUTE + i * 10_000 for i in range(300)]
    produce(kafka_conf, topic, [(1, ts) for ts in backlog])
    ck = str(tmp_path / "ck")
    df = source(spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxEventTimeDrift="10 minutes")
    windows = Windows()
    query = windows.start(df, ck)
    try:
        query.processAllAvailable()
        ends = checkpoint_batches(ck)[0]
        # Partition 1 reads below the drift past partition 0's last record, not past its marker's time.
        assert ends[max(ends)] == {p0: 31, p1: sum(ts < first[-1] + 10 * MINUTE for ts in backlog)}
        second = [T - 55 * MINUTE + i * 10_000 for i in range(30)]  # to 50 min 10 s before T
        commit(second, 62)
        query.processAllAvailable()
        ends = checkpoint_batches(ck)[0]
        read_p1 = sum(ts < second[-1] + 10 * MINUTE for ts in backlog)
        assert ends[max(ends)] == {p0: 62, p1: read_p1}
    finally:
        query.stop()
    assert dropped_by_watermark(query) == 0
    assert sum(windows.counts.values()) == len(first) + len(second) + read_p1
