"""What a sink producer's deliveries prove (``sink.delivery``): failed deliveries, the implicit-ack tripwire,
the producer's settings and the in-flight option check."""

from __future__ import annotations

import logging

import pytest

from sparkafka.client.log import LIBRDKAFKA_LOG
from sparkafka.errors import AuthorizationError, ConfigError, DeliveryError
from sparkafka.sink.delivery import Deliveries, check_in_flight, librdkafka_int, producer_settings
from sparkafka.sink.task import _flush

IMPLICIT = (
    "127.0.0.1:9092/1: out [2] 1 message(s) implicitly acked by subsequent batch success (msgids 1..1, "
    "last acked 2)"
)
IMPLICIT_LINE = ((logging.DEBUG, f"IMPLICITACK [thrd:b:9092/1]: {IMPLICIT}"),)


class Message:
    def topic(self) -> str:
        return "out"

    def partition(self) -> int:
        return 2


class Unreadable:
    def topic(self) -> str:
        raise SystemError("<method 'topic' of 'Message' objects> returned a result with an exception set")

    def partition(self) -> int:
        return 0


def test_failed_deliveries_are_recorded_with_where_they_went() -> None:
    delivery = Deliveries({})
    delivery(None, Message())
    delivery("MSG_SIZE_TOO_LARGE", Message())
    assert delivery.errors == ["out-2: MSG_SIZE_TOO_LARGE"]


def test_a_fatal_error_is_kept_when_the_message_cannot_name_its_partition() -> None:
    delivery = Deliveries({})
    delivery("_FENCED: producer fenced", Unreadable())
    assert delivery.errors == ["a record: _FENCED: producer fenced"]


class Flushing:
    """A producer whose flush delivers nothing more (every report already arrived) and serves ``lines`` of
    librdkafka's log; with ``late``, its flush returns first and the next poll serves them (librdkafka's
    flush reads its queue's length, then the records left: a line queued in between is left for later)."""

    def __init__(
        self, log: logging.Logger | None = None, lines: tuple[tuple[int, str], ...] = (), late: bool = False
    ) -> None:
        self.log, self.lines, self.late = log, lines, late

    def _serve(self) -> None:
        # As confluent-kafka serves librdkafka's log queue: logger.log(level, "%s [%s] %s", fac, name, buf)
        lines, self.lines = self.lines, ()
        for level, line in lines:
            assert self.log is not None
            facility, _, message = line.partition(" ")
            self.log.log(level, "%s [%s] %s", facility, "rdkafka#producer-1", message)

    def flush(self, timeout: float) -> int:
        if not self.late:
            self._serve()
        return 0

    def poll(self, timeout: float) -> int:
        self._serve()
        return 0


def test_a_refused_delivery_fails_one_flush_not_every_later_one() -> None:
    """The at-least-once producer and its delivery report live as long as the Python worker (cached): a
    refusal reported once must not fail the worker's later flushes, after the ACL was granted."""
    delivery = Deliveries({"security.protocol": "SASL_SSL", "sasl.username": "etl"})
    delivery(29, Message())  # TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(AuthorizationError, match="may not WRITE topic out"):
        _flush(Flushing(), delivery)
    _flush(Flushing(), delivery)  # nothing new went wrong
    assert delivery.denied is None
    assert delivery.errors == []


@pytest.mark.parametrize("late", [False, True])
def test_an_implicit_ack_logged_during_the_flush_fails_it_once_naming_the_partition(late: bool) -> None:
    """The tripwire: librdkafka's IMPLICITACK debug line, served through the producer's own logger by the
    flush or just after it (``late``), fails that flush (and only that one: a cached producer's next flush
    is judged afresh)."""
    deliveries = Deliveries({})
    settings = producer_settings({"bootstrap.servers": "b:9092"}, deliveries, "t")
    with pytest.raises(
        DeliveryError, match=r"never acknowledged \(out \[2\] 1 message\(s\) implicitly acked"
    ):
        _flush(Flushing(settings["logger"], IMPLICIT_LINE, late=late), deliveries)
    _flush(Flushing(), deliveries)


def test_logging_disable_in_the_worker_does_not_switch_the_tripwire_off() -> None:
    """User code in the same Python worker silencing every library (``logging.disable``) must not drop the
    implicit-ack line: the producer's logger takes every record."""
    deliveries = Deliveries({})
    settings = producer_settings({"bootstrap.servers": "b:9092"}, deliveries, "t")
    logging.disable(logging.CRITICAL)
    try:
        with pytest.raises(DeliveryError, match="implicitly acked"):
            _flush(Flushing(settings["logger"], IMPLICIT_LINE), deliveries)
    finally:
        logging.disable(logging.NOTSET)


@pytest.mark.parametrize(
    ("conf", "transactional", "shown"),
    [
        ({}, False, ["GETPID retrying", "FAIL down"]),
        ({}, True, ["FAIL down"]),
        ({"debug": "msg"}, True, ["IDEMPSTATE change", "GETPID retrying", "FAIL down"]),
    ],
)
def test_the_tripwire_passes_librdkafkas_lines_on_as_the_producer_and_the_user_ask(
    conf: dict[str, str], transactional: bool, shown: list[str]
) -> None:
    """A plain producer's warnings and errors reach ``sparkafka.librdkafka`` as before; a transactional
    one's errors only (its warnings are retries it rides out); with the user's own ``kafka.debug``, every
    line. The eos debug lines sparkafka adds for itself stay private."""
    deliveries = Deliveries({})
    logger = producer_settings(conf, deliveries, "t", transactional)["logger"]
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage().replace(" [rdkafka#producer-1]", ""))

    keep = Keep(logging.DEBUG)
    LIBRDKAFKA_LOG.addHandler(keep)
    try:
        lines = (
            (logging.DEBUG, "IDEMPSTATE change"),
            (logging.WARNING, "GETPID retrying"),
            (logging.ERROR, "FAIL down"),
        )
        _flush(Flushing(logger, lines), deliveries)
    finally:
        LIBRDKAFKA_LOG.removeHandler(keep)
    assert seen == shown


def test_sink_producers_keep_one_request_in_flight_and_log_eos_unless_told_otherwise() -> None:
    deliveries = Deliveries({})
    settings = producer_settings({"bootstrap.servers": "b:9092", "debug": "broker"}, deliveries, "t")
    assert settings["max.in.flight.requests.per.connection"] == "1"
    assert settings["debug"] == "broker,eos"
    assert settings["on_delivery"] is deliveries
    assert settings["delivery.report.only.error"] is True
    given = producer_settings({"max.in.flight": "3", "debug": "all"}, deliveries, "t")
    assert "max.in.flight.requests.per.connection" not in given
    assert given["max.in.flight"] == "3"
    assert given["debug"] == "all"


@pytest.mark.parametrize(
    ("value", "number"),
    [
        ("5", 5),
        ("+5", 5),
        ("5.0", 5),
        ("0x5", 5),
        ("05", 5),
        (" 12ms", 12),
        ("1", 1),
        ("-3", -3),
        ("x", None),
    ],
)
def test_settings_are_read_as_librdkafka_reads_integers(value: str, number: int | None) -> None:
    assert librdkafka_int(value) == number


@pytest.mark.parametrize("value", ["+5", "5.0", "0x5", "2"])
def test_exactly_once_refuses_every_spelling_of_more_than_one_request_in_flight(value: str) -> None:
    with pytest.raises(ConfigError, match="is not allowed with deliveryGuarantee=exactly_once"):
        check_in_flight({"max.in.flight.requests.per.connection": value}, exactly_once=True)


@pytest.mark.parametrize("key", ["max.in.flight.requests.per.connection", "max.in.flight"])
def test_more_than_one_request_in_flight_is_refused_exactly_once_and_warned_about_otherwise(
    key: str, caplog: pytest.LogCaptureFixture
) -> None:
    check_in_flight({key: "1"}, exactly_once=True)
    with pytest.raises(ConfigError, match=rf"option kafka\.{key}=2 is not allowed .*allowed: 1"):
        check_in_flight({key: "2"}, exactly_once=True)
    with caplog.at_level(logging.WARNING, "sparkafka.sink.delivery"):
        check_in_flight({key: "4"}, exactly_once=False)
        check_in_flight({key: "4"}, exactly_once=False)
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [f"option kafka.{key}=4"]
