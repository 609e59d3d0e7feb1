"""The first contact with the brokers: an answer, or one sentence saying why none came, within seconds.

Runs where a query, a write or a CLI tool first needs Kafka (the driver side, the CLI), before the lookups
that retry for ``metadataTimeoutMs`` (30 s by default: right for a cluster that answered once and is
electing leaders, long for an address where nothing ever answered: measured 30-35 s and hundreds of
librdkafka lines, then a raw ``KafkaError{_TRANSPORT}``). Every entry point gives the same sentence.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from sparkafka.client.metadata import AdminMetadata
from sparkafka.errors import BrokerError, ConfigError

__all__ = ["FIRST_CONTACT_S", "first_answer", "no_answer"]

FIRST_CONTACT_S = 5.0
"""How long the first contact may go unanswered before the sentence (``load()``, the sinks, the CLI)."""


def no_answer(conf: Mapping[str, Any], timeout_s: float, reason: str) -> BrokerError:
    """The one sentence for brokers that did not answer: where, how long, what to check, and why."""
    return BrokerError(
        f"listing topics failed against bootstrap servers {conf.get('bootstrap.servers')} (option "
        f"kafka.bootstrap.servers): no Kafka broker answered within {timeout_s:g} s; is it running, and is "
        f"the address right? (librdkafka: {reason or 'no answer'})"
    )


def first_answer(
    conf: Mapping[str, str],
    timeout_s: float,
    *,
    admin: Any = None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Return once a broker answers a metadata request; else raise, one sentence, within ``timeout_s``.

    The client asking logs nothing (``log_level`` 0): the sentence replaces librdkafka's "Connection
    refused" lines. ``admin`` is the AdminClient to ask (default: the process's cached one; tests pass a
    fake), ``clock`` the clock the bound is kept with (tests pass a fake).

    Raises:
        ConfigError: librdkafka refused a setting when the client was made (a CA file that is not there).
        BrokerError: nothing answered within ``timeout_s`` (``no_answer``).
    """
    try:
        metadata = AdminMetadata({**conf, "log_level": "0"}, timeout_s, admin=admin, clock=clock)
    except Exception as e:  # noqa: BLE001 - confluent-kafka's KafkaException: librdkafka refused a setting
        error: Any = e.args[0] if e.args else e
        said = error.str() if callable(getattr(error, "str", None)) else str(error)
        raise ConfigError(  # e.g. a kafka.ssl.ca.location that is not there: at start, not at a task
            f"the Kafka client could not be made with these kafka.* settings: {said}"
        ) from None
    try:
        metadata.topics()
    except BrokerError as e:
        reason = str(e.__cause__ or e)
        inner: Any = e.__cause__.args[0] if e.__cause__ is not None and e.__cause__.args else None
        if callable(getattr(inner, "str", None)):  # the KafkaError of a KafkaException: its own words
            reason = inner.str()
        raise no_answer(conf, timeout_s, reason) from None
