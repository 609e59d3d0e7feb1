"""Executor-side reading: consume offset ranges and yield Arrow record batches.

Runs inside Spark's Python workers. One client per worker process and configuration is cached and reused
across tasks and micro-batches (creating one costs a broker handshake); it is only ever used with
``assign`` and explicit positions, never with group membership or commits. How records come off Kafka is a
``fetchers.Fetcher``'s job (sparkafka's native extension, else confluent-kafka); what to read, when a range
is done and what an event means are decided here, the same for both.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sparkafka.client import broker_gaps
from sparkafka.client.core import (
    DEFAULT_TIMEOUT_S,
    LEADER_ELECTION_S,
    cached,
    is_leaderless,
    learn_topics,
    new_consumer,
    with_retries,
)
from sparkafka.client.security import AUTHORIZATION_CODES, Access, denied, is_group_denial
from sparkafka.errors import BrokerError, DataLossError
from sparkafka.source.fetchers import Fetcher, PythonFetcher, arrow_schema
from sparkafka.source.native_fetch import NativeFetcher, NativeUnavailableError
from sparkafka.source.options import FetcherChoice
from sparkafka.structs import TopicPartition

__all__ = ["OffsetRange", "arrow_schema", "read_ranges"]

log = logging.getLogger(__name__)

ROWS_PER_BATCH = 20_000

PREFETCH_PARTITIONS = 8
"""Partitions assigned beside the one a task reads, with a fetcher that reads each from its own queue
(``Fetcher.overlaps``; ``_assign_ahead``)."""


@dataclass(frozen=True)
class OffsetRange:
    """Read ``[start, end)`` of one partition.

    A batch read's ``earliest`` and ``latest`` are bound when its task starts, as Spark's executors bind
    them (``KafkaBatchPartitionReader.resolveRange``): ``start`` and ``end`` are then what planning saw, and
    the task reads from the log start and to the log end it finds (the last stable offset under
    read_committed). So retention between planning and the task does not fail a default batch read, and
    records that arrived since are read.
    """

    tp: TopicPartition
    start: int
    end: int
    from_earliest: bool = False
    """Start at the log start when the task starts (a batch read's ``earliest``)."""
    to_latest: bool = False
    """End at the log end when the task starts (a batch read's ``latest``)."""


def _reader_settings(conf: Mapping[str, str]) -> dict[str, str]:
    """The librdkafka settings of a reader's consumer: ``conf`` with the reader's own."""
    settings = dict(conf)
    settings["enable.auto.commit"] = "false"
    settings["enable.auto.offset.store"] = "false"
    settings["enable.partition.eof"] = "true"
    # An out-of-range position must surface as an error (data loss), never as a silent reset.
    settings["auto.offset.reset"] = "error"
    if not settings.get("group.id"):  # a reader joins no group, but librdkafka reads through one's queue
        settings["group.id"] = "sparkafka-reader"
    # 2 MB fetches per partition (librdkafka's default is 1 MB): as fast as 8 MB under Spark (batch reads:
    # 1,678,278 against 1,486,538 records/s) and each response buffer, held while any of its records is
    # queued, is smaller: a Python worker's peak at 400,000 rows a batch fell from 361 to 265 MB, flat
    # (bench/worker_memory.py).
    settings.setdefault("max.partition.fetch.bytes", str(2 * 1024 * 1024))
    # Keep fetching while the Python side drains the queue: at librdkafka's default (100,000 messages)
    # the prefetch pauses and resumes in steps, and a task read at 0.6 x the rate it reaches with a
    # queue of 1,000,000 (bench/read_path.py). The queue is then bounded by its size in bytes: 16 MB,
    # not librdkafka's 64 MB, which cost each Python worker about 150 MB more (peak 507 MB against 359,
    # bench/worker_memory.py: librdkafka keeps about 4 x the payload per queued message) and no speed
    # measurable under Spark (batch reads at 16 MB against 64 MB: 326,261 against 304,579, then 357,209
    # against 392,398 records/s in two runs of bench/read_path.py --spark; runs spread more than that).
    settings.setdefault("queued.min.messages", "1000000")
    settings.setdefault("queued.max.messages.kbytes", "16384")
    # Once that queue is full, librdkafka postpones the partition's next fetch by fetch.queue.backoff.ms:
    # 1 s by default, which the native fetch (it drains 16 MB in tens of ms) spent waiting. At 10 ms a batch
    # read under Spark runs 1.8 x faster with the queue still bounded at 16 MB (bench/read_path.py --spark
    # has the row with librdkafka's 1 s beside the reader's 10 ms).
    settings.setdefault("fetch.queue.backoff.ms", "10")
    # Short: the fetch past a range's end is held this long, and the next partition's requests queue
    # behind it on the connection (see broker_gaps for the brokers where it must be longer).
    settings["fetch.wait.max.ms"] = broker_gaps.fetch_wait_ms(conf)
    return settings


def _fetcher(conf: Mapping[str, str], choice: FetcherChoice) -> Fetcher:
    """The worker's cached ``Fetcher`` for ``conf``: the native one unless ``choice`` is ``python`` or (for
    ``auto``) the extension is missing or cannot take the settings; then confluent-kafka's."""
    settings = _reader_settings(conf)
    if choice != "python":
        own = _per_partition_queues(settings)
        try:
            native: Fetcher = cached("reader-native", own, lambda: NativeFetcher(own), _close)
        except NativeUnavailableError as e:
            if choice == "native":
                raise NativeUnavailableError(f"option fetcher=native: {e}") from None
            if e.args[0] not in _told:
                _told.add(e.args[0])
                log.info("%s; reading with confluent-kafka (option fetcher=auto)", e)
        else:
            return native
    return cached("reader-consumer", settings, lambda: PythonFetcher(new_consumer(settings)), _close)


_told: set[str] = set()


def _per_partition_queues(settings: Mapping[str, str]) -> dict[str, str]:
    """``settings`` for a fetcher with a queue per partition (``NativeFetcher``): librdkafka's prefetch
    bounds (``queued.max.messages.kbytes``, ``queued.min.messages``) then hold per partition, not for the
    consumer's one queue, so each is divided among the partitions a read assigns at once (1 +
    ``PREFETCH_PARTITIONS``), a user's own bound included (no floor above librdkafka's least, 1): a
    worker's queued records stay within the bound as before, whatever the partitions read. librdkafka
    checks a queue's bound before each fetch, so each queue may pass it by one fetch
    (``max.partition.fetch.bytes``): that overshoot is per partition assigned, no longer once."""
    out = dict(settings)
    window = 1 + PREFETCH_PARTITIONS
    for key in ("queued.max.messages.kbytes", "queued.min.messages"):
        if out.get(key, "").strip().isdigit():  # else librdkafka refuses it, naming it
            out[key] = str(max(int(out[key]) // window, 1))
    return out


def _close(fetcher: Fetcher) -> None:
    fetcher.close()


def read_ranges(
    conf: Mapping[str, str],
    ranges: Sequence[OffsetRange],
    include_headers: bool = False,
    fail_on_data_loss: bool = True,
    poll_timeout_ms: int = 120_000,
    *,
    fetcher: FetcherChoice = "auto",
) -> Iterator[pa.RecordBatch]:
    """Yield every record in ``ranges`` exactly once, in offset order per partition, as Arrow batches.

    Partitions are read one after another in (topic, partition) order (a batch holds one partition's
    records); with a fetcher that reads each assigned partition from its own queue, the next
    ``PREFETCH_PARTITIONS`` are assigned while one is read, so their first records are fetched meanwhile
    (``_assign_ahead``). A partition is done
    when a record at or past its end arrives, the consumer's position reaches the end, or the partition's
    end-of-log event reports an offset at or past the end. So gaps (transaction markers, compaction,
    aborted records under read_committed) never stall it. ``fetcher`` picks how records are taken off
    Kafka (``_fetcher``); the decisions here are the same for both.

    Data loss is Spark's (``KafkaDataConsumer``): offsets below the log start when the task starts, or that
    go out of range while it reads (retention overtaking it, a log truncated under it), fail the task, or
    with ``fail_on_data_loss`` off are skipped to the earliest offset still in the range, with a warning
    saying how many.

    Raises:
        DataLossError: offsets of a range are no longer in the log and ``fail_on_data_loss``.
        BrokerError: no progress within ``poll_timeout_ms``.
        NativeUnavailableError: ``fetcher`` is ``native`` and the extension is missing or refuses a setting.
    """
    todo = [r for r in ranges if r.end > r.start or r.to_latest]
    if not todo:
        return
    twice = sorted({r.tp for r in todo if sum(o.tp == r.tp for o in todo) > 1})
    if twice:  # a task's plan has one range a partition (reader.py); reading is keyed by partition
        raise ValueError(f"read_ranges takes one range per partition; {twice[0]} has more than one")
    reader = _fetcher(conf, fetcher)
    learn_topics(reader, {r.tp.topic for r in todo}, 30)
    todo = sorted((_bind(reader, r, fail_on_data_loss, conf) for r in todo), key=lambda r: r.tp)
    starts = {r.tp: r.start for r in todo}
    assigned: set[TopicPartition] = set()
    stalled = functools.partial(broker_gaps.note_stalled_fetch, conf)
    try:
        for i, r in enumerate(todo):
            only = r.tp
            out_of_range_at: int | None = None
            while starts[only] < r.end:
                _assign_ahead(reader, todo[i:], starts, assigned)
                try:
                    yield from _read_partition(
                        reader,
                        only,
                        r.end,
                        include_headers,
                        poll_timeout_ms,
                        stalled=stalled,
                        log_end=functools.partial(_log_end, reader, only, conf),
                    )
                    break
                except _StalledError as e:  # the fetch wait was raised: again from where the read got to
                    reader.unassign()
                    assigned.clear()
                    if e.position is not None:
                        starts[only] = e.position
                    reader = _fetcher(conf, fetcher)
                    learn_topics(reader, {t.tp.topic for t in todo[i:]}, 30)
                except _OutOfRangeError as e:
                    reader.release(only)
                    assigned.discard(only)
                    at = starts[only] if e.position is None else e.position
                    if at == out_of_range_at:  # the log held it, yet the broker refused it again
                        raise BrokerError(
                            f"reading {only}: offset {at} was refused as out of range twice, though the log "
                            "held it in between"
                        ) from None
                    out_of_range_at = at
                    starts[only] = _skip_out_of_range(reader, r, at, fail_on_data_loss, conf)
            if only in assigned:
                reader.release(only)
                assigned.discard(only)
    except _DeniedError as e:
        raise denied(conf, Access("READ", "topic", e.tp.topic), f"reading {e.tp}") from None
    finally:
        reader.unassign()


def _assign_ahead(
    reader: Fetcher,
    rest: Sequence[OffsetRange],
    starts: dict[TopicPartition, int],
    assigned: set[TopicPartition],
) -> None:
    """Assign ``rest[0]``, the range read now, unless it is; and when ``reader.overlaps``, those of the next
    ``PREFETCH_PARTITIONS`` ranges with something left to read, each from where its read is to start.

    So a partition's first fetch goes out with the fetches of the ones before it, and its first records are
    queued when its turn comes: assigned alone, a partition's first fetch waits on the connection for the
    fetch in flight, which a broker holds up to ``fetch.wait.max.ms`` at a log's end (bench/PARTITIONS.md:
    about 12 ms a partition at the readers' 10 ms). Each partition is still read alone, in offset order, from
    its own queue; ``assigned`` is kept up to date.
    """
    ahead = PREFETCH_PARTITIONS if reader.overlaps else 0
    for r in rest[: 1 + ahead]:
        if r.tp not in assigned and starts[r.tp] < r.end:
            reader.assign(r.tp, starts[r.tp])
            assigned.add(r.tp)


class _DeniedError(Exception):
    """A fetch of ``tp`` refused by ACL: worded in ``read_ranges``, which knows the settings."""

    def __init__(self, tp: TopicPartition) -> None:
        super().__init__(tp)
        self.tp = tp


class _StalledError(Exception):
    """Fetches gave nothing for ``broker_gaps.STALL_S`` and the fetch wait was raised (``broker_gaps``)."""

    def __init__(self, position: int | None) -> None:
        super().__init__(position)
        self.position = position


class _OutOfRangeError(Exception):
    """librdkafka found the read's position out of range (``auto.offset.reset=error``: it reports, never
    resets); ``position``: where the read got to, None when not known (no record yet)."""

    def __init__(self, position: int | None = None) -> None:
        super().__init__(position)
        self.position = position


def _read_partition(
    reader: Fetcher,
    only: TopicPartition,
    end: int,
    include_headers: bool,
    poll_timeout_ms: int,
    *,
    stalled: Callable[[], bool] = lambda: False,
    log_end: Callable[[], int | None] = lambda: None,
) -> Iterator[pa.RecordBatch]:
    """Read the assigned partition ``only`` up to ``end``, yielding batches of up to ``ROWS_PER_BATCH``.

    Raises:
        _StalledError: nothing arrived for ``broker_gaps.STALL_S`` and ``stalled()`` raised the fetch wait.
        _OutOfRangeError: offsets went out of range, or nothing arrived for ``poll_timeout_ms`` and
            ``log_end()`` (the log's end, None: not known) is below ``end``.
    """
    last_progress = time.monotonic()
    position: int | None = None
    event_mark = -1  # the position events alone made since the last record (-1: none); see _read_events
    while True:
        got = reader.fetch(only, end, ROWS_PER_BATCH, 0.5, include_headers)
        if got.batch is not None:
            yield got.batch
        if got.reached_end:
            return
        # End-of-partition events count only after the data fetched with them.
        try:
            eof, past_events = _read_events(got.events, only)
        except _OutOfRangeError:
            raise _OutOfRangeError(position if got.last_offset is None else got.last_offset + 1) from None
        if eof is not None and eof >= end:
            return
        if got.last_offset is not None:
            position = got.last_offset + 1
            event_mark = past_events  # the chunk's events come after its records
            last_progress = time.monotonic()
            continue
        event_mark = max(event_mark, past_events)
        at = reader.position(only)
        if at >= end and at != event_mark:  # passed the end without a record to show it
            return
        quiet_s = time.monotonic() - last_progress
        _check_quiet(
            only,
            end,
            quiet_s,
            position=position,
            stalled=stalled,
            log_end=log_end,
            poll_timeout_ms=poll_timeout_ms,
        )


def _check_quiet(
    only: TopicPartition,
    end: int,
    quiet_s: float,
    *,
    position: int | None,
    stalled: Callable[[], bool],
    log_end: Callable[[], int | None],
    poll_timeout_ms: int,
) -> None:
    """After a fetch that brought nothing: raise if the fetch stalled or ``pollTimeoutMs`` passed.

    A stalled fetch raises ``_StalledError`` (the caller resumes with a longer wait). Past
    ``pollTimeoutMs``, a log that now ends below ``end`` (truncated, or its topic recreated, since the range
    was planned: the read waits at the log's end, where nothing is out of range) is Spark's data loss
    (``_OutOfRangeError``); else the task fails with a ``BrokerError`` naming the partition.
    """
    if quiet_s > broker_gaps.STALL_S and stalled():
        raise _StalledError(position)
    if quiet_s * 1000 > poll_timeout_ms:
        now_ends = log_end()
        if now_ends is not None and now_ends < end:
            raise _OutOfRangeError(position)
        raise BrokerError(
            f"no records arrived for {poll_timeout_ms} ms while reading {only} up to {end} "
            "(raise pollTimeoutMs if the broker is slow)"
        )


def _read_events(events: Sequence[Any], only: TopicPartition) -> tuple[int | None, int]:
    """A fetch's events for ``only``: its end-of-partition offset (None: none), and the largest
    ``offset + 1`` among them (-1: none); errors raise.

    That second value is a position no record vouches for: ``rd_kafka_consume_batch_queue`` (the native
    fetch, and confluent-kafka's ``consume``) moves a partition's position past every message it returns,
    events included. An end-of-partition event at ``end - 1`` (a follower's or a new leader's high watermark
    lagging the one the range was planned with) makes the position ``end`` while the record at ``end - 1``
    is still to come: that position does not end the range; a later end-of-partition event at ``end``, or
    the record, does.

    A leaderless answer (a broker down, a leader being elected: librdkafka reports it and keeps fetching
    from the new leader once there is one) is logged and ridden out; ``pollTimeoutMs`` still bounds the wait.
    """
    from confluent_kafka import KafkaError

    eof: int | None = None
    past = -1
    for err, topic, partition, offset in events:
        tp = TopicPartition(topic, partition) if topic is not None else only
        if tp == only and offset >= 0:
            past = max(past, offset + 1)
        if err.code() == KafkaError._PARTITION_EOF:
            if tp == only:
                eof = offset
        elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            raise _OutOfRangeError
        elif is_leaderless(err):
            log.info("reading %s: %s (riding out a leader change)", tp, err.str())
        elif is_group_denial(err):
            _warn_group_denial(err)
        elif err.code() in AUTHORIZATION_CODES:
            raise _DeniedError(tp)
        else:
            raise BrokerError(f"reading {tp} failed: {err.str()}")
    return eof, past


def _warn_group_denial(err: Any) -> None:
    """Once per worker: the readers' group may not be described, harmless to reads (``is_group_denial``)."""
    if "group denial" in _told:
        return
    _told.add("group denial")
    log.warning(
        "%s: the readers' consumer group (kafka.group.id, else sparkafka-reader) may not be DESCRIBEd; "
        "reads go on (readers never join or commit it), but librdkafka asks for its coordinator about "
        "once a second: grant DESCRIBE on that group (docs/security.md)",
        err.str(),
    )


def _watermarks(reader: Fetcher, tp: TopicPartition, conf: Mapping[str, Any]) -> tuple[int, int]:
    """(log start, log end as this reader's isolation level reads it) of ``tp``, asked of its leader.

    The lookup rides through a leader election (a broker killed: its partitions answer NOT_LEADER, or the
    request dies with the broker's handle) for ``DEFAULT_TIMEOUT_S``, each try capped at the election time.
    """
    from confluent_kafka import TopicPartition as CTopicPartition

    ctp = CTopicPartition(tp.topic, tp.partition)
    return with_retries(
        f"the log start of {tp}",
        conf,
        lambda left: reader.get_watermark_offsets(ctp, timeout=min(left, LEADER_ELECTION_S)),
        DEFAULT_TIMEOUT_S,
        access=Access("DESCRIBE", "topic", tp.topic),
    )


def _log_end(reader: Fetcher, tp: TopicPartition, conf: Mapping[str, Any]) -> int | None:
    """The end of ``tp``'s log where ListOffsets(latest) tells it (``broker_gaps``), else None."""
    return _watermarks(reader, tp, conf)[1] if broker_gaps.latest_is_exact(conf) else None


def _bind(reader: Fetcher, r: OffsetRange, fail_on_data_loss: bool, conf: Mapping[str, Any]) -> OffsetRange:
    """What the task reads of ``r``: its late-bound ends resolved (``OffsetRange``), and a start that
    retention removed moved to the log start when ``fail_on_data_loss`` is off."""
    low, high = _watermarks(reader, r.tp, conf)
    known = low is not None and low >= 0
    start = low if r.from_earliest and known else r.start
    end = high if r.to_latest and high is not None and high >= 0 else r.end
    if not known or start >= low:
        return OffsetRange(r.tp, start, end)
    lost = f"{r.tp}: offsets {start}..{min(low, end) - 1} were removed (log starts at {low})"
    if fail_on_data_loss:
        raise DataLossError(
            f"[KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE] Some data may have been lost from {lost}; "
            "set failOnDataLoss=false to skip ahead with a warning"
        )
    log.warning("%s; skipping ahead: %d offsets skipped (failOnDataLoss=false)", lost, min(low, end) - start)
    return OffsetRange(r.tp, int(min(low, end)), end)


def resume_after_out_of_range(at: int, end: int, low: int, high: int) -> int:
    """Where a read of ``[at, end)`` goes on once ``at`` went out of range and the log holds ``[low, high)``:
    Spark's ``KafkaDataConsumer.getEarliestAvailableOffsetBetween``.

    ``end`` (the rest of the range is skipped) when the two do not overlap; ``at`` when the log holds it
    again (a topic recreated and refilled); else ``low``.
    """
    if at >= high or low >= end:
        return end
    return max(at, low)


def _skip_out_of_range(
    reader: Fetcher, r: OffsetRange, at: int, fail_on_data_loss: bool, conf: Mapping[str, Any]
) -> int:
    """After offset ``at`` went out of range while reading ``r``: where the read goes on
    (``resume_after_out_of_range``), with a warning saying how many offsets that skips.

    Raises:
        DataLossError: ``fail_on_data_loss``.
    """
    low, high = _watermarks(reader, r.tp, conf)
    what = (
        f"{r.tp}: offset {at} went out of range while reading up to {r.end} "
        f"(the log now starts at {low} and ends at {high})"
    )
    if fail_on_data_loss:
        raise DataLossError(
            f"[KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE] Some data may have been lost from {what}; "
            "set failOnDataLoss=false to skip to the earliest offset left with a warning"
        )
    resume = resume_after_out_of_range(at, r.end, low, high)
    log.warning("%s; going on from %d: %d offsets skipped (failOnDataLoss=false)", what, resume, resume - at)
    return resume
