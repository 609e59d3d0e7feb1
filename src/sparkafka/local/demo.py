"""``sparkafka demo``: a run on the embedded broker that shows the pieces working together."""

from __future__ import annotations

import json
import random
import time
from typing import Any, TextIO

from sparkafka.kafka import partition_for_key
from sparkafka.local.broker import EmbeddedBroker
from sparkafka.local.tansu_workarounds import SEAL_VALUE, seal_latest_offsets

__all__ = ["make_order", "run_demo"]

CURRENCIES = ("EUR", "USD", "GBP", "CHF")


def make_order(rng: random.Random, order_id: int, customers: int = 50) -> tuple[bytes, bytes]:
    """One shop order as (key, JSON value), keyed by customer id."""
    customer = f"customer-{rng.randrange(customers):03d}"
    order = {
        "order_id": order_id,
        "customer": customer,
        "amount": round(rng.uniform(1, 500), 2),
        "currency": rng.choice(CURRENCIES),
        "event_time": int(time.time() * 1000) - rng.randrange(60_000),
    }
    return customer.encode(), json.dumps(order).encode()


def run_demo(out: TextIO, records: int = 5000, partitions: int = 4, seed: int = 7) -> int:
    """Start a broker, produce and read back ``records`` orders, aggregate them with Spark. Returns 0 if
    every order came back exactly once on the partition Java's partitioner would choose."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    rng = random.Random(seed)
    with EmbeddedBroker() as broker:
        conf = {"bootstrap.servers": broker.bootstrap_servers}
        print(f"embedded broker (tansu, pid {broker.pid}) at {broker.bootstrap_servers}", file=out)
        admin = AdminClient(conf)
        for future in admin.create_topics([NewTopic("orders", partitions, 1)]).values():
            future.result(30)

        started = time.monotonic()
        producer = Producer({**conf, "linger.ms": 5})
        for i in range(records):
            key, value = make_order(rng, i)
            # Java-compatible placement: librdkafka's own default would hash keys with CRC32.
            producer.produce("orders", value, key=key, partition=partition_for_key(key, partitions))
        producer.flush(60)
        seal_latest_offsets(conf, "orders", range(partitions))  # tansu: exact ListOffsets(latest)
        elapsed = time.monotonic() - started
        print(f"produced {records} orders to 'orders' ({partitions} partitions) in {elapsed:.2f} s", file=out)

        consumer = Consumer({**conf, "group.id": "sparkafka-demo", "enable.auto.commit": False})
        consumer.assign([CTopicPartition("orders", p, 0) for p in range(partitions)])
        rows: list[tuple[int, int, str, str]] = []
        deadline = time.monotonic() + 60
        while len(rows) < records and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is None and msg.value() != SEAL_VALUE:
                    rows.append((msg.partition(), msg.offset(), msg.key().decode(), msg.value().decode()))
        consumer.close()
        print(f"read back {len(rows)} records with a confluent-kafka consumer", file=out)
        return _spark_report(broker.bootstrap_servers, len(rows), records, partitions, out)


def _spark_report(bootstrap: str, read_back: int, expected: int, partitions: int, out: TextIO) -> int:
    from pyspark.sql import functions as F  # noqa: N812

    from sparkafka.local.spark import local_spark, stop_spark

    spark: Any = local_spark(app_name="sparkafka-demo")
    try:
        # The sparkafka batch source: earliest to latest, one task per Kafka partition.
        df = (
            spark.read.format("sparkafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "orders")
            .load()
            .where(F.col("value") != F.lit(SEAL_VALUE))
            .selectExpr("partition", "cast(key as string) as key", "cast(value as string) as value")
        )
        orders = df.select(
            "partition",
            "key",
            F.from_json("value", "order_id long, customer string, amount double, currency string").alias("o"),
        ).select("partition", "key", "o.*")
        by_currency = (
            orders.groupBy("currency")
            .agg(F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("revenue"))
            .orderBy("currency")
            .collect()
        )
        print("Spark job: revenue per currency", file=out)
        for row in by_currency:
            print(f"  {row['currency']}  {row['orders']:>6} orders  {row['revenue']:>12,.2f}", file=out)
        distinct_ids = orders.select("order_id").distinct().count()
        total = orders.count()
        placements = orders.select("key", "partition").distinct().collect()
        misplaced = [
            r for r in placements if partition_for_key(r["key"].encode(), partitions) != r["partition"]
        ]
    finally:
        stop_spark(spark)
    ok = read_back == expected and distinct_ids == expected == total and not misplaced
    print(
        f"Spark read {total} records with spark.read.format('sparkafka'), {distinct_ids} distinct order ids",
        file=out,
    )
    print(
        f"check: {distinct_ids} distinct order ids of {expected} produced, {read_back} read; "
        f"{len(placements)} customers, {len(misplaced)} on a partition Java's murmur2 would not choose: "
        + ("OK" if ok else "FAILED"),
        file=out,
    )
    return 0 if ok else 1
