"""Java client settings a ``format("kafka")`` job carries, made librdkafka's where they have an equivalent.

Runs wherever options are parsed (the driver, Spark's Python workers, the CLI). A Spark job moved from
``format("kafka")`` carries the Java client's settings as ``kafka.*`` options; librdkafka knows some under
other names or units, has no equivalent of others. ``from_java_names`` translates the first kind (logged
once per process) and refuses the second together, in one sentence saying for each what to do instead.
The table is ``JAVA_SETTINGS``; ``sasl.jaas.config`` is read by ``jaas_settings``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from sparkafka.errors import ConfigError

__all__ = ["JAVA_SETTINGS", "Client", "JavaSetting", "from_java_names", "jaas_settings"]

log = logging.getLogger(__name__)

Client = Literal["consumer", "producer"]
"""Which client ``kafka.*`` settings are for: the source's consumers, or the sink's producers."""


@dataclass(frozen=True)
class JavaSetting:
    """How a Java client setting a ``format("kafka")`` job carries maps onto librdkafka.

    Either ``name`` (librdkafka's setting of the same meaning, its value converted by ``value``), or
    ``instead`` (what to do, for a setting librdkafka has no equivalent of), or neither: librdkafka needs no
    setting for it (``value`` may refuse a value it cannot take). ``client``: only for that client's
    settings.
    """

    name: str | None = None
    value: Callable[[str], str] | None = None
    instead: str | None = None
    client: Client | None = None


def _kbytes(value: str) -> str:
    """Java's ``buffer.memory`` (bytes) as librdkafka's ``queue.buffering.max.kbytes`` (KiB, rounded up)."""
    if not value.strip().isdigit():
        raise ConfigError(f"option kafka.buffer.memory={value!r} must be a whole number of bytes")
    return str(max(1, -(-int(value) // 1024)))


def _os_buffer(value: str) -> str:
    """Java's -1 for "the operating system's default" socket buffer is librdkafka's 0."""
    return "0" if value.strip() == "-1" else value


def _identification(value: str) -> str:
    """Java turns host name verification off with an empty value, librdkafka with ``none``."""
    return value if value.strip() else "none"


def _keystore_type(value: str) -> str:
    if value.strip().upper() == "PKCS12":
        return value  # librdkafka reads kafka.ssl.keystore.location as PKCS#12: nothing to set
    raise ConfigError(
        f"option kafka.ssl.keystore.type={value!r}: librdkafka reads a key store as PKCS#12 only: convert "
        "it (keytool -importkeystore -deststoretype PKCS12), or give PEM files as "
        "kafka.ssl.certificate.location and kafka.ssl.key.location"
    )


_REMOVE_TLS = "librdkafka (OpenSSL) has no such setting and negotiates TLS 1.2 or 1.3 itself: remove it"
_REMOVE_JAVA_SECURITY = "a Java security provider setting, with no meaning to librdkafka: remove it"
_NO_HANDLERS = (
    "librdkafka runs no Java callback handlers: for OAUTHBEARER set kafka.sasl.oauthbearer.method=oidc "
    "with kafka.sasl.oauthbearer.client.id, kafka.sasl.oauthbearer.client.secret and "
    "kafka.sasl.oauthbearer.token.endpoint.url"
)
_LOGIN_REFRESH = "librdkafka refreshes logins itself: remove it"
_TRUSTSTORE = (
    "librdkafka reads CA certificates as PEM: export them (keytool -exportcert -rfc -keystore FILE) and set "
    "kafka.ssl.ca.location"
)
_METRICS = (
    "remove it: sparkafka's metrics are sparkafka.source_metrics, sparkafka.sink_metrics and the Prometheus "
    "exporter (librdkafka's own: kafka.statistics.interval.ms)"
)
_PARTITIONER = "use the sink's option partitioner (default, fixed or roundrobin) instead"

JAVA_SETTINGS: Mapping[str, JavaSetting] = {
    # Same meaning under another name, or another unit or spelling of the value.
    "fetch.max.wait.ms": JavaSetting("fetch.wait.max.ms"),
    "max.request.size": JavaSetting("message.max.bytes"),
    "receive.buffer.bytes": JavaSetting("socket.receive.buffer.bytes", _os_buffer),
    "send.buffer.bytes": JavaSetting("socket.send.buffer.bytes", _os_buffer),
    "buffer.memory": JavaSetting("queue.buffering.max.kbytes", _kbytes),
    # A Java consumer's request timeout; librdkafka's request.timeout.ms is the producer's ack timeout.
    "request.timeout.ms": JavaSetting("socket.timeout.ms", client="consumer"),
    "ssl.endpoint.identification.algorithm": JavaSetting(
        "ssl.endpoint.identification.algorithm", _identification
    ),
    "ssl.truststore.certificates": JavaSetting("ssl.ca.pem"),
    "ssl.keystore.certificate.chain": JavaSetting("ssl.certificate.pem"),
    "ssl.keystore.key": JavaSetting("ssl.key.pem"),
    "ssl.keystore.type": JavaSetting(value=_keystore_type),
    # No equivalent: what to do instead.
    "max.block.ms": JavaSetting(
        instead="librdkafka never blocks a send: remove it (the sink waits up to kafka.delivery.timeout.ms "
        "for each record's delivery)"
    ),
    "default.api.timeout.ms": JavaSetting(
        instead="set sparkafka's option metadataTimeoutMs, the bound on each lookup, instead"
    ),
    "metadata.max.idle.ms": JavaSetting(
        instead="remove it (librdkafka refreshes the metadata every kafka.topic.metadata.refresh.interval.ms)"
    ),
    "socket.connection.setup.timeout.max.ms": JavaSetting(
        instead="remove it (librdkafka has kafka.socket.connection.setup.timeout.ms only)"
    ),
    "exclude.internal.topics": JavaSetting(
        instead="remove it: sparkafka's topic patterns never match Kafka's internal topics"
    ),
    "interceptor.classes": JavaSetting(instead="librdkafka runs no Java interceptors: remove it"),
    "ssl.truststore.location": JavaSetting(instead=_TRUSTSTORE),
    "ssl.truststore.password": JavaSetting(instead=_TRUSTSTORE),
    "ssl.truststore.type": JavaSetting(instead=_TRUSTSTORE),
    "ssl.protocol": JavaSetting(instead=_REMOVE_TLS),
    "ssl.enabled.protocols": JavaSetting(instead=_REMOVE_TLS),
    **{
        name: JavaSetting(instead=_REMOVE_JAVA_SECURITY)
        for name in (
            "ssl.keymanager.algorithm",
            "ssl.trustmanager.algorithm",
            "ssl.secure.random.implementation",
            "ssl.provider",
            "ssl.engine.factory.class",
            "security.providers",
        )
    },
    **{
        name: JavaSetting(instead=_NO_HANDLERS)
        for name in (
            "sasl.login.callback.handler.class",
            "sasl.client.callback.handler.class",
            "sasl.login.class",
        )
    },
    **{
        f"sasl.login.{name}": JavaSetting(instead=_LOGIN_REFRESH)
        for name in (
            "refresh.window.factor",
            "refresh.window.jitter",
            "refresh.min.period.seconds",
            "refresh.buffer.seconds",
            "connect.timeout.ms",
            "read.timeout.ms",
            "retry.backoff.ms",
            "retry.backoff.max.ms",
        )
    },
    "sasl.kerberos.ticket.renew.window.factor": JavaSetting(instead=_LOGIN_REFRESH),
    "sasl.kerberos.ticket.renew.jitter": JavaSetting(instead=_LOGIN_REFRESH),
    **{
        name: JavaSetting(instead=_METRICS)
        for name in (
            "metric.reporters",
            "metrics.num.samples",
            "metrics.sample.window.ms",
            "metrics.recording.level",
            "auto.include.jmx.reporter",
        )
    },
    "partitioner.class": JavaSetting(instead=_PARTITIONER),
    "partitioner.ignore.keys": JavaSetting(instead=_PARTITIONER),
    "partitioner.adaptive.partitioning.enable": JavaSetting(instead=_PARTITIONER),
    "partitioner.availability.timeout.ms": JavaSetting(instead=_PARTITIONER),
}
"""Java client settings a ``format("kafka")`` job may pass as ``kafka.*``, and what each becomes here
(``from_java_names``). ``sasl.jaas.config`` is read by ``jaas_settings``. Names of librdkafka's that Java
shares with the same meaning (``acks``, ``linger.ms``, ``batch.size``, ``security.protocol``, ...) pass as
they are."""

_JAAS_MODULE = re.compile(r"^\s*([\w.$]+)\s+(?:required|requisite|sufficient|optional)\b(.*?);?\s*$", re.S)
_JAAS_OPTION = re.compile(r'([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+))')
_JAAS_LOGINS = {
    "PlainLoginModule": {"username": "sasl.username", "password": "sasl.password"},
    "ScramLoginModule": {"username": "sasl.username", "password": "sasl.password"},
    "Krb5LoginModule": {"keyTab": "sasl.kerberos.keytab", "principal": "sasl.kerberos.principal"},
}


def jaas_settings(jaas: str) -> tuple[str, dict[str, str]] | str:
    """The librdkafka settings of a ``sasl.jaas.config``: (its login module, the settings), else why not.

    PLAIN and SCRAM logins (``PlainLoginModule``, ``ScramLoginModule``) give ``sasl.username`` and
    ``sasl.password``; a Kerberos login from a key tab (``Krb5LoginModule``) ``sasl.kerberos.keytab`` and
    ``sasl.kerberos.principal``. Any other module, or one without those options, gives the sentence that
    says what to set instead (a ``str``).
    """
    match = _JAAS_MODULE.match(jaas)
    module = match.group(1).rpartition(".")[2] if match else ""
    wanted = _JAAS_LOGINS.get(module)
    if match is None or wanted is None:
        return (
            "librdkafka has no JAAS: set kafka.sasl.mechanism with kafka.sasl.username and "
            "kafka.sasl.password (PLAIN, SCRAM), kafka.sasl.kerberos.keytab and "
            "kafka.sasl.kerberos.principal (GSSAPI) or kafka.sasl.oauthbearer.* (OAUTHBEARER)"
        )
    found = {
        m.group(1): m.group(2).replace('\\"', '"') if m.group(2) is not None else m.group(3)
        for m in _JAAS_OPTION.finditer(match.group(2))
    }
    if not all(option in found for option in wanted):
        settings = " and ".join(f"kafka.{v}" for v in wanted.values())
        return f"its {module} names no {' and '.join(wanted)}: set {settings}"
    return module, {setting: found[option] for option, setting in wanted.items()}


_translated: set[tuple[str, str]] = set()


def _log_once(java: str, what: str) -> None:
    if (java, what) not in _translated:
        _translated.add((java, what))
        log.info("option kafka.%s is a Java client setting: %s", java, what)


def from_java_names(conf: Mapping[str, str], client: Client | None = None) -> dict[str, str]:
    """``conf`` with the Java client settings a ``format("kafka")`` job carries made librdkafka's.

    Runs wherever options are parsed (driver or worker). Each setting with an equivalent
    (``JAVA_SETTINGS``, ``jaas_settings``) is renamed and its value converted, and the translation is logged
    once per process (never a value: they may be secrets). The settings without one are refused together,
    in one sentence that says for each what to do instead; so is a setting given under both names.
    ``client``: which client the settings are for (the source's consumers, the sink's producers).

    Raises:
        ConfigError: Java settings librdkafka has no equivalent of, or given twice.
    """
    out = dict(conf)
    refused: list[str] = []
    for java in sorted(conf):
        if java == "sasl.jaas.config":
            jaas = jaas_settings(conf[java])
            if isinstance(jaas, str):
                refused.append(f"kafka.{java} ({jaas})")
                continue
            module, settings = jaas
            twice = sorted(k for k in settings if k in conf)
            if twice:
                refused.append(f"kafka.{java} (also given as kafka.{', kafka.'.join(twice)}: keep one)")
                continue
            del out[java]
            out.update(settings)
            _log_once(java, f"its {module} is read as kafka.{' and kafka.'.join(settings)}")
            continue
        setting = JAVA_SETTINGS.get(java)
        if setting is None or (setting.client is not None and setting.client != client):
            continue
        if setting.instead is not None:
            refused.append(f"kafka.{java} ({setting.instead})")
            continue
        if setting.name is not None and setting.name != java and setting.name in conf:
            refused.append(f"kafka.{java} (the same setting as kafka.{setting.name}, also given: keep one)")
            continue
        value = setting.value(conf[java]) if setting.value is not None else conf[java]
        del out[java]
        if setting.name is None:
            _log_once(java, "librdkafka needs no setting for it")
            continue
        out[setting.name] = value
        if setting.name != java or value != conf[java]:
            # A converted value is shown (a size, a spelling: never a secret, which no conversion touches).
            unit = "" if value == conf[java] else f" = {value}"
            _log_once(java, f"read as kafka.{setting.name}{unit}")
    if refused:
        raise ConfigError(
            f"Java client setting{'s' if len(refused) > 1 else ''} without a librdkafka equivalent: "
            + "; ".join(refused)
        )
    return out
