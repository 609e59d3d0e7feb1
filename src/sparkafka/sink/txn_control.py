"""Finishing a Kafka transaction from a process that did not start it (kafka-python, protocol level).

librdkafka cannot resume another process's transaction. The driver commits (or aborts) a task's flushed
transaction by sending EndTxn with the task producer's transactional id, producer id and epoch to the
transaction coordinator, which then writes the COMMIT/ABORT markers: Flink's recoverAndCommit.

Each EndTxn answer says what became of the transaction (``classify``): the driver records that outcome
instead of failing on it, so a transaction the broker aborted (timeout, fencing) never wedges a query.
Where the answer cannot say (the id's epoch was bumped since, or the id expired), the transaction's
markers in the output decide (``sparkafka.sink.outcomes``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from sparkafka.client.conf import against_servers
from sparkafka.client.core import new_kafka_python_client
from sparkafka.client.security import Access, denied
from sparkafka.errors import AuthorizationError, TransactionError

__all__ = ["EndAnswer", "MarkerProbe", "TxnController", "TxnHandle", "TxnOutcome", "classify"]

log = logging.getLogger(__name__)

# Kafka error codes (org.apache.kafka.common.protocol.Errors) that EndTxn may answer.
_NONE = 0
_RETRIABLE = {
    7,  # REQUEST_TIMED_OUT
    14,  # COORDINATOR_LOAD_IN_PROGRESS
    15,  # COORDINATOR_NOT_AVAILABLE
    16,  # NOT_COORDINATOR
    51,  # CONCURRENT_TRANSACTIONS: markers of an earlier EndTxn are still being written
}
_INVALID_PRODUCER_EPOCH = 47
_INVALID_TXN_STATE = 48
_INVALID_PRODUCER_ID_MAPPING = 49
_PRODUCER_FENCED = 90
_TXN_ID_AUTHORIZATION_FAILED = 53
_NAMES = {
    _INVALID_PRODUCER_EPOCH: "INVALID_PRODUCER_EPOCH",
    _INVALID_TXN_STATE: "INVALID_TXN_STATE",
    _INVALID_PRODUCER_ID_MAPPING: "INVALID_PRODUCER_ID_MAPPING",
    _TXN_ID_AUTHORIZATION_FAILED: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    _PRODUCER_FENCED: "PRODUCER_FENCED",
}

TxnOutcome = Literal["committed", "aborted"]
EndAnswer = Literal["committed", "aborted", "fenced", "forgotten"]
"""What an EndTxn answer says: an outcome, or ``fenced`` / ``forgotten`` when only the data can tell."""


def classify(code: int, commit: bool) -> EndAnswer | None:
    """What an EndTxn answer says became of the transaction; None when it says nothing at all.

    Apache Kafka's coordinator (``TransactionCoordinator.handleEndTransaction``), for the pid and epoch the
    transaction was written with:

    ============================ ======================== =========================================
    answer                       to EndTxn(commit)        to EndTxn(abort)
    ============================ ======================== =========================================
    NONE                         committed (now, or a     aborted (now, or a repeated abort)
                                 repeated commit)
    INVALID_TXN_STATE            aborted (CompleteAbort)  committed (CompleteCommit)
    PRODUCER_FENCED /            fenced: the epoch was bumped since, by a timeout abort (aborted) or
    INVALID_PRODUCER_EPOCH       by an InitProducerId after the transaction ended (either outcome)
    INVALID_PRODUCER_ID_MAPPING  forgotten: the coordinator no longer knows the id (expired)
    anything else                nothing sure (an error)
    ============================ ======================== =========================================

    ``fenced`` and ``forgotten`` are decided from the transaction's markers (``sparkafka.sink.outcomes``).
    """
    if code == _NONE:
        return "committed" if commit else "aborted"
    if code in (_PRODUCER_FENCED, _INVALID_PRODUCER_EPOCH):
        return "fenced"
    if code == _INVALID_PRODUCER_ID_MAPPING:
        return "forgotten"
    if code == _INVALID_TXN_STATE:
        return "aborted" if commit else "committed"
    return None


@dataclass(frozen=True)
class MarkerProbe:
    """Where a transaction's COMMIT or ABORT marker is to be looked for: a partition it wrote to, from an
    offset its marker cannot precede (``-1``: not known yet)."""

    topic: str
    partition: int
    offset: int = -1

    def to_json(self) -> list[Any]:
        """``[topic, partition, offset]``."""
        return [self.topic, self.partition, self.offset]


@dataclass(frozen=True)
class TxnHandle:
    """What the driver needs to finish a task's transaction; travels in the commit message and intent.

    Two handles are the same transaction when their transactional id, producer id and epoch are: the other
    fields describe it (the probe's offset is filled in by the driver before the intent is written).
    """

    transactional_id: str
    producer_id: int
    epoch: int
    records: int = field(default=0, compare=False)
    """Records the task produced into the transaction."""
    task: int = field(default=0, compare=False)
    """The Spark task (partition) index that wrote it: ``<prefix>-<task>`` is its transactional id."""
    probe: MarkerProbe | None = field(default=None, compare=False)
    """Where its marker will be (``sparkafka.sink.outcomes``); None in intents written before it existed."""

    def to_json(self) -> dict[str, Any]:
        """The handle as a JSON-ready dict with short keys (``from_json`` reads it back)."""
        data: dict[str, Any] = {
            "tid": self.transactional_id,
            "pid": self.producer_id,
            "epoch": self.epoch,
            "n": self.records,
            "task": self.task,
        }
        if self.probe is not None:
            data["probe"] = self.probe.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TxnHandle:
        """A handle from ``to_json``'s dict; an old one without ``task`` takes it from the id's suffix."""
        tid = str(data["tid"])
        task = data.get("task", tid.rpartition("-")[2])  # records written before "task" was stored
        probe = data.get("probe")
        return cls(
            tid,
            int(data["pid"]),
            int(data["epoch"]),
            int(data.get("n", 0)),
            int(task),
            MarkerProbe(str(probe[0]), int(probe[1]), int(probe[2])) if probe else None,
        )

    def with_probe_offset(self, offset: int) -> TxnHandle:
        """This handle with its probe's offset set (it must have a probe)."""
        assert self.probe is not None
        return replace(self, probe=replace(self.probe, offset=offset))


class TxnController:
    """Sends EndTxn for transactions by handle. One network client, closed by ``close``.

    Args:
        conf: librdkafka-style settings (bootstrap servers and security are used).
        timeout_s: bound on each transaction's completion, retries included.
    """

    def __init__(self, conf: Mapping[str, str], timeout_s: float = 60.0) -> None:
        """Connect now: the broker's API versions are checked within ``timeout_s``."""
        self._timeout_s = timeout_s
        self._conf = conf
        self._where = against_servers(conf)
        self._client: Any = new_kafka_python_client(conf)
        self._client.check_version(timeout_ms=int(timeout_s * 1000))

    def close(self) -> None:
        """Close the network client."""
        self._client.close()

    def __enter__(self) -> TxnController:
        """This controller, closed when the ``with`` block ends."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the network client, whether or not the block raised."""
        self.close()

    def end(self, handle: TxnHandle, commit: bool) -> EndAnswer:
        """Send EndTxn(commit or abort) for one transaction and say what the answer says (``classify``).

        Retriable answers and connection failures are retried until the timeout.

        Raises:
            TransactionError: the answer says nothing (e.g. an authorization failure), or no answer came
                in time.
        """
        return self._end_one(handle, commit)

    def find_coordinator(self, transactional_id: str) -> None:
        """Ask which broker coordinates ``transactional_id``; nothing about the id itself changes.

        Kafka answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED unless the user may at least DESCRIBE the id
        (WRITE implies it): the one question about a transactional-id ACL that touches no transaction
        (InitProducerId would fence one). It is not free of effects on a fresh cluster: a broker asked for
        a transaction coordinator while ``__transaction_state`` does not exist yet creates that topic
        (``KafkaApis.getCoordinator``) and answers COORDINATOR_NOT_AVAILABLE, which is raised here, not
        retried (``sink.access`` then leaves the question to the first transaction); the sink's first
        transaction would have had the topic created anyway. A user refused by ACL triggers nothing: the
        broker authorizes the id before it looks for the coordinator.

        Raises:
            AuthorizationError: the user may not use ``transactional_id`` (``denied``'s sentence).
            Exception: any other answer than a coordinator (COORDINATOR_NOT_AVAILABLE on a fresh
                cluster), or none in time.
        """
        self._coordinator(transactional_id)

    def _coordinator(self, transactional_id: str) -> Any:
        from kafka.protocol.metadata import FindCoordinatorRequest

        node = self._client.least_loaded_node()
        request = FindCoordinatorRequest(key=transactional_id, key_type=1, max_version=3)
        response = self._client.send_and_receive(node, request, timeout_ms=int(self._timeout_s * 1000))
        if response.error_code == _TXN_ID_AUTHORIZATION_FAILED:
            raise self._denied(transactional_id)
        if response.error_code != _NONE:
            raise _RetryError(f"FindCoordinator error {response.error_code}")
        return self._client.cluster.add_coordinator(response, 1, transactional_id)

    def _end_one(self, handle: TxnHandle, commit: bool) -> EndAnswer:
        from kafka.protocol.producer import EndTxnRequest

        what = "commit" if commit else "abort"
        deadline = time.monotonic() + self._timeout_s
        delay = 0.05
        while True:
            try:
                node = self._coordinator(handle.transactional_id)
                # EndTxn v3 at most: below v5 the broker runs the transaction as transaction version 1
                # even on a Kafka 4.x cluster with KIP-890 enabled (no epoch bump at each transaction's
                # end), which resuming another process's transaction by (pid, epoch) relies on. librdkafka
                # 2.16 also sends v0-1. Keep it below 5.
                request = EndTxnRequest(
                    transactional_id=handle.transactional_id,
                    producer_id=handle.producer_id,
                    producer_epoch=handle.epoch,
                    committed=commit,
                    max_version=3,
                )
                response = self._client.send_and_receive(
                    node, request, timeout_ms=int(self._timeout_s * 1000)
                )
                code = int(response.error_code)
            except AuthorizationError:
                raise
            except Exception as e:  # noqa: BLE001 - connection drops and coordinator moves: retried until the deadline
                code, reason = -1, f"{type(e).__name__}: {e}"
            else:
                reason = _NAMES.get(code, f"error {code}")
            if code == _TXN_ID_AUTHORIZATION_FAILED:
                raise self._denied(handle.transactional_id)
            outcome = classify(code, commit) if code != -1 else None
            if outcome is not None:
                log.debug("%s of %s: %s (%s)", what, handle, outcome, reason if code else "NONE")
                return outcome
            if code not in _RETRIABLE and code != -1:
                raise TransactionError(
                    f"{what} of transaction {handle.transactional_id} (producer id {handle.producer_id}, "
                    f"epoch {handle.epoch}) failed {self._where}: {reason}"
                )
            if time.monotonic() + delay > deadline:
                raise TransactionError(
                    f"{what} of transaction {handle.transactional_id} did not complete within "
                    f"{self._timeout_s:.0f} s {self._where}: {reason}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _denied(self, transactional_id: str) -> AuthorizationError:
        """The sentence for EndTxn (or its coordinator lookup) refused by ACL, naming the id's prefix."""
        prefix, _, task = transactional_id.rpartition("-")
        access = (
            Access("WRITE", "transactional id", prefix, prefixed=True)
            if prefix and task.isdigit()
            else Access("WRITE", "transactional id", transactional_id)
        )
        return denied(self._conf, access, f"ending transaction {transactional_id}")


class _RetryError(Exception):
    pass
