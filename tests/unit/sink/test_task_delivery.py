"""The sink task's delivery report: a failed delivery is recorded even when the message cannot say where."""

from __future__ import annotations

from sparkafka.sink.task import _Delivery


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
    delivery = _Delivery({})
    delivery(None, Message())
    delivery("MSG_SIZE_TOO_LARGE", Message())
    assert delivery.errors == ["out-2: MSG_SIZE_TOO_LARGE"]


def test_a_fatal_error_is_kept_when_the_message_cannot_name_its_partition() -> None:
    delivery = _Delivery({})
    delivery("_FENCED: producer fenced", Unreadable())
    assert delivery.errors == ["a record: _FENCED: producer fenced"]


class Flushing:
    """A producer whose flush delivers nothing more (every report already arrived)."""

    def flush(self, timeout: float) -> int:
        return 0


def test_a_refused_delivery_fails_one_flush_not_every_later_one() -> None:
    """The at-least-once producer and its delivery report live as long as the Python worker (cached): a
    refusal reported once must not fail the worker's later flushes, after the ACL was granted."""
    import pytest

    from sparkafka.errors import AuthorizationError
    from sparkafka.sink.task import _flush

    delivery = _Delivery({"security.protocol": "SASL_SSL", "sasl.username": "etl"})
    delivery(29, Message())  # TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(AuthorizationError, match="may not WRITE topic out"):
        _flush(Flushing(), delivery)
    _flush(Flushing(), delivery)  # nothing new went wrong
    assert delivery.denied is None
    assert delivery.errors == []
