"""SASL/SSL settings reach every Kafka client sparkafka creates, on the driver, executors and EndTxn path.

The client classes are replaced by recorders (no broker here): each code path that builds a client is run
with secure settings, and the settings each client was built with are checked.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

SECURE = {
    "bootstrap.servers": "broker:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "etl",
    "sasl.password": "canary-password",
    "ssl.ca.location": "/etc/kafka/ca.pem",
}

built: list[tuple[str, dict[str, Any]]] = []


class _Topic:
    error = None
    partitions: ClassVar[dict[int, Any]] = {}


class _Metadata:
    def __init__(self, topics: list[str]) -> None:
        self.topics = dict.fromkeys(topics, _Topic())
        self.brokers = {1: None}


class Recorder:
    """Stands in for Producer, Consumer, AdminClient and KafkaNetClient; remembers its settings."""

    kind = "client"

    def __init__(self, conf: dict[str, Any] | None = None, **kwargs: Any) -> None:
        built.append((self.kind, dict(conf) if conf is not None else dict(kwargs)))

    def list_topics(self, *args: Any, **kwargs: Any) -> _Metadata:
        return _Metadata(["_sparkafka-intents-p"])

    def flush(self, *args: Any) -> int:
        return 0

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


class _Delivered:
    def offset(self) -> int:
        return 0


class Producer(Recorder):
    kind = "producer"

    def produce(self, *args: Any, on_delivery: Any = None, **kwargs: Any) -> None:
        if on_delivery is not None:  # what a broker's acknowledgement gives the intent log: an offset
            on_delivery(None, _Delivered())


class Consumer(Recorder):
    kind = "consumer"


class AdminClient(Recorder):
    kind = "admin"


class KafkaNetClient(Recorder):
    kind = "kafka-python"


@pytest.fixture(autouse=True)
def recorders(monkeypatch: pytest.MonkeyPatch) -> None:
    import confluent_kafka
    import confluent_kafka.admin
    import kafka.net.compat

    import sparkafka.client.core

    built.clear()
    monkeypatch.setattr(sparkafka.client.core, "_cache", {})  # every client is built anew under the recorders
    monkeypatch.setattr(sparkafka.client.core, "_closers", {})
    monkeypatch.setattr(confluent_kafka, "Producer", Producer)
    monkeypatch.setattr(confluent_kafka, "Consumer", Consumer)
    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", AdminClient)
    monkeypatch.setattr(kafka.net.compat, "KafkaNetClient", KafkaNetClient)


def _assert_secure(kind: str, conf: dict[str, Any]) -> None:
    if kind == "kafka-python":
        assert conf["security_protocol"] == "SASL_SSL"
        assert conf["sasl_mechanism"] == "SCRAM-SHA-512"
        assert conf["sasl_plain_username"] == "etl"
        assert conf["sasl_plain_password"] == "canary-password"
        assert conf["ssl_cafile"] == "/etc/kafka/ca.pem"
    else:
        missing = {k: v for k, v in SECURE.items() if conf.get(k) != v}
        assert not missing, f"{kind} built without {sorted(missing)}"


def test_driver_clients_get_the_security_settings() -> None:
    from sparkafka.ops.lag import fetch_group_lag
    from sparkafka.source.admin import SourceMetadata
    from sparkafka.source.commits import KafkaCommitClient

    SourceMetadata(SECURE)
    KafkaCommitClient(SECURE, "group")
    from sparkafka.errors import ConfigError

    with pytest.raises(ConfigError, match="does not exist on broker:9093"):  # the recorder knows no topics
        fetch_group_lag(SECURE, "group", "orders")
    assert [k for k, _ in built] == ["admin", "consumer"]  # lag reuses the process's admin client
    for kind, conf in built:
        _assert_secure(kind, conf)


def test_executor_clients_get_the_security_settings() -> None:
    from sparkafka.sink.task import _plain_producer
    from sparkafka.source.fetch import _fetcher

    _fetcher(SECURE, "auto")  # the native fetch is plaintext only: SASL_SSL reads with confluent-kafka
    _plain_producer(SECURE, "at_least_once")
    assert [k for k, _ in built] == ["consumer", "producer"]
    for kind, conf in built:
        _assert_secure(kind, conf)


def test_exactly_once_commit_path_clients_get_the_security_settings() -> None:
    from sparkafka.errors import TransactionError
    from sparkafka.sink.identity import open_transactional_producer
    from sparkafka.sink.intents import IntentLog, IntentRecord
    from sparkafka.sink.txn_control import TxnController

    with pytest.raises(TransactionError):  # the recorder logs no producer id; the build is what counts
        open_transactional_producer(SECURE, "p-0")
    log = IntentLog(SECURE, "p")
    log.append(IntentRecord("q", 0, "done", (), 1))
    TxnController(SECURE)
    kinds = [k for k, _ in built]
    assert kinds == ["producer", "admin", "producer", "kafka-python"], kinds
    for kind, conf in built:
        _assert_secure(kind, conf)
