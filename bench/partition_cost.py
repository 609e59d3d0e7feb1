"""Where a micro-batch's cost per Kafka partition goes: each part measured alone, at several partition counts.

One local Apache Kafka; a topic of P partitions (default 10, 200 and 1,000) holding ``--records`` records
of 100 B (default 200,000, as issue 41's table), and one batch's share read: ``--batch-records`` (default
50,000) spread over the partitions. Five parts, each timed without the others where it can be:

  driver   the planner's calls for one batch, in this process (Spark's source runner runs the same code):
           ``latestOffset`` (its ListOffsets, and the rest) and ``partitions`` (task planning), medians of
           ``--repeat``; also for 100 topics of 10 partitions, subscribed by list and by pattern.
  reader   ``fetch.read_ranges`` in this process (what a reader task runs), two ways: one call per
           partition (one task per partition, each on the worker's cached client, as Spark runs them one
           after another in a Python worker) and one call for every partition (a task that reads them
           all); the time inside each ``Fetcher`` call is summed per kind, and the first ``fetch`` after each
           ``assign`` (waiting for the partition's first records) is counted apart from the rest.
  spark    Spark's own cost per task of a Python data source, without Kafka: a batch read of ready-made
           Arrow batches (the reader's schema) into ``noop`` on ``local[2]``, with P tasks of one batch each,
           with 2 tasks of one batch each, and with 2 tasks of P / 2 small batches each (what small Arrow
           batches cost); and Spark's JVM ``range`` with P tasks for comparison.
  sink     the exactly-once sink's task (``sink.task.write_task``) in this process: a task with nothing to
           write and one with ``--batch-records`` / P rows, each opening its transaction; and the driver's
           commit (``TwoPhaseCommitter.commit``) of P such transactions against 2.

Prints a table per part. Nothing here is a goal (``bench/vs_spark.py --only scale`` has the goals); the
figures say where the time goes.

    python bench/partition_cost.py [--partitions 10,200,1000] [--only driver,reader,spark,sink]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from source_throughput import fill
from sparkafka.client.core import close_all
from sparkafka.local import ApacheKafka
from sparkafka.local.spark import local_spark, stop_spark
from sparkafka.source import fetch
from sparkafka.source.fetch import OffsetRange, arrow_schema, read_ranges
from sparkafka.source.options import parse_source_options
from sparkafka.source.reader import KafkaStreamReader
from sparkafka.spark_lines import ReadMaxRows
from sparkafka.structs import TopicPartition

PARTS = ("driver", "reader", "spark", "sink")


def median_ms(call: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """(median ms of ``repeat`` calls, the last call's result)."""
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = call()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), out


def create_topics(conf: dict[str, str], names: list[str], partitions: int) -> None:
    admin = AdminClient(conf)  # must outlive its futures
    for f in admin.create_topics([NewTopic(t, partitions, 1) for t in names]).values():
        f.result(60)


# -- driver ------------------------------------------------------------------------------------------------


class _Timed:
    """Wraps an object: the time spent in each of its methods, summed per name."""

    def __init__(self, inner: Any, into: dict[str, float]) -> None:
        self._inner, self._into = inner, into

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self._into[name] += (time.perf_counter() - t) * 1000

        return timed


def plan_once(options: dict[str, str], per_batch: int, repeat: int) -> dict[str, float]:
    """Medians (ms) of a streaming batch's planning calls: latestOffset, its ListOffsets, partitions."""
    reader = KafkaStreamReader(parse_source_options(options))
    start = reader.initialOffset()
    calls: dict[str, float] = defaultdict(float)
    planner = reader._planner  # the bench times the metadata calls inside latestOffset
    planner._metadata = _Timed(planner.metadata, calls)
    latest, end = median_ms(lambda: reader.latestOffset(start, ReadMaxRows(per_batch)), repeat)
    lookups = {k: v / repeat for k, v in calls.items()}
    plan, tasks = median_ms(lambda: reader.partitions(start, end), repeat)
    return {"latestOffset": latest, **lookups, "partitions": plan, "tasks": len(tasks)}


def bench_driver(conf: dict[str, str], topics: dict[int, str], args: argparse.Namespace) -> None:
    print("driver: one streaming batch's planning, in this process (ms, medians)")
    cases: list[tuple[str, dict[str, str]]] = [
        (f"1 topic x {n}", {"subscribe": t}) for n, t in sorted(topics.items())
    ]
    run = uuid.uuid4().hex[:6]
    many = [f"pc-many-{run}-{i:03d}" for i in range(100)]
    create_topics(conf, many, 10)
    producer = Producer(conf)
    for t in many:
        for i in range(100):
            producer.produce(t, b"x" * 100, partition=i % 10)
    producer.flush(60)
    cases.append(("100 topics x 10, list", {"subscribe": ",".join(many)}))
    cases.append(("100 topics x 10, pattern", {"subscribePattern": f"pc-many-{run}-.*"}))
    for label, sub in cases:
        options = {"kafka.bootstrap.servers": conf["bootstrap.servers"], "startingOffsets": "earliest", **sub}
        row = plan_once(options, args.batch_records, args.repeat)
        rest = ", ".join(f"{k} {v:.1f}" for k, v in row.items() if k not in ("latestOffset", "tasks"))
        print(f"  {label:<26} latestOffset {row['latestOffset']:7.1f}  ({rest}; {row['tasks']:.0f} tasks)")


# -- reader ------------------------------------------------------------------------------------------------


class _FetcherClock:
    """Wraps the worker's fetcher: time per method, and each partition's first ``fetch`` after its
    ``assign`` apart."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.ms: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._fresh: set[Any] = set()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            key = name
            if name == "assign":
                self._fresh.add(args[0])
            elif name == "fetch" and args[0] in self._fresh:
                key = "fetch (first after assign)"
            t = time.perf_counter()
            try:
                out = attr(*args, **kwargs)
            finally:
                self.ms[key] += (time.perf_counter() - t) * 1000
                self.calls[key] += 1
            if name == "fetch" and getattr(out, "batch", None) is not None:
                self._fresh.discard(args[0])
            return out

        return timed


def read_timed(
    conf: dict[str, str], groups: list[list[OffsetRange]], fetcher: str
) -> tuple[float, _FetcherClock]:
    """Total ms of ``read_ranges`` over each group of ranges in turn (one call per group), and the clock."""
    real = fetch._fetcher
    clock: _FetcherClock | None = None

    def timed_fetcher(c: Any, choice: Any) -> Any:
        nonlocal clock
        inner = real(c, choice)
        if clock is None or clock.inner is not inner:
            clock = _FetcherClock(inner)
        return clock

    fetch._fetcher = timed_fetcher  # type: ignore[assignment]
    try:
        rows = 0
        t = time.perf_counter()
        for ranges in groups:
            for batch in read_ranges(conf, ranges, fetcher=fetcher):  # type: ignore[arg-type]
                rows += batch.num_rows
        total = (time.perf_counter() - t) * 1000
    finally:
        fetch._fetcher = real  # type: ignore[assignment]
    expected = sum(r.end - r.start for g in groups for r in g)
    if rows != expected:
        raise RuntimeError(f"read {rows} rows, expected {expected}")
    assert clock is not None
    return total, clock


def bench_reader(conf: dict[str, str], topics: dict[int, str], args: argparse.Namespace) -> None:
    if args.fetch_wait_ms is not None:
        conf = {**conf, "fetch.wait.max.ms": str(args.fetch_wait_ms)}
    waits = f", fetch.wait.max.ms {args.fetch_wait_ms}" if args.fetch_wait_ms is not None else ""
    print(f"reader: one batch's share of every partition, read_ranges in this process (ms{waits})")
    for fetcher, ahead in ((f, int(a)) for f in args.fetchers.split(",") for a in args.prefetch.split(",")):
        fetch.PREFETCH_PARTITIONS = ahead
        print(f"  prefetch {ahead} (fetcher {fetcher})")
        for n, topic in sorted(topics.items()):
            per = max(args.batch_records // n, 1)
            ranges = [OffsetRange(TopicPartition(topic, p), 0, per) for p in range(n)]
            close_all()
            read_timed(conf, [ranges[:1]], fetcher)  # the worker's client made, the topic learned
            for label, groups in (("a task per partition", [[r] for r in ranges]), ("one task", [ranges])):
                total, clock = read_timed(conf, groups, fetcher)
                parts = ", ".join(
                    f"{k} {v:.0f} ({clock.calls[k]})"
                    for k, v in sorted(clock.ms.items(), key=lambda kv: -kv[1])
                )
                print(
                    f"  {fetcher:<6} {n:>5} x {per:>5} rows, {label:<20} {total:8.0f} ms = "
                    f"{total / n:6.2f} ms/partition; in the fetcher: {parts}",
                    flush=True,
                )
    close_all()


# -- spark -------------------------------------------------------------------------------------------------


class _ReadyReader(DataSourceReader):
    """``tasks`` tasks, each yielding ``batches`` Arrow batches of ``rows`` rows (the reader's schema)."""

    def __init__(self, tasks: int, batches: int, rows: int) -> None:
        self._tasks, self._batches, self._rows = tasks, batches, rows

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self._tasks)]

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        n = self._rows
        batch = pa.RecordBatch.from_arrays(
            [
                pa.nulls(n, pa.binary()),
                pa.array([b"x" * 100] * n, pa.binary()),
                pa.array(["ready"] * n, pa.string()),
                pa.array([partition.value] * n, pa.int32()),
                pa.array(range(n), pa.int64()),
                pa.array([1_764_000_000_000_000] * n, pa.timestamp("us", tz="UTC")),
                pa.array([0] * n, pa.int32()),
            ],
            schema=arrow_schema(False),
        )
        for _ in range(self._batches):
            yield batch


class ReadySource(DataSource):
    """``format("bench_ready")``: ready-made Arrow batches, no Kafka."""

    @classmethod
    def name(cls) -> str:
        return "bench_ready"

    def schema(self) -> str:
        return (
            "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
            "timestampType int"
        )

    def reader(self, schema: Any) -> _ReadyReader:
        o = self.options
        return _ReadyReader(int(o["tasks"]), int(o["batches"]), int(o["rows"]))


def _noop_ms(df: Any, repeat: int) -> float:
    return median_ms(lambda: df.write.format("noop").mode("overwrite").save(), repeat)[0]


def bench_spark(args: argparse.Namespace) -> None:
    import sys

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # bench/ is not on the workers' path
    spark = local_spark(app_name="bench-partition-cost")
    spark.dataSource.register(ReadySource)

    def ready(tasks: int, batches: int, rows: int) -> Any:
        reader = spark.read.format(ReadySource.name())
        return reader.option("tasks", tasks).option("batches", batches).option("rows", rows).load()

    try:
        _noop_ms(ready(2, 2, 100), 2)  # warm-up: the Python workers
        _noop_ms(spark.range(0, 1000, 1, 4), 2)
        print(f"spark: a batch read into noop on local[2], {args.batch_records:,} rows (ms, medians)")
        for n in args.sizes:
            rows = max(args.batch_records // n, 1)
            per_task = _noop_ms(ready(n, 1, rows), args.repeat)
            two = _noop_ms(ready(2, 1, rows * n // 2), args.repeat)
            small = _noop_ms(ready(2, n // 2, rows), args.repeat)
            jvm = _noop_ms(spark.range(0, rows * n, 1, n), args.repeat)
            jvm2 = _noop_ms(spark.range(0, rows * n, 1, 2), args.repeat)
            print(
                f"  {n:>5} partitions: python {n} tasks {per_task:7.0f} (2 tasks {two:5.0f}: "
                f"{(per_task - two) / (n - 2):5.2f} ms/task), 2 tasks of {n // 2} batches {small:6.0f} "
                f"({(small - two) / max(n - 2, 1):5.2f} ms/batch); jvm range {n} tasks {jvm:6.0f} "
                f"(2 tasks {jvm2:4.0f}: {(jvm - jvm2) / (n - 2):5.2f} ms/task)",
                flush=True,
            )
    finally:
        stop_spark(spark)


# -- sink --------------------------------------------------------------------------------------------------


def bench_sink(conf: dict[str, str], args: argparse.Namespace) -> None:
    from sparkafka.sink.intents import IntentLog
    from sparkafka.sink.options import InputColumns, parse_sink_options
    from sparkafka.sink.task import write_task
    from sparkafka.sink.twophase import TwoPhaseCommitter

    print("sink: exactly-once tasks and the driver's commit, in this process (ms, medians)")
    for n in args.sizes:
        topic = f"pc-out-{uuid.uuid4().hex[:6]}"
        create_topics(conf, [topic], n)
        options = parse_sink_options(
            {
                "kafka.bootstrap.servers": conf["bootstrap.servers"],
                "topic": topic,
                "deliveryGuarantee": "exactly_once",
                "transactionalIdPrefix": f"pc-{uuid.uuid4().hex[:6]}",
            }
        )
        assert options.transactional_id_prefix is not None
        IntentLog(
            options.kafka, options.transactional_id_prefix
        )  # the log topic, as the query's writer makes it
        rows = max(args.batch_records // n, 1)
        batch = pa.RecordBatch.from_arrays([pa.array([b"x" * 100] * rows, pa.binary())], names=["value"])
        query = str(uuid.uuid4())
        commit_ms = {}
        tasks = sorted({2, min(n, args.commit_tasks)})
        for batch_id, count in enumerate([2, *tasks]):  # the first commit (of 2) warms the committer up
            results = []
            task_ms = []
            for task in range(count):
                t = time.perf_counter()
                results.append(write_task(options, InputColumns(), iter([batch]), task, query))
                task_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            TwoPhaseCommitter.for_options(options).commit(query, batch_id, results)
            commit_ms[count] = ((time.perf_counter() - t) * 1000, statistics.median(task_ms))
        empty = median_ms(
            functools.partial(write_task, options, InputColumns(), iter(()), 0, query), args.repeat
        )[0]
        (small, _), (big, big_task) = commit_ms[tasks[0]], commit_ms[tasks[-1]]
        print(
            f"  {n:>5} partitions: a task of {rows} rows {big_task:5.1f}, an empty task {empty:5.1f}; "
            f"commit of {tasks[-1]} transactions {big:6.0f}, of 2 {small:5.0f} "
            f"({(big - small) / max(tasks[-1] - 2, 1):4.1f} ms per transaction)",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--partitions", default="10,200,1000", help="partition counts, comma-separated")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch-records", type=int, default=50_000, help="one batch's records in all")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--fetchers", default="native,python")
    parser.add_argument(
        "--fetch-wait-ms", type=int, help="the readers' fetch.wait.max.ms (default: theirs, 10)"
    )
    parser.add_argument(
        "--prefetch",
        default=str(fetch.PREFETCH_PARTITIONS),
        help="partitions assigned ahead of the one read (fetch.PREFETCH_PARTITIONS); several: compared",
    )
    parser.add_argument("--commit-tasks", type=int, default=200, help="most transactions in one commit")
    parser.add_argument("--only", default=",".join(PARTS), help="which parts, comma-separated")
    args = parser.parse_args()
    args.sizes = [int(p) for p in args.partitions.split(",")]
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    if set(parts) - set(PARTS):
        parser.error(f"--only: allowed {', '.join(PARTS)}")
    topics: dict[int, str] = {}
    with ApacheKafka(data_dir=tempfile.mkdtemp(prefix="bench-partition-cost-")) as broker:
        conf = {"bootstrap.servers": broker.bootstrap_servers}
        if {"driver", "reader"} & set(parts):
            for n in args.sizes:
                topics[n] = f"pc-{n}-{uuid.uuid4().hex[:6]}"
                fill(conf, topics[n], args.records, n)
        for part in parts:
            if part == "driver":
                bench_driver(conf, topics, args)
            elif part == "reader":
                bench_reader(conf, topics, args)
            elif part == "spark":
                bench_spark(args)
            else:
                bench_sink(conf, args)
        close_all()


if __name__ == "__main__":
    main()
