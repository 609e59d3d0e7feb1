"""Sink throughput: a raw confluent-kafka transactional producer vs this sink, at-least-once and exactly-once.

One run, same input (default 4,000,000 rows with a 100 B value) on a local Apache Kafka (tansu with
--tansu). (a) one Python process producing with 10,000-record transactions, before the Spark rows and again
after them (the broker then holds everything they wrote); ratios are against the mean of the two. The same
producer without transactions (idempotent, as the sink at least once), also before and after, shows what
transactions cost the broker. Then Spark streams on local[2] reading the rows from parquet files (16 of
250,000 rows by default) into the sink, at least once and exactly once, at 2 and 4 files (500,000 and
1,000,000 rows) per micro-batch, and into a Python sink that does nothing (Spark's own cost of handing the
rows to any Python sink: the floor under ours). Small warm-up queries run first. Rates are rows over the
summed batch durations Spark reports (which include the driver's commit of every batch's transactions): over
all batches, and over the batches after each query's first, which also pays once-per-query costs (the steady
state of a long-running query).

    python bench/sink_throughput.py [--records N] [--partitions P] [--files F] [--files-per-batch K[,K...]]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql.datasource import DataSource, WriterCommitMessage

from sparkafka import register
from sparkafka.local import ApacheKafka, EmbeddedBroker
from sparkafka.local.spark import local_spark, stop_spark
from sparkafka.spark_lines import StreamArrowWriter
from steady import Rates, query_rates

NOTHING = "python_nothing"
DELIVERIES = (NOTHING, "at_least_once", "exactly_once")


def create(conf: dict[str, str], topic: str, partitions: int) -> None:
    admin = AdminClient(conf)  # must outlive its futures
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def raw_producer(conf: dict[str, str], topic: str, records: int, per_txn: int | None = 10_000) -> float:
    """Records/s of one Python process producing 100 B values; ``per_txn=None``: no transactions."""
    settings: dict[str, object] = {**conf, "linger.ms": 5, "queue.buffering.max.messages": 1_000_000}
    if per_txn is None:
        settings["enable.idempotence"] = True
    else:
        settings["transactional.id"] = f"bench-raw-{uuid.uuid4().hex[:6]}"
    producer = Producer(settings)
    step = per_txn or records
    if per_txn is not None:
        producer.init_transactions(30)
    payload = b"x" * 100
    started = time.perf_counter()
    for start in range(0, records, step):
        if per_txn is not None:
            producer.begin_transaction()
        for _ in range(min(step, records - start)):
            while True:
                try:
                    producer.produce(topic, payload)
                    break
                except BufferError:
                    producer.poll(0.05)
        if per_txn is not None:
            producer.commit_transaction(120)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    producer.close()
    return records / elapsed


class _NothingWriter(StreamArrowWriter):  # type: ignore[misc]
    """Reads every Arrow batch Spark sends and does nothing with it."""

    def write(self, iterator: Any) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages: Any, batchId: int) -> None:  # noqa: N803 - Spark's name
        return None

    def abort(self, messages: Any, batchId: int) -> None:  # noqa: N803 - Spark's name
        return None


class NothingSink(DataSource):
    """``format("bench_nothing")``: a Python Arrow sink that does nothing."""

    @classmethod
    def name(cls) -> str:
        return "bench_nothing"

    def streamWriter(self, schema: Any, overwrite: bool) -> _NothingWriter:
        return _NothingWriter()


def spark_sink(
    spark: object,
    input_dir: str,
    bootstrap: str,
    topic: str,
    *,
    delivery: str,
    total: int,
    files_per_batch: int,
) -> Rates:
    reader = spark.readStream.schema("value string").option("maxFilesPerTrigger", files_per_batch)  # type: ignore[attr-defined]
    df = reader.parquet(input_dir)
    checkpoint = tempfile.mkdtemp(prefix="bench-ck-")
    if delivery == NOTHING:
        writer = df.writeStream.format(NothingSink.name()).option("checkpointLocation", checkpoint)
        return query_rates(writer.trigger(availableNow=True).start(), total, "sink read")
    writer = (
        df.writeStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("deliveryGuarantee", delivery)
        .option("checkpointLocation", checkpoint)
    )
    if delivery == "exactly_once":
        writer = writer.option("transactionalIdPrefix", f"bench-{uuid.uuid4().hex[:6]}")
    query = writer.trigger(availableNow=True).start()
    return query_rates(query, total, "sink wrote")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--tansu", action="store_true", help="the pip-only tansu broker instead of Apache Kafka"
    )
    parser.add_argument("--records", type=int, default=4_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--files", type=int, default=16, help="input parquet files (one writer task each)")
    parser.add_argument(
        "--files-per-batch",
        default="2,4",
        help="files per micro-batch, comma-separated for several batch sizes (default 2,4: 500k and 1M rows)",
    )
    args = parser.parse_args()
    sizes = [int(k) for k in str(args.files_per_batch).split(",")]
    with EmbeddedBroker() if args.tansu else ApacheKafka() as broker:
        conf = {"bootstrap.servers": broker.bootstrap_servers}
        for topic in ("raw-before", "raw-after", "raw-idempotent", "warm"):
            create(conf, topic, args.partitions)
        raw_before = raw_producer(conf, "raw-before", args.records)
        print(f"(a) raw confluent-kafka transactional producer, 10k/txn: {raw_before:>10,.0f} records/s")
        idempotent_before = raw_producer(conf, "raw-idempotent", args.records, per_txn=None)
        print(f"    the same without transactions (idempotent):        {idempotent_before:>10,.0f} records/s")
        spark = local_spark(app_name="bench-sink")
        results: dict[tuple[int, str], Rates] = {}
        try:
            register(spark)
            spark.dataSource.register(NothingSink)
            data = tempfile.mkdtemp(prefix="bench-in-")
            warm = tempfile.mkdtemp(prefix="bench-warm-")
            rows = spark.range(args.records).selectExpr("lpad(cast(id as string), 100, 'x') as value")
            rows.repartition(args.files).write.mode("overwrite").parquet(data)
            rows.limit(20_000).repartition(2).write.mode("overwrite").parquet(warm)
            for delivery in DELIVERIES:  # warms each path's Python workers
                create(conf, f"warm-{delivery}", args.partitions)
                spark_sink(
                    spark,
                    warm,
                    broker.bootstrap_servers,
                    f"warm-{delivery}",
                    delivery=delivery,
                    total=20_000,
                    files_per_batch=2,
                )
            for k in sizes:
                for delivery in DELIVERIES:
                    topic = f"{delivery}-{k}"
                    create(conf, topic, args.partitions)
                    results[k, delivery] = spark_sink(
                        spark,
                        data,
                        broker.bootstrap_servers,
                        topic,
                        delivery=delivery,
                        total=args.records,
                        files_per_batch=k,
                    )
        finally:
            stop_spark(spark)
        raw_after = raw_producer(conf, "raw-after", args.records)
        print(f"(a) the same, after the Spark rows:                   {raw_after:>10,.0f} records/s")
        idempotent_after = raw_producer(conf, "raw-idempotent", args.records, per_txn=None)
        print(f"    without transactions, after:                       {idempotent_after:>10,.0f} records/s")
    raw = (raw_before + raw_after) / 2
    idempotent = (idempotent_before + idempotent_after) / 2
    report(results, raw, idempotent, args.records // args.files, sizes)


def report(
    results: dict[tuple[int, str], Rates], raw: float, idempotent: float, per_file: int, sizes: list[int]
) -> None:
    """The table, the ratios, and each batch size's floor: what Spark alone takes per batch."""
    ratio = raw / idempotent
    print(f"raw transactional {raw:,.0f} records/s, idempotent {idempotent:,.0f} (means): {ratio:.2f}")
    print(
        f"{'rows/batch':>10} {'sink':<14} {'batches':>7} {'first (s)':>9} {'median later (s)':>16} "
        f"{'later rec/s':>12} {'all rec/s':>10}"
    )
    for (k, delivery), r in results.items():
        later = f"{r.later_rate:,.0f}" if r.later_rate else "-"
        median = f"{r.later_median_s:.3f}" if r.later_median_s else "-"
        row = f"{k * per_file:>10,} {delivery:<14} {r.batches:>7} {r.first_s:>9.2f} {median:>16} {later:>12}"
        print(f"{row} {r.rate:>10,.0f}")
    for k in sizes:
        eos, alo, nothing = (results[k, d] for d in ("exactly_once", "at_least_once", NOTHING))
        n = k * per_file
        print(
            f"{n:>10,} rows/batch: exactly_once/raw {eos.rate / raw:.2f} "
            f"(later batches {(eos.later_rate or 0) / raw:.2f}), exactly_once/at_least_once "
            f"{eos.rate / alo.rate:.2f} (later {(eos.later_rate or 0) / (alo.later_rate or 1):.2f}), "
            f"at_least_once/raw {alo.rate / raw:.2f}"
        )
        floor = nothing.later_median_s
        if eos.later_median_s and alo.later_median_s and floor:
            print(
                f"{'':>10}  per steady batch: raw producer {n / raw:.3f} s for these rows; Spark into a "
                f"Python sink that does nothing {floor:.3f} s; at_least_once {alo.later_median_s:.3f} s "
                f"(+{alo.later_median_s - floor:.3f}); exactly_once {eos.later_median_s:.3f} s "
                f"(+{eos.later_median_s - floor:.3f})"
            )


if __name__ == "__main__":
    main()
