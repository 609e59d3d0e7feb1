"""The fault-injecting proxy itself (``tests/support/kafka_proxy.py``): what each action does to a real
client and a real broker. ``answer``, ``slow`` and ``delay`` are also the instruments of
test_implicit_ack.py and test_intent_log_faults.py; ``drop`` is shown here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from tests.support.kafka import Kafka
from tests.support.kafka_proxy import PRODUCE, ProxiedKafka, Rule

pytestmark = pytest.mark.xdist_group("proxied-kafka")  # one test process starts the proxied broker


@pytest.fixture
def broker(proxied_kafka: ProxiedKafka) -> Iterator[Kafka]:
    yield Kafka({"bootstrap.servers": proxied_kafka.bootstrap_servers})
    proxied_kafka.proxy.clear()


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_dropped_answer_is_a_write_the_client_retries(
    proxied_kafka: ProxiedKafka, broker: Kafka, idempotent: bool
) -> None:
    """``drop``: the broker writes the request, the client never hears so and sends it again. A plain
    producer writes the record twice; an idempotent one's retry is recognised (same sequence) and written
    once."""
    from confluent_kafka import Producer

    topic = broker.topic()
    rule = proxied_kafka.proxy.add(
        Rule(lambda r: r.api_key == PRODUCE and any(tp.topic == topic for tp in r.partitions), "drop")
    )
    producer = Producer({**broker.conf, "enable.idempotence": idempotent, "acks": "all", "linger.ms": 0})
    errors: list[object] = []
    producer.produce(topic, b"once", on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(30) == 0
    assert errors == [None]
    assert len(rule.fired) == 1
    assert len(proxied_kafka.proxy.produce_requests(topic)) == 2  # the dropped one and its retry
    assert Counter(r.value for r in broker.committed(topic, settle_s=0)) == {b"once": 1 if idempotent else 2}
