"""Output modes of the streaming sink, and how update mode reaches it: decisions only, no Spark here.

Spark (4.3) refuses ``outputMode("update")`` for every Python data source when the query starts: its
``PythonWriteBuilder`` lacks the JVM marker trait ``SupportsStreamingUpdateAsAppend`` (``V2Writes.scala``
150-152, "sparkafka does not support Update mode."), and nothing in Python can add it
(docs/writing.md, "How update mode runs"). Append and complete need nothing: complete mode appends the
whole result table every batch, as Spark's own Kafka sink does.

So ``sparkafka.register`` wraps PySpark's ``DataStreamWriter`` (``sparkafka.stream_writer``): it records
the format, output mode and options the user sets, and when the query starts as ``format("sparkafka")``
in update mode (``runs_as_foreach_batch``), the query runs as ``foreachBatch`` instead. Each micro-batch
is then written by the sink's batch writer with two internal options (``batch_write_options``) naming the
streaming query and the micro-batch id (``StreamBatch``): the writer commits it exactly as the streaming
writer commits batch ``batch_id`` of that query (same intent-log key, same replay and recovery rules, the
query as the prefix's streaming owner), so a batch Spark replays after a crash is resolved against the
intent log, never written twice. Update mode's output is deterministic per batch id (Spark recomputes
a replayed batch from the state of the batch before it), which is what a replay needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, get_args

from sparkafka.errors import ConfigError

__all__ = [
    "FORMAT",
    "OUTPUT_MODES",
    "STREAM_BATCH_OPTION",
    "STREAM_QUERY_OPTION",
    "OutputMode",
    "StreamBatch",
    "StreamWriterSettings",
    "batch_write_options",
    "runs_as_foreach_batch",
    "split_stream_batch",
]

OutputMode = Literal["append", "update", "complete"]
OUTPUT_MODES: tuple[OutputMode, ...] = get_args(OutputMode)

FORMAT = "sparkafka"
"""The data source's short name, as ``format()`` takes it."""

STREAM_QUERY_OPTION = "_sparkafka.streamQueryId"
"""Internal batch-write option: the streaming query whose micro-batch this write is (update mode)."""
STREAM_BATCH_OPTION = "_sparkafka.streamBatchId"
"""Internal batch-write option: the micro-batch id this write commits as (update mode)."""


class StreamBatch(NamedTuple):
    """One micro-batch of a streaming query, written through the batch writer (update mode)."""

    query_id: str
    """The streaming query's id (``StreamingQuery.id``: kept in its checkpoint, the same after restarts)."""
    batch_id: int
    """The micro-batch id Spark passed to ``foreachBatch`` (the same when Spark replays the batch)."""


@dataclass
class StreamWriterSettings:
    """What the user set on one ``DataStreamWriter``, as PySpark forwarded it to the JVM.

    The JVM writer keeps these private, so the wrapper records them as they pass. Mutable, like the
    writer it mirrors; made by the first call that records something.
    """

    format: str | None = None
    """The last ``format()``; None after ``foreach``/``foreachBatch`` (the sink is then the user's)."""
    output_mode: str | None = None
    """The last ``outputMode()``; None: Spark's default, append."""
    options: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Options by lower-cased name (Spark's options are case-insensitive, the last one set wins), each as
    (the name as written, the value as PySpark sent it)."""

    def set_option(self, key: str, value: str) -> None:
        """Record option ``key`` = ``value`` (replacing one of the same name in any case)."""
        self.options[key.lower()] = (key, value)

    def option_map(self) -> dict[str, str]:
        """The options as the user wrote them."""
        return dict(self.options.values())


def runs_as_foreach_batch(settings: StreamWriterSettings) -> bool:
    """Whether a query starting with ``settings`` must run as ``foreachBatch``: sparkafka in update mode.

    Spark matches both names without regard to case (``OutputMode`` and the data source lookup), so this
    does too. Append and complete mode, and every other format, start as they are.
    """
    fmt = (settings.format or "").strip().lower()
    mode = (settings.output_mode or "").strip().lower()
    return fmt == FORMAT and mode == "update"


def batch_write_options(options: Mapping[str, str], batch: StreamBatch) -> dict[str, str]:
    """The options of the batch write that commits ``batch``: the user's, and the two internal ones."""
    internal = {STREAM_QUERY_OPTION.lower(), STREAM_BATCH_OPTION.lower()}
    out = {k: v for k, v in options.items() if k.lower() not in internal}
    out[STREAM_QUERY_OPTION] = batch.query_id
    out[STREAM_BATCH_OPTION] = str(batch.batch_id)
    return out


def split_stream_batch(options: Mapping[str, Any]) -> tuple[dict[str, Any], StreamBatch | None]:
    """A batch write's options without the internal ones, and the micro-batch they name (None: a plain
    batch write). Runs where Spark makes the batch writer (a Python worker on the driver).

    Raises:
        ConfigError: only one of the two is set, or the batch id is not a number (a write made by hand).
    """
    query_key, batch_key = STREAM_QUERY_OPTION.lower(), STREAM_BATCH_OPTION.lower()
    rest: dict[str, Any] = {}
    query_id: str | None = None
    batch_id: str | None = None
    for key, value in options.items():
        lowered = str(key).lower()
        if lowered == query_key:
            query_id = str(value)
        elif lowered == batch_key:
            batch_id = str(value)
        else:
            rest[key] = value
    if query_id is None and batch_id is None:
        return rest, None
    if not query_id or batch_id is None or not batch_id.isdigit():
        raise ConfigError(
            f"options {STREAM_QUERY_OPTION} and {STREAM_BATCH_OPTION} are internal to sparkafka's update "
            "mode and go together (a query id and a micro-batch id); remove them from this write"
        )
    return rest, StreamBatch(query_id, int(batch_id))
