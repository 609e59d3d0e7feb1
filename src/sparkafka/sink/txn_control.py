"""Finishing a Kafka transaction from a process that did not start it (kafka-python, protocol level).

librdkafka cannot resume another process's transaction. The driver commits (or aborts) a task's flushed
transaction by sending EndTxn with the task producer's transactional id, producer id and epoch to the
transaction coordinator, which then writes the COMMIT/ABORT markers: Flink's recoverAndCommit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sparkafka.clientconf import to_kafka_python_config
from sparkafka.errors import TransactionError

__all__ = ["TxnController", "TxnHandle"]

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
_NAMES = {
    47: "INVALID_PRODUCER_EPOCH",
    48: "INVALID_TXN_STATE",
    49: "INVALID_PRODUCER_ID_MAPPING",
    53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    90: "PRODUCER_FENCED",
}


@dataclass(frozen=True)
class TxnHandle:
    """What the driver needs to finish a task's transaction; travels in the commit message and intent."""

    transactional_id: str
    producer_id: int
    epoch: int
    records: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"tid": self.transactional_id, "pid": self.producer_id, "epoch": self.epoch, "n": self.records}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TxnHandle:
        return cls(str(data["tid"]), int(data["pid"]), int(data["epoch"]), int(data.get("n", 0)))


class TxnController:
    """Sends EndTxn for transactions by handle. One network client, closed by ``close``.

    Args:
        conf: librdkafka-style settings (bootstrap servers and security are used).
        timeout_s: bound on each transaction's completion, retries included.
    """

    def __init__(self, conf: Mapping[str, str], timeout_s: float = 60.0) -> None:
        from kafka.net.compat import KafkaNetClient

        self._timeout_s = timeout_s
        self._servers = conf.get("bootstrap.servers")
        self._client: Any = KafkaNetClient(**to_kafka_python_config(conf))
        self._client.check_version(timeout_ms=int(timeout_s * 1000))

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> TxnController:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def end(self, handles: Iterable[TxnHandle], commit: bool) -> None:
        """Commit (or abort) every transaction; raises TransactionError naming the first that fails."""
        for handle in handles:
            self._end_one(handle, commit)

    def _coordinator(self, transactional_id: str) -> Any:
        from kafka.protocol.metadata import FindCoordinatorRequest

        node = self._client.least_loaded_node()
        request = FindCoordinatorRequest(key=transactional_id, key_type=1, max_version=3)
        response = self._client.send_and_receive(node, request, timeout_ms=int(self._timeout_s * 1000))
        if response.error_code != _NONE:
            raise _RetryError(f"FindCoordinator error {response.error_code}")
        return self._client.cluster.add_coordinator(response, 1, transactional_id)

    def _end_one(self, handle: TxnHandle, commit: bool) -> None:
        from kafka.protocol.producer import EndTxnRequest

        what = "commit" if commit else "abort"
        deadline = time.monotonic() + self._timeout_s
        delay = 0.05
        while True:
            try:
                node = self._coordinator(handle.transactional_id)
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
            except Exception as e:  # connection drops and coordinator moves: retried until the deadline
                code, reason = -1, f"{type(e).__name__}: {e}"
            else:
                reason = _NAMES.get(code, f"error {code}")
            if code == _NONE:
                log.debug("%s of %s done", what, handle)
                return
            if code not in _RETRIABLE and code != -1:
                raise TransactionError(
                    f"{what} of transaction {handle.transactional_id} (producer id {handle.producer_id}, "
                    f"epoch {handle.epoch}) failed against {self._servers}: {reason}"
                )
            if time.monotonic() + delay > deadline:
                raise TransactionError(
                    f"{what} of transaction {handle.transactional_id} did not complete within "
                    f"{self._timeout_s:.0f} s against {self._servers}: {reason}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


class _RetryError(Exception):
    pass
