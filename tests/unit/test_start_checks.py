"""What can be checked at start is: producer settings idempotence refuses, a sink topic that does not
exist, a streaming sink's brokers (once per process, so a restart under a running query is ridden out)."""

from __future__ import annotations

from typing import Any

import pytest

from sparkafka.client import contact
from sparkafka.client.conf import idempotence_conflicts
from sparkafka.errors import ConfigError
from sparkafka.sink import at_start
from sparkafka.sink.options import parse_sink_options

BASE = {"kafka.bootstrap.servers": "b:1", "topic": "out"}
EXACTLY_ONCE = {**BASE, "deliveryGuarantee": "exactly_once", "transactionalIdPrefix": "p"}


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ({"kafka.acks": "1"}, "kafka.acks=1 (needs all)"),
        ({"kafka.request.required.acks": "0"}, "kafka.request.required.acks=0 (needs all)"),
        ({"kafka.enable.idempotence": "false"}, "kafka.enable.idempotence=false (needs true)"),
        ({"kafka.max.in.flight.requests.per.connection": "10"}, "per.connection=10 (needs 5 or less)"),
        ({"kafka.retries": "0"}, "kafka.retries=0 (needs 1 or more)"),
        ({"kafka.queuing.strategy": "lifo"}, "kafka.queuing.strategy=lifo (needs fifo)"),
    ],
)
def test_exactly_once_refuses_what_transactions_cannot_take_at_start(
    setting: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_sink_options({**EXACTLY_ONCE, **setting})
    said = str(raised.value)
    assert said.startswith("deliveryGuarantee=exactly_once writes in Kafka transactions")
    assert named in said


def test_at_least_once_with_acks_1_runs_without_idempotence_as_javas_producer_does() -> None:
    options = parse_sink_options({**BASE, "kafka.acks": "1"})
    assert options.kafka["enable.idempotence"] == "false"
    assert "enable.idempotence" not in parse_sink_options({**BASE, "kafka.acks": "all"}).kafka
    with pytest.raises(ConfigError, match=r"kafka\.enable\.idempotence=true conflicts with kafka\.acks=1"):
        parse_sink_options({**BASE, "kafka.acks": "1", "kafka.enable.idempotence": "true"})


def test_settings_idempotence_takes_are_no_conflict() -> None:
    ok = {
        "acks": "-1",
        "max.in.flight.requests.per.connection": "5",
        "retries": "3",
        "queuing.strategy": "fifo",
    }
    assert idempotence_conflicts(ok) == []


class _Admin:
    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics
        self.asked = 0

    def poll(self, timeout: float) -> int:
        return 0

    def list_topics(self, timeout: float) -> Any:
        self.asked += 1
        topics = {
            name: type("T", (), {"partitions": dict.fromkeys(range(n)), "error": None})()
            for name, n in self.topics.items()
        }
        return type("M", (), {"topics": topics})()


def test_a_missing_sink_topic_is_one_sentence_at_start() -> None:
    options = parse_sink_options({**BASE, "topic": "orders-out"})
    with pytest.raises(ConfigError) as raised:
        at_start.check_sink_topic(options, admin=_Admin({"orders": 2}))
    assert str(raised.value) == (
        "option topic=orders-out: no such topic on b:1 (the sink does not create topics: create it first, "
        "e.g. sparkafka topics create orders-out --bootstrap-servers b:1)"
    )
    at_start.check_sink_topic(options, admin=_Admin({"orders-out": 1}))
    at_start.check_sink_topic(parse_sink_options({"kafka.bootstrap.servers": "b:1"}), admin=_Admin({}))


def test_a_streaming_sink_checks_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contact, "_contacted", set())
    monkeypatch.setattr(at_start, "_topics_found", set())
    admin = _Admin({"out": 1})
    options = parse_sink_options(BASE)
    for _ in range(3):  # three micro-batches' writers in one planner process
        contact.first_contact(options.kafka, {}, 30_000, make_admin=lambda _: admin, once=True)
        at_start.check_sink_topic(options, admin=admin, once=True)
    assert admin.asked == 2  # one first contact, one topic lookup
