"""What a sink producer's deliveries prove, and the settings that make them proof of the broker's word.

Runs in executor tasks (Spark's Python workers), wherever a sink producer is made (``sink.task``); the
option check (``check_in_flight``) runs on the driver when the sink's options are parsed.

librdkafka's delivery report is not always the broker's word. An idempotent or transactional producer
(librdkafka 2.16) that has a Produce request of a partition refused with a "retry, not persisted" error
(NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, ...) while a later request of the same partition is
already in flight, and that later one accepted, reports the refused request's records delivered: no error,
offset -1001, logged as "N message(s) implicitly acked by subsequent batch success"
(``rd_kafka_dr_implicit_ack``). Apache Kafka accepts that later request's first sequence above 0 whenever it
holds no state for the producer on the partition (a new producer id, a new partition, expired state), so the
records are lost and nothing says so. Two defences, each enough where the other fails:

1. **One request in flight per connection** (``max.in.flight.requests.per.connection=1``, the sinks'
   default): a partition's next request is only sent once the one before it is answered, and a refused one
   is retried before anything behind it, so no later request can be accepted in its place.
   librdkafka's own default, 5, pipelines a partition's requests while those in flight hold at most four
   records together (its per-partition limit is five in-flight *messages*): small batches, a low rate per
   partition, ``linger.ms`` below the round trip.
2. **The tripwire**: every sink producer logs librdkafka's ``eos`` debug context (a few lines per producer
   id and per transaction, none per request) into a private logger, and an implicit ack seen there fails
   the task when it flushes, before its transaction can be committed (exactly once: the transaction is
   aborted and nothing of it is visible; at least once: Spark's retry writes the rows again). librdkafka
   queues the line before it lets go of the records it names; ``flush()`` may return in between (it reads
   its queue's length, then the records left), so one ``poll(0)`` after it serves the line
   (``sink.task._flush``). The logger is a ``TripwireLogger``: no ``logging.disable`` in the worker can
   switch the tripwire off.

``docs/exactly-once.md`` lists these assumptions with the test that proves each
(``tests/integration/test_implicit_ack.py``, through ``tests/support/kafka_proxy.py``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from sparkafka.client.log import LIBRDKAFKA_LOG
from sparkafka.client.security import Access, denied_by
from sparkafka.errors import AuthorizationError, BrokerError, ConfigError, DeliveryError

__all__ = [
    "BATCH_TOO_LARGE_HINT",
    "IN_FLIGHT_SETTINGS",
    "NO_TOPIC_CREATION",
    "REFUSED_RECORD",
    "TOO_LARGE_HINT",
    "Deliveries",
    "TripwireLogger",
    "check_in_flight",
    "librdkafka_int",
    "producer_settings",
    "refuses_record",
]

log = logging.getLogger(__name__)

IN_FLIGHT_SETTINGS = ("max.in.flight.requests.per.connection", "max.in.flight")
"""librdkafka's name for the requests a connection may have unanswered, and its alias."""

TOO_LARGE_HINT = (
    ": the record is larger than kafka.message.max.bytes, librdkafka's limit on one record (default "
    "1000000): raise it, within the topic's max.message.bytes on the broker, or write smaller records"
)
"""What ``produce()``'s own MSG_SIZE_TOO_LARGE means (librdkafka checks each record against
``message.max.bytes`` before queueing it)."""

BATCH_TOO_LARGE_HINT = (
    ": the broker refused a record batch larger than the topic's max.message.bytes; librdkafka fills a batch "
    "up to kafka.batch.size and kafka.message.max.bytes (default 1000000 each) and never splits one the "
    "broker refuses, so set kafka.batch.size (and kafka.message.max.bytes) below the topic's "
    "max.message.bytes, raise the topic's max.message.bytes, or write smaller records"
)
"""What the broker's MESSAGE_TOO_LARGE in a delivery report means: a batch, which may hold many small
records, over the topic's ``max.message.bytes`` (librdkafka 2.16 does not split it and retry)."""

NO_TOPIC_CREATION = "false"
"""``allow.auto.create.topics`` of every producer the sink makes: the sink creates no topic. librdkafka's
producer default, true, has a metadata request for a missing topic (a ``topic`` column's misspelt value, a
deleted intent log) create it, with the broker's defaults, on a broker with ``auto.create.topics.enable=true``
(Apache Kafka's default). The option is refused when set to true (``sink.options``)."""

REFUSED_RECORD = frozenset(
    {"MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_RECORD", "INVALID_TIMESTAMP"}
)
"""librdkafka's names of the errors that refuse a record for what it is: larger than the producer's
``message.max.bytes`` or the topic's ``max.message.bytes``, larger than a segment, invalid for the topic
(a compacted topic's record without a key), a timestamp outside the topic's
``message.timestamp.*.max.ms``. Sent again, the record is refused again: the error is ``permanent``."""

_IMPLICIT_ACK = "IMPLICITACK"
"""The facility of librdkafka's implicit-ack debug line (contexts ``msg`` and ``eos``)."""


def refuses_record(error: Any) -> bool:
    """Whether librdkafka's ``error`` (a ``KafkaError``, or text naming its code) is one of
    ``REFUSED_RECORD``."""
    name = getattr(error, "name", None)
    if callable(name):
        return name() in REFUSED_RECORD
    return any(code in str(error) for code in REFUSED_RECORD)


class Deliveries:
    """What one producer's deliveries said: failed records (delivery reports: errors only) and implicit acks.

    It is the producer's ``on_delivery`` callback and, through ``producer_settings``, the receiver of its
    implicit-ack log lines. ``failure()`` turns what it collected into the error to raise, and forgets it (a
    cached producer outlives a task). A delivery refused by ACL keeps its sentence, raised before the rest;
    a record refused for what it is (``refuses_record``) makes the error ``permanent``.
    """

    def __init__(self, conf: Mapping[str, str]) -> None:
        self.errors: list[str] = []
        self.implicit: list[str] = []
        self.denied: AuthorizationError | None = None
        self.refused = False
        """Whether a failed delivery was a record refused for what it is (``REFUSED_RECORD``)."""
        self._conf = conf

    def __call__(self, error: Any, message: Any) -> None:
        """A delivery report (errors only: ``delivery.report.only.error``)."""
        if error is None:
            return
        try:
            topic = message.topic()
            where = f"{topic}-{message.partition()}"
        except Exception:  # noqa: BLE001 - after a fatal producer error the message can no longer say
            topic, where = "", "a record"  # (SystemError from Message.topic, measured); the error counts
        self.errors.append(f"{where}: {error}")
        self.refused = self.refused or refuses_record(error)
        if self.denied is None:
            access = Access("WRITE", "topic", topic)
            self.denied = denied_by(error, self._conf, access, f"producing to {where}")

    def implicit_ack(self, line: str) -> None:
        """Record an implicit ack that librdkafka logged (``line``, its debug message)."""
        self.implicit.append(line.split("]: ", 1)[-1].split(": ", 1)[-1])

    def failure(self, left: int = 0, timeout_s: float = 0.0) -> BrokerError | None:
        """The error a flush that left ``left`` records undelivered must raise, or None; resets the state."""
        denied, errors, implicit, refused = self.denied, self.errors, self.implicit, self.refused
        self.denied, self.errors, self.implicit, self.refused = None, [], [], False
        if denied is not None:
            return denied
        if implicit:
            return DeliveryError(
                f"librdkafka reported records delivered that the broker never acknowledged ({implicit[0]}"
                f"{f', and {len(implicit) - 1} more' if len(implicit) > 1 else ''}: an 'implicit ack' after "
                "a Produce request refused with a retriable error), so the task fails before anything of "
                "it is committed and Spark's retry writes its rows again; keep "
                "kafka.max.in.flight.requests.per.connection at 1 (the sink's default) to avoid it"
            )
        if errors:
            # The example is the cause: a record refused for what it is (what makes the error permanent)
            # before any other failure, and the records librdkafka purged once the transaction failed,
            # which can be reported before the cause, last. The sort is stable: otherwise in report order.
            errors.sort(key=lambda e: (not refuses_record(e), "_PURGE_" in e))
            # The broker's MESSAGE_TOO_LARGE (the topic's max.message.bytes) arrives here, as a delivery
            # error.
            hint = BATCH_TOO_LARGE_HINT if "MSG_SIZE_TOO_LARGE" in errors[0] else ""
            return DeliveryError(
                f"{len(errors)} record(s) could not be delivered, e.g. {errors[0]}{hint}", permanent=refused
            )
        if left:
            return DeliveryError(f"{left} record(s) still undelivered after {timeout_s:.0f} s")
        return None


class TripwireLogger(logging.Logger):
    """A private logger (not in the logging tree) that takes every record it is given.

    librdkafka's lines reach it through confluent-kafka's ``logger.log(level, ...)``, which asks
    ``isEnabledFor`` first; a ``logging.disable()`` in the Python worker (user code silencing libraries)
    would otherwise drop the implicit-ack line and the "Acquired PID" line ``sink.identity`` reads.
    """

    def isEnabledFor(self, level: int) -> bool:
        """Always: what this logger is given is read by its handlers, not shown by it."""
        return True


class _Tripwire(logging.Handler):
    """Hands librdkafka's implicit-ack lines to ``Deliveries``, and its other lines from ``forward_from`` up
    to ``sparkafka.librdkafka``'s handlers (the rate limit already ran on this producer's logger).

    A transactional producer's warnings stay here (``forward_from`` ERROR): they are retries it rides out
    (NOT_COORDINATOR while a new transaction coordinator loads, a reconnect), and what it cannot ride out
    fails the task in one sentence. A plain producer's warnings go on as before (WARNING), and with a
    ``kafka.debug`` the user set, everything does (DEBUG).
    """

    def __init__(self, deliveries: Deliveries, forward_from: int) -> None:
        super().__init__(logging.DEBUG)
        self._deliveries = deliveries
        self._forward_from = forward_from

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        facility = args[0] if isinstance(args, tuple) and args else None
        if facility == _IMPLICIT_ACK or (facility is None and "implicitly acked" in str(record.msg)):
            self._deliveries.implicit_ack(record.getMessage())
        elif record.levelno >= self._forward_from and (
            self._forward_from == logging.DEBUG or LIBRDKAFKA_LOG.isEnabledFor(record.levelno)
        ):
            LIBRDKAFKA_LOG.callHandlers(record)


def producer_settings(
    conf: Mapping[str, str], deliveries: Deliveries, name: str, transactional: bool = False
) -> dict[str, Any]:
    """The librdkafka settings of a sink producer: ``conf`` (the sink's ``kafka.*``) with its defaults, its
    delivery callback, the ``eos`` debug context and a private logger named ``name`` (see the module
    docstring).

    It asks the broker to create no topic (``NO_TOPIC_CREATION``). The logger is not in the logging tree:
    the ``eos`` lines sparkafka adds go nowhere but the tripwire, and librdkafka's warnings (a transactional
    producer's: its errors) reach ``sparkafka.librdkafka``'s handlers as every client's do; with a
    ``kafka.debug`` of the user's, every line does.
    """
    settings: dict[str, Any] = dict(conf)
    settings["allow.auto.create.topics"] = NO_TOPIC_CREATION
    settings.setdefault("enable.idempotence", "true")
    settings.setdefault("linger.ms", "5")
    if not any(key in settings for key in IN_FLIGHT_SETTINGS):
        settings["max.in.flight.requests.per.connection"] = "1"
    debug = {d.strip() for d in str(settings.get("debug", "")).split(",") if d.strip()}
    if "all" not in debug:
        settings["debug"] = ",".join(sorted(debug | {"eos"}))
    forward_from = logging.DEBUG if debug else logging.ERROR if transactional else logging.WARNING
    logger = TripwireLogger(f"sparkafka.rdkafka.{name}")
    logger.addHandler(_Tripwire(deliveries, forward_from))
    settings["logger"] = logger
    settings["delivery.report.only.error"] = True
    settings["on_delivery"] = deliveries
    return settings


_warned: set[str] = set()

_C_INT = re.compile(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def librdkafka_int(value: str) -> int | None:
    """The integer librdkafka reads from ``value``: C's ``strtol(value, &end, 0)`` on its leading digits
    (``+5``, ``5.0``, ``0x5`` and ``05`` are all 5), None when no digit leads."""
    match = _C_INT.match(value)
    if match is None:
        return None
    sign, digits = match.groups()
    if digits.lower().startswith("0x"):
        number = int(digits, 16)
    elif digits.startswith("0") and len(digits) > 1:
        number = int(digits, 8)
    else:
        number = int(digits)
    return -number if sign == "-" else number


def check_in_flight(kafka: Mapping[str, str], exactly_once: bool) -> None:
    """Refuse (exactly once) or warn about (once per value in this process) a sink's
    ``kafka.max.in.flight.requests.per.connection`` above 1: it reopens librdkafka's implicit ack, which the
    tripwire then turns into failed tasks (see the module docstring). Runs on the driver, at option parsing.
    """
    for key in IN_FLIGHT_SETTINGS:
        value = str(kafka.get(key, "")).strip()
        number = librdkafka_int(value)
        if number is None or number <= 1:
            continue
        if exactly_once:
            raise ConfigError(
                f"option kafka.{key}={value} is not allowed with deliveryGuarantee=exactly_once (allowed: 1, "
                "the default): with more than one request in flight librdkafka can report records "
                "delivered that the broker never wrote (docs/exactly-once.md)"
            )
        if f"{key}={value}" not in _warned:
            _warned.add(f"{key}={value}")
            log.warning(
                "option kafka.%s=%s: with more than one request in flight librdkafka can report records "
                "delivered that the broker never wrote; the sink then fails the task so that Spark writes it "
                "again (duplicates under at_least_once). The sink's default, 1, avoids it",
                key,
                value,
            )
