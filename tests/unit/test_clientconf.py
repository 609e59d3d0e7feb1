from __future__ import annotations

import pytest

from sparkafka.client.conf import (
    _KAFKA_PYTHON_KEYS,
    check_kafka_python_config,
    is_secret_key,
    mask_secrets,
    to_kafka_python_config,
)
from sparkafka.errors import ConfigError


def test_secret_keys() -> None:
    for key in ("sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret", "my.PASSWORD.x"):
        assert is_secret_key(key)
    for key in ("bootstrap.servers", "sasl.username", "group.id"):
        assert not is_secret_key(key)


def test_mask_secrets_keeps_other_values() -> None:
    masked = mask_secrets({"sasl.password": "hunter2", "sasl.username": "bob", "ssl.key.password": ""})
    assert masked == {"sasl.password": "********", "sasl.username": "bob", "ssl.key.password": ""}


def test_kafka_python_translation() -> None:
    conf = to_kafka_python_config(
        {
            "bootstrap.servers": "a:1, b:2",
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "plain",
            "sasl.username": "u",
            "sasl.password": "p",
            "request.timeout.ms": "5000",
            "linger.ms": "5",
        }
    )
    assert conf == {
        "bootstrap_servers": ["a:1", "b:2"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
        "request_timeout_ms": 5000,
    }


def test_kafka_python_translation_of_ssl_and_scram() -> None:
    conf = to_kafka_python_config(
        {
            "bootstrap.servers": "broker:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "scram-sha-512",
            "sasl.username": "app",
            "sasl.password": "canary-pw",
            "ssl.ca.location": "/etc/ca.pem",
            "ssl.certificate.location": "/etc/client.pem",
            "ssl.key.location": "/etc/client.key",
            "ssl.key.password": "canary-key",
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    assert conf["sasl_mechanism"] == "SCRAM-SHA-512"
    assert conf["sasl_plain_password"] == "canary-pw"
    assert conf["ssl_cafile"] == "/etc/ca.pem"
    assert conf["ssl_certfile"] == "/etc/client.pem"
    assert conf["ssl_keyfile"] == "/etc/client.key"
    assert conf["ssl_password"] == "canary-key"
    assert conf["ssl_check_hostname"] is False


def test_kafka_python_client_accepts_every_translated_key() -> None:
    # The translation must only produce names kafka-python's connection manager knows (an unknown one
    # would be ignored or rejected, and a security setting silently lost).
    from kafka.net.manager import KafkaConnectionManager

    accepted = set(KafkaConnectionManager.DEFAULT_CONFIG)
    produced = set(_KAFKA_PYTHON_KEYS.values())
    assert produced <= accepted, produced - accepted


def test_security_settings_the_commit_client_cannot_use_are_rejected_by_name() -> None:
    for key, value in (
        ("sasl.oauthbearer.client.secret", "canary-secret"),
        ("sasl.kerberos.keytab", "/etc/app.keytab"),
        ("ssl.keystore.location", "/etc/app.p12"),
    ):
        with pytest.raises(ConfigError, match=f"option kafka.{key} cannot be passed") as e:
            check_kafka_python_config({"bootstrap.servers": "b:1", key: value})
        assert "canary" not in str(e.value)
    with pytest.raises(ConfigError, match=r"kafka.sasl.mechanism='OAUTHBEARER' is not supported"):
        check_kafka_python_config({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"})
    with pytest.raises(ConfigError, match=r"kafka.security.protocol='TLS' is not allowed"):
        check_kafka_python_config({"security.protocol": "tls"})


def test_exactly_once_sink_checks_security_settings_at_start() -> None:
    from sparkafka.sink.options import parse_sink_options

    base = {"kafka.bootstrap.servers": "b:1", "topic": "t", "transactionalIdPrefix": "p"}
    parse_sink_options({**base, "deliveryGuarantee": "exactly_once", "kafka.security.protocol": "SASL_SSL"})
    with pytest.raises(ConfigError, match=r"kafka.sasl.oauthbearer.method cannot be passed"):
        parse_sink_options(
            {**base, "deliveryGuarantee": "exactly_once", "kafka.sasl.oauthbearer.method": "oidc"}
        )
