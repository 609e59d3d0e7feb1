"""The read path in one process: what a reader task runs (``read_ranges``, Arrow built) vs a raw consumer.

One local Apache Kafka, one topic (default 2,000,000 records of 100 B in 4 partitions), in one run, side
by side, alternating, each ``--repeat`` times:

  raw          a bare confluent-kafka loop: assign the partitions, ``consume(10000)``, count (no Arrow)
  read_ranges  ``sparkafka.source.fetch.read_ranges`` over the same partitions from 0 to their ends,
               Arrow record batches built, with the source's consumer settings: the native fetch
               (``fetcher=native``, sparkafka's librdkafka extension) and the pure-Python one
               (``fetcher=python``, confluent-kafka); and the native one assigning one partition at a
               time (``fetch.PREFETCH_PARTITIONS`` 0: the whole prefetch bound for the partition read, not
               a ninth of it for each of the partitions assigned together)

Then, with ``--spark`` (the make target's default), where the rest of the time goes under Spark:
batch reads of the same topic on ``local[2]`` into ``noop``, alternating, each ``--repeat`` times:

  sparkafka    ``spark.read.format("sparkafka")``: one reader task per partition, Arrow to the JVM,
               with the native fetch and with the pure-Python one (and the native one with librdkafka's
               default ``fetch.queue.backoff.ms``, 1 s, instead of the reader's 10 ms)
  arrow floor  a Python data source whose tasks yield ready-made Arrow batches of the same schema, size
               and rows (no Kafka): the most any Python source can do on this machine, what is left
               once the fetch costs nothing (the Python worker, Arrow to the JVM, Spark's rows)
  spark kafka  Spark's own ``format("kafka")`` (when its jars are installed: ``make spark-kafka``)

Ratios are against the median raw rate (goals, issue 29: read_ranges >= 1.0 x raw); the Spark rows also
against Spark's connector.

With ``--tls`` every row reads over TLS, logged in with SASL/SCRAM-SHA-512 (``sparkafka broker --secure``'s
broker, as its super user): the native fetch (librdkafka 2.12 on the OpenSSL built into its wheel) against
confluent-kafka (librdkafka 2.16 on its bundled OpenSSL), and Spark's connector with the Java client's
settings for the same login.

    python bench/read_path.py [--records N] [--partitions P] [--repeat K] [--spark] [--tls]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTopicPartition
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from source_throughput import fill
from sparkafka.local import ApacheKafka
from sparkafka.local.secure_kafka import SecureKafka
from sparkafka.local.spark import local_spark, stop_spark
from sparkafka.local.spark_kafka_dist import SPARK_KAFKA, spark_jars
from sparkafka.source import fetch
from sparkafka.source.fetch import ROWS_PER_BATCH, OffsetRange, arrow_schema, read_ranges
from sparkafka.source.options import FetcherChoice
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


def ranges(conf: Mapping[str, str], topic: str, partitions: int, per: int, fetcher: FetcherChoice) -> float:
    todo = [OffsetRange(TopicPartition(topic, p), 0, per) for p in range(partitions)]
    rows = 0
    started = time.perf_counter()
    for batch in read_ranges(conf, todo, fetcher=fetcher):
        rows += batch.num_rows
    elapsed = time.perf_counter() - started
    if rows != per * partitions:
        raise RuntimeError(f"read_ranges returned {rows} rows, expected {per * partitions}")
    return rows / elapsed


class _FloorReader(DataSourceReader):
    def __init__(self, partitions: int, per: int) -> None:
        self._partitions, self._per = partitions, per

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(p) for p in range(self._partitions)]

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        p, size = partition.value, ROWS_PER_BATCH
        value = pa.array([b"x" * 100] * size, pa.binary())
        for first in range(0, self._per, size):
            n = min(size, self._per - first)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.nulls(n, pa.binary()),
                    value.slice(0, n),
                    pa.array(["floor"] * n, pa.string()),
                    pa.array([p] * n, pa.int32()),
                    pa.array(range(first, first + n), pa.int64()),
                    pa.array([1_764_000_000_000_000] * n, pa.timestamp("us", tz="UTC")),
                    pa.array([0] * n, pa.int32()),
                ],
                schema=arrow_schema(False),
            )


class FloorSource(DataSource):
    """``format("bench_arrow_floor")``: tasks yield ready Arrow batches shaped as sparkafka's (no Kafka)."""

    @classmethod
    def name(cls) -> str:
        return "bench_arrow_floor"

    def schema(self) -> str:
        return (
            "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
            "timestampType int"
        )

    def reader(self, schema: Any) -> _FloorReader:
        return _FloorReader(int(self.options["partitions"]), int(self.options["per"]))


def spark_read(spark: Any, fmt: str, options: Mapping[str, str], total: int) -> float:
    """Records per second of one batch read of ``total`` records into ``noop`` (rows are not counted)."""
    reader = spark.read.format(fmt)
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load()
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - started
    return total / elapsed


def java_options(conf: Mapping[str, str]) -> dict[str, str]:
    """Spark's ``format("kafka")`` options (the Java client's names) for librdkafka settings ``conf``."""
    options = {"kafka.bootstrap.servers": conf["bootstrap.servers"]}
    if "security.protocol" in conf:
        options["kafka.security.protocol"] = conf["security.protocol"]
    if "ssl.ca.location" in conf:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.location"] = conf["ssl.ca.location"]
    if "sasl.mechanism" in conf:
        module = "scram.ScramLoginModule" if "SCRAM" in conf["sasl.mechanism"] else "plain.PlainLoginModule"
        options["kafka.sasl.mechanism"] = conf["sasl.mechanism"]
        options["kafka.sasl.jaas.config"] = (
            f'org.apache.kafka.common.security.{module} required username="{conf["sasl.username"]}" '
            f'password="{conf["sasl.password"]}";'
        )
    return options


def spark_rows(conf: Mapping[str, str], topic: str, args: argparse.Namespace, per: int) -> None:
    total = per * args.partitions
    kafka = {**{f"kafka.{k}": v for k, v in conf.items()}, "subscribe": topic}
    theirs = SPARK_KAFKA.installed_libs() is not None
    spark = local_spark(app_name="bench-read-path", config={"spark.jars": spark_jars()} if theirs else None)
    spark.dataSource.register(FloorSource)
    formats = {
        "sparkafka native": ("sparkafka", {**kafka, "fetcher": "native"}),
        "sparkafka python": ("sparkafka", {**kafka, "fetcher": "python"}),
        "sparkafka native, 1 s backoff": (
            "sparkafka",
            {**kafka, "fetcher": "native", "kafka.fetch.queue.backoff.ms": "1000"},  # librdkafka's default
        ),
        "arrow floor": (FloorSource.name(), {"partitions": str(args.partitions), "per": str(per)}),
    }
    if theirs:
        formats["spark kafka"] = ("kafka", {**java_options(conf), "subscribe": topic})
    try:
        for fmt, options in formats.values():  # warm-up: workers, consumers, the JIT
            spark_read(spark, fmt, options, total)
        rates: dict[str, list[float]] = {name: [] for name in formats}
        for i in range(args.repeat):
            for name, (fmt, options) in formats.items():
                rates[name].append(spark_read(spark, fmt, options, total))
            print(
                f"spark run {i + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rates.items()), flush=True
            )
    finally:
        stop_spark(spark)
    medians = {name: statistics.median(r) for name, r in rates.items()}
    over = f" over {conf['security.protocol']}" if "security.protocol" in conf else ""
    print(f"batch reads on local[2] into noop{over}, {total:,} records, medians of {args.repeat}:")
    for name, rate in medians.items():
        vs = f"  {rate / medians['spark kafka']:.2f} x spark kafka" if theirs else ""
        print(f"  {name:<30} {rate:>10,.0f} records/s{vs}")
    if not theirs:
        print("  (spark kafka: not installed; make spark-kafka)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--spark", action="store_true", help="also the batch reads under Spark (see above)")
    parser.add_argument("--tls", action="store_true", help="over TLS with SASL/SCRAM-SHA-512 (see above)")
    args = parser.parse_args()
    kind = SecureKafka if args.tls else ApacheKafka
    with kind(data_dir=tempfile.mkdtemp(prefix="bench-read-path-")) as broker:
        conf = broker.admin_settings()
        topic = f"bench-read-{uuid.uuid4().hex[:6]}"
        fill(conf, topic, args.records, args.partitions)
        per = args.records // args.partitions
        total = per * args.partitions
        rows: dict[str, list[float]] = {
            "raw": [],
            "read_ranges native": [],
            "read_ranges native, prefetch 0": [],
            "read_ranges python": [],
        }
        ahead = fetch.PREFETCH_PARTITIONS
        for i in range(args.repeat):
            rows["raw"].append(raw(conf, topic, args.partitions, args.records))
            rows["read_ranges native"].append(ranges(conf, topic, args.partitions, per, "native"))
            fetch.PREFETCH_PARTITIONS = 0
            try:
                one_at_a_time = ranges(conf, topic, args.partitions, per, "native")
                rows["read_ranges native, prefetch 0"].append(one_at_a_time)
            finally:
                fetch.PREFETCH_PARTITIONS = ahead
            rows["read_ranges python"].append(ranges(conf, topic, args.partitions, per, "python"))
            print(f"run {i + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rows.items()), flush=True)
        base = statistics.median(rows["raw"])
        over = " over TLS (SASL_SSL, SCRAM-SHA-512)" if args.tls else ""
        print(
            f"{total:,} records of 100 B in {args.partitions} partitions{over}, one process, "
            f"medians of {args.repeat}:"
        )
        for name, rates in rows.items():
            rate = statistics.median(rates)
            print(f"  {name:<30} {rate:>10,.0f} records/s  {rate / base:.2f} x raw")
        if args.spark:
            spark_rows(conf, topic, args, per)


if __name__ == "__main__":
    main()
