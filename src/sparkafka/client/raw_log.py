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
from typing import Any

from sparkafka.client.core import new_kafka_python_client
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


class _Log:
    """One kafka-python connection reading raw batches of one topic's partitions."""

    def __init__(self, conf: Mapping[str, str], topic: str, timeout_s: float) -> None:
        self.topic = topic
        self.timeout_s = timeout_s
        self.client: Any = new_kafka_python_client(conf)
        try:
            self.client.check_version(timeout_ms=int(timeout_s * 1000))
            self.refresh()
        except BaseException:
            self.client.close()
            raise

    def close(self) -> None:
        self.client.close()

    def refresh(self) -> None:
        """Metadata of the topic alone, asked without allowing the broker to create it."""
        from kafka.protocol.metadata import MetadataRequest

        cluster = self.client.cluster
        node = next(iter(cluster.brokers())).node_id
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=self.topic)], allow_auto_topic_creation=False
        )
        response = self.client.send_and_receive(node, request, timeout_ms=int(self.timeout_s * 1000))
        cluster.update_metadata(response)

    def partitions(self) -> set[int]:
        known = self.client.cluster.partitions_for_topic(self.topic)
        if not known:
            raise BrokerError(f"topic {self.topic!r} does not exist or has no partitions")
        return set(known)

    def earliest(self, partition: int) -> int:
        """The partition's log start offset (ListOffsets, earliest)."""
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
        if answer.error_code != 0:
            raise BrokerError(f"ListOffsets of {self.topic}-{partition} failed: error {answer.error_code}")
        return int(answer.offset)

    def batches(
        self, partition: int, start: int, with_records: bool, until: Callable[[RawBatch], bool] | None = None
    ) -> Iterator[RawBatch]:
        """The batches from ``start`` up to the high watermark, in order, each once; stops after ``until``.

        Raises:
            LogRangeGoneError: ``start`` is below the log's start.
        """
        from kafka.protocol.consumer import FetchRequest
        from kafka.structs import TopicPartition as KTopicPartition

        tp = KTopicPartition(self.topic, partition)
        next_offset = start
        deadline = time.monotonic() + self.timeout_s
        while True:
            leader = self.client.cluster.leader_for_partition(tp)
            if leader is None or leader < 0:
                if time.monotonic() > deadline:
                    raise BrokerError(f"no leader for {self.topic}-{partition}")
                time.sleep(0.2)  # a leader election in progress: its outcome is in the next metadata
                self.refresh()
                continue
            fetch_partition = FetchRequest.FetchTopic.FetchPartition(
                partition=partition, fetch_offset=next_offset, partition_max_bytes=8 * 1024 * 1024
            )
            request = FetchRequest(
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=64 * 1024 * 1024,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[FetchRequest.FetchTopic(topic=self.topic, partitions=[fetch_partition])],
                forgotten_topics_data=[],
                max_version=12,
            )
            response = self.client.send_and_receive(leader, request, timeout_ms=int(self.timeout_s * 1000))
            data = response.responses[0].partitions[0]
            if data.error_code == _OFFSET_OUT_OF_RANGE:
                log_start = self.earliest(partition)  # an error's answer carries no log start
                raise LogRangeGoneError(
                    f"{self.topic}-{partition} no longer holds offset {next_offset} (its log starts at "
                    f"{log_start})",
                    log_start,
                )
            if data.error_code in _RETRIABLE_FETCH_ERRORS and time.monotonic() < deadline:
                time.sleep(0.2)  # wait for the new leader to be known, then ask it
                self.refresh()
                continue
            if data.error_code != 0:
                raise BrokerError(
                    f"fetch of {self.topic}-{partition} at {next_offset} failed: error {data.error_code}"
                )
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
            deadline = time.monotonic() + self.timeout_s


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
        return {p: list(log.batches(p, log.earliest(p), True)) for p in wanted}
    finally:
        log.close()


@dataclass(frozen=True)
class Marker:
    """A transaction marker found in a partition: its offset, kind and the producer epoch it carries."""

    offset: int
    commit: bool
    epoch: int


def find_marker(
    conf: Mapping[str, str], tp: TopicPartition, producer_id: int, start: int, timeout_s: float = 30.0
) -> Marker | None:
    """The first COMMIT or ABORT marker of ``producer_id`` at or after ``start``; None up to the end.

    A producer's transactions end in order and each writes its marker into every partition it wrote to, so
    the first marker of ``producer_id`` after a point the transaction's records precede is that
    transaction's own, or a later one's (then this one had ended before ``start``). Only batch headers are
    decoded.

    Raises:
        LogRangeGoneError: the log no longer holds ``start`` (retention or DeleteRecords).
        BrokerError: the topic is gone, or the broker does not answer.
    """
    log = _Log(conf, tp.topic, timeout_s)
    try:
        for batch in log.batches(
            tp.partition, start, False, lambda b: b.is_control and b.producer_id == producer_id
        ):
            if batch.is_control and batch.producer_id == producer_id and batch.base_offset >= start:
                return Marker(batch.base_offset, batch.control_type == CONTROL_COMMIT, batch.producer_epoch)
        return None
    finally:
        log.close()
