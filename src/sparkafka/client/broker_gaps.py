"""Broker gaps that reach users of the embedded broker: detected by a probe, handled here and only here.

Runs wherever end offsets are looked up (the source's planner on the driver, ``sparkafka lag``).

**ListOffsets(latest).** tansu 0.6 (the embedded broker) answers the base offset of a partition's newest
stored batch plus one, so every record after the first of a multi-record batch stays invisible to anything
that trusts it: a default confluent-kafka producer batches, and a query read 3 of 500 records (measured).
Its read_committed answer is lower still (0 while a transaction is open). Both are lower bounds of the
true end. On such a broker the end of each partition is resolved by fetching from that bound to the
end-of-partition event (``fetched_end_offsets``).

**Fetch waits cut storage reads short.** tansu lists a partition's stored batches until the fetch's max
wait runs out and returns what it listed by then, so a short ``fetch.wait.max.ms`` on a long partition
(measured on memory storage: 10 ms reads nothing once a partition holds about 60,000 batches; 100 ms is
fine there; on S3 storage 1 ms reads nothing at all) returns no records, forever. Apache Kafka answers a
fetch as soon as data is there and holds only an empty one. Consumers that read to the end of the log
want short waits: a fetch held at the end delays every request queued behind it on the connection
(another partition's fetch, a ListOffsets), by up to 500 ms by default. So they take ``fetch_wait_ms``,
which starts short and, when a fetch that should return data gives nothing for ``STALL_S``
(``note_stalled_fetch``), grows tenfold for that broker in this process. A conformant broker never
stalls, so it keeps the short wait at no cost; a ``fetch.wait.max.ms`` the user set is always kept.

**Detection**, once per process and bootstrap servers (``latest_is_exact``). A cluster id of the form
Apache Kafka generates (22 characters of URL-safe base64: Apache Kafka, Confluent, MSK) is trusted at no
cost. Any other broker gets one probe: two records in one batch into a private topic
(``_sparkafka-probe-...``, deleted again), then ListOffsets(latest) must answer 2. A broker that refuses
the probe topic (authorization) is trusted.

**Leader elections** (a broker dying) are ridden through as everywhere in the client layer
(``core.is_leaderless``): the probe's broker calls are retried, and a fetch to the end of a partition
waits out leaderless answers until its deadline.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Mapping
from typing import Any

from sparkafka.client.core import (
    DEFAULT_TIMEOUT_S,
    LEADER_ELECTION_S,
    admin_client,
    broker_error,
    cached,
    is_leaderless,
    learn_topics,
    new_consumer,
    new_producer,
    with_retries,
)
from sparkafka.structs import INTERNAL_TOPIC_PREFIX, TopicPartition

__all__ = [
    "STALL_S",
    "fetch_wait_ms",
    "fetched_end_offsets",
    "latest_is_exact",
    "looks_like_kafka_cluster_id",
    "note_stalled_fetch",
]

log = logging.getLogger(__name__)

_KAFKA_CLUSTER_ID = re.compile(r"[A-Za-z0-9_-]{22}")
_exact: dict[str, bool] = {}

FETCH_WAITS_MS = (10, 100, 1000)
STALL_S = 1.0
"""How long a fetch that should return data may give nothing before the wait is raised."""
_wait_level: dict[str, int] = {}


def fetch_wait_ms(conf: Mapping[str, Any]) -> str:
    """``fetch.wait.max.ms`` for a consumer that reads to the end of partitions (see the module docstring).

    Runs wherever such a consumer is made (planner, reader tasks); per process, per bootstrap servers.
    """
    if "fetch.wait.max.ms" in conf:
        return str(conf["fetch.wait.max.ms"])
    return str(FETCH_WAITS_MS[_wait_level.get(str(conf.get("bootstrap.servers")), 0)])


def note_stalled_fetch(conf: Mapping[str, Any]) -> bool:
    """A fetch that should have returned data gave nothing for ``STALL_S``: raise the wait if it can be.

    Returns whether it was raised (the caller then makes its consumer again with ``fetch_wait_ms``).
    """
    servers = str(conf.get("bootstrap.servers"))
    level = _wait_level.get(servers, 0)
    if "fetch.wait.max.ms" in conf or level + 1 >= len(FETCH_WAITS_MS):
        return False
    _wait_level[servers] = level + 1
    log.info(
        "broker %s returned nothing for %.0f s to fetches of data it has with fetch.wait.max.ms=%d (tansu "
        "cuts its storage reads at the fetch's max wait): using %d ms from now on",
        servers,
        STALL_S,
        FETCH_WAITS_MS[level],
        FETCH_WAITS_MS[level + 1],
    )
    return True


def looks_like_kafka_cluster_id(cluster_id: str | None) -> bool:
    """Whether ``cluster_id`` has the form Apache Kafka generates (a base64url UUID, 22 characters)."""
    return cluster_id is not None and _KAFKA_CLUSTER_ID.fullmatch(cluster_id) is not None


def latest_is_exact(conf: Mapping[str, str], timeout_s: float = DEFAULT_TIMEOUT_S, admin: Any = None) -> bool:
    """Whether this broker's ListOffsets(latest) can be trusted (see the module docstring); cached.

    ``admin``: the caller's AdminClient (default: the process's one for ``conf``).
    """
    servers = str(conf.get("bootstrap.servers"))
    if servers not in _exact:
        _exact[servers] = _probe(conf, timeout_s, admin if admin is not None else admin_client(conf))
    return _exact[servers]


def _probe(conf: Mapping[str, str], timeout_s: float, admin: Any) -> bool:
    from confluent_kafka import TopicPartition as CTopicPartition
    from confluent_kafka.admin import NewTopic, OffsetSpec

    cluster_id = with_retries(
        "looking up the cluster id", conf, lambda left: admin.list_topics(timeout=left).cluster_id, timeout_s
    )
    if looks_like_kafka_cluster_id(cluster_id):
        return True
    topic = f"{INTERNAL_TOPIC_PREFIX}probe-{uuid.uuid4().hex[:12]}"
    try:
        for future in admin.create_topics([NewTopic(topic, 1)], request_timeout=timeout_s).values():
            future.result(timeout_s)
    except Exception as e:  # noqa: BLE001 - no right to create topics: a managed, so conformant, cluster
        log.info("cluster %s: not probing ListOffsets (%s); trusting it", cluster_id, e)
        return True
    try:
        producer = new_producer(
            {**_plain(conf), "linger.ms": "100", "enable.idempotence": "false", "acks": "all"}
        )
        producer.produce(topic, b"probe-1")
        producer.produce(topic, b"probe-2")  # one batch of two: the case the gap shows in
        if producer.flush(timeout_s):
            return True
        spec = {CTopicPartition(topic, 0): OffsetSpec.latest()}

        def lookup(left: float) -> Any:
            # Cut off after LEADER_ELECTION_S: librdkafka waits for a dead leader to come back.
            answer = admin.list_offsets(spec, request_timeout=min(left, LEADER_ELECTION_S))
            return next(iter(answer.values())).result(left)

        latest = with_retries(f"looking up the end of {topic}", conf, lookup, timeout_s)
    except Exception as e:  # noqa: BLE001 - the probe itself failed: keep the conformant path, say so
        log.warning("ListOffsets probe on cluster %s failed (%s); trusting ListOffsets", cluster_id, e)
        return True
    else:
        if int(latest.offset) == 2:
            return True
        log.info(
            "broker %s (cluster %s) answers ListOffsets(latest)=%d after a 2-record batch: end offsets are "
            "resolved by fetching to the end of each partition instead",
            conf.get("bootstrap.servers"),
            cluster_id,
            latest.offset,
        )
        return False
    finally:
        for future in admin.delete_topics([topic], request_timeout=timeout_s).values():
            try:
                future.result(timeout_s)
            except Exception as e:  # noqa: BLE001 - a leftover probe topic is harmless (patterns skip _sparkafka-)
                log.info("could not delete probe topic %s: %s", topic, e)


def _plain(conf: Mapping[str, str]) -> dict[str, str]:
    drop = ("isolation.level", "group.id", "enable.auto.commit", "auto.offset.reset", "transactional.id")
    return {k: v for k, v in conf.items() if k not in drop}


def _consume_to_ends(
    consumer: Any,
    conf: Mapping[str, str],
    waiting: set[TopicPartition],
    ends: dict[TopicPartition, int],
    deadline: float,
) -> bool:
    """Consume until every ``waiting`` partition reported its end (``ends`` raised as records arrive).

    Returns True if the fetch stalled and ``note_stalled_fetch`` raised the wait (the caller starts over).
    """
    from confluent_kafka import KafkaError

    last_progress = time.monotonic()
    while waiting:
        now = time.monotonic()
        if now >= deadline:
            missing = ", ".join(map(str, sorted(waiting)))
            raise broker_error(f"finding the end of {missing} by fetching", conf, "timed out")
        if now - last_progress > STALL_S and note_stalled_fetch(conf):
            return True
        # Short waits: consume() returns only when the batch is full or the wait is over.
        msgs = consumer.consume(10_000, min(deadline - now, 0.02))
        if msgs:
            last_progress = time.monotonic()
        for msg in msgs:
            tp = TopicPartition(msg.topic(), msg.partition())
            error = msg.error()
            if error is None:
                ends[tp] = max(ends[tp], msg.offset() + 1)
            elif error.code() == KafkaError._PARTITION_EOF:
                ends[tp] = max(ends[tp], msg.offset())
                waiting.discard(tp)
            elif is_leaderless(error):
                # librdkafka finds the new leader itself; a broker down is no fetch-wait stall either.
                log.info("fetching to the ends of partitions: %s; waiting for the leader", error)
                last_progress = time.monotonic()
            else:
                raise broker_error(f"fetching {tp} to find its end", conf, error)
    return False


def fetched_end_offsets(
    conf: Mapping[str, str],
    lower_bounds: Mapping[TopicPartition, int],
    read_committed: bool,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> dict[TopicPartition, int]:
    """The end of each partition, found by fetching from ``lower_bounds`` to the end-of-partition event.

    ``lower_bounds`` must not exceed the partition's end as the isolation level sees it (the broker's own
    ListOffsets answer, or the query's position): a read_committed fetch that starts above the last stable
    offset waits forever on tansu (measured). The end is the consumer's position after the event, which is
    past any trailing transaction marker, or the bound itself when nothing was read.

    Leaderless answers (a broker dying) are waited out within ``timeout_s``.

    Raises:
        BrokerError: the end of some partition was not reached within ``timeout_s``.
    """
    from confluent_kafka import TopicPartition as CTopicPartition

    if not lower_bounds:
        return {}
    bounds = {tp: max(0, o) for tp, o in lower_bounds.items()}
    ends = dict(bounds)
    waiting = set(bounds)
    deadline = time.monotonic() + timeout_s
    while True:
        consumer = _end_offsets_consumer(conf, read_committed)
        learn_topics(consumer, {tp.topic for tp in waiting}, max(deadline - time.monotonic(), 0.001))
        consumer.assign([CTopicPartition(tp.topic, tp.partition, ends[tp]) for tp in sorted(waiting)])
        try:
            stalled = _consume_to_ends(consumer, conf, waiting, ends, deadline)
            if not stalled:
                for ctp in consumer.position([CTopicPartition(tp.topic, tp.partition) for tp in bounds]):
                    tp = TopicPartition(ctp.topic, ctp.partition)
                    if ctp.offset >= 0:
                        ends[tp] = max(ends[tp], int(ctp.offset))
        finally:
            consumer.unassign()
        if not stalled:
            return ends


def _end_offsets_consumer(conf: Mapping[str, str], read_committed: bool) -> Any:
    settings = {
        **_plain(conf),
        "group.id": "sparkafka-end-offsets",  # required by librdkafka; never joined or committed
        "enable.auto.commit": "false",
        "enable.partition.eof": "true",
        "fetch.wait.max.ms": fetch_wait_ms(conf),
        "isolation.level": "read_committed" if read_committed else "read_uncommitted",
    }
    return cached("end-offsets-consumer", settings, lambda: new_consumer(settings), lambda c: c.close())
