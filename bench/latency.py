"""End-to-end latency: a raw consume->produce loop vs sparkafka pipelines, side by side in one run.

A feeder produces a steady stream (default 20 records/s) into a 2-partition input topic; each value is its
send time. A read_committed consumer, assigned to the output topic's partitions, records receive time
minus send time. Samples from the first ``--skip`` seconds of each row are dropped. Rows, one after
another, each on fresh topics:

  raw        one Python process: confluent-kafka consumer -> producer
  alo / eos  sparkafka source -> sparkafka sink, at_least_once / exactly_once, local[2], default trigger
  rate-alo / rate-eos   Spark's rate source -> sparkafka sink (the sink's share, without our source);
             latency here runs from the start of the record's batch, not from a send

For the Spark rows it prints the median of each part of Spark's per-batch durationMs.

    python bench/latency.py [--seconds S] [--skip S] [--rate R] [--rows raw,alo,eos,rate-alo,rate-eos]
                            [--bootstrap-servers HOST:PORT] [--trigger-ms MS]

With ``--bootstrap-servers`` it runs against that cluster instead of a local Apache Kafka (topics are
created with ``--replication``).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sparkafka import register
from sparkafka.local import ApacheKafka, EmbeddedBroker
from sparkafka.local.spark import local_spark, stop_spark

PARTITIONS = 2
PARTS = ("latestOffset", "queryPlanning", "getBatch", "walCommit", "addBatch", "commitOffsets")


def create(conf: dict[str, str], replication: int, *topics: str) -> None:
    admin = AdminClient(conf)  # must outlive its futures
    futures = admin.create_topics([NewTopic(t, PARTITIONS, replication) for t in topics])
    for f in futures.values():
        f.result(30)


class Feeder(threading.Thread):
    """Produces ``rate`` records/s, round robin over the partitions; each value is its send time."""

    def __init__(self, conf: dict[str, str], topic: str, rate: float) -> None:
        super().__init__(daemon=True)
        self._producer = Producer({**conf, "linger.ms": 0, "enable.idempotence": True})
        self._topic = topic
        self._interval = 1 / rate
        self._halt = threading.Event()
        self.sent = 0

    def run(self) -> None:
        due = time.monotonic()
        while not self._halt.is_set():
            value = f"{time.time():.6f}".encode()
            self._producer.produce(self._topic, value, partition=self.sent % PARTITIONS)
            self._producer.poll(0)
            self.sent += 1
            due += self._interval
            self._halt.wait(max(0.0, due - time.monotonic()))
        self._producer.flush(30)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def next_messages(consumer: Any) -> list[Any]:
    """What is queued, else the first message within 0.1 s (``consume(n, t)`` alone waits out ``t``)."""
    msgs: list[Any] = consumer.consume(1000, 0)
    if msgs:
        return msgs
    first = consumer.poll(0.1)
    return [first] if first is not None else []


def _end(consumer: Any, tp: CTopicPartition) -> int:
    """The partition's end offset; a topic created a moment ago may not have a leader yet: asked again."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + 30
    while True:
        try:
            return int(consumer.get_watermark_offsets(tp, 10)[1])
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class Receiver(threading.Thread):
    """read_committed consumer on the output topic from its current end; latency = now - sent time."""

    def __init__(self, conf: dict[str, str], topic: str) -> None:
        super().__init__(daemon=True)
        self._consumer = Consumer(
            {
                **conf,
                "group.id": f"bench-latency-{uuid.uuid4().hex[:8]}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        ends = [_end(self._consumer, CTopicPartition(topic, p)) for p in range(PARTITIONS)]
        self._consumer.assign([CTopicPartition(topic, p, ends[p]) for p in range(PARTITIONS)])
        self._halt = threading.Event()
        self.samples: list[tuple[float, float]] = []
        """(sent, latency) in seconds."""

    def run(self) -> None:
        while not self._halt.is_set():
            for msg in next_messages(self._consumer):
                now = time.time()
                if msg.error() is None and msg.value():
                    sent = float(msg.value())
                    self.samples.append((sent, now - sent))
        self._consumer.close()

    def stop(self) -> None:
        self._halt.set()
        self.join()


def raw_loop(conf: dict[str, str], source: str, sink: str, stop: threading.Event) -> None:
    """The floor: one Python process consuming and producing each record as it arrives."""
    consumer = Consumer(
        {**conf, "group.id": f"bench-raw-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}
        | {"fetch.wait.max.ms": 10}
    )
    consumer.assign([CTopicPartition(source, p, 0) for p in range(PARTITIONS)])
    producer = Producer({**conf, "linger.ms": 0})
    while not stop.is_set():
        msgs = [m for m in next_messages(consumer) if m.error() is None]
        for m in msgs:
            producer.produce(sink, m.value(), partition=m.partition())
        if msgs:
            producer.flush(10)
    consumer.close()
    producer.flush(10)


@contextlib.contextmanager
def spark_pipeline(spark: Any, name: str, source: str, sink: str, args: argparse.Namespace) -> Iterator[Any]:
    """The row ``name``'s streaming query, started; stopped on exit."""
    bootstrap = args.bootstrap_servers
    delivery = "exactly_once" if name.endswith("eos") else "at_least_once"
    if name.startswith("rate"):
        df = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", int(args.rate))
            .option("numPartitions", PARTITIONS)
            .load()
            # The batch's start (a streaming query's current_timestamp): the rate source makes rows once
            # a second, so their own timestamps would add up to a second of waiting that is not ours.
            .selectExpr("format_string('%.6f', unix_micros(current_timestamp()) / 1e6) as value")
        )
    else:
        df = (
            spark.readStream.format("sparkafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("parallelism", args.parallelism or PARTITIONS)
            .load()
            .select("value")
        )
    writer = (
        df.writeStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("deliveryGuarantee", delivery)
        .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-latency-ck-", dir=args.checkpoint_dir))
    )
    if delivery == "exactly_once":
        writer = writer.option("transactionalIdPrefix", f"bench-lat-{uuid.uuid4().hex[:6]}")
    if args.trigger_ms:
        writer = writer.trigger(processingTime=f"{args.trigger_ms} milliseconds")
    query = writer.start()
    try:
        yield query
    finally:
        query.stop()


class Batches(threading.Thread):
    """Collects every batch's progress (recentProgress keeps only the newest ones)."""

    def __init__(self, query: Any) -> None:
        super().__init__(daemon=True)
        self._query = query
        self._halt = threading.Event()
        self.progress: dict[int, dict[str, Any]] = {}

    def run(self) -> None:
        while not self._halt.wait(1.0):
            for p in self._query.recentProgress:
                self.progress[p["batchId"]] = p

    def stop(self) -> None:
        self._halt.set()
        self.join()
        for p in self._query.recentProgress:
            self.progress[p["batchId"]] = p


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_row(name: str, conf: dict[str, str], spark: Any, args: argparse.Namespace) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    source, sink = f"lat-in-{name}-{run}", f"lat-out-{name}-{run}"
    create(conf, args.replication, source, sink)
    receiver = Receiver(conf, sink)
    receiver.start()
    stop = threading.Event()
    batches: Batches | None = None
    with contextlib.ExitStack() as stack:
        if name == "raw":
            loop = threading.Thread(target=raw_loop, args=(conf, source, sink, stop), daemon=True)
            loop.start()
            stack.callback(loop.join)
            stack.callback(stop.set)
        else:
            query = stack.enter_context(spark_pipeline(spark, name, source, sink, args))
            batches = Batches(query)
            batches.start()
            stack.callback(batches.stop)
        feeder = Feeder(conf, source, args.rate) if not name.startswith("rate") else None
        started = time.time()
        if feeder is not None:
            feeder.start()
        time.sleep(args.seconds)
        if feeder is not None:
            feeder.stop()
        time.sleep(2)  # let the last records through
    receiver.stop()
    lat = [latency for sent, latency in receiver.samples if sent >= started + args.skip]
    row: dict[str, Any] = {"name": name, "n": len(lat)}
    if lat:
        row.update(p50=percentile(lat, 0.5), p90=percentile(lat, 0.9), p99=percentile(lat, 0.99))
    if batches is not None:
        timed = [
            p["durationMs"]
            for p in batches.progress.values()
            if p["numInputRows"] and _epoch(p["timestamp"]) >= started + args.skip
        ]
        row["batches"] = len(timed)
        row["parts"] = {
            part: statistics.median(d.get(part, 0) for d in timed) for part in ("triggerExecution", *PARTS)
        }
    return row


def _epoch(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


LABELS = {
    "raw": "raw confluent-kafka consume->produce, 1 process",
    "alo": "sparkafka source -> sink, at_least_once",
    "eos": "sparkafka source -> sink, exactly_once",
    "rate-alo": "rate source -> sink, at_least_once (from batch start)",
    "rate-eos": "rate source -> sink, exactly_once (from batch start)",
}


def print_table(rows: list[dict[str, Any]]) -> None:
    print()
    print(f"{'pipeline':<50} {'n':>5} {'p50':>7} {'p90':>7} {'p99':>7} {'p99/p50':>7}  median batch (ms)")
    for r in rows:
        if "p50" not in r:
            print(f"{LABELS[r['name']]:<50} {r['n']:>5}  no samples")
            continue
        parts = r.get("parts")
        detail = (
            f"trigger {parts['triggerExecution']:.0f} = "
            + ", ".join(f"{k} {v:.0f}" for k, v in parts.items() if k != "triggerExecution" and v)
            + f" ({r['batches']} batches)"
            if parts
            else "-"
        )
        print(
            f"{LABELS[r['name']]:<50} {r['n']:>5} {r['p50']:>6.3f}s {r['p90']:>6.3f}s {r['p99']:>6.3f}s "
            f"{r['p99'] / r['p50']:>7.2f}  {detail}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument(
        "--tansu", action="store_true", help="the pip-only tansu broker instead of Apache Kafka"
    )
    parser.add_argument("--seconds", type=float, default=45.0, help="how long each row is fed")
    parser.add_argument("--skip", type=float, default=15.0, help="seconds of each row not counted")
    parser.add_argument("--rate", type=float, default=20.0, help="records per second")
    parser.add_argument("--rows", default="raw,alo,eos,rate-alo,rate-eos")
    parser.add_argument("--bootstrap-servers", help="an existing cluster instead of a local Apache Kafka")
    parser.add_argument("--replication", type=int, default=1)
    parser.add_argument("--checkpoint-dir", help="where checkpoints go (default: the temp dir)")
    parser.add_argument("--parallelism", type=int, default=0, help="the source's (default: partitions)")
    parser.add_argument("--trigger-ms", type=int, default=0, help="processing-time trigger (0: default)")
    args = parser.parse_args()
    names = [n.strip() for n in args.rows.split(",") if n.strip()]
    unknown = set(names) - set(LABELS)
    if unknown:
        parser.error(f"--rows: unknown {', '.join(sorted(unknown))} (allowed: {', '.join(LABELS)})")
    with contextlib.ExitStack() as stack:
        if not args.bootstrap_servers:
            args.bootstrap_servers = stack.enter_context(
                EmbeddedBroker() if args.tansu else ApacheKafka()
            ).bootstrap_servers
        conf = {"bootstrap.servers": args.bootstrap_servers}
        spark = None
        if any(n != "raw" for n in names):
            spark = local_spark(
                app_name="bench-latency", config={"spark.sql.streaming.numRecentProgressUpdates": "1000"}
            )
            stack.callback(stop_spark, spark)
            register(spark)
        rows = []
        for name in names:
            print(f"{name}: {args.seconds:.0f} s at {args.rate:.0f} records/s ...", flush=True)
            rows.append(run_row(name, conf, spark, args))
        print_table(rows)


if __name__ == "__main__":
    main()
