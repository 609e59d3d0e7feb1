"""Record timestamps at given offsets, by fetching: what event-time alignment asks that ListOffsets cannot.

Runs on the driver side (Spark's source runner, planning a micro-batch) with one long-lived consumer per
process and settings, assigned only for the lookup. Kafka has no request for "the timestamp of the record at
offset N": a fetch from N returns the record batch holding N, so a lookup costs one fetch round trip for
all partitions and about one record batch per partition. The consumer keeps at most ``queued.min.messages``
records per partition queued, so it does not read ahead past what a lookup needs, and a lookup of one record
a partition fetches at most librdkafka's default of 1 MiB a partition (or the one record batch holding it,
when larger), whatever the executors' reads set.

Measured (2026-11-28, 100 partitions of 2,000 records, one lookup of the first record at a position in
each): 146 ms a lookup, and 1 s or more one time in three, before two settings below. librdkafka waits
``fetch.queue.backoff.ms`` (1 s) before it fetches again a partition whose queue was full, and the same
partition assigned again for the next lookup was still under that wait: now 0. And taking the queued
records 10,000 at a time made a Python message of every record fetched (about 850 a partition) where one
a partition is needed; taken one at a time, the records queued behind a partition once it is paused are
dropped inside librdkafka: 35 ms a lookup (4 partitions of 250,000 records: 10 ms, with stalls of 1 s,
then 6 ms).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sparkafka.client.broker_gaps import fetch_wait_ms
from sparkafka.client.core import (
    DEFAULT_TIMEOUT_S,
    broker_error,
    cached,
    is_leaderless,
    learn_topics,
    new_consumer,
    next_messages,
)
from sparkafka.structs import TimestampedOffset, TopicPartition

__all__ = ["last_times", "lookup_settings", "scan_times"]

_QUEUED_PER_PARTITION = 1000

A = TypeVar("A")

_FIRST_RECORD_FETCH_BYTES = 1024 * 1024
"""The largest ``max.partition.fetch.bytes`` of a lookup of one record a partition: librdkafka's default.
A raised ``kafka.max.partition.fetch.bytes`` for the executors' reads would bring up to that much a
partition for one record's timestamp; a lower one is kept. Not lower than the default: a read_committed
lookup past a large aborted transaction fetches it all (the client drops it), and a smaller cap takes more
round trips for it (64 KiB: 16 times those of the default). The broker answers with the whole first record
batch when it is larger (KIP-74), so the lookup always gets its record. ``fetch.max.bytes`` is left as it
is: librdkafka requires it to be at least ``message.max.bytes`` (1 MB)."""

_FETCH_BYTES_KEYS = ("max.partition.fetch.bytes", "fetch.message.max.bytes")


def scan_times(
    conf: Mapping[str, str],
    ranges: Mapping[TopicPartition, tuple[int, int]],
    at_least_ms: int | None,
    max_records: int,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> dict[TopicPartition, tuple[TimestampedOffset | None, int]]:
    """Per ``(start, end)`` range: the first record in it whose timestamp is at least ``at_least_ms`` (any
    record when None), and how far the scan looked.

    The scan of a partition stops at that record (``(record, its offset)``), after ``max_records`` records
    below it (``(None, offset after the last)``), at ``end`` (``(None, end)``), or at the end of the
    partition as the isolation level reads it (``(None, that offset)``). Records a read_committed reader
    skips (aborted transactions, markers) are not looked at. An offset below the log's start scans from
    the log's start; a record below ``start`` (a log truncated under the scan, reset to its start) ends the
    scan at once with ``(None, start)``: nothing at or past ``start`` is known.

    Raises:
        BrokerError: the scan did not finish within ``timeout_s`` (or the fetch failed, not retriably).
    """
    todo = {tp: r for tp, r in ranges.items() if r[0] < r[1]}
    out: dict[TopicPartition, tuple[TimestampedOffset | None, int]] = {
        tp: (None, end) for tp, (start, end) in ranges.items() if tp not in todo
    }
    if not todo:
        return out
    consumer = _consumer(conf, first_only=max_records == 1)
    looked = dict.fromkeys(todo, 0)

    def outcome(tp: TopicPartition, msg: Any) -> _Decided[tuple[TimestampedOffset | None, int]] | None:
        looked[tp] += msg.error() is None and int(msg.offset()) >= todo[tp][0]
        found = _outcome(conf, tp, msg, todo[tp], at_least_ms=at_least_ms, last=looked[tp] >= max_records)
        return None if found is None else _Decided(found)

    # For the first record only, one message at a time: pausing a partition once it has its answer makes
    # librdkafka drop what it has queued behind it, which a batch taken at once would have made into
    # Python messages (see the module's docstring).
    per_call = 1 if max_records == 1 else 10_000
    out.update(
        _read_until_decided(
            conf, consumer, todo, outcome, per_call=per_call, timeout_s=timeout_s, what="record timestamps"
        )
    )
    return out


def last_times(
    conf: Mapping[str, str],
    ranges: Mapping[TopicPartition, tuple[int, int]],
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> dict[TopicPartition, TimestampedOffset | None]:
    """Per ``(start, end)`` range: the last record in it that this isolation level reads (never a
    transaction marker; read_committed, never an aborted record), by reading the range; None: none there.

    Raises:
        BrokerError: the read did not finish within ``timeout_s`` (or the fetch failed, not retriably).
    """
    todo = {tp: r for tp, r in ranges.items() if r[0] < r[1]}
    out: dict[TopicPartition, TimestampedOffset | None] = dict.fromkeys(ranges)
    if not todo:
        return out
    consumer = _consumer(conf, first_only=False)
    seen: dict[TopicPartition, TimestampedOffset] = {}  # the last record of the range read so far

    def outcome(tp: TopicPartition, msg: Any) -> _Decided[TimestampedOffset | None] | None:
        record, done = _last_outcome(conf, tp, msg, todo[tp])
        if record is not None:
            seen[tp] = record
        return _Decided(seen.get(tp)) if done else None

    out.update(
        _read_until_decided(
            conf, consumer, todo, outcome, per_call=10_000, timeout_s=timeout_s, what="the last records"
        )
    )
    return out


@dataclass(frozen=True)
class _Decided(Generic[A]):
    """A lookup's outcome for one partition: it is decided, with ``answer`` (which may itself be None)."""

    answer: A


def _read_until_decided(
    conf: Mapping[str, str],
    consumer: Any,
    ranges: Mapping[TopicPartition, tuple[int, int]],
    outcome: Callable[[TopicPartition, Any], _Decided[A] | None],
    *,
    per_call: int,
    timeout_s: float,
    what: str,
    clock: Callable[[], float] = time.monotonic,
) -> dict[TopicPartition, A]:
    """Reads each partition of ``ranges`` from its start until ``outcome`` decides it: the answers.

    The loop of ``scan_times`` and ``last_times``; runs on the driver (the source runner, planning a
    micro-batch), on the process's cached lookup ``consumer``. All partitions are assigned at once so that
    one fetch round trip serves them all. ``outcome(tp, msg)`` is given every message (record or event:
    end of partition, error) of a partition not yet decided, in order, up to ``per_call`` taken at a time;
    None: read on. A decided partition is paused at once: librdkafka fetches no more of it and drops what it
    has queued behind (see the module's docstring), and messages of it already taken are passed over. At
    the end, decided or not, the paused partitions are resumed and all unassigned: the consumer is reused,
    and nothing of this lookup may stay paused or assigned for the next one.

    Raises:
        BrokerError: partitions still undecided after ``timeout_s`` (named; the deadline starts now, and
            the metadata fetch ahead of the assignment has ``timeout_s`` of its own), or what ``outcome``
            raises.
    """
    from confluent_kafka import TopicPartition as CTopicPartition

    deadline = clock() + timeout_s
    learn_topics(consumer, {tp.topic for tp in ranges}, timeout_s)
    consumer.assign(
        [CTopicPartition(tp.topic, tp.partition, start) for tp, (start, _) in sorted(ranges.items())]
    )
    todo = set(ranges)
    out: dict[TopicPartition, A] = {}
    paused = []
    try:
        while todo:
            left = deadline - clock()
            if left <= 0:
                missing = ", ".join(map(str, sorted(todo)))
                raise broker_error(f"looking up {what} of {missing}", conf, "timed out")
            for msg in next_messages(consumer, per_call, min(left, 0.1)):
                tp = TopicPartition(msg.topic(), msg.partition())
                if tp not in todo:
                    continue  # done with it already; what the fetch brought beyond is dropped
                decided = outcome(tp, msg)
                if decided is None:
                    continue
                out[tp] = decided.answer
                todo.remove(tp)
                paused.append(CTopicPartition(tp.topic, tp.partition))
                consumer.pause(paused[-1:])  # no further fetches for it
    finally:
        if paused:
            consumer.resume(paused)  # the consumer is reused: no partition stays paused for the next lookup
        consumer.unassign()
    return out


def _last_outcome(
    conf: Mapping[str, str], tp: TopicPartition, msg: Any, scan: tuple[int, int]
) -> tuple[TimestampedOffset | None, bool]:
    """For ``last_times``: the record ``msg`` is, if in the range, and whether the read of ``tp`` is done
    (the range's last offset or past it, or the end of the log)."""
    from confluent_kafka import KafkaError

    start, end = scan
    error = msg.error()
    if error is not None:
        if is_leaderless(error) or error.code() == KafkaError._AUTO_OFFSET_RESET:
            return None, False  # librdkafka finds the new leader, or starts at the log's start, itself
        if error.code() != KafkaError._PARTITION_EOF:
            raise broker_error(f"fetching {tp} to look up its last record", conf, error)
        return None, True  # the end of the log as this reader sees it
    offset = int(msg.offset())
    if offset < start:  # reset to the log's start under a truncated log (as in ``_outcome``): none here
        return None, True
    record = TimestampedOffset(offset, int(msg.timestamp()[1])) if offset < end else None
    return record, offset >= end - 1


def _outcome(
    conf: Mapping[str, str],
    tp: TopicPartition,
    msg: Any,
    scan: tuple[int, int],
    *,
    at_least_ms: int | None,
    last: bool,
) -> tuple[TimestampedOffset | None, int] | None:
    """What ``msg`` ends the scan of ``tp`` with (see ``scan_times``); None: it goes on. ``last``: the scan
    has looked at as many records as it may."""
    from confluent_kafka import KafkaError

    start, end = scan
    error = msg.error()
    if error is not None:
        if error.code() == KafkaError._PARTITION_EOF:
            return None, max(start, min(end, int(msg.offset())))
        if is_leaderless(error) or error.code() == KafkaError._AUTO_OFFSET_RESET:
            return None  # librdkafka finds the new leader, or starts at the log's start, itself
        raise broker_error(f"fetching {tp} to look up record timestamps", conf, error)
    offset, timestamp = int(msg.offset()), int(msg.timestamp()[1])
    if offset < start:
        # Below the scan's start: the log was truncated under it (an unclean leader election) and
        # auto.offset.reset started it at the log's start (librdkafka drops records below a fetch's
        # offset otherwise). Nothing is known at or past the start: the scan ends there at once, instead
        # of reading the log from its start (the next plan asks again; data loss is the reader's).
        return None, start
    if offset >= end:
        return None, end
    if at_least_ms is None or timestamp >= at_least_ms:
        return TimestampedOffset(offset, timestamp), offset
    return (None, offset + 1) if last else None


def lookup_settings(conf: Mapping[str, str], *, first_only: bool) -> dict[str, str]:
    """The lookup consumer's settings for ``conf``. ``first_only``: for lookups of one record a partition,
    whose fetches are capped at ``_FIRST_RECORD_FETCH_BYTES`` a partition (or what ``conf`` sets, when
    lower). Scans for the bound (alignment's ``SCAN_LIMIT`` records at most) keep
    the fetch size of ``conf``."""
    own = ("group.id", "enable.auto.commit", "auto.offset.reset", *(_FETCH_BYTES_KEYS if first_only else ()))
    capped = {}
    if first_only:
        given = [int(conf[k]) for k in _FETCH_BYTES_KEYS if k in conf]
        capped = {"max.partition.fetch.bytes": str(min([_FIRST_RECORD_FETCH_BYTES, *given]))}
    return {
        **{k: v for k, v in conf.items() if k not in own},
        **capped,
        "group.id": "sparkafka-record-times",  # required by librdkafka; never joined or committed
        "enable.auto.commit": "false",
        "enable.partition.eof": "true",
        "auto.offset.reset": "earliest",
        "queued.min.messages": str(_QUEUED_PER_PARTITION),
        "fetch.queue.backoff.ms": "0",  # a partition assigned again is fetched at once (module docstring)
        "fetch.wait.max.ms": fetch_wait_ms(conf),
    }


def _consumer(conf: Mapping[str, str], *, first_only: bool) -> Any:
    """The process's lookup consumer for these settings (``lookup_settings``): one for first records, one
    for scans."""
    settings = lookup_settings(conf, first_only=first_only)
    return cached("record-times-consumer", settings, lambda: new_consumer(settings), lambda c: c.close())
