"""A partition's log as stored: record batches with their producer ids, epochs and transaction markers.

librdkafka never shows control records (a transaction's COMMIT/ABORT markers) nor which producer wrote a
batch; kafka-python's raw Fetch (``read_uncommitted``) does. Two users, both on the rare paths:

- the committed-view oracle (``sparkafka.ops.committed_view``), which applies the markers itself;
- the exactly-once sink's driver (``sparkafka.sink.outcomes``), when the transaction coordinator cannot say
  what became of a transaction (its id expired, or its epoch was bumped since): the marker of that producer
  id and epoch in a partition the transaction wrote to is the proof (``find_marker``).

Runs where its caller runs (the driver, the CLI, tests); each call opens one kafka-python connection and
closes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sparkafka.client.core import new_kafka_python_client
from sparkafka.client.security import AUTHORIZATION_CODES, Access, denied
from sparkafka.errors import BrokerError
from sparkafka.structs import TopicPartition

__all__ = [
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "LogRangeGoneError",
    "Marker",
    "RawBatch",
    "RawRecord",
    "find_marker",
    "parse_batches",
    "read_raw_batches",
]

T = TypeVar("T")

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_OFFSET_OUT_OF_RANGE = 1
_RETRIABLE_FETCH_ERRORS = {
    3,  # UNKNOWN_TOPIC_OR_PARTITION: metadata not yet propagated
    5,  # LEADER_NOT_AVAILABLE
    6,  # NOT_LEADER_OR_FOLLOWER: leadership moved
    56,  # KAFKA_STORAGE_ERROR
    74,  # FENCED_LEADER_EPOCH
    75,  # UNKNOWN_LEADER_EPOCH
}


@dataclass(frozen=True)
class RawRecord:
    """One data record as stored in the log."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int = 0
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True)
class RawBatch:
    """One record batch as stored in the log (magic v2)."""

    base_offset: int
    producer_id: int = -1
    is_transactional: bool = False
    control_type: int | None = None
    """CONTROL_COMMIT or CONTROL_ABORT for a control batch; None for a data batch."""
    records: tuple[RawRecord, ...] = field(default_factory=tuple)
    last_offset: int = -1
    """Offset of the batch's last record, even if compaction removed it; -1 to derive it from ``records``."""
    producer_epoch: int = -1

    @property
    def next_offset(self) -> int:
        """The offset right after this batch."""
        if self.last_offset >= 0:
            return self.last_offset + 1
        return (self.records[-1].offset if self.records else self.base_offset) + 1

    @property
    def is_control(self) -> bool:
        """Whether this is a transaction marker (commit or abort) rather than data."""
        return self.control_type is not None


class LogRangeGoneError(BrokerError):
    """The offsets asked for are no longer in the log (retention or DeleteRecords moved its start)."""

    def __init__(self, message: str, log_start: int) -> None:
        """An error with ``message``; ``log_start`` is where the log starts now (-1 when not said)."""
        super().__init__(message)
        self.log_start = log_start


def parse_batches(partition: int, data: bytes, with_records: bool = True) -> list[RawBatch]:
    """Decode a fetch response's record bytes into batches (kafka-python's decoder, magic v2 only).

    Without ``with_records`` a data batch is read from its header alone (no record is decoded or kept):
    what a scan for markers needs.
    """
    from kafka.record import MemoryRecords

    batches: list[RawBatch] = []
    memory = MemoryRecords(data)
    while (batch := memory.next_batch()) is not None:
        if batch.magic < 2:
            raise BrokerError(f"partition {partition} holds message format v{batch.magic}; need v2 batches")
        control_type: int | None = None
        records: list[RawRecord] = []
        if batch.is_control_batch or with_records:
            for rec in batch:
                if batch.is_control_batch:
                    control_type = rec.type
                    continue
                records.append(
                    RawRecord(
                        partition=partition,
                        offset=rec.offset,
                        key=rec.key,
                        value=rec.value,
                        timestamp=rec.timestamp,
                        headers=tuple((k, v) for k, v in rec.headers),
                    )
                )
        batches.append(
            RawBatch(
                base_offset=batch.base_offset,
                producer_id=batch.producer_id,
                is_transactional=bool(batch.is_transactional),
                control_type=control_type,
                records=tuple(records),
                last_offset=batch.last_offset,
                producer_epoch=batch.producer_epoch,
            )
        )
    return batches


_FETCH_MAX_BYTES = 8 * 1024 * 1024
"""What one fetch (of one partition) asks for at most: a batch larger than this still comes whole (Kafka
returns the first batch whatever the limit)."""
_RECEIVE_MAX_BYTES = 4 * _FETCH_MAX_BYTES
"""The largest answer the connection takes: a first batch over the fetch limit comes whole (up to the
broker's ``message.max.bytes``, 1 MB by default; topics may raise it)."""


class _Log:
    """One kafka-python connection reading raw batches of one topic's partitions."""

    def __init__(self, conf: Mapping[str, str], topic: str, timeout_s: float) -> None:
        self.conf = conf
        self.topic = topic
        self.timeout_s = timeout_s
        # kafka-python's network client refuses an answer over 1 MB unless told (InvalidReceiveError
        # "Invalid frame length"): a fetch of a partition with more than that to give failed until its
        # time-out (the soak's oracle, 2.4 MB; the exactly-once sink's marker search alike).
        self.client: Any = new_kafka_python_client(conf, receive_message_max_bytes=_RECEIVE_MAX_BYTES)
        try:
            self.client.check_version(timeout_ms=int(timeout_s * 1000))
            self._ask(self.refresh, f"metadata of {topic}")
        except BaseException:
            self.client.close()
            raise

    def _ask(self, call: Callable[[], T], what: str) -> T:
        """``call()``, retried through connection failures (a broker down, a leader moving) until the
        timeout; then BrokerError. Errors the broker answers are the caller's to judge."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return call()
            except BrokerError:
                raise
            except Exception as e:  # kafka-python's connection and timeout errors: retried
                if time.monotonic() > deadline:
                    raise BrokerError(f"{what}: no answer within {self.timeout_s:.0f} s ({e})") from e
                time.sleep(0.2)  # let the client reconnect or learn the new leader

    def close(self) -> None:
        self.client.close()

    def refresh(self) -> None:
        """Metadata of the topic alone, asked without allowing the broker to create it."""
        from kafka.protocol.metadata import MetadataRequest

        cluster = self.client.cluster
        node = self.client.least_loaded_node()  # any live broker, not always the first one listed
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=self.topic)], allow_auto_topic_creation=False
        )
        response = self.client.send_and_receive(node, request, timeout_ms=int(self.timeout_s * 1000))
        for answer in response.topics:
            self._check_access(answer.error_code, "DESCRIBE", "looking it up")
        cluster.update_metadata(response)

    def _check_access(self, error_code: int, operation: str, doing: str) -> None:
        """Raise the one sentence (``security.denied``) when the broker refused ``operation`` by ACL."""
        if error_code in AUTHORIZATION_CODES:
            raise denied(self.conf, Access(operation, "topic", self.topic), f"{doing} for its raw log")

    def partitions(self) -> set[int]:
        known = self.client.cluster.partitions_for_topic(self.topic)
        if not known:
            raise BrokerError(f"topic {self.topic!r} does not exist or has no partitions")
        return set(known)

    def log_start(self, partition: int) -> int:
        """The partition's log start offset (ListOffsets, earliest), asked through connection failures."""
        return self._ask(lambda: self._earliest(partition), f"the log start of {self.topic}-{partition}")

    def _earliest(self, partition: int) -> int:
        from kafka.protocol.consumer import ListOffsetsRequest
        from kafka.structs import TopicPartition as KTopicPartition

        leader = self.client.cluster.leader_for_partition(KTopicPartition(self.topic, partition))
        if leader is None or leader < 0:
            raise BrokerError(f"no leader for {self.topic}-{partition}")
        part = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=partition, timestamp=-2
        )
        request = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=self.topic, partitions=[part])],
            max_version=5,
        )
        response = self.client.send_and_receive(leader, request, timeout_ms=int(self.timeout_s * 1000))
        answer = response.topics[0].partitions[0]
        self._check_access(answer.error_code, "DESCRIBE", f"asking where {self.topic}-{partition} starts")
        if answer.error_code != 0:
            raise BrokerError(f"ListOffsets of {self.topic}-{partition} failed: error {answer.error_code}")
        return int(answer.offset)

    def batches(
        self,
        partition: int,
        start: int,
        with_records: bool,
        until: Callable[[RawBatch], bool] | None = None,
        at_least: int = 0,
    ) -> Iterator[RawBatch]:
        """The batches from ``start`` up to the high watermark, in order, each once; stops after ``until``.

        The read does not end below ``at_least``: a high watermark under it (a leader just elected, or one
        deposed without knowing it, answers a stale one) is asked again until the timeout.

        Raises:
            LogRangeGoneError: ``start`` is below the log's start.
            BrokerError: no answer, or no high watermark up to ``at_least``, within the timeout.
        """
        next_offset = start
        deadline = time.monotonic() + self.timeout_s
        while True:
            data = self._fetch(partition, next_offset, at_least, deadline)
            if data is None:
                continue
            if next_offset >= data.high_watermark:
                return
            if not data.records and time.monotonic() < deadline:
                # An empty answer below the high watermark: the broker's max wait ran out before its storage
                # answered (seen with tansu on S3 storage). Ask again.
                continue
            new = [
                b
                for b in parse_batches(partition, data.records or b"", with_records)
                if b.next_offset > next_offset
            ]
            if not new:
                # Brokers may return a partial batch at the size limit; nothing decodable means no progress.
                raise BrokerError(
                    f"fetch of {self.topic}-{partition} at {next_offset} returned no complete batch"
                )
            for batch in new:
                yield batch
                if until is not None and until(batch):
                    return
            next_offset = new[-1].next_offset
            if next_offset >= data.high_watermark:
                return  # read to the end this answer gave: asking again would wait out max_wait_ms
            deadline = time.monotonic() + self.timeout_s

    def _fetch(self, partition: int, offset: int, at_least: int, deadline: float) -> Any | None:
        """One Fetch (read_uncommitted) at ``offset``: the partition's answer, or None to ask again.

        Raises:
            LogRangeGoneError: ``offset`` is below the log's start.
            BrokerError: an error that asking again cannot mend, or none of the retries answered in time.
        """
        from kafka.protocol.consumer import FetchRequest
        from kafka.structs import TopicPartition as KTopicPartition

        where = f"{self.topic}-{partition}"
        leader = self.client.cluster.leader_for_partition(KTopicPartition(self.topic, partition))
        if leader is None or leader < 0:
            self._wait(deadline, f"no leader for {where}")
            return None
        fetch_partition = FetchRequest.FetchTopic.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=_FETCH_MAX_BYTES
        )
        request = FetchRequest(
            max_wait_ms=500,
            min_bytes=1,
            max_bytes=_FETCH_MAX_BYTES,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=self.topic, partitions=[fetch_partition])],
            forgotten_topics_data=[],
            max_version=12,
        )
        try:
            response = self.client.send_and_receive(leader, request, timeout_ms=int(self.timeout_s * 1000))
        except Exception as e:  # noqa: BLE001 - the leader went away: find the new one, until the deadline
            self._wait(deadline, f"fetch of {where} at {offset}: {e}")
            return None
        data = response.responses[0].partitions[0]
        self._check_access(data.error_code, "READ", f"fetching {where}")
        if data.error_code == _OFFSET_OUT_OF_RANGE:
            log_start = self.log_start(partition)
            raise LogRangeGoneError(
                f"{where} no longer holds offset {offset} (its log starts at {log_start})", log_start
            )
        if data.error_code in _RETRIABLE_FETCH_ERRORS:
            self._wait(deadline, f"fetch of {where} at {offset}: error {data.error_code}")
            return None
        if data.error_code != 0:
            raise BrokerError(f"fetch of {where} at {offset} failed: error {data.error_code}")
        if data.high_watermark < at_least:
            self._wait(
                deadline,
                f"{where} answered a high watermark of {data.high_watermark}, below the {at_least} it had",
            )
            return None
        return data

    def _wait(self, deadline: float, why: str) -> None:
        """Before asking again: wait a moment and learn the leaders anew; past ``deadline``, BrokerError."""
        if time.monotonic() > deadline:
            raise BrokerError(f"{why} (for {self.timeout_s:.0f} s)")
        time.sleep(0.2)  # a leader election or a reconnect in progress: its outcome is in the next metadata
        self._ask(self.refresh, f"metadata of {self.topic}")


def read_raw_batches(
    conf: Mapping[str, str], topic: str, partitions: Iterable[int] | None = None, timeout_s: float = 30.0
) -> dict[int, list[RawBatch]]:
    """All batches of ``topic`` (or of the given partitions) from the log start to the high watermark.

    Args:
        conf: librdkafka-style settings; ``bootstrap.servers`` and any security settings are used.
        topic: the topic to read.
        partitions: the partitions to read; None for every partition of ``topic``.
        timeout_s: bound on each broker request, and on asking again while a partition answers empty
            below its high watermark.
    """
    log = _Log(conf, topic, timeout_s)
    try:
        wanted = sorted(log.partitions() if partitions is None else set(partitions))
        return {p: list(log.batches(p, log.log_start(p), True)) for p in wanted}
    finally:
        log.close()


@dataclass(frozen=True)
class Marker:
    """A transaction marker found in a partition: its offset, kind and the producer epoch it carries."""

    offset: int
    commit: bool
    epoch: int


def find_marker(
    conf: Mapping[str, str],
    tp: TopicPartition,
    producer_id: int,
    span: tuple[int, int],
    timeout_s: float = 30.0,
) -> Marker | None:
    """The first COMMIT or ABORT marker of ``producer_id`` in ``span`` or after; None up to the end.

    ``span`` is (start, at least): the search starts at ``start`` and does not take "none" for an answer
    before it has read up to ``at least`` (an end offset known before the search, so that a leader with a
    stale high watermark cannot cut it short).

    A producer's transactions end in order and each writes its marker into every partition it wrote to, so
    the first marker of ``producer_id`` after a point the transaction's records precede is that
    transaction's own, or a later one's (then this one had ended before ``start``). Only batch headers are
    decoded.

    Raises:
        LogRangeGoneError: the log no longer holds ``start`` (retention or DeleteRecords).
        AuthorizationError: the user may not DESCRIBE or READ the topic (one sentence with the grant).
        BrokerError: the topic is gone, or the broker does not answer.
    """
    start, at_least = span
    log = _Log(conf, tp.topic, timeout_s)
    try:
        for batch in log.batches(
            tp.partition,
            start,
            False,
            lambda b: b.is_control and b.producer_id == producer_id,
            at_least,
        ):
            if batch.is_control and batch.producer_id == producer_id and batch.base_offset >= start:
                return Marker(batch.base_offset, batch.control_type == CONTROL_COMMIT, batch.producer_epoch)
        return None
    finally:
        log.close()
