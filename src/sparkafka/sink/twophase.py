"""Driver side of exactly-once: Flink's TwoPhaseCommitSinkFunction over Kafka transactions.

Phase one (pre-commit) happened in the tasks: each flushed its transaction and reported a TxnHandle.
Phase two here: record the batch's handles durably (the intent), commit each transaction by EndTxn, fence
transactional ids that are no longer used (aborting what they hold), record ``done``. A crash anywhere is
finished by ``recover`` (run whenever a writer is made, so before a replayed batch's tasks fence the ids
again); a replayed batch that is already done is aborted instead of written twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from sparkafka.errors import TransactionError
from sparkafka.metrics_files import default_metrics_path, read_json, write_json_atomically
from sparkafka.sink.faults import fault_point
from sparkafka.sink.identity import open_transactional_producer
from sparkafka.sink.intents import IntentLog, IntentRecord, IntentState
from sparkafka.sink.options import SinkOptions
from sparkafka.sink.task import TaskResult, transactional_id
from sparkafka.sink.txn_control import TxnController, TxnHandle

__all__ = ["TwoPhaseCommitter", "claim_transactional_ids"]

log = logging.getLogger(__name__)


class TwoPhaseCommitter:
    def __init__(self, options: SinkOptions) -> None:
        assert options.transactional_id_prefix is not None
        self._options = options
        self._prefix = options.transactional_id_prefix
        self._intents = IntentLog(options.kafka, self._prefix, options.metadata_timeout_ms / 1000)

    def _end(self, handles: Sequence[TxnHandle], commit: bool, pause_after_first: bool = False) -> None:
        with TxnController(self._options.kafka) as controller:
            for i, handle in enumerate(handles):
                controller.end([handle], commit)
                if pause_after_first and i == 0:
                    fault_point("after_first_txn")

    def _finish(self, intent: IntentRecord, state: IntentState) -> None:
        """Commit an intent's transactions to completion (repeating a commit writes nothing twice)."""
        log.warning(
            "completing batch %d of query %s from its commit intent (%d transactions)",
            intent.batch_id,
            intent.query_id,
            len(intent.handles),
        )
        self._end(intent.handles, commit=True)
        done = IntentRecord(intent.query_id, intent.batch_id, "done", (), intent.tids_in_use)
        self._intents.append(done)
        self._count(
            batches=1, transactions=len(intent.handles), records=sum(h.records for h in intent.handles)
        )
        state.last_done[intent.query_id] = max(intent.batch_id, state.last_done.get(intent.query_id, -1))
        state.pending.remove(intent)

    def recover(self) -> IntentState:
        state = self._intents.read()
        for intent in list(state.pending):
            self._finish(intent, state)
        return state

    def _abort_quietly(self, handles: Sequence[TxnHandle], why: str) -> None:
        if not handles:
            return
        log.info("aborting %d transaction(s): %s", len(handles), why)
        try:
            self._end(handles, commit=False)
        except TransactionError as e:
            # A fenced or already-finished transaction needs no abort; the broker aborts open ones on fence.
            log.warning("abort: %s", e)

    def commit(self, query_id: str, batch_id: int, results: Sequence[TaskResult]) -> None:
        state = self.recover()
        handles = [r.handle for r in results if r.handle is not None]
        if state.is_done(query_id, batch_id):
            self._abort_quietly(
                handles, f"batch {batch_id} of query {query_id} was already committed (replay)"
            )
            self._count(replays=1)
            return
        self._warn_if_old(results)
        tids = len(results)
        intent = IntentRecord(query_id, batch_id, "intent", tuple(handles), max(tids, state.tids_in_use))
        self._intents.append(intent)
        fault_point("after_intent")
        self._end(handles, commit=True, pause_after_first=True)
        self._fence(range(tids, state.tids_in_use))
        self._intents.append(IntentRecord(query_id, batch_id, "done", (), tids))
        self._count(batches=1, transactions=len(handles), records=sum(h.records for h in handles))
        log.info(
            "batch %d committed: %d transaction(s), %d record(s)",
            batch_id,
            len(handles),
            sum(h.records for h in handles),
        )
        fault_point("commit_end")

    def abort(self, query_id: str | None, batch_id: int, results: Sequence[TaskResult]) -> None:
        state = self._intents.read()
        handles = [r.handle for r in results if r.handle is not None]
        intent = state.intent_for(query_id, batch_id) if query_id else None
        if intent is not None:
            # The decision to commit was recorded: roll forward, never back.
            self._finish(intent, state)
            handles = [h for h in handles if h not in intent.handles]
        self._abort_quietly(handles, f"batch {batch_id} aborted by Spark")

    def _count(self, **increments: int) -> None:
        """Add to the sink's counters (``sink_metrics``); a metrics file that cannot be written only warns."""
        path = default_metrics_path("sink", self._prefix)
        try:
            data = read_json(path) or {}
            for key, n in increments.items():
                data[key] = int(data.get(key, 0)) + n
            write_json_atomically(path, data)
        except (OSError, ValueError) as e:
            log.warning("could not update sink metrics %s: %s", path, e)

    def _fence(self, tasks: range) -> None:
        """Abort whatever transactional ids no longer used by any task hold (parallelism went down)."""
        for task in tasks:
            tid = transactional_id(self._prefix, task)
            producer, _, _ = open_transactional_producer(self._options.kafka, tid)
            producer.close()
            log.info("fenced unused transactional id %s", tid)

    def _warn_if_old(self, results: Sequence[TaskResult]) -> None:
        if not results:
            return
        age_ms = int(time.time() * 1000) - min(r.started_ms for r in results)
        timeout = self._options.transaction_timeout_ms
        if age_ms > timeout // 2:
            log.warning(
                "the oldest transaction of this batch is %d ms old, over half of transaction.timeout.ms=%d: "
                "the broker aborts transactions older than that, so commits and recovery must finish "
                "sooner (raise kafka.transaction.timeout.ms up to the broker's transaction.max.timeout.ms)",
                age_ms,
                timeout,
            )


def claim_transactional_ids(options: SinkOptions, count: int) -> None:
    """Record that ids ``<prefix>-0`` .. ``<prefix>-(count-1)`` may hold transactions, before first use.

    A crash can leave a transaction open under an id that no later run uses (parallelism went down);
    the claim lets a later commit find and fence it. Written only when parallelism grows.
    """
    assert options.transactional_id_prefix is not None
    intents = IntentLog(options.kafka, options.transactional_id_prefix, options.metadata_timeout_ms / 1000)
    intents.append(IntentRecord("", -1, "claim", (), count))
