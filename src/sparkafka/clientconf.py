"""Client settings in one place: librdkafka's dotted keys, their kafka-python equivalents, secret masking.

Every client sparkafka creates (driver, executors, the transaction-resume path) gets its settings through
these functions, so SASL and SSL settings reach all of them and secrets are masked the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkafka.errors import ConfigError

__all__ = [
    "against_servers",
    "check_kafka_python_config",
    "is_secret_key",
    "mask_secrets",
    "to_kafka_python_config",
]

_MASK = "********"

# librdkafka key -> kafka-python keyword. Only settings that matter for the protocol-level paths we use
# kafka-python for (raw fetches, EndTxn); kafka-python rejects keys it does not know.
_KAFKA_PYTHON_KEYS = {
    "bootstrap.servers": "bootstrap_servers",
    "client.id": "client_id",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
    "request.timeout.ms": "request_timeout_ms",
    "socket.connection.setup.timeout.ms": "socket_connection_setup_timeout_ms",
    "ssl.endpoint.identification.algorithm": "ssl_check_hostname",
}

# Security settings librdkafka understands but the kafka-python path (EndTxn) could not honour: connecting
# without them would fail late or, worse, connect differently. Rejected up front, by name.
_KAFKA_PYTHON_UNSUPPORTED_PREFIXES = ("sasl.", "ssl.")
_KAFKA_PYTHON_SECURITY_PROTOCOLS = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
_KAFKA_PYTHON_SASL_MECHANISMS = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI"}


def against_servers(conf: Mapping[str, Any]) -> str:
    """``against bootstrap servers HOST:PORT``: how every connection error names where it tried."""
    return f"against bootstrap servers {conf.get('bootstrap.servers')}"


def is_secret_key(key: str) -> bool:
    """True for settings whose values must never be shown: passwords, secrets, private keys, JAAS configs."""
    k = key.lower()
    return any(word in k for word in ("password", "secret", "sasl.jaas.config", "ssl.key.pem", "token"))


def mask_secrets(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``conf`` with every secret value replaced by ``********``, for logs, errors and plans."""
    return {k: (_MASK if is_secret_key(k) and v not in (None, "") else v) for k, v in conf.items()}


def check_kafka_python_config(conf: Mapping[str, str]) -> None:
    """Raise ConfigError, naming the option, for a security setting the kafka-python path cannot use.

    The exactly-once sink commits through kafka-python (EndTxn), so every SASL/SSL setting must reach it
    too; settings other than security ones concern librdkafka's own data path and are left out.
    """
    security = _KAFKA_PYTHON_UNSUPPORTED_PREFIXES
    for key in conf:
        if key.startswith(security) and key not in _KAFKA_PYTHON_KEYS:
            supported = ", ".join(sorted("kafka." + k for k in _KAFKA_PYTHON_KEYS if k.startswith(security)))
            raise ConfigError(
                f"option kafka.{key} cannot be passed to the transaction-commit client (kafka-python) of "
                f"the exactly-once sink; the security settings it supports: {supported}"
            )
    protocol = str(conf.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in _KAFKA_PYTHON_SECURITY_PROTOCOLS:
        raise ConfigError(
            f"option kafka.security.protocol={protocol!r} is not allowed: use one of "
            f"{', '.join(sorted(_KAFKA_PYTHON_SECURITY_PROTOCOLS))}"
        )
    mechanism = str(conf.get("sasl.mechanism", conf.get("sasl.mechanisms", "PLAIN"))).upper()
    if protocol.startswith("SASL") and mechanism not in _KAFKA_PYTHON_SASL_MECHANISMS:
        raise ConfigError(
            f"option kafka.sasl.mechanism={mechanism!r} is not supported by the exactly-once sink's "
            f"transaction-commit client: use one of {', '.join(sorted(_KAFKA_PYTHON_SASL_MECHANISMS))}"
        )


def to_kafka_python_config(conf: Mapping[str, str]) -> dict[str, Any]:
    """kafka-python keyword arguments for a librdkafka-style configuration.

    Every SASL/SSL setting of ``check_kafka_python_config`` is carried over; keys kafka-python has no
    equivalent for and that are not security settings are left out (they concern librdkafka's data path).
    """
    check_kafka_python_config(conf)
    out: dict[str, Any] = {}
    for key, value in conf.items():
        target = _KAFKA_PYTHON_KEYS.get(key)
        if target is None:
            continue
        if target == "ssl_check_hostname":
            out[target] = str(value).lower() == "https"
        elif target == "bootstrap_servers":
            out[target] = [s.strip() for s in str(value).split(",") if s.strip()]
        elif target.endswith("_ms"):
            out[target] = int(value)
        elif target in {"security_protocol", "sasl_mechanism"}:
            out[target] = str(value).upper()
        else:
            out[target] = value
    return out
