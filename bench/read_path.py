"""The read path in one process: what a reader task runs (``read_ranges``, Arrow built) vs a raw consumer.

One local Apache Kafka, one topic (default 2,000,000 records of 100 B in 4 partitions), in one run, side
by side, alternating, each ``--repeat`` times:

  raw          a bare confluent-kafka loop: assign the partitions, ``consume(10000)``, count (no Arrow)
  read_ranges  ``sparkafka.source.fetch.read_ranges`` over the same partitions from 0 to their ends,
               Arrow record batches built, with the source's consumer settings
  read_ranges with librdkafka's default ``queued.min.messages`` (100,000), to show what that setting buys

Ratios are against the median raw rate (goal, issue 29: read_ranges >= 1.0 x raw).

    python bench/read_path.py [--records N] [--partitions P] [--repeat K]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Mapping

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTopicPartition

from source_throughput import fill
from sparkafka.local import ApacheKafka
from sparkafka.source.fetch import OffsetRange, read_ranges
from sparkafka.structs import TopicPartition


def raw(conf: Mapping[str, str], topic: str, partitions: int, total: int) -> float:
    consumer = Consumer({**conf, "group.id": f"bench-{uuid.uuid4().hex}", "enable.auto.commit": False})
    consumer.assign([CTopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    started = time.perf_counter()
    while seen < total:
        for msg in consumer.consume(10000, 1.0):
            if msg.error() is None:
                seen += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return seen / elapsed


def ranges(conf: Mapping[str, str], topic: str, partitions: int, per: int) -> float:
    todo = [OffsetRange(TopicPartition(topic, p), 0, per) for p in range(partitions)]
    rows = 0
    started = time.perf_counter()
    for batch in read_ranges(conf, todo):
        rows += batch.num_rows
    elapsed = time.perf_counter() - started
    if rows != per * partitions:
        raise RuntimeError(f"read_ranges returned {rows} rows, expected {per * partitions}")
    return rows / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with ApacheKafka(data_dir=tempfile.mkdtemp(prefix="bench-read-path-")) as broker:
        conf = {"bootstrap.servers": broker.bootstrap_servers}
        topic = f"bench-read-{uuid.uuid4().hex[:6]}"
        fill(conf, topic, args.records, args.partitions)
        per = args.records // args.partitions
        total = per * args.partitions
        rows: dict[str, list[float]] = {"raw": [], "read_ranges": [], "read_ranges, queue 100k": []}
        for i in range(args.repeat):
            rows["raw"].append(raw(conf, topic, args.partitions, args.records))
            rows["read_ranges"].append(ranges(conf, topic, args.partitions, per))
            default_queue = {**conf, "queued.min.messages": "100000"}
            rows["read_ranges, queue 100k"].append(ranges(default_queue, topic, args.partitions, per))
            print(f"run {i + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rows.items()), flush=True)
        base = statistics.median(rows["raw"])
        print(
            f"{total:,} records of 100 B in {args.partitions} partitions, one process, "
            f"medians of {args.repeat}:"
        )
        for name, rates in rows.items():
            rate = statistics.median(rates)
            print(f"  {name:<26} {rate:>10,.0f} records/s  {rate / base:.2f} x raw")


if __name__ == "__main__":
    main()
