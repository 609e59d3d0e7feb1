"""Client settings in one place: librdkafka's dotted keys, their kafka-python equivalents, secret masking.

Every client sparkafka creates (driver, executors, the transaction-resume path) gets its settings through
these functions, so SASL and SSL settings reach all of them and secrets are masked the same way everywhere.
``kafka.*`` options are checked against librdkafka itself when they are parsed
(``check_librdkafka_settings``), so a misspelt property is one sentence with a "did you mean", not a client's
traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from sparkafka.client.java_settings import JAVA_SETTINGS, jaas_settings
from sparkafka.errors import ConfigError

__all__ = [
    "CONSUMER_ONLY",
    "LIBRDKAFKA_PROPERTIES",
    "PRODUCER_ONLY",
    "against_servers",
    "check_kafka_python_config",
    "check_librdkafka_settings",
    "close_librdkafka_property",
    "consumer_settings",
    "idempotence_conflicts",
    "is_secret_key",
    "mask_secrets",
    "producer_settings",
    "to_kafka_python_config",
]

_PROPERTY_NAMES = """
    acks allow.auto.create.topics api.version.fallback.ms api.version.request
    api.version.request.timeout.ms auto.commit.enable auto.commit.interval.ms auto.offset.reset
    batch.num.messages batch.size bootstrap.servers broker.address.family broker.address.ttl
    broker.version.fallback builtin.features check.crcs client.dns.lookup client.id client.rack
    compression.codec compression.level compression.type connections.max.idle.ms
    consume.callback.max.messages coordinator.query.interval.ms debug delivery.report.only.error
    delivery.timeout.ms enable.auto.commit enable.auto.offset.store enable.gapless.guarantee
    enable.idempotence enable.metrics.push enable.partition.eof enable.random.seed
    enable.sasl.oauthbearer.unsecure.jwt enable.ssl.certificate.verification enabled_events
    fetch.error.backoff.ms fetch.max.bytes fetch.message.max.bytes fetch.min.bytes
    fetch.queue.backoff.ms fetch.wait.max.ms group.id group.instance.id group.protocol
    group.protocol.type group.remote.assignor heartbeat.interval.ms https.ca.location https.ca.pem
    internal.termination.signal isolation.level linger.ms log.connection.close log.queue log.thread.name
    log_level max.in.flight max.in.flight.requests.per.connection max.partition.fetch.bytes
    max.poll.interval.ms max.poll.records message.copy.max.bytes message.max.bytes
    message.send.max.retries message.timeout.ms metadata.broker.list metadata.max.age.ms
    metadata.recovery.rebootstrap.trigger.ms metadata.recovery.strategy offset.store.method
    offset.store.path offset.store.sync.interval.ms partition.assignment.strategy partitioner
    plugin.library.paths produce.offset.report queue.buffering.backpressure.threshold
    queue.buffering.max.kbytes queue.buffering.max.messages queue.buffering.max.ms
    queued.max.messages.kbytes queued.min.messages queuing.strategy receive.message.max.bytes
    reconnect.backoff.jitter.ms reconnect.backoff.max.ms reconnect.backoff.ms request.required.acks
    request.timeout.ms retries retry.backoff.max.ms retry.backoff.ms sasl.kerberos.keytab
    sasl.kerberos.kinit.cmd sasl.kerberos.min.time.before.relogin sasl.kerberos.principal
    sasl.kerberos.service.name sasl.mechanism sasl.mechanisms sasl.oauthbearer.assertion.algorithm
    sasl.oauthbearer.assertion.claim.aud sasl.oauthbearer.assertion.claim.exp.seconds
    sasl.oauthbearer.assertion.claim.iss sasl.oauthbearer.assertion.claim.jti.include
    sasl.oauthbearer.assertion.claim.nbf.seconds sasl.oauthbearer.assertion.claim.sub
    sasl.oauthbearer.assertion.file sasl.oauthbearer.assertion.jwt.template.file
    sasl.oauthbearer.assertion.private.key.file sasl.oauthbearer.assertion.private.key.passphrase
    sasl.oauthbearer.assertion.private.key.pem sasl.oauthbearer.client.credentials.client.id
    sasl.oauthbearer.client.credentials.client.secret sasl.oauthbearer.client.id
    sasl.oauthbearer.client.secret sasl.oauthbearer.config sasl.oauthbearer.extensions
    sasl.oauthbearer.grant.type sasl.oauthbearer.metadata.authentication.type sasl.oauthbearer.method
    sasl.oauthbearer.scope sasl.oauthbearer.sub.claim.name sasl.oauthbearer.token.endpoint.url
    sasl.password sasl.username security.protocol session.timeout.ms share.acknowledgement.mode
    socket.blocking.max.ms socket.connection.setup.timeout.ms socket.keepalive.enable socket.max.fails
    socket.nagle.disable socket.receive.buffer.bytes socket.send.buffer.bytes socket.timeout.ms
    ssl.ca.certificate.stores ssl.ca.location ssl.ca.pem ssl.certificate.location ssl.certificate.pem
    ssl.cipher.suites ssl.crl.location ssl.curves.list ssl.endpoint.identification.algorithm
    ssl.engine.id ssl.engine.location ssl.key.location ssl.key.password ssl.key.pem
    ssl.keystore.location ssl.keystore.password ssl.providers ssl.sigalgs.list statistics.interval.ms
    sticky.partitioning.linger.ms topic.blacklist topic.metadata.propagation.max.ms
    topic.metadata.refresh.fast.cnt topic.metadata.refresh.fast.interval.ms
    topic.metadata.refresh.interval.ms topic.metadata.refresh.sparse transaction.timeout.ms
    transactional.id
"""
LIBRDKAFKA_PROPERTIES = frozenset(_PROPERTY_NAMES.split())
"""librdkafka's configuration properties, global and topic-level (2.16, from
``rd_kafka_conf_properties_show``; the C API's callback and pointer properties left out), for "did you mean"
only: whether a setting is accepted is asked of the installed librdkafka itself
(``check_librdkafka_settings``), so a newer librdkafka's properties pass before this list has them."""

_PRODUCER_ONLY_NAMES = """
    acks batch.num.messages batch.size compression.codec compression.level compression.type
    delivery.report.only.error delivery.timeout.ms enable.gapless.guarantee enable.idempotence linger.ms
    message.send.max.retries message.timeout.ms partitioner produce.offset.report
    queue.buffering.backpressure.threshold queue.buffering.max.kbytes queue.buffering.max.messages
    queue.buffering.max.ms queuing.strategy request.required.acks request.timeout.ms retries
    sticky.partitioning.linger.ms transaction.timeout.ms transactional.id
"""
PRODUCER_ONLY = frozenset(_PRODUCER_ONLY_NAMES.split())
"""librdkafka's producer-only settings (``P`` in its CONFIGURATION.md, 2.12): a consumer given one logs a
CONFWARN line ("is a producer property and will be ignored by this consumer instance") and ignores it."""

_CONSUMER_ONLY_NAMES = """
    auto.commit.enable auto.commit.interval.ms auto.offset.reset check.crcs consume.callback.max.messages
    coordinator.query.interval.ms enable.auto.commit enable.auto.offset.store enable.partition.eof
    fetch.error.backoff.ms fetch.max.bytes fetch.message.max.bytes fetch.min.bytes fetch.queue.backoff.ms
    fetch.wait.max.ms group.id group.instance.id group.protocol group.protocol.type group.remote.assignor
    heartbeat.interval.ms isolation.level max.partition.fetch.bytes max.poll.interval.ms max.poll.records
    offset.store.method offset.store.path offset.store.sync.interval.ms partition.assignment.strategy
    queued.max.messages.kbytes queued.min.messages session.timeout.ms share.acknowledgement.mode
"""
CONSUMER_ONLY = frozenset(_CONSUMER_ONLY_NAMES.split())
"""librdkafka's consumer-only settings (``C``): a producer (or an AdminClient) warns of each, ignoring it."""


def idempotence_conflicts(conf: Mapping[str, str]) -> list[str]:
    """The producer settings in ``conf`` an idempotent (or transactional) librdkafka producer refuses.

    librdkafka refuses them when the producer is made (``Failed to create producer: `acks` must be set
    to `all` when `enable.idempotence` is true``), which for a sink is in every task, again on each retry:
    checked where the options are parsed instead. Each as ``kafka.<name>=<value> (<what it needs>)``.
    """
    found = []
    for name in ("acks", "request.required.acks"):
        if name in conf and str(conf[name]).strip().lower() not in ("all", "-1"):
            found.append(f"kafka.{name}={conf[name]} (needs all)")
    for name in ("max.in.flight.requests.per.connection", "max.in.flight"):
        value = str(conf.get(name, "")).strip()
        if value.isdigit() and int(value) > 5:
            found.append(f"kafka.{name}={value} (needs 5 or less)")
    for name in ("retries", "message.send.max.retries"):
        if str(conf.get(name, "")).strip() == "0":
            found.append(f"kafka.{name}=0 (needs 1 or more)")
    if "queuing.strategy" in conf and str(conf["queuing.strategy"]).strip().lower() != "fifo":
        found.append(f"kafka.queuing.strategy={conf['queuing.strategy']} (needs fifo)")
    return found


def consumer_settings(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` without the producer-only settings (a sink's ``kafka.acks`` meant for its producers)."""
    return {k: v for k, v in conf.items() if k not in PRODUCER_ONLY}


def producer_settings(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` without the consumer-only settings."""
    return {k: v for k, v in conf.items() if k not in CONSUMER_ONLY}


LIBRDKAFKA_CONFIGURATION = "https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md"

_NOT_SETTABLE = {
    "logger": "librdkafka's logs go to the Python logger sparkafka.librdkafka (rate-limited): configure that "
    "logger instead",
    "key.deserializer": "sparkafka reads keys and values as bytes: decode them in Spark",
    "value.deserializer": "sparkafka reads keys and values as bytes: decode them in Spark",
    "key.serializer": "sparkafka writes the key and value columns as bytes: encode them in Spark",
    "value.serializer": "sparkafka writes the key and value columns as bytes: encode them in Spark",
}
"""Settings that look like Kafka client settings but cannot be string options here, with what to do."""

_PYTHON_CALLBACKS = {"error_cb", "throttle_cb", "stats_cb", "oauth_cb", "on_delivery", "on_commit"}
"""confluent-kafka's own settings, which take a Python callable: not settable from a string option."""

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
    return any(word in k for word in (
        "password", "secret", "sasl.jaas.config", "key.pem", "token", "passphrase", "private.key",
        "sasl.oauthbearer.config",
    ))  # fmt: skip


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


def close_librdkafka_property(name: str) -> str | None:
    """The librdkafka property ``name`` is, or is a likely misspelling of (``fetch.max.byte``); else None."""
    if name in LIBRDKAFKA_PROPERTIES:
        return name
    close = difflib.get_close_matches(name, sorted(LIBRDKAFKA_PROPERTIES), n=1, cutoff=0.8)
    return close[0] if close else None


def check_librdkafka_settings(
    conf: Mapping[str, str], options: Iterable[str] = (), *, values: bool = True
) -> None:
    """Raise ConfigError naming the ``kafka.*`` option librdkafka would refuse, with what to use instead.

    Each setting is offered to the installed librdkafka exactly as a client's construction offers it
    (``rd_kafka_conf_set``): an unknown name gets a "did you mean" from ``LIBRDKAFKA_PROPERTIES`` (or, for
    ``kafka.subscribe``, from ``options``, sparkafka's own option names); with ``values``, a value of the
    wrong type or out of range is refused too, in librdkafka's words (secrets masked). Fast (about 0.01 ms a
    setting) and no client is made: each check adds a setting librdkafka refuses after the one checked,
    so the construction always stops at the configuration step, before any thread or socket exists.
    """
    known = {o.lower(): o for o in options}
    for key, value in conf.items():
        refusal = _librdkafka_refusal(key, str(value))
        if refusal is None:
            continue
        kind, why = refusal
        if kind == "unknown":
            hint = known.get(key) or _kafka_hint(key)
            advice = f": did you mean {hint}?" if hint else f" (see {LIBRDKAFKA_CONFIGURATION})"
            raise ConfigError(f"option kafka.{key} is not a librdkafka setting{advice}")
        if kind == "unsettable":
            raise ConfigError(f"option kafka.{key} cannot be set as an option: {why}")
        if values:
            shown = mask_secrets({key: value})[key]
            if is_secret_key(key) and value:
                why = why.replace(value, str(shown))
            raise ConfigError(f"option kafka.{key}={shown!r} is refused by librdkafka: {why}")


def _kafka_hint(key: str) -> str | None:
    close = close_librdkafka_property(key)
    return f"kafka.{close}" if close else None


def _librdkafka_refusal(key: str, value: str) -> tuple[str, str] | None:
    """(``unknown``, ``unsettable`` or ``value``; why) if librdkafka refuses ``key=value``, else None."""
    if key in _NOT_SETTABLE or key in _PYTHON_CALLBACKS:
        return "unsettable", _NOT_SETTABLE.get(key, "confluent-kafka takes a Python callable there")
    java = JAVA_SETTINGS.get(key)
    if key == "sasl.jaas.config" or (java is not None and java.instead):
        # Reached only where settings were not translated first (``from_java_names``): say the same.
        return "unsettable", java.instead if java is not None and java.instead else str(jaas_settings(""))
    text = _offer(key, value)
    if text is None:
        return None
    if text.startswith("No such configuration property"):
        return "unknown", text
    if text.startswith("Internal property") or "dedicated" in text:
        return "unsettable", "a pointer or callback of librdkafka's C API"
    return "value", text


def _offer(key: str, value: str) -> str | None:
    """What librdkafka answers to ``key=value`` when it refuses it; None when it takes it.

    A second setting that librdkafka refuses (the stopper) follows the one offered: confluent-kafka applies
    settings in order and stops at the first refusal, so the construction never gets past the
    configuration step. Should a future confluent-kafka apply them in another order, the stopper is refused
    first and every setting passes: the check fails open, and the client's construction reports as before.
    """
    from confluent_kafka import KafkaException, cimpl

    # confluent_kafka.Producer is cimpl.Producer; named here so that tests' stand-ins for clients (which
    # replace confluent_kafka.Producer) leave this check, which never makes a client, as it is.
    stopper = "message.max.bytes" if key == "log_level" else "log_level"
    try:
        client = cimpl.Producer({key: value, stopper: "refused"})
    except KafkaException as e:
        error = e.args[0]
        text = str(error.str() if callable(getattr(error, "str", None)) else error).strip()
    except (TypeError, ValueError) as e:  # confluent-kafka's own checks of its Python-level settings
        text = str(e).strip()
    else:  # cannot happen (the stopper is refused); a client made anyway is let go at once
        del client
        return None
    return None if f'"{stopper}"' in text else text
