"""Helpers for source tests: produce known records, run queries, read what they wrote."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient

from sparkafka.local.tansu_workarounds import exact_latest_producer_conf
from sparkafka.structs import TopicPartition, committed_offsets

Offsets = dict[TopicPartition, int]


def produce(
    conf: dict[str, str],
    topic: str,
    values: Iterable[str],
    partitions: int = 1,
    headers: list[tuple[str, bytes]] | None = None,
    timestamp: int | None = None,
) -> list[str]:
    """Produce each value round-robin over ``partitions`` (each record its own batch); returns the values."""
    producer = Producer(exact_latest_producer_conf(conf))
    out = []
    for i, value in enumerate(values):
        kwargs: dict[str, Any] = {"partition": i % partitions, "key": f"k{i}".encode()}
        if headers:
            kwargs["headers"] = headers
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        producer.produce(topic, value.encode(), **kwargs)
        out.append(value)
    assert producer.flush(30) == 0
    return out


def source(spark: Any, bootstrap: str, **options: Any) -> Any:
    reader = spark.readStream.format("sparkafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def run_to_parquet(
    df: Any, path: str, checkpoint: str, available_now: bool = True, timeout_s: float = 120
) -> Any:
    """Run the query into a parquet directory (Spark's exactly-once file sink) until it ends."""
    writer = df.selectExpr("topic", "partition", "offset", "cast(value as string) as value").writeStream
    writer = writer.format("parquet").option("path", path).option("checkpointLocation", checkpoint)
    query = writer.trigger(availableNow=True).start() if available_now else writer.start()
    assert query.awaitTermination(timeout_s), "query did not finish"
    if query.exception() is not None:
        raise AssertionError(str(query.exception()))
    return query


def read_values(spark: Any, path: str) -> list[str]:
    return [r["value"] for r in spark.read.parquet(path).collect()]


def memory_query(df: Any, name: str, checkpoint: str) -> Any:
    return (
        (
            df.selectExpr("topic", "partition", "offset", "cast(value as string) as value", "headers")
            if "headers" in df.columns
            else df.selectExpr("topic", "partition", "offset", "cast(value as string) as value")
        )
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", checkpoint)
        .start()
    )


def wait_for(predicate: Any, timeout_s: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def group_offsets(conf: dict[str, str], group: str, topic: str, partitions: int) -> Offsets:
    """The group's committed offsets, read as lag tools do (AdminClient list_consumer_group_offsets)."""
    admin = AdminClient(conf)
    wanted = [CTopicPartition(topic, p) for p in range(partitions)]
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, wanted)])[group]
    got = committed_offsets(future.result(30).topic_partitions)
    return {tp: o for tp, o in got.items() if o is not None}


def checkpoint_batches(checkpoint: str) -> tuple[dict[int, Offsets], set[int]]:
    """The end offsets of each batch in the offset log, and the batch ids in the commit log."""
    ends: dict[int, Offsets] = {}
    for f in (Path(checkpoint) / "offsets").glob("[0-9]*"):
        source_json = json.loads(f.read_text().splitlines()[2])
        ends[int(f.name)] = {
            TopicPartition(t, int(p)): int(o) for t, parts in source_json.items() for p, o in parts.items()
        }
    commits = {int(f.name) for f in (Path(checkpoint) / "commits").glob("[0-9]*")}
    return ends, commits


def memory_values(spark: Any, name: str) -> list[str]:
    """The values a ``memory_query`` named ``name`` has collected so far."""
    return [r["value"] for r in spark.sql(f"select value from {name}").collect()]
