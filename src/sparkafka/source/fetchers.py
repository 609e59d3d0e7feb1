"""The two ways a reader task takes records off Kafka: the shape they share, and the pure-Python one.

Runs inside Spark's Python workers, under ``source.fetch.read_ranges``, which holds every decision (when a
partition is done, stalls, data loss, events) and asks a ``Fetcher`` only for the next chunk of one
assigned partition. ``PythonFetcher`` reads with confluent-kafka, Python objects per record;
``source.native_fetch.NativeFetcher`` reads with sparkafka's own librdkafka extension straight into Arrow
buffers. Both are tested by the same integration tests (``tests/integration/test_fetch.py``).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from sparkafka.client.core import next_messages
from sparkafka.structs import TopicPartition

__all__ = ["Fetched", "Fetcher", "PythonFetcher", "arrow_schema"]

_HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_CONSUME_CHUNK = 5_000
_IS_NOT_NONE = functools.partial(operator.is_not, None)


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema of what ``read_ranges`` yields; matches the source's Spark schema."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", _HEADERS_TYPE))
    return pa.schema(fields)


@dataclass(frozen=True)
class Fetched:
    """What one ``Fetcher.fetch`` took off the assigned partition."""

    batch: pa.RecordBatch | None
    """The records before the range's end, in offset order; None when there were none."""
    last_offset: int | None
    """The offset of the last record of the partition seen (at or past the end too); None: no record."""
    reached_end: bool
    """A record at or past ``end - 1`` was seen: the range is read."""
    events: Sequence[Any] = field(default_factory=tuple)
    """confluent-kafka ``KafkaError``s delivered in the chunk (end of partition, errors), with where:
    ``(error, topic, partition, offset)``."""


class Fetcher(Protocol):
    """One reader's client: a consumer used only with ``assign`` and explicit positions."""

    overlaps: bool
    """Whether partitions can be assigned beside the one being read, each fetched alone from its own
    queue (sparkafka_native); False: one partition at a time, ``assign`` replaces the assignment
    (confluent-kafka reads every assigned partition from one queue)."""

    def list_topics(self, topic: str, timeout: float) -> Any:
        """Fetch ``topic``'s metadata now (``client.core.learn_topics``); raises a KafkaException."""

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        """(log start, high watermark) of confluent-kafka TopicPartition ``tp``; raises KafkaException."""

    def assign(self, tp: TopicPartition, offset: int) -> None:
        """Read ``tp`` from ``offset``: added to the assignment when ``overlaps``, else replacing it."""

    def release(self, tp: TopicPartition) -> None:
        """Stop reading ``tp`` (its prefetched records are dropped); nothing when it is not assigned."""

    def unassign(self) -> None:
        """Stop reading every partition (the end of a task's read; prefetched records are dropped)."""

    def position(self, tp: TopicPartition) -> int:
        """The next offset the assigned ``tp`` returns (negative: not known yet)."""

    def fetch(
        self, tp: TopicPartition, end: int, max_rows: int, timeout_s: float, include_headers: bool
    ) -> Fetched:
        """The next records of the assigned ``tp`` (up to ``max_rows``), stopping at ``end``, at an event, or
        when nothing arrives within ``timeout_s``."""

    def close(self) -> None:
        """Close the client (at worker exit: ``client.core.close_all``)."""


class PythonFetcher:
    """A ``Fetcher`` over a confluent-kafka Consumer: Python objects per record, Arrow built from lists.

    The fallback when sparkafka's native extension is not installed or cannot take the settings (GSSAPI),
    and option ``fetcher=python``. One partition at a time (``overlaps`` False): confluent-kafka has no
    queue per partition (``rd_kafka_queue_get_partition``), so a partition assigned beside the one being
    read would interleave its records in the one queue, to be held in Python while the current one is read.
    """

    overlaps = False

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer

    def list_topics(self, topic: str, timeout: float) -> Any:
        """See ``Fetcher.list_topics``."""
        return self.consumer.list_topics(topic=topic, timeout=timeout)

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        """See ``Fetcher.get_watermark_offsets``."""
        low, high = self.consumer.get_watermark_offsets(tp, timeout=timeout)
        return int(low), int(high)

    def assign(self, tp: TopicPartition, offset: int) -> None:
        """See ``Fetcher.assign``."""
        from confluent_kafka import TopicPartition as CTopicPartition

        self.consumer.assign([CTopicPartition(tp.topic, tp.partition, offset)])

    def release(self, tp: TopicPartition) -> None:
        """See ``Fetcher.release``: the assignment is ``tp`` or nothing."""
        self.consumer.unassign()

    def unassign(self) -> None:
        """See ``Fetcher.unassign``."""
        self.consumer.unassign()

    def position(self, tp: TopicPartition) -> int:
        """See ``Fetcher.position``."""
        from confluent_kafka import TopicPartition as CTopicPartition

        (ctp,) = self.consumer.position([CTopicPartition(tp.topic, tp.partition)])
        return int(ctp.offset)

    def fetch(
        self, tp: TopicPartition, end: int, max_rows: int, timeout_s: float, include_headers: bool
    ) -> Fetched:
        """See ``Fetcher.fetch``."""
        columns = _Columns(include_headers)
        events: list[Any] = []
        last_offset: int | None = None
        reached_end = False
        while len(columns) < max_rows and not reached_end and not events:
            msgs = next_messages(self.consumer, min(_CONSUME_CHUNK, max_rows - len(columns)), timeout_s)
            if not msgs:
                break
            if _has_events(msgs):
                errors = [m for m in msgs if m.error() is not None]
                events = [(m.error(), m.topic(), *_where(m)) for m in errors]
                msgs = [m for m in msgs if m.error() is None]
            msgs = _of_partition(msgs, tp)
            if not msgs:
                continue
            last_offset = msgs[-1].offset()
            if last_offset >= end - 1:
                msgs = [m for m in msgs if m.offset() < end]
                reached_end = True
            if msgs:
                columns.add(msgs, tp.topic, tp.partition)
        batch = columns.build(arrow_schema(include_headers)) if len(columns) else None
        return Fetched(batch, last_offset, reached_end, events)

    def close(self) -> None:
        """See ``Fetcher.close``."""
        self.consumer.close()


def _where(event: Any) -> tuple[int, int]:
    """An event's (partition, offset), -1 for none: a consumer-level event (a refused group lookup, say)
    has neither, and confluent-kafka gives None where the native fetch gives -1."""
    partition, offset = event.partition(), event.offset()
    return (-1 if partition is None else partition), (-1 if offset is None else offset)


def _has_events(msgs: Sequence[Any]) -> bool:
    """Whether any message is an event or error (``error()`` set), without Python bytecode per message.

    Not ``list.count(None)``: KafkaError's ``==`` raises when compared with None (measured).
    """
    return bool(msgs) and any(map(_IS_NOT_NONE, map(type(msgs[0]).error, msgs)))


def _of_partition(msgs: list[Any], tp: TopicPartition) -> list[Any]:
    """The messages of ``tp``: with one partition assigned, all of them (librdkafka drops what it fetched
    for an earlier assignment, and its queue is FIFO); checking the first is a belt-and-braces guard."""
    if not msgs:
        return msgs
    first = msgs[0]
    if first.partition() == tp.partition and first.topic() == tp.topic:
        return msgs
    return [m for m in msgs if m.partition() == tp.partition and m.topic() == tp.topic]


def _timestamp_type(kind: int) -> int:
    # librdkafka: 1 create time, 2 log append time, 0 not available; Kafka's TimestampType ids: 0, 1, -1.
    return {1: 0, 2: 1}.get(kind, -1)


class _Columns:
    """Column builders for one Arrow batch."""

    def __init__(self, include_headers: bool) -> None:
        self.include_headers = include_headers
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.topics: list[str] = []
        self.partitions: list[int] = []
        self.offsets: list[int] = []
        self.timestamps: list[int | None] = []
        """Milliseconds since the epoch; made microseconds in Arrow by ``build``."""
        self.types: list[int] = []
        self.headers: list[list[dict[str, Any]] | None] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, msgs: Sequence[Any], topic: str, partition: int) -> None:
        # map() over the C methods: no Python bytecode per message (the read's hot loop).
        message = type(msgs[0])
        self.keys.extend(map(message.key, msgs))
        self.values.extend(map(message.value, msgs))
        self.offsets.extend(map(message.offset, msgs))
        kinds, stamps = zip(*map(message.timestamp, msgs), strict=True)
        if kinds.count(1) == len(kinds):  # the common case: every record has a create time (ms)
            self.timestamps.extend(stamps)
            self.types.extend([0] * len(stamps))
        else:
            self.timestamps.extend([ts if kind else None for kind, ts in zip(kinds, stamps, strict=True)])
            self.types.extend([_timestamp_type(kind) for kind in kinds])
        self.topics.extend([topic] * len(msgs))
        self.partitions.extend([partition] * len(msgs))
        if self.include_headers:
            for m in msgs:
                hs = m.headers()
                # No headers: null, as Spark's connector gives (KafkaRecordToRowConverter), not [].
                self.headers.append([{"key": k, "value": v} for k, v in hs] if hs else None)

    def build(self, schema: pa.Schema) -> pa.RecordBatch:
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array(self.topics, pa.string()),
            pa.array(self.partitions, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pc.multiply(pa.array(self.timestamps, pa.int64()), 1000).cast(pa.timestamp("us", tz="UTC")),
            pa.array(self.types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, _HEADERS_TYPE))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
