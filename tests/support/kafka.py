"""The test broker as tests use it: topics, records in, the committed view and group offsets out."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sparkafka.client.core import admin_client, cached, close_all, new_producer
from sparkafka.local.tansu_workarounds import exact_latest_producer_conf
from sparkafka.ops.committed_view import RawRecord, committed_view
from sparkafka.structs import TopicPartition, committed_offsets

FLUSH_S = 120
"""How long the test producer waits for its records to be acknowledged (a bound on a wait, not a timing)."""

__all__ = ["Kafka", "Offsets", "group_offsets", "produce", "read_committed"]

Offsets = dict[TopicPartition, int]


def produce(
    conf: dict[str, str],
    topic: str,
    values: Iterable[str],
    partitions: int = 1,
    headers: list[tuple[str, bytes]] | None = None,
    timestamp: int | None = None,
) -> list[str]:
    """Produce each value round-robin over ``partitions`` (each record its own batch); returns the values once
    the broker has acknowledged each (a delivery error fails the call)."""
    # Idempotent, so that records land in the order produced: without it a request refused on a fresh
    # topic (its leader not yet known everywhere) is retried after the ones behind it (each record is its
    # own request here), and a partition's first record can end up last (seen: g16, g18, g0).
    # One producer per process and broker (closed with the process's other clients, before a fixture's
    # broker stops): a new idempotent producer asks for its producer id before it has a connection and
    # librdkafka retries that 500 ms later, so a producer per call took 0.5 s a call (measured: 26 calls,
    # 14.3 of 30 s in ten tests of test_source.py and test_offset_commits.py).
    # One request in flight: a producer that has its id writes to a topic created a moment before, its
    # first request is refused (NOT_LEADER) while the next, already sent, is accepted, and librdkafka
    # 2.16 counts the first record as delivered with it ("implicitly acked by subsequent batch success")
    # although it is not in the log: 17 of 400 records lost, none reported (confluent-kafka-go issue 921).
    settings = {
        **exact_latest_producer_conf(conf),
        "enable.idempotence": "true",
        "max.in.flight.requests.per.connection": "1",
    }
    producer = cached("test-producer", settings, lambda: new_producer(settings), close=lambda p: p.flush(10))
    failed: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            failed.append(f"{message.topic()}[{message.partition()}]: {error}")

    out = []
    for i, value in enumerate(values):
        kwargs: dict[str, Any] = {"partition": i % partitions, "key": f"k{i}".encode()}
        kwargs["on_delivery"] = delivered
        if headers:
            kwargs["headers"] = headers
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        producer.produce(topic, value.encode(), **kwargs)
        out.append(value)
    # A wait, not a timing: on a loaded machine (CI, the line legs beside the main suite) a new broker's
    # coordinator was still loading and 30 s left 1,052 records unacknowledged (a producer id came later).
    left = producer.flush(FLUSH_S)
    if left or failed:
        close_all()  # a producer in a fatal state is not handed to the next test
    assert left == 0, f"{left} records not acknowledged in {FLUSH_S} s"
    assert failed == [], failed
    return out


def group_offsets(conf: dict[str, str], group: str, topic: str, partitions: int) -> Offsets:
    """The group's committed offsets, read by a plain consumer of the group (OffsetFetch; it never joins).

    Not AdminClient.list_consumer_group_offsets: librdkafka crashes the process when that OffsetFetch is
    answered NOT_COORDINATOR (a group's first lookup; librdkafka issue 5040), as it was here.
    """
    from confluent_kafka import Consumer, KafkaError, KafkaException
    from confluent_kafka import TopicPartition as CTopicPartition

    moving = {
        KafkaError.NOT_COORDINATOR,  # a new broker's group coordinator still loading (seen on a fresh one)
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    }
    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": "false"})
    deadline = time.monotonic() + 30
    wanted = [CTopicPartition(topic, p) for p in range(partitions)]
    try:
        while True:
            try:
                answer = consumer.committed(wanted, timeout=30)
                break
            except KafkaException as e:
                if e.args[0].code() not in moving or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # the coordinator's move: ask again, as any Kafka client does
    finally:
        consumer.close()
    got = committed_offsets(answer)
    return {tp: o for tp, o in got.items() if o is not None}


def read_committed(
    conf: dict[str, str], topic: str, timeout_s: float = 60.0
) -> dict[int, list[bytes | None]]:
    """What a plain confluent-kafka consumer with ``isolation.level=read_committed`` reads, by partition.

    Each partition is read from offset 0 to its end as it is when called (the high watermark): the broker's
    own answer, to compare with the committed-view oracle (``Kafka.committed``), which applies the
    transaction markers itself. A transaction still open holds the consumer at the last stable offset below
    the end: that fails with TimeoutError naming the partitions, as does anything else that stops the read.
    """
    from confluent_kafka import Consumer, KafkaError, KafkaException
    from confluent_kafka import TopicPartition as CTopicPartition

    settings = {**conf, "group.id": f"read-committed-{uuid.uuid4().hex[:8]}", "enable.auto.commit": "false"}
    probe = Consumer({**settings, "isolation.level": "read_uncommitted"})  # its ListOffsets: high watermark
    try:
        partitions = sorted(probe.list_topics(topic, timeout=30).topics[topic].partitions)
        ends = {p: probe.get_watermark_offsets(CTopicPartition(topic, p), timeout=30)[1] for p in partitions}
    finally:
        probe.close()
    consumer = Consumer({**settings, "isolation.level": "read_committed", "enable.partition.eof": "true"})
    values: dict[int, list[bytes | None]] = {p: [] for p in partitions}
    reached: dict[int, int] = dict.fromkeys(partitions, 0)
    deadline = time.monotonic() + timeout_s
    try:
        consumer.assign([CTopicPartition(topic, p, 0) for p in partitions])
        while any(reached[p] < ends[p] for p in partitions):
            if time.monotonic() > deadline:
                behind = {p: f"{reached[p]} of {ends[p]}" for p in partitions if reached[p] < ends[p]}
                raise TimeoutError(f"read_committed read of {topic} stopped short: {behind}")
            for msg in consumer.consume(1000, 0.5):
                error = msg.error()
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                if error is None:
                    values[msg.partition()].append(msg.value())
                # EOF comes at the last stable offset, past any trailing transaction marker.
                reached[msg.partition()] = max(reached[msg.partition()], msg.offset() + (error is None))
    finally:
        consumer.close()
    return values


class Kafka:
    """One broker's topics, records and groups, for a test (the ``kafka`` fixture) or a harness.

    Topics are not deleted afterwards (see the ``new_topic`` fixture): names are unique instead.
    """

    def __init__(self, conf: dict[str, str]) -> None:
        self.conf = conf

    def topic(
        self,
        partitions: int = 1,
        prefix: str = "t",
        config: Mapping[str, str] | None = None,
        replication: int = 1,
    ) -> str:
        """A new, uniquely named topic: ``kafka.topic(partitions=4)``."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.create_topics([name], partitions, config, replication)
        return name

    def create_topics(
        self,
        names: Iterable[str],
        partitions: int,
        config: Mapping[str, str] | None = None,
        replication: int = 1,
    ) -> None:
        """Create ``names``, each with ``partitions`` partitions of ``replication`` replicas.

        Without time retention unless ``config`` sets it: tests write records with timestamps years old,
        which a broker's retention would delete under them (an external broker's too).
        """
        from confluent_kafka.admin import NewTopic

        admin = admin_client(self.conf)  # the process's client for this broker, kept while futures resolve
        settings = {"retention.ms": "-1", **(config or {})}
        specs = [NewTopic(name, partitions, replication, config=settings) for name in names]
        for future in admin.create_topics(specs).values():
            future.result(30)

    def produce(self, topic: str, values: Iterable[str], partitions: int = 1, **record: Any) -> list[str]:
        """``produce``: each value round-robin over ``partitions``, keys ``k0``, ``k1``, ... (``headers``,
        ``timestamp`` for every record)."""
        return produce(self.conf, topic, values, partitions, **record)

    def transactions(self, topic: str, count: int, size: int, aborted: Callable[[int], bool]) -> None:
        """``count`` transactions of ``size`` records (``t<n>-<i>``) into partition 0 of ``topic``, one
        transactional producer; transaction ``n`` is aborted when ``aborted(n)``, else committed."""
        from confluent_kafka import Producer

        producer = Producer({**self.conf, "transactional.id": f"test-{uuid.uuid4().hex[:8]}"})
        producer.init_transactions(30)
        for n in range(count):
            producer.begin_transaction()
            for i in range(size):
                producer.produce(topic, f"t{n}-{i}".encode(), partition=0)
            if aborted(n):
                producer.flush(30)  # in the log before the abort (librdkafka drops what it has not sent)
                producer.abort_transaction(30)
            else:
                producer.commit_transaction(30)

    def committed(self, topic: str, settle_s: float = 10) -> list[RawRecord]:
        """Every record a correct read_committed consumer sees in ``topic``, partition by partition, once the
        markers of transactions just committed or aborted are in the log (up to ``settle_s``)."""
        view = committed_view(self.conf, topic, settle_s=settle_s)
        return [r for records in view.values() for r in records]

    def committed_values(self, topic: str) -> Counter[bytes | None]:
        """The committed records' values, counted (duplicates show as counts above one)."""
        return Counter(r.value for r in self.committed(topic))

    def visible_now(self, topic: str) -> Counter[bytes | None]:
        """The values a read_committed consumer reads in ``topic`` now, counted: for a moment the test knows
        transactions are open and undecided (a driver killed at a pause before its commit). A transaction
        still open holds its partition back at once, where ``committed_values`` reads it again for 10 s
        waiting for the markers of one just decided, in vain for one that stays open."""
        return Counter(r.value for r in self.committed(topic, settle_s=0))

    def pending_transactions(self, prefix: str) -> dict[str, str]:
        """The coordinator's state (DescribeTransactions) of each transaction the prefix's one pending
        intent names, by transactional id: ``Ongoing`` while undecided, so no marker can be on its way and
        ``visible_now`` is final for it."""
        from sparkafka.sink.intents import IntentLog
        from sparkafka.sink.txn_tool import describe_transactions

        (intent,) = IntentLog(self.conf, prefix).read().pending
        described, note = describe_transactions(self.conf, [h.transactional_id for h in intent.handles])
        assert described is not None, note
        return {t.transactional_id: t.state for t in described}

    def open_transactions(self, prefix: str, tasks: int) -> list[str]:
        """The ids ``<prefix>-0`` .. ``<prefix>-(tasks-1)`` whose transaction the coordinator holds open
        (DescribeTransactions: ``Ongoing``); each id must be known to it."""
        from sparkafka.sink.task import transactional_id
        from sparkafka.sink.txn_tool import describe_transactions

        ids = [transactional_id(prefix, task) for task in range(tasks)]
        described, note = describe_transactions(self.conf, ids)
        assert described is not None, note
        assert {t.transactional_id for t in described} == set(ids)
        return [t.transactional_id for t in described if t.state == "Ongoing"]

    def read_committed(self, topic: str) -> list[bytes | None]:
        """``read_committed``: what a plain read_committed consumer reads in ``topic``, all partitions."""
        return [v for values in read_committed(self.conf, topic).values() for v in values]

    def group_offsets(self, group: str, topic: str, partitions: int) -> Offsets:
        return group_offsets(self.conf, group, topic, partitions)
