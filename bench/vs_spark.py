"""sparkafka side by side with Spark's own Kafka connector (``format("kafka")``), in one run, same topics.

One local Apache Kafka, one SparkSession on ``local[2]`` with Spark's connector on ``spark.jars``
(``sparkafka.local.spark_kafka_dist``: 4.2.0, the newest on Maven Central). Each measurement runs both
connectors with the same options, only the format's name changed, as a user switching would:

  source   a backlog (default 2,000,000 records of 100 B in 4 partitions) read into ``noop`` with
           availableNow and ``maxOffsetsPerTrigger`` (default 500,000): the backlog drain (records over
           the wall time from ``start()`` to the query's end) and the steady state (records over the
           summed batch durations Spark reports). Each connector ``--repeat`` times, alternating, and a
           bare confluent-kafka loop over the same topic in this process (``read_path.raw``) before and
           after them (the ratio uses their mean; issue 29's goal: the drain >= 2.0 x that loop).
  latency  a feeder at 20 records/s into a 2-partition topic; the connector's source -> its sink, default
           trigger; a read_committed consumer times each record from send to receipt: p50, p99, and the
           median of each part of Spark's per-batch durations (where the time goes). Theirs at least
           once (all Spark's sink offers), ours at least once and exactly once; then their source into
           our sink and ours into theirs, which shows which side the difference is on.
  scale    issue 41's table: per size in ``--sizes`` (default 10, 200, 1,000 partitions) a topic of
           ``--scale-records`` (200,000) records of 100 B read with availableNow and ``maxOffsetsPerTrigger``
           ``--scale-batch`` (50,000) into ``noop``, theirs then ours: the total time from ``start()`` and
           the median batch time; then, with ``--scale-sink``, the same read written to a topic with as many
           partitions, by their sink (at least once) and by ours exactly once. The goal: ours / theirs
           <= 1.0 at every size. ``--scale-runs`` picks the runs: theirs, ours (default options),
           ours-per-partition (``parallelism`` = the partition count), ours-fetch-wait-1ms. Also the
           driver's planning time per batch (Spark's ``durationMs``: ``latestOffset`` + ``queryPlanning``).
           In ``bench/vs_scale.py``.
  pattern  issue 41's pattern subscription: 100 topics of 10 partitions, the same records split over them,
           read by ``subscribePattern`` by both connectors, into ``noop`` and with ``--scale-sink`` into a
           topic of 10 partitions; the same figures. In ``bench/vs_scale.py``.
  sink     rows from parquet files (default 2,000,000 rows with a 100 B value, 8 files) streamed with
           availableNow, 2 files per micro-batch, into Spark's sink (at least once) and ours (at least
           once, exactly once): records over the summed batch durations, and over the wall time.

Warm-up queries of every kind run first (Python workers; the JVM's JIT: without a warm-up of 400,000
records Spark's reader ran at half its speed in its first timed run). Goals (issue 27): our source >= 1.0 x
theirs; our exactly-once sink >= 1.0 x their at-least-once sink; our exactly-once p50 within 0.1 s of
theirs.

    python bench/vs_spark.py [--records N] [--sink-records N] [--seconds S] [--repeat K] [--only source,...]
    python bench/vs_spark.py --only scale,pattern [--sizes 10,200,1000] [--scale-sink] [--scale-runs R,...]
    python bench/vs_spark.py --pyspark 4.0 [...]   # on an older PySpark line, beside that line's connector

``--pyspark LINE`` runs the same benchmark in that line's venv (``sparkafka.local.spark_lines_dist``, made
once, as ``make test`` makes it), with this tree's sources first on the path and that line's own
``format("kafka")`` on ``spark.jars``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark
from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

import sink_throughput
from latency import Batches, Feeder, Receiver, percentile
from latency import create as create_topics
from read_path import raw
from source_throughput import fill
from sparkafka.local import ApacheKafka
from sparkafka.local.spark import local_spark, stop_spark
from sparkafka.local.spark_kafka_dist import line_connector_version, spark_jars, spark_line
from sparkafka.local.spark_lines_dist import LINES, line_python
from sparkafka.spark_lines import ADMISSION_CONTROL
from steady import Rates, query_rates
from vs_common import OURS, THEIRS, backlog, sink_writer
from vs_scale import bench_pattern, bench_scale

PARTS = ("latestOffset", "queryPlanning", "getBatch", "walCommit", "addBatch", "commitOffsets")


@dataclass(frozen=True)
class SourceRun:
    fmt: str
    drain: float
    """Records/s from ``start()`` to the end of the availableNow run (on a line without admission control
    for Python sources, 4.0 and 4.1: a run at a 0 s trigger until every record is read, for both)."""
    steady: float
    """Records/s over the summed batch durations."""
    parts: dict[str, float]
    """Median ms per batch of each part Spark reports."""


def _parts(progress: list[dict[str, Any]]) -> dict[str, float]:
    timed = [p["durationMs"] for p in progress if p["numInputRows"]]
    return (
        {k: statistics.median(d.get(k, 0) for d in timed) for k in ("triggerExecution", *PARTS)}
        if timed
        else {}
    )


def read_source(spark: Any, fmt: str, *, bootstrap: str, topic: str, total: int, per_batch: int) -> SourceRun:
    df = backlog(spark, fmt, bootstrap, topic, per_batch)
    writer = df.writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp(prefix="vs-ck-"))
    started = time.perf_counter()
    if ADMISSION_CONTROL:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
    else:  # availableNow would be one capped batch of a Python source here: both run batch after batch
        query = writer.trigger(processingTime="0 seconds").start()
        query.processAllAvailable()
        query.stop()
    drained = time.perf_counter() - started
    rates = query_rates(query, total, f"{fmt} source")
    return SourceRun(fmt, total / drained, rates.rate, _parts(list(query.recentProgress)))


@contextlib.contextmanager
def pipeline(
    spark: Any, route: tuple[str, str], delivery: str, *, bootstrap: str, source: str, sink: str
) -> Iterator[Any]:
    """``route``'s source format -> its sink format, default trigger, started; stopped on exit."""
    source_fmt, fmt = route
    df = (
        spark.readStream.format(source_fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("value")
    )
    query = sink_writer(df, fmt, delivery, bootstrap=bootstrap, topic=sink, label="vs-lat").start()
    try:
        yield query
    finally:
        query.stop()


def latency_row(
    spark: Any, conf: dict[str, str], route: tuple[str, str], delivery: str, args: argparse.Namespace
) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    source, sink = f"vs-lat-in-{run}", f"vs-lat-out-{run}"
    create_topics(conf, 1, source, sink)
    receiver = Receiver(conf, sink)
    receiver.start()
    with pipeline(
        spark, route, delivery, bootstrap=conf["bootstrap.servers"], source=source, sink=sink
    ) as query:
        batches = Batches(query)
        batches.start()
        feeder = Feeder(conf, source, args.rate)
        started = time.time()
        feeder.start()
        time.sleep(args.seconds)
        feeder.stop()
        time.sleep(2)  # the last records through
        batches.stop()
    receiver.stop()
    lat = [latency for sent, latency in receiver.samples if sent >= started + args.skip]
    timed = [p for p in batches.progress.values() if p["numInputRows"]]
    row: dict[str, Any] = {"route": route, "delivery": delivery, "n": len(lat), "sent": feeder.sent}
    if lat:
        row.update(p50=percentile(lat, 0.5), p99=percentile(lat, 0.99))
    row["parts"] = _parts(timed)
    return row


def write_sink(
    spark: Any,
    fmt: str,
    delivery: str,
    *,
    bootstrap: str,
    data: str,
    topic: str,
    total: int,
    options: Mapping[str, str] | None = None,
) -> tuple[Rates, float]:
    """(rates over batch durations, records/s over wall time) of ``data`` streamed into ``fmt``'s sink."""
    df = spark.readStream.schema("value string").option("maxFilesPerTrigger", 2).parquet(data)
    writer = sink_writer(
        df, fmt, delivery, bootstrap=bootstrap, topic=topic, label="vs-sink", options=options
    )
    started = time.perf_counter()
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    wall = time.perf_counter() - started
    return query_rates(query, total, f"{fmt} {delivery} sink"), total / wall


def _parts_text(parts: dict[str, float]) -> str:
    if not parts:
        return "-"
    rest = ", ".join(f"{k} {v:.0f}" for k, v in parts.items() if k != "triggerExecution" and v)
    return f"batch {parts['triggerExecution']:.0f} ms = {rest}"


def bench_source(spark: Any, conf: dict[str, str], args: argparse.Namespace) -> None:
    bootstrap = conf["bootstrap.servers"]
    topic, warm = f"vs-src-{uuid.uuid4().hex[:6]}", f"vs-warm-{uuid.uuid4().hex[:6]}"
    t = time.perf_counter()
    total = fill(conf, topic, args.records, args.partitions)
    warm_total = fill(conf, warm, args.warm_records, args.partitions)
    print(
        f"source: {total:,} records of 100 B in {args.partitions} partitions "
        f"({time.perf_counter() - t:.0f} s to fill)"
    )
    for fmt in (THEIRS, OURS):
        read_source(
            spark, fmt, bootstrap=bootstrap, topic=warm, total=warm_total, per_batch=args.warm_records // 4
        )
    loops = [raw(conf, topic, args.partitions, total)]
    runs: dict[str, list[SourceRun]] = {THEIRS: [], OURS: []}
    for i in range(args.repeat):
        for fmt in (THEIRS, OURS) if i % 2 == 0 else (OURS, THEIRS):
            run = read_source(
                spark, fmt, bootstrap=bootstrap, topic=topic, total=total, per_batch=args.batch_records
            )
            runs[fmt].append(run)
            print(
                f"  {fmt:<9} drain {run.drain:>10,.0f} rec/s  steady {run.steady:>10,.0f} rec/s  "
                f"{_parts_text(run.parts)}",
                flush=True,
            )
    loops.append(raw(conf, topic, args.partitions, total))
    loop = statistics.mean(loops)
    drain = {f: statistics.median(r.drain for r in rs) for f, rs in runs.items()}  # medians of the runs
    steady = {f: statistics.median(r.steady for r in rs) for f, rs in runs.items()}
    print(f"  raw loop   {', '.join(f'{r:,.0f}' for r in loops)} rec/s (one process, no Spark, no Arrow)")
    print(
        f"SOURCE ours/theirs: drain {drain[OURS] / drain[THEIRS]:.2f} ({drain[OURS]:,.0f} vs "
        f"{drain[THEIRS]:,.0f} rec/s), steady {steady[OURS] / steady[THEIRS]:.2f} (goal >= 1.0)"
    )
    print(
        f"SOURCE drain / raw loop: ours {drain[OURS] / loop:.2f}, theirs {drain[THEIRS] / loop:.2f} "
        f"(loop {loop:,.0f} rec/s; goal ours >= 2.0)"
    )


class _TickReader(DataSourceStreamReader):
    """Offsets are ticks of ``rate`` a second since the epoch; a tick's row is its time as text."""

    def __init__(self, rate: float) -> None:
        self._rate = rate

    def _now(self) -> dict[str, int]:
        return {"tick": int(time.time() * self._rate)}

    def initialOffset(self) -> dict[str, int]:
        return self._now()

    def latestOffset(self) -> dict[str, int]:
        return self._now()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [InputPartition((start["tick"], end["tick"]))]

    def read(self, partition: Any) -> Iterator[tuple[str]]:
        first, end = partition.value
        for tick in range(first, end):
            yield (f"{tick / self._rate:.6f}",)

    def commit(self, end: dict[str, int]) -> None:
        return None


class TickSource(DataSource):
    """``format("bench_tick")``: the least a Python streaming source can do (Spark's cost of one)."""

    @classmethod
    def name(cls) -> str:
        return "bench_tick"

    def schema(self) -> str:
        return "value string"

    def streamReader(self, schema: Any) -> _TickReader:
        return _TickReader(float(self.options.get("rate", "20")))


def floor_row(spark: Any, args: argparse.Namespace) -> dict[str, float]:
    """Median batch parts of a Python source that does nothing but count into a Python sink that does
    nothing, at the latency rows' rate: what Spark's two Python hops cost per batch, without Kafka."""
    query = (
        spark.readStream.format(TickSource.name())
        .option("rate", args.rate)
        .load()
        .writeStream.format(sink_throughput.NothingSink.name())
        .option("checkpointLocation", tempfile.mkdtemp(prefix="vs-floor-ck-"))
        .start()
    )
    batches = Batches(query)
    batches.start()
    try:
        time.sleep(args.seconds)
    finally:
        batches.stop()
        query.stop()
    skip = sorted(batches.progress)[: int(len(batches.progress) * args.skip / args.seconds)]
    return _parts([p for b, p in batches.progress.items() if b not in skip])


LATENCY_ROWS = (
    ((THEIRS, THEIRS), "at_least_once"),
    ((OURS, OURS), "at_least_once"),
    ((OURS, OURS), "exactly_once"),
    # Where the difference lies: one side ours, the other theirs.
    ((THEIRS, OURS), "at_least_once"),
    ((THEIRS, OURS), "exactly_once"),
    ((OURS, THEIRS), "at_least_once"),
)


def bench_latency(spark: Any, conf: dict[str, str], args: argparse.Namespace) -> None:
    rows = {}
    for route, delivery in LATENCY_ROWS:
        label = f"{route[0]} -> {route[1]} {delivery}"
        print(f"latency: {label}, {args.seconds:.0f} s at {args.rate:.0f} records/s ...", flush=True)
        row = latency_row(spark, conf, route, delivery, args)
        rows[route, delivery] = row
        if "p50" in row:
            print(
                f"  {label:<40} n {row['n']:>4}  p50 {row['p50']:.3f} s  p99 {row['p99']:.3f} s  "
                f"{_parts_text(row['parts'])}",
                flush=True,
            )
        else:
            print(f"  {label:<40} no samples ({row['sent']} sent)")
    print(f"latency floor: a Python source into a Python sink, neither doing anything, {args.seconds:.0f} s")
    cloudpickle.register_pickle_by_value(sink_throughput)  # bench/ is not on the workers' path
    spark.dataSource.register(TickSource)
    spark.dataSource.register(sink_throughput.NothingSink)
    print(f"  {'python tick -> python nothing':<40} {_parts_text(floor_row(spark, args))}", flush=True)
    theirs, ours_alo, ours_eos = (rows[key] for key in LATENCY_ROWS[:3])
    if all("p50" in r for r in (theirs, ours_alo, ours_eos)):
        print(
            f"LATENCY p50 ours-eos minus theirs: {ours_eos['p50'] - theirs['p50']:+.3f} s (goal <= +0.1); "
            f"ours-alo minus theirs {ours_alo['p50'] - theirs['p50']:+.3f} s; "
            f"p99 theirs {theirs['p99']:.3f}, ours-alo {ours_alo['p99']:.3f}, "
            f"ours-eos {ours_eos['p99']:.3f} s"
        )


def bench_sink(spark: Any, conf: dict[str, str], args: argparse.Namespace) -> None:
    bootstrap = conf["bootstrap.servers"]
    data, warm = tempfile.mkdtemp(prefix="vs-in-"), tempfile.mkdtemp(prefix="vs-warm-")
    rows = spark.range(args.sink_records).selectExpr("lpad(cast(id as string), 100, 'x') as value")
    rows.repartition(8).write.mode("overwrite").parquet(data)
    warm_rows = args.warm_records // 2
    rows.limit(warm_rows).repartition(2).write.mode("overwrite").parquet(warm)
    # The sinks keep one Produce request in flight per connection (sink/delivery.py); the last case is
    # at least once with librdkafka's default of 5, which the sinks used before: what one costs.
    five = {"kafka.max.in.flight.requests.per.connection": "5"}
    cases: tuple[tuple[str, str, dict[str, str]], ...] = (
        (THEIRS, "at_least_once", {}),
        (OURS, "at_least_once", {}),
        (OURS, "exactly_once", {}),
        (OURS, "at_least_once/5", five),
    )

    def into(case: tuple[str, str, dict[str, str]], source: str, rows: int, label: str) -> Any:
        fmt, delivery, options = case
        topic = f"{label}-{uuid.uuid4().hex[:6]}"
        create_topics(conf, 1, topic)  # PARTITIONS (2) partitions, as the latency topics
        return write_sink(
            spark,
            fmt,
            delivery.split("/", maxsplit=1)[0],
            bootstrap=bootstrap,
            data=source,
            topic=topic,
            total=rows,
            options=options,
        )

    for case in cases:
        into(case, warm, warm_rows, "vs-warm")
    print(f"sink: {args.sink_records:,} rows of 100 B, 8 files, 2 a micro-batch")
    result: dict[tuple[str, str], tuple[Rates, float]] = {}
    for case in cases:
        fmt, delivery, _ = case
        rates, wall = into(case, data, args.sink_records, "vs-sink")
        result[fmt, delivery] = rates, wall
        later = f"{rates.later_rate:,.0f}" if rates.later_rate else "-"
        print(
            f"  {fmt:<9} {delivery:<15} {rates.rate:>10,.0f} rec/s over batches (later {later}), "
            f"{wall:>10,.0f} over wall time",
            flush=True,
        )
    theirs = result[THEIRS, "at_least_once"][0].rate
    alo, eos = result[OURS, "at_least_once"][0].rate, result[OURS, "exactly_once"][0].rate
    alo5 = result[OURS, "at_least_once/5"][0].rate
    print(
        f"SINK one request in flight / five, ours at least once: {alo / alo5:.2f} "
        f"(over wall time {result[OURS, 'at_least_once'][1] / result[OURS, 'at_least_once/5'][1]:.2f})"
    )
    print(
        f"SINK ours-alo/theirs {alo / theirs:.2f}; ours-eos/theirs(alo) {eos / theirs:.2f} (goal >= 1.0); "
        f"wall time: {result[OURS, 'at_least_once'][1] / result[THEIRS, 'at_least_once'][1]:.2f}, "
        f"{result[OURS, 'exactly_once'][1] / result[THEIRS, 'at_least_once'][1]:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000, help="source backlog")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batch-records", type=int, default=500_000, help="source maxOffsetsPerTrigger")
    parser.add_argument("--repeat", type=int, default=3, help="source runs of each connector")
    parser.add_argument(
        "--warm-records", type=int, default=400_000, help="read first by each (Python workers, the JVM's JIT)"
    )
    parser.add_argument("--sink-records", type=int, default=2_000_000)
    parser.add_argument("--seconds", type=float, default=40.0, help="how long each latency row is fed")
    parser.add_argument("--skip", type=float, default=10.0, help="seconds of each latency row not counted")
    parser.add_argument("--rate", type=float, default=20.0, help="latency feed, records per second")
    parser.add_argument("--sizes", default="10,200,1000", help="scale: partition counts, comma-separated")
    parser.add_argument("--scale-records", type=int, default=200_000)
    parser.add_argument("--scale-batch", type=int, default=50_000, help="scale: maxOffsetsPerTrigger")
    parser.add_argument("--scale-sink", action="store_true", help="scale: also into each connector's sink")
    parser.add_argument(
        "--scale-runs",
        default="theirs,ours,ours-per-partition",
        help="scale: which runs, of theirs, ours, ours-per-partition, ours-fetch-wait-1ms",
    )
    parser.add_argument(
        "--only", default="source,latency,sink", help="which parts, comma-separated (or scale, pattern)"
    )
    parser.add_argument("--pyspark", choices=sorted(LINES), help="an older PySpark line to run on")
    args = parser.parse_args()
    if args.pyspark and args.pyspark != spark_line():
        python = str(line_python(args.pyspark))
        src = str(Path(__file__).resolve().parents[1] / "src")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}
        os.execve(python, [python, __file__, *sys.argv[1:]], env)
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    benches = {
        "source": bench_source,
        "latency": bench_latency,
        "sink": bench_sink,
        "scale": bench_scale,
        "pattern": bench_pattern,
    }
    unknown = set(parts) - set(benches)
    if unknown:
        parser.error(f"--only: unknown {', '.join(sorted(unknown))} (allowed: {', '.join(benches)})")
    print(
        f'sparkafka vs Spark\'s format("kafka") {line_connector_version()} on PySpark '
        f"{pyspark.__version__}, local[2], Apache Kafka, one run"
    )
    with ApacheKafka() as broker:
        conf = {"bootstrap.servers": broker.bootstrap_servers}
        spark = local_spark(
            app_name="bench-vs-spark",
            config={
                "spark.jars": spark_jars(quiet=False),
                "spark.sql.streaming.numRecentProgressUpdates": "1000",
            },
        )
        try:
            for part in parts:
                benches[part](spark, conf, args)
        finally:
            stop_spark(spark)


if __name__ == "__main__":
    main()
