"""Probe a broker for the Kafka behaviours sparkafka relies on: ``sparkafka doctor``'s checks.

Runs in the CLI's process (``doctor``) and in tests. Tests use these probes to skip, with the reason printed,
what a non-conformant broker (such as the embedded tansu) cannot serve, so the same tests run in full
against a real Apache Kafka. Each probe creates its own short-lived topic and deletes it again.

A probe that could not finish (a request timed out, a connection broke, a record was not delivered in
time) learnt nothing about the broker: its ``Capability`` says so (``conclusive`` False), and it is never
read as a missing capability.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sparkafka.client.core import (
    admin_client,
    is_retriable,
    new_consumer,
    new_kafka_python_client,
    new_producer,
    with_retries,
)
from sparkafka.errors import BrokerError

__all__ = ["IMPACT", "PROBES", "Capability", "could_not_tell", "probe_all", "probe_broker"]


@dataclass(frozen=True)
class Capability:
    """The outcome of one probe."""

    name: str
    ok: bool
    detail: str
    """What was observed; on failure, what goes wrong without it."""
    conclusive: bool = True
    """False when the probe could not finish (a timeout, a lost connection): ``ok`` is then False, but
    nothing was learnt about the broker, so it is no finding of a missing capability."""


_TIMEOUT_S = 30.0
"""Bound on each probe step, retries of Kafka's retriable errors included."""


def _admin(conf: Mapping[str, str]) -> Any:
    return admin_client(conf)  # one per process and settings: it outlives the futures it returns


def _new_topic(conf: Mapping[str, str], partitions: int = 1, config: Mapping[str, str] | None = None) -> str:
    from confluent_kafka.admin import NewTopic

    name = f"sparkafka-probe-{uuid.uuid4().hex[:10]}"
    spec = NewTopic(name, partitions, 1, config=dict(config or {}))

    def create(left: float) -> None:
        for future in _admin(conf).create_topics([spec], request_timeout=left).values():
            future.result(left)

    with_retries(f"creating probe topic {name}", conf, create, _TIMEOUT_S)
    return name


def _flush(producer: Any, what: str) -> None:
    """Deliver what ``producer`` holds; a record still undelivered after ``_TIMEOUT_S`` is no finding."""
    if producer.flush(_TIMEOUT_S) != 0:
        raise TimeoutError(f"{what} not delivered within {_TIMEOUT_S:.0f} s")


def could_not_tell(error: BaseException) -> bool:
    """Whether ``error`` ended a probe before it learnt anything (a timeout, a broken connection, a leader
    being elected: what a retry could cure), rather than being the broker's answer."""
    if isinstance(error, BrokerError) and error.__cause__ is not None:  # with_retries' wording
        return could_not_tell(error.__cause__)
    return is_retriable(error)


def _delete_topic(conf: Mapping[str, str], topic: str) -> None:
    for future in _admin(conf).delete_topics([topic]).values():
        with contextlib.suppress(Exception):
            future.result(30)


def _latest(conf: Mapping[str, str], topic: str, partition: int = 0) -> int:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    def lookup(left: float) -> int:
        request = {TopicPartition(topic, partition): OffsetSpec.latest()}
        futures = _admin(conf).list_offsets(request, request_timeout=left)
        return int(next(iter(futures.values())).result(left).offset)

    # Retried: right after creation a topic's leader may not be known everywhere (Apache Kafka).
    return with_retries(f"looking up the latest offset of {topic}", conf, lookup, _TIMEOUT_S)


class _NotGrownYetError(Exception):
    """The metadata does not show a topic's new partitions with leaders yet (asked again)."""


def probe_create_partitions(conf: Mapping[str, str]) -> Capability:
    """CreatePartitions: needed to grow a topic while a query runs (partition discovery tests).

    Judged on the answer, not on the first look: on a freshly started, loaded Apache Kafka the request
    can find the new topic not yet known to the broker asked (retried, as any retriable error), and the
    metadata can show the old partition count for a moment after it succeeded (asked again until it shows
    two partitions with leaders, or ``_TIMEOUT_S`` passes). A retried request that finds the topic grown
    already (INVALID_PARTITIONS) counts as grown.
    """
    from confluent_kafka.admin import NewPartitions

    topic = _new_topic(conf)
    admin = _admin(conf)

    def grow(left: float) -> None:
        for future in admin.create_partitions([NewPartitions(topic, 2)], request_timeout=left).values():
            try:
                future.result(left)
            except Exception as e:  # confluent-kafka's KafkaException; "already 2" is a retry's success
                if "INVALID_PARTITIONS" not in str(e):
                    raise

    def grown(left: float) -> int:
        found = admin.list_topics(topic, timeout=left).topics.get(topic)
        partitions = found.partitions if found is not None and found.error is None else {}
        if len(partitions) < 2 or any(p.leader < 0 for p in partitions.values()):
            raise _NotGrownYetError(f"{topic} shows {len(partitions)} partition(s)")
        return len(partitions)

    try:
        with_retries(f"growing probe topic {topic}", conf, grow, _TIMEOUT_S)
        count = with_retries(
            f"waiting for {topic} to show 2 partitions",
            conf,
            grown,
            _TIMEOUT_S,
            retriable=lambda e: isinstance(e, _NotGrownYetError) or is_retriable(e),
        )
        return Capability("create_partitions", True, f"topic has {count} partitions after growing to 2")
    except Exception as e:  # the broker's refusal is the finding; a timeout is none (re-raised)
        if could_not_tell(e):
            raise
        return Capability("create_partitions", False, f"CreatePartitions failed: {e}")
    finally:
        _delete_topic(conf, topic)


def probe_list_offsets_latest(conf: Mapping[str, str]) -> Capability:
    """ListOffsets(latest) equals the log end after a multi-record batch (the source's batch end offsets)."""
    topic = _new_topic(conf)
    try:
        producer = new_producer({**conf, "linger.ms": 200, "batch.num.messages": 100})
        for i in range(5):
            producer.produce(topic, str(i).encode(), partition=0)
        _flush(producer, "5 records")
        latest = _latest(conf, topic)
        ok = latest == 5
        return Capability("list_offsets_latest", ok, f"latest={latest} after 5 records in one batch (want 5)")
    finally:
        _delete_topic(conf, topic)


def probe_offsets_for_times(conf: Mapping[str, str]) -> Capability:
    """ListOffsets(timestamp) looks at record timestamps (startingTimestamp)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    topic = _new_topic(conf)
    try:
        producer = new_producer({**conf, "batch.num.messages": 1})
        for i, ts in enumerate((1_000_000, 2_000_000, 3_000_000)):
            producer.produce(topic, str(i).encode(), partition=0, timestamp=ts)
            _flush(producer, f"record {i}")
        futures = _admin(conf).list_offsets({TopicPartition(topic, 0): OffsetSpec.for_timestamp(2_500_000)})
        offset = int(next(iter(futures.values())).result(30).offset)
        ok = offset == 2
        return Capability("offsets_for_times", ok, f"offset for timestamp 2500000 is {offset} (want 2)")
    finally:
        _delete_topic(conf, topic)


def probe_read_committed(conf: Mapping[str, str]) -> Capability:
    """A read_committed consumer skips aborted records (the source's isolation guarantee)."""
    from confluent_kafka import TopicPartition as CTopicPartition

    topic = _new_topic(conf)
    try:
        producer = new_producer({**conf, "transactional.id": f"probe-{uuid.uuid4().hex}"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, b"aborted", partition=0)
        _flush(producer, "the record to abort")  # in the log, so the abort has something to hide
        producer.abort_transaction(30)
        plain = new_producer(dict(conf))
        plain.produce(topic, b"visible", partition=0)
        _flush(plain, "the record after the aborted one")
        consumer = new_consumer(
            {
                **conf,
                "group.id": "sparkafka-probe",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([CTopicPartition(topic, 0, 0)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and b"visible" not in seen:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen.append(msg.value() or b"")
        consumer.close()
        if b"visible" not in seen:  # the consumer did not get as far as the records: no finding
            raise TimeoutError(f"a read_committed consumer read {seen} in 10 s, not the visible record")
        ok = b"aborted" not in seen
        return Capability("read_committed", ok, f"read_committed consumer saw {seen}")
    finally:
        _delete_topic(conf, topic)


def probe_api_versions(conf: Mapping[str, str]) -> Capability:
    """The broker answers ApiVersions and Metadata (every client needs this)."""
    client = new_kafka_python_client(conf)
    try:
        version = client.check_version(timeout_ms=10_000)
    finally:
        client.close()
    brokers = len(_admin(conf).list_topics(timeout=30).brokers)
    return Capability(
        "api_versions", True, f"ApiVersions answered (protocol level {version}); {brokers} broker(s)"
    )


def probe_transactions(conf: Mapping[str, str], wait_s: float = 20.0) -> Capability:
    """A transactional producer can init, produce and commit (the exactly-once sink's foundation).

    The log is read once the COMMIT marker is in it (``committed_view``'s ``settle_s``).
    """
    from sparkafka.ops.committed_view import committed_view

    topic = _new_topic(conf)
    try:
        producer = new_producer({**conf, "transactional.id": f"probe-{uuid.uuid4().hex}"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, b"committed", partition=0)
        producer.commit_transaction(30)
        producer.close()
        values = [r.value for r in committed_view(conf, topic, settle_s=wait_s)[0]]
        ok = values == [b"committed"]
        return Capability("transactions", ok, f"committed transaction shows {values} in the log")
    finally:
        _delete_topic(conf, topic)


def probe_transaction_timeout(conf: Mapping[str, str], wait_s: float = 20.0) -> Capability:
    """The broker aborts a transaction left open past transaction.timeout.ms (bounds lingering data)."""
    from sparkafka.ops.committed_view import read_raw_batches

    topic = _new_topic(conf)
    try:
        producer = new_producer(
            {**conf, "transactional.id": f"probe-{uuid.uuid4().hex}", "transaction.timeout.ms": 1000}
        )
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, b"left open", partition=0)
        _flush(producer, "the record left open")
        del producer  # left open on purpose: only the broker's timeout can end it
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if any(b.is_control for b in read_raw_batches(conf, topic)[0]):
                return Capability(
                    "transaction_timeout", True, "an open transaction was aborted after its timeout"
                )
            time.sleep(0.5)
        return Capability(
            "transaction_timeout",
            False,
            f"a transaction with a 1 s timeout was still open after {wait_s:.0f} s",
        )
    finally:
        _delete_topic(conf, topic)


def probe_group_commit_assign(conf: Mapping[str, str]) -> Capability:
    """An assign-mode consumer (no group membership) can commit offsets and read them back."""
    from confluent_kafka import TopicPartition as CTopicPartition

    topic = _new_topic(conf)
    try:
        consumer = new_consumer(
            {**conf, "group.id": f"probe-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}
        )
        consumer.commit(offsets=[CTopicPartition(topic, 0, 7)], asynchronous=False)
        got = consumer.committed([CTopicPartition(topic, 0)], timeout=30)[0].offset
        consumer.close()
        return Capability("group_commit_assign", got == 7, f"committed 7, read back {got}")
    finally:
        _delete_topic(conf, topic)


def probe_message_size_limit(conf: Mapping[str, str]) -> Capability:
    """The broker rejects a record over a topic's max.message.bytes with MESSAGE_TOO_LARGE."""
    name = _new_topic(conf, config={"max.message.bytes": "1024"})
    try:
        errors: list[Any] = []
        producer = new_producer({**conf, "linger.ms": 0})
        producer.produce(name, b"x" * 8192, on_delivery=lambda e, _m: errors.append(e))
        _flush(producer, "the 8 KiB record")  # delivered or refused: either is an answer
        error = errors[0] if errors else None
        if error is not None and "TOO_LARGE" in error.name():
            return Capability("message_size_limit", True, f"8 KiB record rejected: {error.name()}")
        return Capability("message_size_limit", False, f"8 KiB record to max.message.bytes=1024: {error}")
    finally:
        _delete_topic(conf, name)


PROBES: dict[str, Callable[[Mapping[str, str]], Capability]] = {
    "api_versions": probe_api_versions,
    "create_partitions": probe_create_partitions,
    "list_offsets_latest": probe_list_offsets_latest,
    "offsets_for_times": probe_offsets_for_times,
    "transactions": probe_transactions,
    "read_committed": probe_read_committed,
    "transaction_timeout": probe_transaction_timeout,
    "group_commit_assign": probe_group_commit_assign,
    "message_size_limit": probe_message_size_limit,
}

IMPACT: dict[str, str] = {
    "api_versions": "nothing works: the broker is unreachable or not Kafka-compatible",
    "create_partitions": "topics cannot grow; partition discovery of new partitions cannot be exercised",
    "list_offsets_latest": "batch end offsets come out wrong: micro-batches miss or wait for records",
    "offsets_for_times": "startingTimestamp starts at the wrong offsets",
    "transactions": "deliveryGuarantee=exactly_once cannot work",
    "read_committed": "readers see records of aborted transactions: exactly-once output is not exactly once",
    "transaction_timeout": "a crashed writer's open transaction is never aborted: read_committed stalls",
    "group_commit_assign": "offset commits to the consumer group fail: lag tools stay blind",
    "message_size_limit": "oversized records are stored instead of rejected: consumers with smaller fetch "
    "limits stall on them",
}


def probe_broker(conf: Mapping[str, str], name: str) -> Capability:
    """Run one probe by name. An error that is the broker's answer counts as a missing capability; one
    that ended the probe before it learnt anything (``could_not_tell``) makes it inconclusive."""
    try:
        return PROBES[name](conf)
    except Exception as e:  # noqa: BLE001 - every error is reported, as a finding or as none
        if could_not_tell(e):
            return Capability(name, False, f"could not tell: {type(e).__name__}: {e}", conclusive=False)
        return Capability(name, False, f"probe failed: {type(e).__name__}: {e}")


def probe_all(conf: Mapping[str, str]) -> dict[str, Capability]:
    """Every probe, by name."""
    return {name: probe_broker(conf, name) for name in PROBES}
