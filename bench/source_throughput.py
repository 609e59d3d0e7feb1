"""Source throughput: sparkafka on local[2] into Spark's noop sink vs a raw confluent-kafka consumer.

Both read the same topic (default 2,000,000 records of 100 B in 4 partitions) on a local Apache Kafka (tansu
with --tansu), in one run, side by side; the raw consumer before and after the Spark rows (its rate moves
between runs of the same machine), ratios against the mean of the two. Python workers are warmed up by a
small query first. Two Spark figures: steady state, records over the summed batch durations Spark reports
for the timed query, and the backlog drain, records over the wall time from the query's ``start()`` to the
end of its availableNow run (so per-query and per-batch start-up costs count).

    python bench/source_throughput.py [--records N] [--partitions P] [--batch-records B] [--cluster]

``--cluster`` adds the same read on a local Spark standalone cluster (2 workers, 1 core each: executors
in separate JVMs), next to local[2], in the same run.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sparkafka.local import ApacheKafka, EmbeddedBroker
from sparkafka.local.cluster import StandaloneCluster
from sparkafka.local.spark import local_spark, stop_spark
from sparkafka.local.tansu_workarounds import seal_latest_offsets
from steady import steady_rate


def produce_spread(conf: dict[str, str], slots: list[tuple[str, int]], records: int) -> int:
    """``records`` of 100 B round-robin over ``slots`` (topic, partition), fast; the count left unsent
    after a 120 s flush."""
    producer = Producer(
        {**conf, "linger.ms": 20, "batch.num.messages": 10000, "queue.buffering.max.messages": 1_000_000}
    )
    payload = b"x" * 100
    for i in range(records):
        topic, partition = slots[i % len(slots)]
        while True:
            try:
                producer.produce(topic, payload, partition=partition)
                break
            except BufferError:
                producer.poll(0.05)
    return int(producer.flush(120))


def fill(conf: dict[str, str], topic: str, records: int, partitions: int) -> int:
    admin = AdminClient(conf)  # must outlive its futures
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)
    produce_spread(conf, [(topic, p) for p in range(partitions)], records)
    seal_latest_offsets(conf, topic, range(partitions))  # tansu: make ListOffsets(latest) exact
    return records + partitions


def raw_consumer(conf: dict[str, str], topic: str, partitions: int, total: int) -> float:
    consumer = Consumer({**conf, "group.id": f"bench-{uuid.uuid4().hex}", "enable.auto.commit": False})
    consumer.assign([CTopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    size = 0
    started = time.perf_counter()
    while seen < total:
        for msg in consumer.consume(10000, 1.0):
            if msg.error() is None:
                size += len(msg.value())
                seen += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return seen / elapsed


def spark_source(
    spark: object, bootstrap: str, topic: str, total: int, batch_records: int
) -> tuple[float, float]:
    """(steady rate, drain rate): records over summed batch durations, and over start() to termination."""
    df = (
        spark.readStream.format("sparkafka")  # type: ignore[attr-defined]
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("parallelism", 2)
        .option("maxRecordsPerTrigger", batch_records)
        .load()
    )
    ck = tempfile.mkdtemp(prefix="bench-ck-")
    writer = df.writeStream.format("noop").option("checkpointLocation", ck).trigger(availableNow=True)
    started = time.perf_counter()
    query = writer.start()
    query.awaitTermination()
    drained = time.perf_counter() - started
    return steady_rate(query, total, "source read")[0], total / drained


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--tansu", action="store_true", help="the pip-only tansu broker instead of Apache Kafka"
    )
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batch-records", type=int, default=500_000)
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="also run on a local standalone cluster of 2 workers with 1 core each, next to local[2]",
    )
    args = parser.parse_args()
    with EmbeddedBroker() if args.tansu else ApacheKafka() as broker:
        conf = {"bootstrap.servers": broker.bootstrap_servers}
        topic = "bench-source"
        t = time.perf_counter()
        total = fill(conf, topic, args.records, args.partitions)
        print(
            f"filled {topic}: {total} records of 100 B in {args.partitions} partitions, "
            f"{time.perf_counter() - t:.1f} s"
        )
        raw_before = raw_consumer(conf, topic, args.partitions, total)
        print(f"(a) raw confluent-kafka consumer, 1 process : {raw_before:>12,.0f} records/s")
        fill(conf, "bench-warmup", 20_000, args.partitions)
        spark = local_spark(app_name="bench-source")
        ours, drain = measure(spark, broker.bootstrap_servers, topic, total, args)
        raw_after = raw_consumer(conf, topic, args.partitions, total)
        print(f"(a) the same, after the Spark rows           : {raw_after:>12,.0f} records/s")
        raw = (raw_before + raw_after) / 2
        print(f"(b) sparkafka source, local[2] -> noop       : {ours:>12,.0f} records/s (steady)")
        print(f"(d) the same, start() to availableNow's end  : {drain:>12,.0f} records/s (backlog drain)")
        print(f"ratio (b)/(a): {ours / raw:.2f}   ratio (d)/(a): {drain / raw:.2f}")
        if args.cluster:
            with StandaloneCluster(workers=2, cores=1, memory="2g") as cluster:
                spark = local_spark(app_name="bench-source", master=cluster.master_url, config=CLUSTER_CONF)
                on_cluster, _ = measure(spark, broker.bootstrap_servers, topic, total, args)
            print(f"(c) sparkafka source, 2 workers x 1 core     : {on_cluster:>12,.0f} records/s")
            print(f"ratio (c)/(b): {on_cluster / ours:.2f}   ratio (c)/(a): {on_cluster / raw:.2f}")


CLUSTER_CONF = {"spark.cores.max": "2", "spark.executor.cores": "1", "spark.executor.memory": "1g"}


def measure(
    spark: object, bootstrap: str, topic: str, total: int, args: argparse.Namespace
) -> tuple[float, float]:
    """Warm up (Python workers, consumers), then read ``topic``: (steady, drain) rates; stops ``spark``."""
    try:
        spark_source(spark, bootstrap, "bench-warmup", 20_000 + args.partitions, 10_000)
        return spark_source(spark, bootstrap, topic, total, args.batch_records)
    finally:
        stop_spark(spark)


if __name__ == "__main__":
    main()
