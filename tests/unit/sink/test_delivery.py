"""What a sink producer's deliveries prove (``sink.delivery``): failed deliveries, the implicit-ack tripwire,
the producer's settings and the in-flight option check."""

from __future__ import annotations

import logging

import pytest

from sparkafka.client.log import LIBRDKAFKA_LOG
from sparkafka.errors import AuthorizationError, ConfigError, DeliveryError
from sparkafka.sink.delivery import Deliveries, check_in_flight, producer_settings
from sparkafka.sink.task import _flush

IMPLICIT = (
    "127.0.0.1:9092/1: out [2] 1 message(s) implicitly acked by subsequent batch success (msgids 1..1, "
    "last acked 2)"
)


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
    """A producer whose flush delivers nothing more (every report already arrived)."""

    def __init__(self, log: logging.Logger | None = None, lines: tuple[tuple[int, str], ...] = ()) -> None:
        self.log, self.lines = log, lines

    def flush(self, timeout: float) -> int:
        # As confluent-kafka serves librdkafka's log queue: logger.log(level, "%s [%s] %s", fac, name, buf)
        for level, line in self.lines:
            assert self.log is not None
            facility, _, message = line.partition(" ")
            self.log.log(level, "%s [%s] %s", facility, "rdkafka#producer-1", message)
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


def test_an_implicit_ack_logged_during_the_flush_fails_it_once_naming_the_partition() -> None:
    """The tripwire: librdkafka's IMPLICITACK debug line, served by the flush through the producer's own
    logger, fails that flush (and only that one: a cached producer's next flush is judged afresh)."""
    deliveries = Deliveries({})
    settings = producer_settings({"bootstrap.servers": "b:9092"}, deliveries, "t")
    producer = Flushing(settings["logger"], ((logging.DEBUG, f"IMPLICITACK [thrd:b:9092/1]: {IMPLICIT}"),))
    with pytest.raises(
        DeliveryError, match=r"never acknowledged \(out \[2\] 1 message\(s\) implicitly acked"
    ):
        _flush(producer, deliveries)
    _flush(Flushing(), deliveries)


def test_the_tripwire_passes_librdkafkas_errors_on_and_keeps_its_warnings_and_debug_lines() -> None:
    deliveries = Deliveries({})
    logger = producer_settings({"bootstrap.servers": "b:9092"}, deliveries, "t")["logger"]
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    keep = Keep(logging.DEBUG)
    LIBRDKAFKA_LOG.addHandler(keep)
    try:
        lines = (
            (logging.DEBUG, "IDEMPSTATE Idempotent producer state change"),
            (logging.WARNING, "GETPID Failed to acquire transactional PID: Not coordinator: retrying"),
            (logging.ERROR, "FAIL down"),
        )
        _flush(Flushing(logger, lines), deliveries)
    finally:
        LIBRDKAFKA_LOG.removeHandler(keep)
    assert seen == ["FAIL [rdkafka#producer-1] down"]


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
