"""The first contact with the brokers: an answer, or one sentence saying why none came, within seconds.

Runs where a query, a write, a pipeline or a CLI tool first needs Kafka (the driver side, the CLI), before
the lookups that retry for ``metadataTimeoutMs``. librdkafka answers a refused login, an untrusted
certificate or a plaintext client at a TLS port alike: "Broker transport failure" once its wait is over.
The reason comes only through its error callback, served by ``poll``, so the first contact asks in short
slices and reads the callback between them: a wrong password is a sentence in about half a second
(``client.security.contact_failure``), not "no broker answered" after five. Measured against Apache Kafka
4.4 (tests/integration/test_secure_mistakes.py): a wrong password, an unknown user, a mechanism the brokers
do not enable (``_AUTHENTICATION``), an untrusted CA and a host name the certificate does not list (``_SSL``,
both "certificate verify failed"), no or an expired client certificate at a mutual-TLS port (``_TRANSPORT``
with a TLS alert), and a plaintext client at a TLS port (no error at all: the broker closes the
connection), which ``security.speaks_tls`` finds after a second without an answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from sparkafka.client.core import admin_settings
from sparkafka.client.log import logged
from sparkafka.client.security import contact_failure, speaks_tls
from sparkafka.errors import AuthenticationError, BrokerError, ConfigError

__all__ = ["FIRST_CONTACT_S", "SLICE_S", "first_answer", "first_contact"]

FIRST_CONTACT_S = 5.0
"""How long the first contact may go unanswered before the sentence (``load()``, the sinks, the CLI tools,
whose ``--timeout`` replaces it)."""

SLICE_S = 0.25
"""How long each ask waits before the error callback is read (a refused login takes about 0.3 s)."""

TLS_PROBE_AFTER_S = 1.0
"""A plaintext client with no answer by then asks, once, whether the port speaks TLS (``speaks_tls``)."""


def _make_admin(settings: Mapping[str, Any]) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(logged(settings))


def first_answer(
    conf: Mapping[str, str],
    timeout_s: float,
    *,
    make_admin: Callable[[Mapping[str, Any]], Any] = _make_admin,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    probe_tls: Callable[[Mapping[str, Any]], bool] = speaks_tls,
) -> None:
    """Return once a broker answers a metadata request; else raise, one sentence, within ``timeout_s``.

    The client asking is made for this alone (not the cached one the lookups then use: its error callback
    is this call's) and logs nothing (``log_level`` 0): the sentence replaces librdkafka's lines.
    ``make_admin``, ``clock``, ``sleep`` and ``probe_tls`` (whether the server speaks TLS) are injectable.

    Raises:
        ConfigError: librdkafka refused a setting when the client was made (a CA file that is not there,
            a key its password does not open).
        AuthenticationError: the brokers refused the login or the TLS handshake, or speak TLS to a
            plaintext client.
        BrokerError: nothing answered within ``timeout_s``.
    """
    errors: list[Any] = []
    settings = {**admin_settings(conf), "log_level": "0", "error_cb": errors.append}
    try:
        admin = make_admin(settings)
    except Exception as e:  # noqa: BLE001 - confluent-kafka's KafkaException: librdkafka refused a setting
        error: Any = e.args[0] if e.args else e
        said = error.str() if callable(getattr(error, "str", None)) else str(error)
        raise ConfigError(
            f"the Kafka client could not be made with these kafka.* settings: {_key_hint(said)}"
        ) from None
    began = clock()
    deadline = began + timeout_s
    plaintext = not str(conf.get("security.protocol", "PLAINTEXT")).upper().endswith("SSL")
    probed = False
    last: Exception | None = None
    while True:
        asked = clock()
        wait = max(min(SLICE_S, deadline - asked), 0.001)
        try:
            admin.list_topics(timeout=wait)
        except Exception as e:  # noqa: BLE001 - KafkaException until a broker answers; the callback says why
            last = e
        else:
            return
        admin.poll(0)  # serves the error callback
        failure = contact_failure(conf, errors)
        if failure is not None:
            raise failure
        if plaintext and not probed and clock() - began >= TLS_PROBE_AFTER_S:
            probed = True
            if probe_tls(conf):  # a TLS listener closes a plaintext connection without a word
                raise _speaks_tls(conf)
        if clock() >= deadline:
            break
        sleep(max(0.0, asked + wait - clock()))  # an ask refused at once: wait out its slice
    if plaintext and not probed and probe_tls(conf):
        raise _speaks_tls(conf)
    servers = conf.get("bootstrap.servers")
    inner: Any = last.args[0] if last is not None and last.args else last
    reason = inner.str() if callable(getattr(inner, "str", None)) else str(inner)
    raise BrokerError(
        f"listing topics failed against bootstrap servers {servers} (option kafka.bootstrap.servers): "
        f"no Kafka broker answered within {timeout_s:g} s; is it running, and is the address right? "
        f"(librdkafka: {reason})"
    )


def _speaks_tls(conf: Mapping[str, str]) -> AuthenticationError:
    protocol = str(conf.get("security.protocol", "PLAINTEXT")).upper()
    return AuthenticationError(
        f"bootstrap server {conf.get('bootstrap.servers')} speaks TLS but kafka.security.protocol is "
        f"{protocol}: set it to SSL (mutual TLS) or SASL_SSL, with kafka.ssl.ca.location"
    )


def _key_hint(said: str) -> str:
    """Librdkafka's words for a client it could not make, with the likely cause of a key it cannot open."""
    if "ssl.key.location failed" in said:
        return (
            f"{said} (the private key kafka.ssl.key.location could not be read: a wrong "
            "kafka.ssl.key.password, or not a PEM key)"
        )
    return said


_contacted: set[tuple[tuple[str, str], ...]] = set()


def first_contact(
    kafka: Mapping[str, str],
    options: Mapping[str, Any],
    metadata_timeout_ms: int,
    *,
    make_admin: Any = None,
    once: bool = False,
) -> None:
    """Ask the brokers for their topics once; raise one sentence if none answers or they refuse the client.

    Runs where a query or write first needs Kafka, before the lookups that retry for ``metadataTimeoutMs``
    (30 s by default, right for a cluster that answered once and is electing leaders or restarting a
    broker, long for an address where nothing ever answered: measured 35 s and 581 librdkafka lines for a
    batch read from a wrong port). The bound is ``FIRST_CONTACT_S``, or ``metadataTimeoutMs`` when the user
    set that option (a cluster known to answer slowly, say after an OAuth token fetch). A refused login or
    TLS handshake is its own sentence at once (``client.contact.first_answer``). Once this succeeds, the
    lookups that follow keep their full retries.

    Args:
        kafka: the librdkafka settings (``kafka.*`` without the prefix).
        options: the raw options, to tell whether ``metadataTimeoutMs`` was set.
        metadata_timeout_ms: ``metadataTimeoutMs`` as parsed.
        make_admin: makes the AdminClient to ask (tests pass a fake).
        once: ask only if these settings have not had an answer in this process yet. For the streaming
            sink, whose writer Spark makes every micro-batch in a planner process it keeps (and for an
            update-mode query's micro-batches): a broker restarting under a running query is ridden out by
            the retries, not failed within 5 s.
    """
    key = tuple(sorted((str(k), str(v)) for k, v in kafka.items()))
    if once and key in _contacted:
        return

    explicit = any(str(k).lower() == "metadatatimeoutms" for k in options)
    timeout_s = metadata_timeout_ms / 1000 if explicit else min(FIRST_CONTACT_S, metadata_timeout_ms / 1000)
    if make_admin is None:
        first_answer(kafka, timeout_s)
    else:
        first_answer(kafka, timeout_s, make_admin=make_admin)
    _contacted.add(key)
