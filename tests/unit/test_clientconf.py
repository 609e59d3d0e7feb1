from __future__ import annotations

from sparkafka.clientconf import is_secret_key, mask_secrets, to_kafka_python_config


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
