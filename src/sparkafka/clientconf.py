"""Client settings in one place: librdkafka's dotted keys, their kafka-python equivalents, secret masking.

Every client sparkafka creates (driver, executors, the transaction-resume path) gets its settings through
these functions, so SASL and SSL settings reach all of them and secrets are masked the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["is_secret_key", "mask_secrets", "to_kafka_python_config"]

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
    "socket.connection.setup.timeout.ms": "socket_connection_timeout_ms",
}


def is_secret_key(key: str) -> bool:
    """True for settings whose values must never be shown: passwords, secrets, private keys, JAAS configs."""
    k = key.lower()
    return any(word in k for word in ("password", "secret", "sasl.jaas.config", "ssl.key.pem", "token"))


def mask_secrets(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``conf`` with every secret value replaced by ``********``, for logs, errors and plans."""
    return {k: (_MASK if is_secret_key(k) and v not in (None, "") else v) for k, v in conf.items()}


def to_kafka_python_config(conf: Mapping[str, str]) -> dict[str, Any]:
    """kafka-python keyword arguments for a librdkafka-style configuration.

    Keys kafka-python has no equivalent for are left out (they concern librdkafka's own data path).
    """
    out: dict[str, Any] = {}
    for key, value in conf.items():
        target = _KAFKA_PYTHON_KEYS.get(key)
        if target is None:
            continue
        if target == "bootstrap_servers":
            out[target] = [s.strip() for s in str(value).split(",") if s.strip()]
        elif target.endswith("_ms"):
            out[target] = int(value)
        elif target in {"security_protocol", "sasl_mechanism"}:
            out[target] = str(value).upper()
        else:
            out[target] = value
    return out
