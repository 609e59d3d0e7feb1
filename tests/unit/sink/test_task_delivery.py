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
