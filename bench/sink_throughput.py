"""Sink throughput: a raw confluent-kafka transactional producer vs this sink, at-least-once and exactly-once.

One run, same input (default 2,000,000 rows with a 100 B value) on the embedded broker. (a) one Python
process producing with 10,000-record transactions; (b) and (c) a Spark stream on local[2] reading the rows
from parquet files into the sink (by default four files, 1,000,000 rows, per micro-batch; a task per file).
The Spark figures are steady state: a small warm-up query runs first, and the rate is rows over the summed
batch durations Spark reports (which include the driver's commit of every batch's transactions).

    python bench/sink_throughput.py [--records N] [--partitions P] [--files F] [--files-per-batch K]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from sparkafka import register
from sparkafka.local import EmbeddedBroker
from sparkafka.local.spark import local_spark, stop_spark
from steady import steady_rate


def create(conf: dict[str, str], topic: str, partitions: int) -> None:
    admin = AdminClient(conf)  # must outlive its futures
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def raw_transactional(conf: dict[str, str], topic: str, records: int, per_txn: int = 10_000) -> float:
    producer = Producer(
        {
            **conf,
            "transactional.id": f"bench-raw-{uuid.uuid4().hex[:6]}",
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    producer.init_transactions(30)
    payload = b"x" * 100
    started = time.perf_counter()
    for start in range(0, records, per_txn):
        producer.begin_transaction()
        for _ in range(min(per_txn, records - start)):
            while True:
                try:
                    producer.produce(topic, payload)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.commit_transaction(120)
    elapsed = time.perf_counter() - started
    producer.close()
    return records / elapsed


def spark_sink(
    spark: object,
    input_dir: str,
    bootstrap: str,
    topic: str,
    *,
    delivery: str,
    total: int,
    files_per_batch: int,
) -> float:
    reader = spark.readStream.schema("value string").option("maxFilesPerTrigger", files_per_batch)  # type: ignore[attr-defined]
    df = reader.parquet(input_dir)
    writer = (
        df.writeStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("deliveryGuarantee", delivery)
        .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-ck-"))
    )
    if delivery == "exactly_once":
        writer = writer.option("transactionalIdPrefix", f"bench-{uuid.uuid4().hex[:6]}")
    query = writer.trigger(availableNow=True).start()
    rate, batches, seconds = steady_rate(query, total, "sink wrote")
    print(f"    {delivery}: {batches} batches, {seconds / batches:.2f} s per batch on average")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--files", type=int, default=8, help="input parquet files (one writer task each)")
    parser.add_argument("--files-per-batch", type=int, default=4, help="files per micro-batch")
    args = parser.parse_args()
    with EmbeddedBroker() as broker:
        conf = {"bootstrap.servers": broker.bootstrap_servers}
        for topic in ("raw", "alo", "eos", "warm"):
            create(conf, topic, args.partitions)
        raw = raw_transactional(conf, "raw", args.records)
        print(f"(a) raw confluent-kafka transactional producer, 10k/txn : {raw:>10,.0f} records/s")
        spark = local_spark(app_name="bench-sink")
        try:
            register(spark)
            data = tempfile.mkdtemp(prefix="bench-in-")
            warm = tempfile.mkdtemp(prefix="bench-warm-")
            rows = spark.range(args.records).selectExpr("lpad(cast(id as string), 100, 'x') as value")
            rows.repartition(args.files).write.mode("overwrite").parquet(data)
            rows.limit(20_000).repartition(2).write.mode("overwrite").parquet(warm)
            spark_sink(
                spark,
                warm,
                broker.bootstrap_servers,
                "warm",
                delivery="exactly_once",
                total=20_000,
                files_per_batch=2,
            )
            alo = spark_sink(
                spark,
                data,
                broker.bootstrap_servers,
                "alo",
                delivery="at_least_once",
                total=args.records,
                files_per_batch=args.files_per_batch,
            )
            eos = spark_sink(
                spark,
                data,
                broker.bootstrap_servers,
                "eos",
                delivery="exactly_once",
                total=args.records,
                files_per_batch=args.files_per_batch,
            )
        finally:
            stop_spark(spark)
        print(f"(b) sparkafka sink at_least_once, local[2]          : {alo:>10,.0f} records/s")
        print(f"(c) sparkafka sink exactly_once, local[2]           : {eos:>10,.0f} records/s")
        print(f"ratio exactly_once/raw: {eos / raw:.2f}   exactly_once/at_least_once: {eos / alo:.2f}")


if __name__ == "__main__":
    main()
