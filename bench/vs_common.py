"""Shared by ``bench/vs_spark.py`` and ``bench/vs_scale.py``: the two connectors' names, a backlog read and a
sink writer, with the same options for both, only the format's name changed."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Mapping
from typing import Any

THEIRS, OURS = "kafka", "sparkafka"


def backlog(
    spark: Any,
    fmt: str,
    bootstrap: str,
    topic: str,
    per_batch: int,
    *,
    options: dict[str, str] | None = None,
    pattern: str | None = None,
) -> Any:
    """``fmt``'s stream of ``topic`` (or of the topics ``pattern`` matches, by ``subscribePattern``) from
    earliest, ``per_batch`` records a batch, with ``options``."""
    subscription = ("subscribe", topic) if pattern is None else ("subscribePattern", pattern)
    return (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option(*subscription)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", per_batch)
        .options(**(options or {}))
        .load()
    )


def sink_writer(
    df: Any,
    fmt: str,
    delivery: str,
    *,
    bootstrap: str,
    topic: str,
    label: str,
    options: Mapping[str, str] | None = None,
) -> Any:
    """``df.writeStream`` into ``fmt``'s sink on ``topic``: ours with ``delivery``, theirs as Spark has it;
    ``options`` added to either."""
    writer = (
        df.writeStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", tempfile.mkdtemp(prefix=f"{label}-ck-"))
    )
    if fmt == OURS:
        writer = writer.option("deliveryGuarantee", delivery)
        if delivery == "exactly_once":
            writer = writer.option("transactionalIdPrefix", f"{label}-{uuid.uuid4().hex[:6]}")
    for key, value in (options or {}).items():
        writer = writer.option(key, value)
    return writer
