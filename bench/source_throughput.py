"""Source throughput: sparkafka on local[2] into Spark's noop sink vs a raw confluent-kafka consumer.

Both read the same topic (default 2,000,000 records of 100 B in 4 partitions) on the embedded broker, in
one run, side by side. The Spark figure is steady state: Python workers are warmed up by a small query
first, and the rate is records over the summed batch durations Spark reports for the timed query.

    python bench/source_throughput.py [--records N] [--partitions P] [--batch-records B]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sparkafka.local import EmbeddedBroker
from sparkafka.local.spark import local_spark, stop_spark
from sparkafka.local.tansu_workarounds import seal_latest_offsets
from steady import steady_rate


def fill(conf: dict[str, str], topic: str, records: int, partitions: int) -> int:
    admin = AdminClient(conf)  # must outlive its futures
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)
    producer = Producer(
        {**conf, "linger.ms": 20, "batch.num.messages": 10000, "queue.buffering.max.messages": 1_000_000}
    )
    payload = b"x" * 100
    for i in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)
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


def spark_source(spark: object, bootstrap: str, topic: str, total: int, batch_records: int) -> float:
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
    query = df.writeStream.format("noop").option("checkpointLocation", ck).trigger(availableNow=True).start()
    return steady_rate(query, total, "source read")[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batch-records", type=int, default=500_000)
    args = parser.parse_args()
    with EmbeddedBroker() as broker:
        conf = {"bootstrap.servers": broker.bootstrap_servers}
        topic = "bench-source"
        t = time.perf_counter()
        total = fill(conf, topic, args.records, args.partitions)
        print(
            f"filled {topic}: {total} records of 100 B in {args.partitions} partitions, "
            f"{time.perf_counter() - t:.1f} s"
        )
        raw = raw_consumer(conf, topic, args.partitions, total)
        print(f"(a) raw confluent-kafka consumer, 1 process : {raw:>12,.0f} records/s")
        spark = local_spark(app_name="bench-source")
        try:
            fill(conf, "bench-warmup", 20_000, args.partitions)
            spark_source(spark, broker.bootstrap_servers, "bench-warmup", 20_000 + args.partitions, 10_000)
            ours = spark_source(spark, broker.bootstrap_servers, topic, total, args.batch_records)
        finally:
            stop_spark(spark)
        print(f"(b) sparkafka source, local[2] -> noop       : {ours:>12,.0f} records/s")
        print(f"ratio (b)/(a): {ours / raw:.2f}")


if __name__ == "__main__":
    main()
