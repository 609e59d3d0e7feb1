"""Issue 41's side-by-side parts of ``bench/vs_spark.py``: many partitions, and a pattern over many topics.

Run from ``bench/vs_spark.py --only scale,pattern`` (one SparkSession with Spark's connector, one Apache
Kafka). Each run is an availableNow read with ``maxOffsetsPerTrigger`` into ``noop`` (or, with
``--scale-sink``, into each connector's sink: theirs at least once, ours exactly once), theirs and ours with
the same options. Per run: the total time from ``start()`` to the query's end, the median batch
(``triggerExecution``), and the driver's planning time per batch: the medians of Spark's progress
``durationMs.latestOffset`` (the source's ``latestOffset``: for both connectors the offsets lookup) and
``durationMs.queryPlanning`` (the physical plan, which for a Python source includes its ``partitions``), and
of their sum. Spark times both parts around the source's calls, so they are ours as well as theirs; our
source reports no metrics of its own in the progress.

  scale    per size in ``--sizes`` a topic of ``--scale-records`` records of 100 B; the sink topic has as many
           partitions as the source.
  pattern  100 topics of 10 partitions under a unique prefix, the same ``--scale-records`` split over them,
           read by ``subscribePattern`` (``<prefix>-.*``, valid Java and Python regex); the sink topic has
           10 partitions (a pattern's output usually goes to one topic, not 100).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from source_throughput import fill, produce_spread
from steady import query_rates
from vs_common import OURS, THEIRS, backlog, sink_writer

PATTERN_TOPICS, PATTERN_PARTITIONS, PATTERN_SINK_PARTITIONS = 100, 10, 10


@dataclass(frozen=True)
class ScaleRun:
    wall: float
    """Seconds from ``start()`` to the end of the availableNow run."""
    batch: float
    """Median seconds of a batch with rows (``triggerExecution``)."""
    latest_ms: float
    """Median ``durationMs.latestOffset`` of those batches."""
    planning_ms: float
    """Median ``durationMs.queryPlanning``."""
    plan_ms: float
    """Median of their sum per batch: the driver's planning time per batch."""
    first: float
    """Seconds of the first batch (which also pays once-per-query costs)."""
    outside: float
    """Seconds of ``wall`` outside the batches (the query's start and end)."""


def scale_run(
    spark: Any,
    fmt: str,
    *,
    bootstrap: str,
    topic: str,
    total: int,
    per_batch: int,
    sink: str | None = None,
    options: dict[str, str] | None = None,
    pattern: str | None = None,
) -> ScaleRun:
    """An availableNow read of ``topic`` (or ``pattern``) into ``noop``, or with ``sink`` into that topic by
    ``fmt``'s sink (ours exactly once); ``options``: more source options."""
    df = backlog(spark, fmt, bootstrap, topic, per_batch, options=options, pattern=pattern)
    if sink is None:
        writer = df.writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp(prefix="vs-ck-"))
    else:
        delivery = "exactly_once" if fmt == OURS else "at_least_once"
        writer = sink_writer(
            df.select("value"), fmt, delivery, bootstrap=bootstrap, topic=sink, label="vs-scale"
        )
    started = time.perf_counter()
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    wall = time.perf_counter() - started
    rates = query_rates(query, total, f"{fmt} scale")
    timed = [p["durationMs"] for p in query.recentProgress if p["numInputRows"]]
    assert rates.batches == len(timed)
    latest = [d.get("latestOffset", 0) for d in timed]
    planning = [d.get("queryPlanning", 0) for d in timed]
    return ScaleRun(
        wall,
        statistics.median(d["triggerExecution"] / 1000 for d in timed),
        statistics.median(latest),
        statistics.median(planning),
        statistics.median(a + b for a, b in zip(latest, planning, strict=True)),
        timed[0]["triggerExecution"] / 1000,
        wall - sum(d["triggerExecution"] for d in timed) / 1000,
    )


def print_runs(what: str, got: dict[str, ScaleRun]) -> None:
    """One line per run, each but theirs with its ratios to theirs (goal <= 1.0)."""
    print(f"  {what}:")
    theirs = got.get("theirs")
    for label, run in got.items():
        ratio = ""
        if label != "theirs" and theirs is not None:
            ratio = (
                f"; SCALE ours/theirs total {run.wall / theirs.wall:.2f}, "
                f"batch {run.batch / theirs.batch:.2f}, "
                f"plan {run.plan_ms / max(theirs.plan_ms, 1):.2f} (goal <= 1.0)"
            )
        print(
            f"        {label:<20} {run.wall:6.1f} s (median batch {run.batch:5.2f} s; "
            f"plan {run.plan_ms:5.0f} ms = latestOffset {run.latest_ms:.0f} "
            f"+ queryPlanning {run.planning_ms:.0f}; first batch {run.first:.2f} s, outside batches "
            f"{run.outside:.1f} s){ratio}",
            flush=True,
        )


def create(conf: dict[str, str], topics: dict[str, int]) -> None:
    """Creates ``topics`` (name: partitions), waiting for each."""
    admin = AdminClient(conf)  # must outlive its futures
    for f in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
        f.result(60)


def warm_up(spark: Any, conf: dict[str, str], sinks: bool) -> None:
    """A small read by each connector first: Python workers started, the JVM's JIT; with ``sinks`` also
    into each connector's sink (its workers, and the broker's first transaction: Apache Kafka creates
    ``__transaction_state`` then, about 1 s once per cluster, ``bench/sink_first_batch.py``)."""
    warm = f"vs-warm-{uuid.uuid4().hex[:6]}"
    warm_total = fill(conf, warm, 40_000, 10)
    bootstrap = conf["bootstrap.servers"]
    for fmt in (THEIRS, OURS):
        scale_run(spark, fmt, bootstrap=bootstrap, topic=warm, total=warm_total, per_batch=10_000)
        if sinks:
            out = f"vs-warm-out-{uuid.uuid4().hex[:6]}"
            create(conf, {out: 10})
            scale_run(
                spark, fmt, bootstrap=bootstrap, topic=warm, total=warm_total, per_batch=10_000, sink=out
            )


def bench_scale(spark: Any, conf: dict[str, str], args: argparse.Namespace) -> None:
    bootstrap = conf["bootstrap.servers"]
    warm_up(spark, conf, args.scale_sink)
    print(
        f"scale: {args.scale_records:,} records of 100 B, maxOffsetsPerTrigger {args.scale_batch:,}, "
        "availableNow (total s from start(), median batch s, median driver planning ms a batch)"
    )
    for n in (int(x) for x in args.sizes.split(",")):
        topic = f"vs-scale-{n}-{uuid.uuid4().hex[:6]}"
        total = fill(conf, topic, args.scale_records, n)
        sinks: list[str | None] = [None]
        if args.scale_sink:
            sinks.append(f"vs-scale-out-{n}-{uuid.uuid4().hex[:6]}")
            create(conf, {t: n for t in sinks if t})
        for sink in sinks:
            # Ours by default (a task per core), with a task per partition (``parallelism`` = the partition
            # count, the default before issue 41) and with the readers' fetch wait at 1 ms (the reader's
            # cost per partition, bench/PARTITIONS.md), side by side with theirs in one run.
            runs = {
                "theirs": (THEIRS, {}),
                "ours": (OURS, {}),
                "ours-per-partition": (OURS, {"parallelism": str(n)}),
                "ours-fetch-wait-1ms": (OURS, {"kafka.fetch.wait.max.ms": "1"}),
            }
            runs = {label: run for label, run in runs.items() if label in args.scale_runs.split(",")}
            got = {
                label: scale_run(
                    spark,
                    fmt,
                    bootstrap=bootstrap,
                    topic=topic,
                    total=total,
                    per_batch=args.scale_batch,
                    sink=sink,
                    options=options,
                )
                for label, (fmt, options) in runs.items()
            }
            into = "noop" if sink is None else "sink (ours exactly once)"
            print_runs(f"{n:>5} partitions into {into}", got)


def fill_topics(conf: dict[str, str], topics: list[str], partitions: int, records: int) -> int:
    """``records`` of 100 B spread round-robin over every partition of ``topics`` (created here); the count
    written (Apache Kafka's ListOffsets is exact, so no seal record is needed)."""
    create(conf, dict.fromkeys(topics, partitions))
    if produce_spread(conf, [(t, p) for t in topics for p in range(partitions)], records):
        raise RuntimeError("fill_topics: records left unsent after 120 s")
    return records


def bench_pattern(spark: Any, conf: dict[str, str], args: argparse.Namespace) -> None:
    bootstrap = conf["bootstrap.servers"]
    if "scale" not in args.only.split(","):  # else warmed up by bench_scale
        warm_up(spark, conf, args.scale_sink)
    prefix = f"vs-pat-{uuid.uuid4().hex[:6]}"
    topics = [f"{prefix}-{i:03d}" for i in range(PATTERN_TOPICS)]
    total = fill_topics(conf, topics, PATTERN_PARTITIONS, args.scale_records)
    pattern = f"{prefix}-.*"
    print(
        f"pattern: subscribePattern {pattern!r} over {PATTERN_TOPICS} topics of {PATTERN_PARTITIONS} "
        f"partitions, {total:,} records of 100 B, maxOffsetsPerTrigger {args.scale_batch:,}, availableNow"
    )
    sinks: list[str | None] = [None]
    if args.scale_sink:
        sinks.append(f"vs-pat-out-{uuid.uuid4().hex[:6]}")  # not matched by the pattern
        create(conf, {t: PATTERN_SINK_PARTITIONS for t in sinks if t})
    wanted = args.scale_runs.split(",")
    runs = {label: fmt for label, fmt in (("theirs", THEIRS), ("ours", OURS)) if label in wanted}
    for sink in sinks:
        got = {
            label: scale_run(
                spark,
                fmt,
                bootstrap=bootstrap,
                topic="",
                total=total,
                per_batch=args.scale_batch,
                sink=sink,
                pattern=pattern,
            )
            for label, fmt in runs.items()
        }
        into = "noop" if sink is None else f"sink of {PATTERN_SINK_PARTITIONS} partitions (ours exactly once)"
        print_runs(f"{PATTERN_TOPICS} topics x {PATTERN_PARTITIONS} partitions by pattern into {into}", got)
