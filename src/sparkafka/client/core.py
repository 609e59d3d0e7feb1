"""The one Kafka client layer: construction, per-process caches, retries, and how failures are worded.

Every driver-side broker call (metadata, ListOffsets, group offsets, topic lookups, the intent log, lag)
goes through ``with_retries`` here (or ``client.metadata.AdminMetadata``, built on it), so Kafka's
retriable errors (a new topic whose leaders are not known everywhere yet, a coordinator moving, a broker
restarting) are retried with backoff until the caller's timeout (``metadataTimeoutMs``), and then fail
with one wording:
``<what> failed against bootstrap servers <servers>: <error>``.

**Leader elections.** When a broker dies, its partitions and coordinators answer without a leader until
Apache Kafka (KRaft) declares it dead, after ``broker.session.timeout.ms`` (9 s by default), and elects new
leaders (``LEADER_ELECTION_S``). Clients word that in many ways (``is_leaderless``): librdkafka's ListOffsets
fails the whole request with ``_NOENT`` "Failed to query partition leaders: No leaders found" when no
partition asked about has a leader, and waits for a dead leader to come back rather than for a new one.
Every lookup here retries those answers, refreshing the metadata in between, for ``DEFAULT_TIMEOUT_S``
(measured failure without this: a 3-broker cluster with a broker killed every 15 s failed the exactly-once
sink's intent log lookup at once with that ``_NOENT``).

Clients are cached per process and per settings (``cached``): Spark reuses Python workers across tasks
and micro-batches, and a confluent-kafka client must stay referenced until its futures resolve.

**librdkafka's own log lines** go to the Python logger ``sparkafka.librdkafka`` (``client.log``), never
straight to stderr: every client is made here with it as confluent-kafka's ``logger``.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from sparkafka.client.conf import (
    CONSUMER_ONLY,
    PRODUCER_ONLY,
    against_servers,
    consumer_settings,
    producer_settings,
)
from sparkafka.client.log import logged
from sparkafka.client.security import Access, denied_by
from sparkafka.errors import BrokerError

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "LEADER_ELECTION_S",
    "admin_client",
    "admin_settings",
    "broker_error",
    "cached",
    "error_code",
    "is_leaderless",
    "is_retriable",
    "new_consumer",
    "new_kafka_python_admin",
    "new_kafka_python_client",
    "new_producer",
    "raise_leaderless",
    "uncache",
    "with_retries",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

LEADER_ELECTION_S = 10.0
"""How long a dead broker's partitions and coordinators can answer without a (reachable) leader.

Apache Kafka (KRaft) declares a broker dead after ``broker.session.timeout.ms`` (9 s by default), then
elects new leaders from the in-sync replicas and spreads the metadata, which takes well under a second.
Until then requests reach the dead broker (connection refused, timeouts) or find no leader at all. Also
the bound on one ListOffsets request (``AdminMetadata``): librdkafka sends it to the leader its metadata
names and, while that broker is down, waits for it to come back rather than for a new leader; cut off
after this long, the retry, after a metadata refresh, reaches the leader elected meanwhile.
"""

DEFAULT_TIMEOUT_S = 30.0
"""Default bound on a lookup, retries included (``metadataTimeoutMs`` defaults to the same 30 s).

Three times ``LEADER_ELECTION_S``: a lookup started as a broker dies rides through the election, and
through a request cut off waiting for the dead leader, with time to spare. A shorter bound turns every
broker restart into a failed query.
"""

# Answers given while a partition, coordinator or controller has no reachable leader: its broker died or
# restarted, and Kafka has not yet (or just) elected another one. Kafka codes and librdkafka's local ones.
_LEADERLESS_CODES = {
    5,  # LEADER_NOT_AVAILABLE: no leader elected yet
    6,  # NOT_LEADER_OR_FOLLOWER (NOT_LEADER_FOR_PARTITION): asked a broker that no longer leads it
    7,  # REQUEST_TIMED_OUT: the leader waited for replicas on a dead broker
    13,  # NETWORK_EXCEPTION: the leader's connection to a replica broke
    14,  # COORDINATOR_LOAD_IN_PROGRESS: a new coordinator is loading its log
    15,  # COORDINATOR_NOT_AVAILABLE: the coordinator's partition has no leader yet
    16,  # NOT_COORDINATOR: the coordinator moved
    19,  # NOT_ENOUGH_REPLICAS: the in-sync replicas shrank below min.insync.replicas
    20,  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
    41,  # NOT_CONTROLLER: the controller moved
    56,  # KAFKA_STORAGE_ERROR: the leader's log directory went offline; leadership moves
    74,  # FENCED_LEADER_EPOCH: the client's leader is older than the broker's
    75,  # UNKNOWN_LEADER_EPOCH: the client's leader is newer than the broker's
    78,  # OFFSET_NOT_AVAILABLE: a new leader whose high watermark is not caught up yet
    -195,  # _TRANSPORT: the connection to the (dead) leader broke or was refused
    -187,  # _ALL_BROKERS_DOWN: every broker the client is connected to is down
    -185,  # TIMED_OUT: no answer in time, e.g. waiting for a dead leader to come back
    -180,  # _WAIT_COORD: waiting for the coordinator
    -137,  # _DESTROY_BROKER: the request's broker left the cluster metadata (killed) while it waited
}
_NOENT = -156
"""librdkafka's generic "no such entry": a leaderless answer only when its message speaks of leaders."""

# Other answers a retry can cure.
_TRANSIENT_CODES = {
    3,  # UNKNOWN_TOPIC_OR_PARTITION: just after creation, before every broker knows the topic
    -193,  # _RESOLVE: a broker's name did not resolve (DNS hiccup, a broker being replaced)
}
UNKNOWN_TOPIC_OR_PARTITION = 3
TIMED_OUT = -185
"""librdkafka's _TIMED_OUT (retried, in the codes above): no answer within the call's own timeout."""
UNSTABLE_OFFSET_COMMIT = 88
"""OffsetFetch while a transactional offset commit of the group is pending: ask again once it ends."""


def _inner(error: BaseException | Any) -> Any:
    """The object that carries the code: a KafkaException's KafkaError, else ``error`` itself."""
    if isinstance(error, BaseException) and error.args and callable(getattr(error.args[0], "code", None)):
        return error.args[0]
    return error


def error_code(error: BaseException | Any) -> int | None:
    """The Kafka error code of ``error``, if it has one.

    ``error``: a confluent-kafka KafkaException or KafkaError, or a kafka-python error (``kafka.errors``,
    whose classes carry ``errno`` and a boolean ``retriable``; ``errno`` of other exceptions, such as
    OSError's, is not a Kafka code).
    """
    inner = _inner(error)
    code = getattr(inner, "code", None)
    if callable(code):
        return int(code())
    errno = getattr(inner, "errno", None)
    if isinstance(errno, int) and isinstance(getattr(inner, "retriable", None), bool):
        return errno
    return None


def is_leaderless(error: BaseException | Any) -> bool:
    """Whether ``error`` is an answer given while a leader is missing or moving (see ``LEADER_ELECTION_S``).

    Matched by code, and by message only for librdkafka's generic ``_NOENT``, which its ListOffsets and
    DeleteRecords give as "Failed to query partition leaders: No leaders found" when no partition asked
    about has a leader. The partitions of a deleted topic get that same answer: a caller that must tell the
    two apart asks the metadata, as ``AdminMetadata`` does (a deleted topic is ``PartitionsGoneError``).
    librdkafka's ``_UNKNOWN_PARTITION`` is not leaderless: it means the topic has fewer partitions.
    """
    code = error_code(error)
    if code in _LEADERLESS_CODES:
        return True
    if code != _NOENT:
        return False
    inner = _inner(error)
    text = inner.str() if callable(getattr(inner, "str", None)) else str(inner)
    return "leader" in str(text).lower()


def is_retriable(error: BaseException | Any) -> bool:
    """Whether a retry can cure ``error`` (a KafkaException, a KafkaError, a kafka-python error, a timeout).

    Leaderless answers (``is_leaderless``), a few other transient codes, errors the client itself flags
    retriable (confluent-kafka's ``KafkaError.retriable()``, kafka-python's ``retriable`` attribute), and
    timeouts.
    """
    if is_leaderless(error) or error_code(error) in _TRANSIENT_CODES:
        return True
    flag = getattr(_inner(error), "retriable", None)
    if callable(flag):
        flag = flag()
    return flag is True or isinstance(error, TimeoutError)


def raise_leaderless(partitions: Iterable[Any]) -> None:
    """Raise the first leaderless per-partition error of an admin result, so that the retry asks again.

    ``partitions``: confluent-kafka TopicPartitions whose ``error`` is a KafkaError or None (a group's
    offsets as OffsetFetch or OffsetCommit answered them). Other errors are left to the caller.
    """
    from confluent_kafka import KafkaException

    for p in partitions:
        if p.error is None:
            continue
        if is_leaderless(p.error) or error_code(p.error) == UNSTABLE_OFFSET_COMMIT or is_retriable(p.error):
            raise KafkaException(p.error)
        log.warning("%s-%d: %s (read as no committed offset)", p.topic, p.partition, p.error)


def raise_partition_error(partitions: Iterable[Any]) -> None:
    """Raise the first per-partition error of an answer, whatever it is (``raise_leaderless`` raises only
    those a retry can cure): for a caller to whom an error read as "nothing committed" would mean a move."""
    from confluent_kafka import KafkaException

    for p in partitions:
        if p.error is not None:
            raise KafkaException(p.error)


def broker_error(what: str, conf: Mapping[str, Any], error: object) -> BrokerError:
    """The one wording of a failed broker call; an error with no words of its own (a bare ``TimeoutError``
    from a future) is named by its kind, so the sentence never ends in an empty reason."""
    said = str(error).strip() or _no_words(error)
    return BrokerError(f"{what} failed {against_servers(conf)}: {said}")


def _no_words(error: object) -> str:
    if isinstance(error, TimeoutError):
        return "no answer in time (TimeoutError)"
    return f"{type(error).__name__} with no message"


def with_retries(
    what: str,
    conf: Mapping[str, Any],
    call: Callable[[float], T],
    timeout_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    retriable: Callable[[BaseException], bool] = is_retriable,
    access: Access | None = None,
) -> T:
    """``call(remaining_s)`` until it succeeds, retrying retriable errors with backoff within ``timeout_s``.

    Backoff doubles from 50 ms to 1 s. The call gets the time left, to bound its own wait by it. To ride
    through a leader election, ``timeout_s`` must be well above ``LEADER_ELECTION_S`` (as
    ``DEFAULT_TIMEOUT_S`` is); leaderless answers are retried like any other retriable error.

    Raises:
        AuthorizationError: at once, when the brokers refuse the call by ACL: worded for ``access``, the
            permission the call needs (``client.security.denied``).
        BrokerError: a non-retriable error at once, or the last retriable one once the time is up,
            worded by ``broker_error``.
    """
    deadline = clock() + timeout_s
    delay = 0.05
    while True:
        remaining = deadline - clock()
        try:
            return call(max(remaining, 0.001))
        except BrokerError:
            raise
        except Exception as e:  # confluent-kafka's KafkaException and the like, classified below
            refusal = denied_by(e, conf, access, what) if access is not None else None
            if refusal is not None:
                raise refusal from None
            if not retriable(e) or clock() + delay >= deadline:
                raise broker_error(what, conf, e) from e
            log.info("%s: %s; retrying in %.2f s", what, e, delay)
        sleep(delay)
        delay = min(delay * 2, 1.0)


_cache: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
_closers: dict[tuple[str, tuple[tuple[str, str], ...]], Callable[[Any], None]] = {}


def cached(
    kind: str, settings: Mapping[str, Any], make: Callable[[], T], close: Callable[[T], None] | None = None
) -> T:
    """One client of ``kind`` per process and settings, made by ``make`` on first use.

    ``close`` runs at interpreter exit (flush a producer, close a consumer). Settings must be strings (or
    hashable), as parsed options are.
    """
    key = _cache_key(kind, settings)
    if key not in _cache:
        _cache[key] = make()
        if close is not None:
            _closers[key] = close
    return _cache[key]  # type: ignore[no-any-return]


def uncache(kind: str, settings: Mapping[str, Any]) -> None:
    """Forget the cached client of ``kind`` and ``settings`` (not closed: its holder still has it); the
    next ``cached`` call makes a new one."""
    key = _cache_key(kind, settings)
    _cache.pop(key, None)
    _closers.pop(key, None)


def _cache_key(kind: str, settings: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    return kind, tuple(sorted((k, str(v)) for k, v in settings.items()))


def close_all() -> None:
    """Close and forget every cached client (at interpreter exit; before a local broker stops, so no client
    is left to log its lost connections)."""
    for key, close in list(_closers.items()):
        with contextlib.suppress(Exception):
            close(_cache[key])
    _cache.clear()
    _closers.clear()


atexit.register(close_all)

# An AdminClient is a producer-type handle: it warns of each consumer-only setting (a CONFWARN line), and
# acts on producer-only ones it has no use for: with a producer's enable.idempotence=true (a --command-config
# shared with an application) it asks the broker for a producer id, and a fresh broker's "Coordinator load in
# progress" answer became a GETPID warning under `sparkafka lag`'s table (measured, Apache Kafka 4.4).
_ADMIN_DROP = CONSUMER_ONLY | PRODUCER_ONLY | {"allow.auto.create.topics"}


_LOG_SERVE_INTERVAL_S = 1.0
_log_server: threading.Thread | None = None
_log_server_lock = threading.Lock()


def _serve_admin_logs() -> None:
    """Forever: serve the cached AdminClients' log lines (confluent-kafka hands them over only in ``poll``).

    Consumers and producers are polled by their users; an AdminClient is not, and its log lines would
    otherwise wait in its queue for good. ``poll`` on an AdminClient serves nothing else (its results
    resolve futures on librdkafka's background thread).
    """
    while True:
        time.sleep(_LOG_SERVE_INTERVAL_S)
        for (kind, _), client in list(_cache.items()):
            if kind == "admin":
                with contextlib.suppress(Exception):  # a closed client, or a test's stand-in without poll
                    client.poll(0)


def _start_serving_admin_logs() -> None:
    global _log_server  # noqa: PLW0603 - one daemon thread per process, started with its first AdminClient
    with _log_server_lock:
        if _log_server is None or not _log_server.is_alive():
            _log_server = threading.Thread(
                target=_serve_admin_logs, name="sparkafka-librdkafka-logs", daemon=True
            )
            _log_server.start()


def new_consumer(settings: Mapping[str, Any]) -> Any:
    """A confluent-kafka Consumer: every consumer sparkafka makes is made here (logs: ``LIBRDKAFKA_LOG``).

    Producer-only settings are left out (a sink's settings reach its intent-log reader): librdkafka would
    ignore each with a CONFWARN line.
    """
    from confluent_kafka import Consumer

    return Consumer(logged(consumer_settings(settings)))


def next_messages(consumer: Any, max_messages: int, timeout_s: float) -> list[Any]:
    """What ``consumer`` has queued (up to ``max_messages``), else the first message within ``timeout_s``.

    Not ``consume(n, timeout)`` alone: librdkafka returns from it only when ``n`` messages arrived or the
    timeout passed, so every call that finds fewer than ``n`` (the end of any read) waits out the timeout.
    """
    msgs: list[Any] = consumer.consume(max_messages, 0)
    if msgs:
        return msgs
    first = consumer.poll(timeout_s)
    return [first] if first is not None else []


_known_topics: dict[int, set[str]] = {}


def learn_topics(consumer: Any, topics: Iterable[str], timeout_s: float) -> None:
    """Have ``consumer`` (a long-lived, cached one) fetch metadata for ``topics`` it has not seen yet.

    Call before assigning their partitions: librdkafka (2.16) otherwise waits about 1 s before its first
    fetch of a topic that appeared after the consumer's last metadata refresh (measured on the embedded
    broker; the topic's metadata request goes out on a timer).

    Only a shortcut: a retriable failure (a broker dying, a leader election) is logged and the topic asked
    about again next time; the consumer learns the metadata by itself meanwhile.
    """
    known = _known_topics.setdefault(id(consumer), set())
    for topic in sorted(set(topics) - known):
        try:
            consumer.list_topics(topic=topic, timeout=timeout_s)
        except Exception as e:  # confluent-kafka's KafkaException: classified below
            if not is_retriable(e):
                raise
            log.info("metadata of topic %s not fetched ahead (%s); the consumer fetches it itself", topic, e)
            continue
        known.add(topic)


def new_producer(settings: Mapping[str, Any]) -> Any:
    """A confluent-kafka Producer: every producer sparkafka makes is made here (logs: ``LIBRDKAFKA_LOG``).

    Consumer-only settings are left out, as ``new_consumer`` leaves out producer-only ones.
    """
    from confluent_kafka import Producer

    return Producer(logged(producer_settings(settings)))


def new_kafka_python_client(conf: Mapping[str, str], **settings: Any) -> Any:
    """kafka-python's network client, for the protocol steps librdkafka lacks (EndTxn, raw fetches);
    ``settings`` are kafka-python's own (``receive_message_max_bytes`` for a raw fetch's answers)."""
    from kafka.net.compat import KafkaNetClient

    from sparkafka.client.conf import to_kafka_python_config

    return KafkaNetClient(**to_kafka_python_config(conf), **settings)


def new_kafka_python_admin(conf: Mapping[str, str], timeout_s: float) -> Any:
    """kafka-python's admin client (ListTransactions / DescribeTransactions)."""
    from kafka import KafkaAdminClient

    from sparkafka.client.conf import to_kafka_python_config

    return KafkaAdminClient(**to_kafka_python_config(conf), request_timeout_ms=int(timeout_s * 1000))


def admin_settings(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` without the consumer- and producer-only settings: an AdminClient warns about the first and
    would act on some of the second (``enable.idempotence``: a producer id asked for at start)."""
    return {k: v for k, v in conf.items() if k not in _ADMIN_DROP}


def admin_client(conf: Mapping[str, str]) -> Any:
    """The process's AdminClient for these settings (it must outlive the futures it returns).

    Its log lines go to ``LIBRDKAFKA_LOG``, served once a second by a daemon thread.
    """
    from confluent_kafka.admin import AdminClient

    settings = admin_settings(conf)

    def make() -> Any:
        client = AdminClient(logged(settings))
        _start_serving_admin_logs()
        return client

    return cached("admin", settings, make)
