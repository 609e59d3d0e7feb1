"""Event-time alignment (``maxEventTimeDrift``), in one run on one local Apache Kafka and ``local[2]``.

skew     the issue's backlog, larger: 4 partitions, partition 0 holding three hours of records (one a
         second), partitions 1-3 the last ten minutes (ten a second each), read from earliest with
         ``maxOffsetsPerTrigger`` into a 1-minute windowed count with a 10-minute watermark (update mode,
         availableNow). Spark's ``format("kafka")`` beside ``format("sparkafka")`` with a drift of 10
         minutes: records counted against a batch count of the same topic, Spark's
         ``numRowsDroppedByWatermark``, batches and wall time.
drain    a backlog without skew (default 2,000,000 records of 100 B in 4 partitions, each partition's
         timestamps spread evenly over the same three hours) into ``noop``, availableNow,
         ``maxOffsetsPerTrigger`` 500,000: alignment off and on (10 minutes), alternating, ``--repeat``
         times each; records over the wall time from ``start()`` to the end. Goal: on >= 0.9 x off.
planning the driver's planning time per micro-batch (``latestOffset``, no Spark: the source's reader
         called as Spark's source runner calls it) for 100 partitions with a skewed backlog and
         ``maxOffsetsPerTrigger``, alignment off and on, alternating batch by batch.

  python bench/event_time.py [--records N] [--repeat K] [--only skew,drain,planning]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from sparkafka.local import ApacheKafka
from sparkafka.local.spark import local_spark, stop_spark
from sparkafka.local.spark_kafka_dist import spark_jars
from sparkafka.source.options import parse_source_options
from sparkafka.source.reader import KafkaStreamReader
from sparkafka.spark_lines import ReadMaxRows

HOUR, MINUTE = 3_600_000, 60_000
T = 1_700_000_000_000 // HOUR * HOUR


def create(conf: dict[str, str], topic: str, partitions: int) -> None:
    """Without time retention: the records' timestamps are from 2023, and the broker's retention check (every
    5 minutes) deleted the logs under a run that lasted longer (a drain then read 0 rows, or lost offsets)."""
    admin = AdminClient(conf)  # must outlive its futures
    for f in admin.create_topics([NewTopic(topic, partitions, 1, config={"retention.ms": "-1"})]).values():
        f.result(30)


def produce(conf: dict[str, str], topic: str, records: Any, payload: bytes = b"x" * 100) -> int:
    """``(partition, timestamp)`` records; returns how many."""
    producer = Producer(
        {**conf, "linger.ms": 20, "batch.num.messages": 10000, "queue.buffering.max.messages": 1_000_000}
    )
    n = 0
    for partition, timestamp in records:
        while True:
            try:
                producer.produce(topic, payload, partition=partition, timestamp=timestamp)
                break
            except BufferError:
                producer.poll(0.05)
        n += 1
    producer.flush(300)
    return n


def windows(
    spark: Any, fmt: str, bootstrap: str, topic: str, *, per_batch: int, drift: str | None
) -> dict[str, Any]:
    """The windowed count of one connector: counted records, Spark's dropped rows, batches, seconds."""
    from pyspark.sql.functions import window

    reader = (
        spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    )
    reader = reader.option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", per_batch)
    if drift is not None:
        reader = reader.option("maxEventTimeDrift", drift)
    counted = (
        reader.load()
        .withWatermark("timestamp", "10 minutes")
        .groupBy(window("timestamp", "1 minute"))
        .count()
    )
    counts: dict[Any, int] = {}

    def collect(df: Any, _batch: int) -> None:
        for row in df.collect():
            counts[row["window"]["start"]] = row["count"]

    started = time.perf_counter()
    query = (
        counted.writeStream.outputMode("update")
        .foreachBatch(collect)
        .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-et-"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds = time.perf_counter() - started
    if query.exception():
        raise RuntimeError(query.exception())
    progress = query.recentProgress
    return {
        "counted": sum(counts.values()),
        "dropped_rows": sum(
            op.get("numRowsDroppedByWatermark", 0) for p in progress for op in p["stateOperators"]
        ),
        "batches": sum(1 for p in progress if p["numInputRows"]),
        "seconds": seconds,
    }


def bench_skew(spark: Any, conf: dict[str, str]) -> None:
    topic = "bench-et-skew"
    create(conf, topic, 4)
    records = [(0, T - 3 * HOUR + i * 1000) for i in range(3 * 3600)]
    records += [(p, T - 10 * MINUTE + i * 100 + p) for p in (1, 2, 3) for i in range(6000)]
    total = produce(conf, topic, records)
    print(
        f"\nskew: {topic}: partition 0 three hours (1/s), partitions 1-3 ten minutes (10/s); {total} records"
    )
    print(
        "  1-minute windows, withWatermark 10 minutes, maxOffsetsPerTrigger 5,000, availableNow, update mode"
    )
    bootstrap = conf["bootstrap.servers"]
    for name, fmt, drift in (
        ('Spark\'s format("kafka")', "kafka", None),
        ("sparkafka, maxEventTimeDrift 10 minutes", "sparkafka", "10 minutes"),
    ):
        r = windows(spark, fmt, bootstrap, topic, per_batch=5000, drift=drift)
        print(
            f"  {name:<40} counted {r['counted']:>6,} of {total:,} ({total - r['counted']:,} dropped as "
            f"late; numRowsDroppedByWatermark {r['dropped_rows']:,}), {r['batches']} batches, "
            f"{r['seconds']:.1f} s"
        )


def drain(spark: Any, bootstrap: str, topic: str, total: int, drift: str | None) -> float:
    reader = (
        spark.readStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
    )
    reader = reader.option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 500_000)
    if drift is not None:
        reader = reader.option("maxEventTimeDrift", drift)
    writer = (
        reader.load()
        .writeStream.format("noop")
        .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-et-"))
    )
    started = time.perf_counter()
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    if query.exception():
        raise RuntimeError(query.exception())
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    if rows != total:
        raise RuntimeError(f"drain read {rows} rows, expected {total}")
    return total / elapsed


def even(partitions: int, per_partition: int) -> Any:
    step = 3 * HOUR / per_partition
    for i in range(per_partition):
        for p in range(partitions):
            yield p, T - 3 * HOUR + int(i * step)


def bench_drain(spark: Any, conf: dict[str, str], args: argparse.Namespace) -> None:
    topic = "bench-et-even"
    create(conf, topic, 4)
    t = time.perf_counter()
    total = produce(conf, topic, even(4, args.records // 4))
    print(
        f"\ndrain: {topic}: {total:,} records of 100 B in 4 partitions, three hours each "
        f"({time.perf_counter() - t:.0f} s to fill)"
    )
    create(conf, "bench-et-warmup", 4)
    warm = produce(conf, "bench-et-warmup", even(4, 50_000))
    drain(spark, conf["bootstrap.servers"], "bench-et-warmup", warm, "10 minutes")
    rates: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(args.repeat):
        for label, drift in (("off", None), ("on", "10 minutes")):
            rates[label].append(drain(spark, conf["bootstrap.servers"], topic, total, drift))
            print(f"  alignment {label:<3} {rates[label][-1]:>12,.0f} records/s")
    off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
    print(f"  median: off {off:,.0f}, on {on:,.0f} records/s: on = {on / off:.2f} x off (goal >= 0.9)")


def bench_planning(conf: dict[str, str], args: argparse.Namespace) -> None:
    topic, partitions = "bench-et-plan", 100
    create(conf, topic, partitions)
    per = 2000
    # Partition p starts p minutes later: every batch has partitions ahead to hold and cuts to look up.
    total = produce(
        conf,
        topic,
        (
            (p, T - 3 * HOUR + p * MINUTE + i * (3 * HOUR // per))
            for i in range(per)
            for p in range(partitions)
        ),
        b"x" * 20,
    )
    print(
        f"\nplanning: {topic}: {partitions} partitions, {total:,} records, partition p starting p minutes "
        "later"
    )
    base = {
        "kafka.bootstrap.servers": conf["bootstrap.servers"],
        "subscribe": topic,
        "startingOffsets": "earliest",
    }
    readers = {
        "off": KafkaStreamReader(parse_source_options(base)),
        "on": KafkaStreamReader(parse_source_options({**base, "maxEventTimeDrift": "10 minutes"})),
    }
    limit = ReadMaxRows(10_000)
    starts = {label: r.initialOffset() for label, r in readers.items()}
    times: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(args.planning_batches):
        for label, reader in readers.items():
            t = time.perf_counter()
            end = reader.latestOffset(starts[label], limit)
            times[label].append((time.perf_counter() - t) * 1000)
            starts[label] = end
    for label, ms in times.items():
        steady = ms[1:]  # the first plan also connects and looks every partition up
        q = statistics.quantiles(steady, n=10)
        print(
            f"  alignment {label:<3} latestOffset per batch: median {statistics.median(steady):.1f} ms, "
            f"p90 {q[-1]:.1f} ms, first {ms[0]:.0f} ms ({len(ms)} batches of 10,000 records)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=2_000_000, help="drain: records in the backlog")
    parser.add_argument("--repeat", type=int, default=3, help="drain: runs of each, alternating")
    parser.add_argument("--planning-batches", type=int, default=40)
    parser.add_argument("--only", default="skew,drain,planning")
    args = parser.parse_args()
    only = set(args.only.split(","))
    with ApacheKafka() as kafka:
        conf = {"bootstrap.servers": kafka.bootstrap_servers}
        if "planning" in only:
            bench_planning(conf, args)
        if only & {"skew", "drain"}:
            spark = local_spark(app_name="bench-event-time", config={"spark.jars": spark_jars(quiet=False)})
            try:
                if "skew" in only:
                    bench_skew(spark, conf)
                if "drain" in only:
                    bench_drain(spark, conf, args)
            finally:
                stop_spark(spark)


if __name__ == "__main__":
    main()
