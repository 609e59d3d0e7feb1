"""Learning a librdkafka transactional producer's producer id and epoch.

confluent-kafka's Python API does not expose them, yet the driver needs both to finish the transaction
from another process. With ``debug=eos`` and a ``logger``, librdkafka logs ``Acquired PID{Id:N,Epoch:E}``
after ``init_transactions`` (measured with confluent-kafka 2.16). This is the one place that relies on it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sparkafka.client.conf import against_servers
from sparkafka.client.core import new_producer
from sparkafka.client.log import LIBRDKAFKA_LOG
from sparkafka.client.security import Access, denied_by
from sparkafka.errors import ConfigError, TransactionError
from sparkafka.sink.delivery import NO_TOPIC_CREATION, TripwireLogger

__all__ = [
    "PROVEN_LIBRDKAFKA",
    "check_transaction_protocol",
    "open_transactional_producer",
    "parse_acquired_pid",
]

_ACQUIRED = re.compile(r"Acquired PID\{Id:(\d+),Epoch:(\d+)\}")

PROVEN_LIBRDKAFKA = (2, 16)
"""The librdkafka line (major, minor) the exactly-once sink is proven with, and pinned to (pyproject.toml).

The driver finishes a task's transaction from another process by (producer id, epoch) with EndTxn below v5,
which makes the broker run it under transaction version 1 (KIP-890 part 1). A librdkafka that adopts
transaction version 2 (Produce v12+, EndTxn v5+: no release up to 2.16 does) would have the broker end
transactions with an epoch bump of their own, and the driver's EndTxn answers would stop saying what became
of them (``txn_control.classify``). librdkafka tells no Python caller which request versions it sends, so
the line is checked instead: a newer one is refused until it is proven (``check_transaction_protocol``)."""


def check_transaction_protocol(libversion: Callable[[], tuple[str, int]] | None = None) -> str | None:
    """The sentence refusing exactly once with this process's librdkafka, or None when it is proven.

    Runs where exactly once starts (the sink's options, on the driver) and where its producers are made
    (each task): an executor may have another confluent-kafka than the driver. ``libversion`` is
    confluent-kafka's (injectable for tests): ``("2.16.0", 0x021000ff)``.
    """
    if libversion is None:
        import confluent_kafka

        libversion = confluent_kafka.libversion
    text, number = libversion()
    line = (number >> 24 & 0xFF, number >> 16 & 0xFF)
    if line == PROVEN_LIBRDKAFKA:
        return None
    proven = ".".join(map(str, PROVEN_LIBRDKAFKA))
    return (
        f"deliveryGuarantee=exactly_once is proven with librdkafka {proven} (confluent-kafka {proven}.x), "
        f"and this Python has librdkafka {text}: another line may speak Kafka's transaction version 2 "
        "(KIP-890), under which the driver cannot finish its tasks' transactions. Install "
        f"'confluent-kafka=={proven}.*' (sparkafka's own requirement)"
    )


def parse_acquired_pid(lines: Iterable[str]) -> tuple[int, int] | None:
    """The last ``(producer id, epoch)`` librdkafka reported acquiring, if any."""
    found = None
    for line in lines:
        match = _ACQUIRED.search(line)
        if match:
            found = (int(match.group(1)), int(match.group(2)))
    return found


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "PID" in message:
            self.lines.append(message)


class _Forward(logging.Handler):
    """A private producer's warnings and errors, on to ``sparkafka.librdkafka``'s handlers."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        if LIBRDKAFKA_LOG.isEnabledFor(record.levelno):
            LIBRDKAFKA_LOG.callHandlers(record)


def open_transactional_producer(
    conf: Mapping[str, Any],
    transactional_id: str,
    timeout_s: float = 60.0,
    topic: str | None = None,
    prefix: str | None = None,
) -> tuple[Any, int, int]:
    """A producer with ``init_transactions`` done (fencing earlier users of the id), its pid and epoch.

    Runs once per exactly-once task and batch, so its start-up is latency. Two librdkafka (2.16) timers
    set it: connecting to a broker the bootstrap metadata named waits half of ``reconnect.backoff.ms``
    (default 100 ms; 10 ms here unless set), and when ``init_transactions`` starts while no broker
    connection is up, which is right after the first metadata answer (librdkafka then drops the bootstrap
    connection), the coordinator query waits for its 500 ms timer. So two metadata requests (for ``topic``,
    which the task looks up anyway, or every topic when None) come first: the second returns once a
    learned broker is connected. Measured on the embedded broker: 54 ms median and 505 ms in about one
    init of ten before; 17 ms median and 19 ms at worst in 60 after.

    ``prefix``: the transactional-id prefix ``transactional_id`` belongs to, which a refusal by ACL names
    (the grant is for the prefix).

    Raises:
        AuthorizationError: the user may not WRITE the transactional id (named with its prefix).
        ConfigError: this process's librdkafka is not the line exactly once is proven with (the
            sentence the sink's options give on the driver, where the executor's may differ).
        TransactionError: when the transactions cannot be initialised or the pid cannot be learned.
    """
    unproven = check_transaction_protocol()
    if unproven is not None:
        raise ConfigError(unproven)
    capture = _Capture()
    given = conf.get("logger")
    # A sink task's producer brings its logger (``sink.delivery``: the implicit-ack tripwire), which keeps
    # its level; any other gets a private one, quiet once the pid is learned.
    logger = (
        given
        if isinstance(given, logging.Logger)
        else TripwireLogger(f"sparkafka.rdkafka.{transactional_id}")  # no logging.disable() hides the pid
    )
    logger.addHandler(capture)
    settings = dict(conf)
    settings.setdefault("reconnect.backoff.ms", "10")
    debug = {d for d in str(settings.get("debug", "")).split(",") if d}
    settings.update(
        {
            "transactional.id": transactional_id,
            "debug": ",".join(sorted(debug | {"eos"})),
            "logger": logger,
            "allow.auto.create.topics": NO_TOPIC_CREATION,  # the driver's fencer brings the sink's bare conf
        }
    )
    producer = new_producer(settings)
    try:
        for _ in range(2):
            producer.list_topics(topic=topic, timeout=timeout_s)
        producer.init_transactions(timeout_s)
    except Exception as e:
        access = (
            Access("WRITE", "transactional id", prefix, prefixed=True)
            if prefix
            else Access("WRITE", "transactional id", transactional_id)
        )
        refusal = denied_by(e, conf, access, f"opening transaction {transactional_id}")
        if refusal is not None:  # the producer is in a fatal state (its close() raises): dropped
            raise refusal from None
        raise TransactionError(
            f"init_transactions for transactional id {transactional_id} failed {against_servers(conf)}: {e}"
        ) from e
    producer.poll(0)  # the log queue is served by poll
    identity = parse_acquired_pid(capture.lines)
    if identity is None:
        raise TransactionError(
            f"could not learn the producer id and epoch of transactional id {transactional_id}: "
            "librdkafka logged no 'Acquired PID' line (this confluent-kafka version may word it differently)"
        )
    logger.removeHandler(capture)
    if logger is not given:  # its warnings go where every client's do (the rate-limited logger)
        logger.addHandler(_Forward())
    return producer, identity[0], identity[1]
