"""Streaming queries in tests: a sparkafka source, runs into parquet or memory, and what they wrote; how a
failed query or job failed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sparkafka.source.planning import offsets_from_json
from tests.support.kafka import Offsets

__all__ = [
    "checkpoint_batches",
    "failed_attempts",
    "memory_query",
    "memory_values",
    "read_values",
    "run_to_parquet",
    "source",
    "spark_report",
]


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


def memory_values(spark: Any, name: str) -> list[str]:
    """The values a ``memory_query`` named ``name`` has collected so far."""
    return [r["value"] for r in spark.sql(f"select value from {name}").collect()]


def checkpoint_batches(checkpoint: str) -> tuple[dict[int, Offsets], set[int]]:
    """The end offsets of each batch in the offset log, and the batch ids in the commit log."""
    ends: dict[int, Offsets] = {}
    for f in (Path(checkpoint) / "offsets").glob("[0-9]*"):
        ends[int(f.name)] = offsets_from_json(json.loads(f.read_text().splitlines()[2]))
    commits = {int(f.name) for f in (Path(checkpoint) / "commits").glob("[0-9]*")}
    return ends, commits


def failed_attempts(spark: Any, group: str) -> int:
    """Task attempts that failed in the jobs of job group ``group`` (a streaming query's: its run id), as
    Spark's status tracker counts them."""
    tracker = spark.sparkContext.statusTracker()
    failed = 0
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info is not None else ():
            stage_info = tracker.getStageInfo(stage)
            failed += stage_info.numFailedTasks if stage_info is not None else 0
    return failed


def spark_report(error: BaseException) -> str:
    """Spark's own message of a failure (its JVM exception's), whatever ``sparkafka.register`` makes of the
    text the user reads (``sparkafka.spark_errors``)."""
    origin = getattr(error, "_origin", None)
    return str(origin.getMessage()) if origin is not None else str(error)
