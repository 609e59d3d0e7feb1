"""Unit tests talk to no broker: constructing a real Kafka client here is an error, not a connection."""

from __future__ import annotations

from typing import Any

import pytest


class _NoClient:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("unit tests make no Kafka clients: inject a fake (see tests/unit/test_clients.py)")


@pytest.fixture(autouse=True)
def no_kafka_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    import confluent_kafka
    import confluent_kafka.admin
    import kafka
    import kafka.net.compat

    for module, name in (
        (confluent_kafka, "Producer"),
        (confluent_kafka, "Consumer"),
        (confluent_kafka.admin, "AdminClient"),
        (kafka, "KafkaAdminClient"),
        (kafka.net.compat, "KafkaNetClient"),
    ):
        monkeypatch.setattr(module, name, _NoClient)
