"""Executor-side reading: consume offset ranges with confluent-kafka and build Arrow record batches.

Runs inside Spark's Python workers. One consumer per worker process and configuration is cached and reused
across tasks and micro-batches (creating one costs a broker handshake); it is only ever used with
``assign`` and explicit positions, never with group membership or commits.
"""

from __future__ import annotations

import copy
import functools
import itertools
import logging
import operator
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkafka.client import broker_gaps
from sparkafka.client.core import (
    DEFAULT_TIMEOUT_S,
    LEADER_ELECTION_S,
    cached,
    is_leaderless,
    learn_topics,
    new_consumer,
    next_messages,
    with_retries,
)
from sparkafka.errors import BrokerError, DataLossError
from sparkafka.structs import TopicPartition

__all__ = ["OffsetRange", "arrow_schema", "read_ranges"]

log = logging.getLogger(__name__)

ROWS_PER_BATCH = 20_000
_IS_NOT_NONE = functools.partial(operator.is_not, None)
_CONSUME_CHUNK = 5_000

_HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


@dataclass(frozen=True)
class OffsetRange:
    """Read ``[start, end)`` of one partition."""

    tp: TopicPartition
    start: int
    end: int


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


def _consumer(conf: Mapping[str, str]) -> Any:

    settings = dict(conf)
    settings["enable.auto.commit"] = "false"
    settings["enable.auto.offset.store"] = "false"
    settings["enable.partition.eof"] = "true"
    # An out-of-range position must surface as an error (data loss), never as a silent reset.
    settings["auto.offset.reset"] = "error"
    settings.setdefault("group.id", "sparkafka-reader")
    # Bigger fetches per partition: a task reads known ranges to the end, so larger requests only help.
    settings.setdefault("max.partition.fetch.bytes", str(8 * 1024 * 1024))
    # Keep fetching while the Python side drains the queue: at librdkafka's default (100,000 messages)
    # the prefetch pauses and resumes in steps, and a task read at 0.6 x the rate it reaches with a
    # queue of 1,000,000 (bench/read_path.py). The queue is then bounded by its size in bytes: 16 MB,
    # not librdkafka's 64 MB, which cost each Python worker about 150 MB more (peak 507 MB against 359,
    # bench/worker_memory.py: librdkafka keeps about 4 x the payload per queued message) and no speed
    # measurable under Spark (batch reads at 16 MB against 64 MB: 326,261 against 304,579, then 357,209
    # against 392,398 records/s in two runs of bench/read_path.py --spark; runs spread more than that).
    settings.setdefault("queued.min.messages", "1000000")
    settings.setdefault("queued.max.messages.kbytes", "16384")
    # Short: the fetch past a range's end is held this long, and the next partition's requests queue
    # behind it on the connection (see broker_gaps for the brokers where it must be longer).
    settings["fetch.wait.max.ms"] = broker_gaps.fetch_wait_ms(conf)
    return cached("reader-consumer", settings, lambda: new_consumer(settings), lambda c: c.close())


def _timestamp_type(kind: int) -> int:
    # librdkafka: 1 create time, 2 log append time, 0 not available; Kafka's TimestampType ids: 0, 1, -1.
    return {1: 0, 2: 1}.get(kind, -1)


class _Columns:
    """Column builders for one Arrow batch."""

    def __init__(self, include_headers: bool) -> None:
        self.include_headers = include_headers
        self._reset()

    def _reset(self) -> None:
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

    def take(self) -> _Columns:
        """What was added so far, leaving this builder empty."""
        full = copy.copy(self)  # shares the filled lists; this builder gets new ones
        self._reset()
        return full

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


def read_ranges(
    conf: Mapping[str, str],
    ranges: Sequence[OffsetRange],
    include_headers: bool = False,
    fail_on_data_loss: bool = True,
    poll_timeout_ms: int = 120_000,
) -> Iterator[pa.RecordBatch]:
    """Yield every record in ``ranges`` exactly once, in offset order per partition, as Arrow batches.

    A partition is done when a record at or past its end arrives, the consumer's position reaches the end,
    or the partition's end-of-log event reports an offset at or past the end. So gaps (transaction
    markers, compaction, aborted records under read_committed) never stall it.

    Raises:
        DataLossError: the range starts below the log start (retention) and ``fail_on_data_loss``.
        BrokerError: no progress within ``poll_timeout_ms``.
    """
    from confluent_kafka import TopicPartition as CTopicPartition

    todo = [r for r in ranges if r.end > r.start]
    if not todo:
        return
    schema = arrow_schema(include_headers)
    consumer = _consumer(conf)
    learn_topics(consumer, {r.tp.topic for r in todo}, 30)
    starts = {r.tp: _check_start(consumer, r, fail_on_data_loss, conf) for r in todo}
    ends = {r.tp: r.end for r in todo}
    columns = _Columns(include_headers)
    stalled = functools.partial(broker_gaps.note_stalled_fetch, conf)
    try:
        # One partition at a time: every message of a chunk is then of that partition, which saves two
        # calls per message (topic(), partition()), a measurable share of the read.
        for only in sorted(tp for tp in ends if starts[tp] < ends[tp]):
            while True:
                consumer.assign([CTopicPartition(only.topic, only.partition, starts[only])])
                try:
                    reading = _read_partition(consumer, only, ends, columns, poll_timeout_ms, stalled=stalled)
                    for full in reading:
                        yield full.build(schema)
                    break
                except _StalledError as e:  # the fetch wait was raised: again from where the read got to
                    consumer.unassign()
                    if e.position is not None:
                        starts[only] = e.position
                    consumer = _consumer(conf)
                    learn_topics(consumer, {only.topic}, 30)
        if len(columns):
            yield columns.build(schema)
    finally:
        consumer.unassign()


class _StalledError(Exception):
    """Fetches gave nothing for ``broker_gaps.STALL_S`` and the fetch wait was raised (``broker_gaps``)."""

    def __init__(self, position: int | None) -> None:
        super().__init__(position)
        self.position = position


def _read_partition(
    consumer: Any,
    only: TopicPartition,
    ends: Mapping[TopicPartition, int],
    columns: _Columns,
    poll_timeout_ms: int,
    *,
    stalled: Callable[[], bool] = lambda: False,
) -> Iterator[_Columns]:
    """Consume the assigned partition ``only`` into ``columns``; yields them whenever they are full.

    Raises:
        _StalledError: nothing arrived for ``broker_gaps.STALL_S`` and ``stalled()`` raised the fetch wait.
    """
    pending = {only}
    last_progress = time.monotonic()
    position: int | None = None
    while pending:
        msgs = next_messages(consumer, _CONSUME_CHUNK, 0.5)
        eof: dict[TopicPartition, int] = {}
        if _has_events(msgs):
            msgs, eof = _split_events(msgs)
        for i, j, tp in _runs(msgs, only):
            if tp not in pending:
                continue
            end = ends[tp]
            run = msgs[i:j]
            position = run[-1].offset() + 1
            if run[-1].offset() >= end - 1:
                run = [m for m in run if m.offset() < end]
                pending.discard(tp)
            if run:
                columns.add(run, tp.topic, tp.partition)
        # End-of-partition events count only after the data consumed with them.
        for tp, offset in eof.items():
            if tp in pending and offset >= ends[tp]:
                pending.discard(tp)
        if msgs:
            last_progress = time.monotonic()
        elif pending:
            _drop_finished(consumer, pending, ends)
            quiet_s = time.monotonic() - last_progress
            _check_quiet(
                pending, ends, quiet_s, position=position, stalled=stalled, poll_timeout_ms=poll_timeout_ms
            )
        if len(columns) >= ROWS_PER_BATCH:
            yield columns.take()


def _check_quiet(
    pending: set[TopicPartition],
    ends: Mapping[TopicPartition, int],
    quiet_s: float,
    *,
    position: int | None,
    stalled: Callable[[], bool],
    poll_timeout_ms: int,
) -> None:
    """After a poll that brought nothing: raise if the fetch stalled or ``pollTimeoutMs`` passed.

    A stalled fetch raises ``_StalledError`` (the caller resumes with a longer wait); past
    ``pollTimeoutMs`` the task fails with a ``BrokerError`` naming the partitions.
    """
    if pending and quiet_s > broker_gaps.STALL_S and stalled():
        raise _StalledError(position)
    if pending and quiet_s * 1000 > poll_timeout_ms:
        desc = ", ".join(f"{tp} up to {ends[tp]}" for tp in sorted(pending))
        raise BrokerError(
            f"no records arrived for {poll_timeout_ms} ms while reading {desc} "
            "(raise pollTimeoutMs if the broker is slow)"
        )


def _has_events(msgs: Sequence[Any]) -> bool:
    """Whether any message is an event or error (``error()`` set), without Python bytecode per message.

    Not ``list.count(None)``: KafkaError's ``==`` raises when compared with None (measured).
    """
    return bool(msgs) and any(map(_IS_NOT_NONE, map(type(msgs[0]).error, msgs)))


def _runs(msgs: Sequence[Any], only: TopicPartition) -> list[tuple[int, int, TopicPartition]]:
    """Split a chunk into runs of one partition: ``(start, stop, partition)``.

    With one partition assigned the whole chunk is that partition: librdkafka drops messages fetched for
    an earlier assignment, and its queue is FIFO, so checking the first message is a belt-and-braces guard.
    """
    if not msgs:
        return []
    first = msgs[0]
    if first.partition() == only.partition and first.topic() == only.topic:
        return [(0, len(msgs), only)]
    keys = [(m.topic(), m.partition()) for m in msgs]
    cuts = [0, *[i for i in range(1, len(keys)) if keys[i] != keys[i - 1]], len(keys)]
    return [(i, j, TopicPartition(*keys[i])) for i, j in itertools.pairwise(cuts)]


def _split_events(msgs: list[Any]) -> tuple[list[Any], dict[TopicPartition, int]]:
    """The data messages, and the end-of-partition offsets seen; errors raise.

    A leaderless answer (a broker down, a leader being elected: librdkafka reports it and keeps fetching
    from the new leader once there is one) is logged and ridden out; ``pollTimeoutMs`` still bounds the wait.
    """
    from confluent_kafka import KafkaError

    data = []
    eof: dict[TopicPartition, int] = {}
    for m in msgs:
        err = m.error()
        if err is None:
            data.append(m)
            continue
        tp = TopicPartition(m.topic(), m.partition())
        if err.code() == KafkaError._PARTITION_EOF:
            eof[tp] = m.offset()
        elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            raise DataLossError(f"offsets of {tp} are out of range while reading: {err.str()}")
        elif is_leaderless(err):
            log.info("reading %s: %s (riding out a leader change)", tp, err.str())
        else:
            raise BrokerError(f"reading {tp} failed: {err.str()}")
    return data, eof


def _drop_finished(consumer: Any, pending: set[TopicPartition], ends: Mapping[TopicPartition, int]) -> None:
    """Drop partitions whose consumer position passed their end without a record to show it."""
    from confluent_kafka import TopicPartition as CTopicPartition

    positions = consumer.position([CTopicPartition(tp.topic, tp.partition) for tp in pending])
    for ctp in positions:
        tp = TopicPartition(ctp.topic, ctp.partition)
        if ctp.offset >= 0 and ctp.offset >= ends[tp]:
            pending.discard(tp)


def _check_start(consumer: Any, r: OffsetRange, fail_on_data_loss: bool, conf: Mapping[str, Any]) -> int:
    """The offset to start at: ``r.start``, unless retention removed it (then data loss).

    The lookup rides through a leader election (a broker killed: its partitions answer NOT_LEADER, or the
    request dies with the broker's handle) for ``DEFAULT_TIMEOUT_S``, each try capped at the election time.
    """
    from confluent_kafka import TopicPartition as CTopicPartition

    ctp = CTopicPartition(r.tp.topic, r.tp.partition)
    low, _high = with_retries(
        f"the log start of {r.tp}",
        conf,
        lambda left: consumer.get_watermark_offsets(ctp, timeout=min(left, LEADER_ELECTION_S)),
        DEFAULT_TIMEOUT_S,
    )
    if low is None or low < 0 or r.start >= low:
        return r.start
    lost = f"{r.tp}: offsets {r.start}..{min(low, r.end) - 1} were removed (log starts at {low})"
    if fail_on_data_loss:
        raise DataLossError(f"{lost}. Set failOnDataLoss=false to skip ahead with a warning")
    log.warning("%s; skipping ahead (failOnDataLoss=false)", lost)
    return int(min(low, r.end))
