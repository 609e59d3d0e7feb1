"""Java client settings a format("kafka") job carries: translated when librdkafka has an equivalent, else
refused together in one sentence that says what to do; and each client gets only the settings it takes."""

from __future__ import annotations

import logging

import pytest

from sparkafka.client import java_settings
from sparkafka.client.conf import (
    CONSUMER_ONLY,
    PRODUCER_ONLY,
    check_librdkafka_settings,
    consumer_settings,
    producer_settings,
)
from sparkafka.client.java_settings import JAVA_SETTINGS, from_java_names, jaas_settings
from sparkafka.errors import ConfigError
from sparkafka.sink.options import parse_sink_options
from sparkafka.source.options import parse_source_options

BOOT = {"kafka.bootstrap.servers": "b:1"}


@pytest.fixture(autouse=True)
def _fresh_log_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(java_settings, "_translated", set())


def test_a_spark_jobs_consumer_settings_are_translated() -> None:
    options = parse_source_options(
        {
            **BOOT,
            "subscribe": "t",
            "kafka.request.timeout.ms": "40000",
            "kafka.fetch.max.wait.ms": "50",
            "kafka.receive.buffer.bytes": "-1",
        }
    )
    assert options.kafka["socket.timeout.ms"] == "40000"  # a Java consumer's request timeout
    assert "request.timeout.ms" not in options.kafka  # librdkafka's is the producer's ack timeout
    assert options.kafka["fetch.wait.max.ms"] == "50"
    assert options.kafka["socket.receive.buffer.bytes"] == "0"  # Java's -1: the system's default


def test_a_spark_jobs_producer_settings_are_translated() -> None:
    options = parse_sink_options(
        {
            **BOOT,
            "topic": "t",
            "kafka.buffer.memory": "33554433",
            "kafka.request.timeout.ms": "40000",
            "kafka.max.request.size": "2000000",
            "kafka.ssl.endpoint.identification.algorithm": "",
        }
    )
    assert options.kafka["queue.buffering.max.kbytes"] == "32769"  # bytes, rounded up to KiB
    assert options.kafka["request.timeout.ms"] == "40000"  # the producer's own: kept
    assert options.kafka["message.max.bytes"] == "2000000"
    assert options.kafka["ssl.endpoint.identification.algorithm"] == "none"
    assert "buffer.memory" not in options.kafka


def test_the_rest_are_refused_at_once_in_one_sentence_saying_what_to_do() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_sink_options(
            {
                **BOOT,
                "topic": "t",
                "kafka.max.block.ms": "60000",
                "kafka.default.api.timeout.ms": "60000",
                "kafka.ssl.truststore.location": "/etc/ts.jks",
                "kafka.interceptor.classes": "com.example.X",
            }
        )
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("Java client settings without a librdkafka equivalent: ")
    for name, advice in [
        ("default.api.timeout.ms", "metadataTimeoutMs"),
        ("interceptor.classes", "remove it"),
        ("max.block.ms", "never blocks a send"),
        ("ssl.truststore.location", "kafka.ssl.ca.location"),
    ]:
        assert f"kafka.{name} (" in message
        assert advice in message


def test_a_setting_given_under_both_names_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"kafka\.fetch\.max\.wait\.ms \(the same setting as kafka\.fetch"):
        from_java_names({"fetch.max.wait.ms": "5", "fetch.wait.max.ms": "7"}, "consumer")


@pytest.mark.parametrize(
    ("jaas", "expected"),
    [
        (
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="etl" '
            'password="s3 cr\\"et";',
            {"sasl.username": "etl", "sasl.password": 's3 cr"et'},
        ),
        (
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=etl password=pw;",
            {"sasl.username": "etl", "sasl.password": "pw"},
        ),
        (
            'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k/etl.keytab" '
            'principal="etl@EXAMPLE.COM";',
            {"sasl.kerberos.keytab": "/k/etl.keytab", "sasl.kerberos.principal": "etl@EXAMPLE.COM"},
        ),
    ],
)
def test_jaas_logins_with_a_librdkafka_equivalent(jaas: str, expected: dict[str, str]) -> None:
    found = jaas_settings(jaas)
    assert not isinstance(found, str)
    assert found[1] == expected


def test_a_jaas_translation_is_logged_once_without_the_password(caplog: pytest.LogCaptureFixture) -> None:
    jaas = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="etl" password="hunter2";'
    )
    with caplog.at_level(logging.INFO, logger="sparkafka.client.java_settings"):
        for _ in range(3):
            out = from_java_names({"sasl.jaas.config": jaas, "sasl.mechanism": "PLAIN"}, "producer")
    assert out == {"sasl.username": "etl", "sasl.password": "hunter2", "sasl.mechanism": "PLAIN"}
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "option kafka.sasl.jaas.config is a Java client setting: its PlainLoginModule is read as "
        "kafka.sasl.username and kafka.sasl.password"
    ]
    assert "hunter2" not in caplog.text


def test_an_oauth_jaas_login_says_what_to_set() -> None:
    jaas = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
    with pytest.raises(ConfigError, match=r"kafka\.sasl\.oauthbearer\.\* \(OAUTHBEARER\)"):
        from_java_names({"sasl.jaas.config": jaas}, "consumer")


def test_every_translation_lands_on_a_setting_librdkafka_takes() -> None:
    for setting in JAVA_SETTINGS.values():
        if setting.name is not None:
            check_librdkafka_settings({setting.name: "1"}, values=False)  # the name is known


def test_a_pkcs12_key_store_type_needs_no_setting_and_a_jks_one_says_how_to_convert() -> None:
    assert from_java_names({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/k.p12"}) == {
        "ssl.keystore.location": "/k.p12"
    }
    with pytest.raises(ConfigError, match=r"PKCS#12 only: convert it \(keytool -importkeystore"):
        from_java_names({"ssl.keystore.type": "JKS"})


def test_each_client_gets_only_its_own_settings() -> None:
    conf = {"bootstrap.servers": "b:1", "acks": "all", "request.timeout.ms": "1", "group.id": "g"}
    assert consumer_settings(conf) == {"bootstrap.servers": "b:1", "group.id": "g"}
    assert producer_settings(conf) == {"bootstrap.servers": "b:1", "acks": "all", "request.timeout.ms": "1"}
    assert not PRODUCER_ONLY & CONSUMER_ONLY


def test_clients_are_made_with_only_their_own_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    import confluent_kafka

    from sparkafka.client.core import new_consumer, new_producer

    made: list[dict[str, object]] = []
    for kind in ("Consumer", "Producer"):
        monkeypatch.setattr(confluent_kafka, kind, lambda settings: made.append(dict(settings)))
    conf = {"bootstrap.servers": "b:1", "acks": "all", "group.id": "g", "fetch.wait.max.ms": "5"}
    new_consumer(conf)
    new_producer(conf)
    consumer, producer = ({k: v for k, v in m.items() if k != "logger"} for m in made)
    assert consumer == {"bootstrap.servers": "b:1", "group.id": "g", "fetch.wait.max.ms": "5"}
    assert producer == {"bootstrap.servers": "b:1", "acks": "all"}
