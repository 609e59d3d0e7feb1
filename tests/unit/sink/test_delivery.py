"""What a sink producer's deliveries prove (``sink.delivery``): failed deliveries, the implicit-ack tripwire,
the producer's settings and the in-flight option check."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


# -- which failed record a failure names (finding 6 of the refusal review) -----------------------------------

_REFUSED = ("MSG_SIZE_TOO_LARGE", "INVALID_RECORD", "INVALID_TIMESTAMP", "RECORD_LIST_TOO_LARGE")
_OTHER = ("_MSG_TIMED_OUT", "NOT_ENOUGH_REPLICAS", "_PURGE_QUEUE", "_PURGE_INFLIGHT")


@given(st.lists(st.sampled_from(_REFUSED + _OTHER), min_size=1, max_size=6))
def test_a_failure_names_a_refused_record_first_then_anything_but_a_purge(codes: list[str]) -> None:
    """Whatever order librdkafka reports in, the example the error gives is its cause: a record refused for
    what it is when there is one (the error is then ``permanent``, and must not read as a timeout), else a
    failure other than the purges an aborted transaction reports."""
    deliveries = Deliveries({})
    for code in codes:
        deliveries(code, Message())
    failure = deliveries.failure()
    assert isinstance(failure, DeliveryError)
    example = str(failure).split(", e.g. out-2: ", 1)[1]
    refused = [c for c in codes if c in _REFUSED]
    if refused:
        assert failure.permanent
        assert example.startswith(refused[0])
    elif any("_PURGE_" not in c for c in codes):
        assert not example.startswith("_PURGE_")
    assert f"{len(codes)} record(s) could not be delivered" in str(failure)


def test_a_permanent_failure_does_not_name_an_earlier_timeout() -> None:
    """The reviewer's case: a timeout reported before the refusal."""
    deliveries = Deliveries({})
    deliveries("_MSG_TIMED_OUT: Local: Message timed out", Message())
    deliveries("INVALID_TIMESTAMP: Broker: Invalid timestamp", Message())
    failure = deliveries.failure()
    assert failure is not None
    assert failure.permanent
    assert "e.g. out-2: INVALID_TIMESTAMP" in str(failure)
    assert "timed out" not in str(failure)


def test_the_brokers_size_refusal_names_the_batch_size_against_the_topics_limit() -> None:
    """librdkafka sends batches up to kafka.batch.size and never splits one the broker refuses: small
    records fail together when the topic's max.message.bytes is below the batch size."""
    deliveries = Deliveries({})
    deliveries("MSG_SIZE_TOO_LARGE: Broker: Message size too large", Message())
    failure = str(deliveries.failure())
    assert "record batch larger than the topic's max.message.bytes" in failure
    assert "kafka.batch.size" in failure
    assert "kafka.message.max.bytes" in failure
