"""The parts ``twophase.TwoPhaseCommitter`` is wired from: what each must do, and the ones over Kafka.

The protocols (``IntentStore``, ``TxnEnder``, ``Fencer``) are what the committer needs of the intent log,
of EndTxn and of InitProducerId; tests give it models of them (tests/unit/sink/coordinator_model.py).
``KafkaEnder``, ``ProducerFencer`` and ``MetricsCounter`` are the real ones the driver uses
(``TwoPhaseCommitter.for_options``); ``claim_transactional_ids`` runs in executor tasks. Nothing here
decides anything about a batch: the rules are ``twophase``'s.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from sparkafka.metrics_files import add_counts, default_metrics_path, query_sink_path
from sparkafka.sink.identity import open_transactional_producer
from sparkafka.sink.intents import IntentLog, IntentRecord, LogState
from sparkafka.sink.options import SinkOptions
from sparkafka.sink.txn_control import EndAnswer, TxnController, TxnHandle

__all__ = [
    "CommitSettings",
    "Fencer",
    "IntentStore",
    "KafkaEnder",
    "MetricsCounter",
    "ProducerFencer",
    "TxnEnder",
    "claim_transactional_ids",
    "wall_ms",
]


class IntentStore(Protocol):
    """The durable intent log (``intents.IntentLog``)."""

    def read(self) -> LogState:
        """The log folded: each query's newest record and the transactional ids that may be in use."""
        ...

    def append(self, record: IntentRecord) -> int:
        """Write ``record`` durably before returning its offset; ``IntentWriteError`` if it may not be
        written."""
        ...

    def forget(self, query_id: str, tasks: Iterable[int] = ()) -> None:
        """Delete the key of ``query_id``, a finished batch write, and its tasks' witnesses (tombstones)."""
        ...


class TxnEnder(Protocol):
    """Ends transactions by handle (``TxnController``); ``end`` returns what the answer says."""

    def end(self, handle: TxnHandle, commit: bool) -> EndAnswer:
        """Send EndTxn(commit or abort) for ``handle``'s transaction; its outcome, or fenced/forgotten."""
        ...

    def close(self) -> None:
        """Release the network client."""
        ...


class Fencer(Protocol):
    """Fences a transactional id (InitProducerId: bumps its epoch, aborting what it holds open)."""

    def fence(self, transactional_id: str) -> None:
        """Fence ``transactional_id``: a transaction it holds open is aborted."""
        ...


@dataclass(frozen=True)
class CommitSettings:
    """What the committer needs of the sink's options: the prefix and its producers' transaction timeout."""

    prefix: str
    transaction_timeout_ms: int
    take_over: bool = False
    """``takeOverTransactionalIdPrefix``: take the prefix from a live owner."""
    connection: str = "--bootstrap-servers HOST:PORT"
    """How the ``sparkafka txn`` and ``offsets`` commands errors name reach the brokers (with
    ``--command-config FILE`` on a secured cluster: the file holds the sink's ``kafka.*`` settings)."""
    checkpoint: str | None = None
    """The streaming query's checkpointLocation, when the sink was given it (for ``offsets replan``)."""


def wall_ms() -> int:
    """The wall clock in ms (intent records' ``at_ms``)."""
    return int(time.time() * 1000)


_UNCONFIRMED = "a refusing task of batch {} had its own abort unconfirmed"
"""Why a refusing task's transactional id is fenced (``TwoPhaseCommitter._fence_quietly``)."""


class MetricsCounter:
    """Adds to the sink's counters files: the prefix's and the query's.

    The prefix's (``sink_metrics``) holds totals and, under ``queries``, each query's own; the query's
    (``query_sink_path``) is read by the Prometheus exporter.
    """

    def __init__(self, prefix: str) -> None:
        self._path = default_metrics_path("sink", prefix)

    def __call__(self, query_id: str, **increments: int) -> None:
        """Add ``increments`` to the prefix's totals, under ``query_id`` there, and to the query's file."""
        add_counts(self._path, increments, query_id)
        add_counts(query_sink_path(query_id), increments)


class KafkaEnder:
    """``TxnEnder`` over one kafka-python connection, opened on first use and closed by ``close``."""

    def __init__(self, options: SinkOptions) -> None:
        self._conf = options.kafka
        self._controller: TxnController | None = None

    def end(self, handle: TxnHandle, commit: bool) -> EndAnswer:
        """EndTxn for ``handle`` (``TxnController.end``), the connection opened on first use."""
        if self._controller is None:
            self._controller = TxnController(self._conf)
        return self._controller.end(handle, commit)

    def close(self) -> None:
        """Close the connection, if one was opened."""
        if self._controller is not None:
            self._controller.close()
            self._controller = None


class ProducerFencer:
    """``Fencer`` by InitProducerId: a transactional producer opened for the id, then closed."""

    def __init__(self, options: SinkOptions) -> None:
        self._conf = options.kafka
        self._prefix = options.transactional_id_prefix

    def fence(self, transactional_id: str) -> None:
        """Open a transactional producer for ``transactional_id`` (InitProducerId) and close it."""
        producer, _, _ = open_transactional_producer(self._conf, transactional_id, prefix=self._prefix)
        producer.close()


def claim_transactional_ids(options: SinkOptions, count: int) -> None:
    """Record that ids ``<prefix>-0`` .. ``<prefix>-(count-1)`` may hold transactions, before first use.

    Runs in an executor task. A crash can leave a transaction open under an id that no later run uses
    (parallelism went down); the claim lets a later commit find and fence it. Written only when
    parallelism grows.
    """
    assert options.transactional_id_prefix is not None
    intents = IntentLog(options.kafka, options.transactional_id_prefix, options.metadata_timeout_ms / 1000)
    intents.append(IntentRecord("", -1, "claim", (), count, at_ms=wall_ms()))
