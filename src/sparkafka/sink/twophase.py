"""Driver side of exactly-once: Flink's TwoPhaseCommitSinkFunction over Kafka transactions, made total.

Runs on the driver: in the planner process when a writer is made (``recover``, the owner check) and in
Spark's sink runner (``commit``, ``abort``). Phase one (pre-commit) happened in the tasks: each flushed
its transaction under ``<prefix>-<task>`` and reported a ``TxnHandle``.

``commit`` of batch B of query Q, in this order:

1. ``recover``: resolve every pending intent of the prefix (below). It runs before anything of B is
   decided, and ``recover`` also runs when the writer is made, before B's tasks open transactions: the
   outcome of a pending intent is therefore learned before any InitProducerId bumps its ids' epochs, which
   is what makes each EndTxn answer exact (``txn_control.classify``). Spark's sink runner makes a writer
   and calls ``commit`` on it at once, in one process: the state that writer's ``recover`` returned is
   passed in (``recovered``) instead of reading the log a third time per batch. Reading it earlier by that
   gap is the same as reading it now: nothing of B, nor of a later batch, is written in between.
2. A replay of a batch already ``done`` is aborted, never written twice, even when a task of it refused
   (``writer``: an error no retry can heal). Any other batch a task refused fails here, before anything
   of it is decided; Spark's ``abort`` then aborts its transactions.
3. The prefix must be Q's (``check_owner``).
4. A replay of a ``partial`` batch: the tasks whose rows are already visible must produce as many records
   as before (else: error, nothing written); their new transactions are aborted, the rest go on.
5. No commit into a timeout race: if the batch's oldest transaction is older than
   ``transaction.timeout.ms`` less a margin, its transactions are aborted and the batch fails with no
   intent written (Spark replays it on restart).
6. The ``intent`` is appended. A failed append is read back: found, the commit goes on; not found, the
   batch fails and its transactions are left alone (the intent may still land; the replay's tasks fence
   them, and recovery then finds them aborted).
7. Roll forward: EndTxn(commit) for every handle; each answer is the transaction's outcome.
8. All committed: unused ids are fenced and ``done`` is appended. Otherwise the outcome (``partial`` or
   ``abandoned``) is appended and the batch fails with an error saying what is visible.

Rules: once an intent is written it is only ever rolled forward (EndTxn(commit)), by ``commit``,
``recover`` or ``abort``; repeating a commit is harmless (the broker answers NONE again). Outcomes are
recorded durably before anything acts on them. A record is always written after the EndTxns it reports.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Literal

from sparkafka.client.security import authenticated
from sparkafka.errors import BrokerError, ConfigError, SparkafkaError, TransactionError
from sparkafka.sink.commit_parts import (
    CommitSettings,
    Fencer,
    IntentStore,
    KafkaEnder,
    MetricsCounter,
    ProducerFencer,
    TxnEnder,
    wall_ms,
)
from sparkafka.sink.faults import fault_point
from sparkafka.sink.intents import BatchState, IntentLog, IntentRecord, IntentWriteError, LogState
from sparkafka.sink.options import SinkOptions
from sparkafka.sink.outcomes import DataEvidence, Finding, KafkaEvidence
from sparkafka.sink.task import TaskResult, transactional_id
from sparkafka.sink.txn_control import EndAnswer, TxnHandle, TxnOutcome

__all__ = [
    "CommitSettings",
    "ResolveAction",
    "TwoPhaseCommitter",
    "cli_connection",
    "timeout_margin_ms",
]

log = logging.getLogger(__name__)

ResolveAction = Literal["commit", "abort", "mark-done", "rewrite"]


def cli_connection(kafka: Mapping[str, str]) -> str:
    """The connection flags of the CLI commands an error names: the bootstrap servers, and on a cluster
    that knows its users, ``--command-config FILE`` (the secured settings, which an error never shows)."""
    flags = f"--bootstrap-servers {kafka.get('bootstrap.servers', '')}"
    return f"{flags} --command-config FILE" if authenticated(kafka) else flags


def timeout_margin_ms(timeout_ms: int) -> int:
    """Time kept free before ``transaction.timeout.ms`` for the commit itself: 10 %, 5 s to half."""
    return min(timeout_ms // 2, max(5_000, timeout_ms // 10))


_IN_DOUBT: set[TxnHandle] = set()
"""Handles whose intent append failed and could not be confirmed: never aborted by this process."""


class TwoPhaseCommitter:
    """See the module docstring for the order of steps and the rules; every part is injectable."""

    def __init__(
        self,
        settings: CommitSettings,
        store: IntentStore,
        ender: TxnEnder,
        fencer: Fencer,
        evidence: DataEvidence,
        *,
        clock: Callable[[], int] = wall_ms,
        faults: Callable[[str], None] = fault_point,
        count: Callable[..., None] | None = None,
    ) -> None:
        """Wire the parts; nothing is read or written before a method is called.

        ``clock`` gives wall-clock ms, ``faults`` is the fault-injection hook and ``count`` adds to the
        sink's counters (default: its counters files).
        """
        self._settings = settings
        self._prefix = settings.prefix
        self._store = store
        self._ender = ender
        self._fencer = fencer
        self._evidence = evidence
        self._clock = clock
        self._faults = faults
        self._count = count or MetricsCounter(settings.prefix)

    @classmethod
    def for_options(cls, options: SinkOptions) -> TwoPhaseCommitter:
        """The committer over the real intent log, EndTxn client and fencer."""
        assert options.transactional_id_prefix is not None
        prefix = options.transactional_id_prefix
        settings = CommitSettings(
            prefix,
            options.transaction_timeout_ms,
            options.take_over_prefix,
            cli_connection(options.kafka),
            options.checkpoint_location,
        )
        timeout_s = options.metadata_timeout_ms / 1000
        store = IntentLog(options.kafka, prefix, timeout_s)
        evidence = KafkaEvidence(options.kafka, timeout_s)
        return cls(settings, store, KafkaEnder(options), ProducerFencer(options), evidence)

    # -- recovery ------------------------------------------------------------------------------------

    def recover(self) -> LogState:
        """Resolve every pending intent (roll forward) and return the log's state afterwards.

        Idempotent: a second run finds nothing pending. Raises TransactionError, naming the batch, when an
        EndTxn answer leaves an outcome unknown; the intent then stays pending for the next attempt.
        """
        try:
            state = self._store.read()
            for intent in state.pending:
                log.warning(
                    "completing batch %d of query %s from its commit intent (%d transactions)",
                    intent.batch_id,
                    intent.query_id,
                    len(intent.handles),
                )
                record = self._record_outcome(intent, self._end_all(intent, commit=True), state)
                self._count(intent.query_id, recovered=1)
                if record.state != "done":
                    log.error("%s", self._unfinished(record))
            self._rewrite_shadowed(state)
            return state
        finally:
            self._ender.close()

    def _rewrite_shadowed(self, state: LogState) -> None:
        """Append again the state of each query whose last record in the log is one folding ignored
        (``LogState.shadowed``): compaction keeps a key's last record, which would then be the stale one.

        The copy continues the state (its ``base``) and keeps the prefix's ids in use. A failed append is
        left to the next recovery: it guards against compaction, which takes an hour at least.
        """
        for query_id in sorted(state.shadowed):
            record = state.latest.get(query_id)
            if record is None:
                state.shadowed.discard(query_id)
                continue
            again = replace(
                record,
                base=state.base(query_id),
                tids_in_use=max(record.tids_in_use, state.tids_in_use),
            )
            log.warning(
                "writing the state of query %s again (%s of batch %d): a record that landed late is last",
                query_id,
                record.state,
                record.batch_id,
            )
            try:
                self._note(state, again, self._store.append(again))
            except BrokerError as e:
                log.warning(
                    "could not write the state of query %s again (the next recovery will): %s", query_id, e
                )

    def check_owner(self, state: LogState, query_id: str) -> None:
        """Refuse a writer for ``query_id`` on a prefix a different, live streaming query owns.

        The owner is the streaming query that wrote last; it is live while its last record is younger
        than ``transaction.timeout.ms`` (after that, every transaction it had open has been aborted by the
        broker, so taking over loses nothing of it; if it comes back, its own check refuses it).
        """
        owner = state.owner()
        if owner is None or owner.query_id == query_id or self._settings.take_over:
            return
        idle_ms = self._clock() - owner.at_ms
        if idle_ms >= self._settings.transaction_timeout_ms:
            log.warning(
                "transactionalIdPrefix %r: taking over from query %s, idle for %d s",
                self._prefix,
                owner.query_id,
                idle_ms // 1000,
            )
            return
        raise ConfigError(
            f"option transactionalIdPrefix={self._prefix!r} belongs to streaming query {owner.query_id}, "
            f"which wrote batch {owner.batch_id} {max(idle_ms, 0) / 1000:.0f} s ago; two writers sharing a "
            "prefix fence each other's transactions. Use another transactionalIdPrefix, or, if that query "
            "is stopped for good (for example its checkpoint was deleted), set option "
            "takeOverTransactionalIdPrefix=true"
        )

    # -- commit and abort ----------------------------------------------------------------------------

    def commit(
        self,
        query_id: str,
        batch_id: int,
        results: Sequence[TaskResult],
        streaming: bool = True,
        recovered: LogState | None = None,
        *,
        refusal: SparkafkaError | None = None,
        fence: Sequence[str] = (),
    ) -> None:
        """Phase two for batch ``batch_id`` of ``query_id``: see the module docstring, steps 1-8.

        ``recovered`` is the state a ``recover`` in this process returned just before (step 1); without
        it, ``commit`` recovers first. ``refusal``: a task's error that no retry can heal (``writer``),
        raised right after step 2, before anything of the batch is decided; only the replay of a batch
        already done goes on without it (its rows are committed: Spark would replay it, refused, on every
        restart). ``fence``: refusing tasks' transactional ids whose own abort the broker did not confirm,
        fenced when the replay is skipped (Spark calls no ``abort`` then; otherwise its abort does).

        Raises:
            TransactionError: the batch is not (fully) committed; the message says what is visible and
                what a restart does.
            ConfigError: the prefix belongs to another live query.
            SparkafkaError: ``refusal``, for a batch that is not done.
        """
        self._faults("commit_start")
        try:
            state = self.recover() if recovered is None else recovered
        except Exception:
            if refusal is not None:  # the recovery's error is raised; the task's refusal is not lost
                log.error("batch %d of query %s: a task refused: %s", batch_id, query_id, refusal)  # noqa: TRY400 - the refusal, not this traceback
            raise
        if refusal is not None and not state.is_done(query_id, batch_id):
            raise refusal
        try:
            handles = [r.handle for r in results if r.handle is not None]
            if state.is_done(query_id, batch_id):
                self._abort_quietly(
                    query_id, handles, f"batch {batch_id} of query {query_id} was already committed"
                )
                if refusal is not None:
                    log.warning(
                        "batch %d of query %s was already committed, so its replay is skipped although a "
                        "task of it refused: %s",
                        batch_id,
                        query_id,
                        refusal,
                    )
                    self._fence_quietly(
                        fence, f"a refusing task of batch {batch_id} had its abort unconfirmed"
                    )
                self._count(query_id, replays=1)
                return
            try:
                self.check_owner(state, query_id)
            except ConfigError:
                self._abort_quietly(query_id, handles, "the prefix belongs to another query")
                raise
            prior = state.record_for(query_id, batch_id)
            committed = prior.committed if prior is not None and prior.state == "partial" else ()
            if committed:
                handles = self._skip_committed(query_id, batch_id, committed, results)
            tids = len(results)
            positioned = self._evidence.mark_positions(handles)  # before the age check: it takes time
            intent = IntentRecord(
                query_id,
                batch_id,
                "intent",
                positioned,
                max(tids, state.tids_in_use),
                committed,
                streaming,
                self._clock(),
                base=state.base(query_id),  # it continues what this writer read of the query
            )
            self._refuse_if_old(intent, [r for r in results if r.handle in handles])
            self._append_intent(intent, state)
            self._faults("after_intent")
            if handles:
                self._faults("after_intent_with_records")
            outcomes = self._end_all(intent, commit=True, pause_after_first=True)
            if all(o == "committed" for o in outcomes.values()):
                self._fence(range(tids, state.tids_in_use))
                record = self._record_outcome(intent, outcomes, state, tids_in_use=tids)
                log.info(
                    "batch %d committed: %d transaction(s), %d record(s)",
                    batch_id,
                    len(handles),
                    sum(h.records for h in handles),
                )
                self._faults("commit_end")
                return
            record = self._record_outcome(intent, outcomes, state)
            raise TransactionError(self._unfinished(record))
        finally:
            self._ender.close()

    def abort(
        self,
        query_id: str | None,
        batch_id: int,
        results: Sequence[TaskResult],
        *,
        fence: Sequence[str] = (),
    ) -> None:
        """Spark gave up on the batch: roll forward if its intent was written, else abort its transactions.

        Never aborts a transaction whose intent may have been written (an unconfirmed append) or that is
        already committed (a partial batch's visible tasks). Then fences the transactional ids ``fence``
        names: refusing tasks' whose own abort the broker did not confirm (``writer``). Safe: a refusal
        makes the commit raise before any intent, so no intent names their transactions, and an intent
        found for the batch was rolled forward first.
        """
        try:
            state = self._store.read()
            handles = [r.handle for r in results if r.handle is not None and r.handle not in _IN_DOUBT]
            record = state.record_for(query_id, batch_id) if query_id else None
            if record is not None and record.state == "intent":
                self._record_outcome(record, self._end_all(record, commit=True), state)
                handles = [h for h in handles if h not in record.handles]
            elif record is not None:
                handles = [h for h in handles if h not in record.committed]
            self._abort_quietly(query_id, handles, f"batch {batch_id} aborted by Spark")
            self._fence_quietly(
                fence, f"a task of batch {batch_id} refused and its own abort was not confirmed"
            )
        finally:
            self._ender.close()

    def resolve(self, query_id: str, action: ResolveAction) -> IntentRecord:
        """An operator's decision on a query's unfinished batch (``sparkafka txn resolve``).

        ``commit``: roll a pending intent forward (what recovery does). ``abort``: abort a pending intent's
        transactions; what was already committed stays (the batch becomes ``partial`` or ``abandoned``).
        ``mark-done`` (partial or abandoned): count the batch as written; its other rows are not written by
        the replay. ``rewrite`` (partial): forget what is visible; the replay writes the whole batch, so
        the visible rows appear twice.
        """
        try:
            state = self._store.read()
            self._rewrite_shadowed(state)
            record = state.latest.get(query_id)
            allowed: dict[str, tuple[ResolveAction, ...]] = {
                "intent": ("commit", "abort", "mark-done", "rewrite"),
                "partial": ("mark-done", "rewrite"),
                "abandoned": ("mark-done",),
            }
            if record is None or action not in allowed.get(record.state, ()):
                found = "no record" if record is None else f"its batch {record.batch_id} is {record.state}"
                choices = ", ".join(allowed.get(record.state, ())) if record else ""
                raise ConfigError(
                    f"cannot {action} query {query_id} of prefix {self._prefix!r}: {found}"
                    + (f" (allowed: {choices})" if choices else " (nothing to resolve)")
                )
            if action in ("commit", "abort"):
                return self._record_outcome(record, self._end_all(record, commit=action == "commit"), state)
            if record.state == "intent":  # outcomes the broker and the data cannot give: the operator's
                assume: TxnOutcome = "committed" if action == "mark-done" else "aborted"
                settled = self._record_outcome(record, self._end_all(record, True, assume=assume), state)
                if action == "rewrite" or settled.state == "done":
                    return settled
                record = settled
            base = state.base(query_id)  # the operator's decision continues the record it decided on
            if action == "mark-done":
                done = record.with_state("done", handles=(), at_ms=self._clock(), base=base)
            else:
                done = record.with_state(
                    "abandoned", handles=(), committed=(), at_ms=self._clock(), base=base
                )
            self._note(state, done, self._store.append(done))
            return done
        finally:
            self._ender.close()

    # -- steps -----------------------------------------------------------------------------------------

    def _end_all(
        self,
        intent: IntentRecord,
        commit: bool,
        pause_after_first: bool = False,
        assume: TxnOutcome | None = None,
    ) -> dict[TxnHandle, TxnOutcome]:
        """EndTxn for each of the intent's transactions, and what became of each.

        An answer that cannot say (fenced, forgotten) is decided from the transaction's markers; when they
        cannot say either, ``assume`` is taken (an operator's ``txn resolve`` decision), or the batch stays
        pending and TransactionError names the commands that decide it.
        """
        outcomes: dict[TxnHandle, TxnOutcome] = {}
        for i, handle in enumerate(intent.handles):
            try:
                answer = self._ender.end(handle, commit)
            except TransactionError as e:
                raise TransactionError(
                    f"{e}; batch {intent.batch_id} of query {intent.query_id} stays pending: its outcome is "
                    "learned when this EndTxn is answered (the next writer retries it), or decided with "
                    f"`sparkafka txn resolve {self._settings.connection} --prefix "
                    f"{self._prefix} --query {intent.query_id} ACTION`"
                ) from e
            outcomes[handle] = self._settle(intent, handle, answer, assume)
            if pause_after_first and i == 0:
                self._faults("after_first_txn")
        return outcomes

    def _settle(
        self, intent: IntentRecord, handle: TxnHandle, answer: EndAnswer, assume: TxnOutcome | None
    ) -> TxnOutcome:
        """The outcome an EndTxn answer gives, asking the markers (``outcomes``) when it cannot say."""
        if answer in ("committed", "aborted"):
            return answer
        if handle.probe is not None and handle.probe.offset >= 0:
            finding = self._evidence.find(handle, intent.at_ms, self._clock())
        elif answer == "fenced":
            # An intent written before handles carried probes: the rule of those versions (exact unless an
            # InitProducerId ran on the id after the transaction ended).
            return "aborted"
        else:
            finding = Finding(None, "the intent was written before sparkafka recorded where markers are")
        if finding.outcome is not None:
            return finding.outcome
        if finding.retry:  # the data could not be read now: the next writer asks again
            raise TransactionError(
                f"batch {intent.batch_id} of query {intent.query_id} stays pending: the outcome of its "
                f"transaction {handle.transactional_id} is read from its marker, and {finding.why}; the "
                "next writer of the prefix tries again"
            )
        if assume is not None:
            log.warning("transaction %s counted %s by the operator: %s", handle, assume, finding.why)
            return assume
        reason = (
            "its id expired (INVALID_PRODUCER_ID_MAPPING: transactional.id.expiration.ms passed)"
            if answer == "forgotten"
            else "its epoch was bumped since (PRODUCER_FENCED)"
        )
        command = (
            f"sparkafka txn resolve {self._settings.connection} --prefix {self._prefix} "
            f"--query {intent.query_id}"
        )
        raise TransactionError(
            f"batch {intent.batch_id} of query {intent.query_id} stays pending: the outcome of its "
            f"transaction {handle.transactional_id} (producer id {handle.producer_id}, epoch "
            f"{handle.epoch}) cannot be learned, since the broker cannot say ({reason}) and the data cannot "
            f"either ({finding.why}); if the batch's rows are in the output run `{command} mark-done "
            f"--yes`, if they are not run `{command} rewrite --yes` (Spark's replay then writes them)"
        )

    def _record_outcome(
        self,
        intent: IntentRecord,
        outcomes: dict[TxnHandle, TxnOutcome],
        log_state: LogState,
        tids_in_use: int | None = None,
    ) -> IntentRecord:
        """Append what became of an intent's transactions (continuing the intent, which is its query's
        state in ``log_state``, which then holds the outcome); a finished batch write's key is deleted."""
        committed = tuple(h for h in intent.handles if outcomes[h] == "committed")
        aborted = tuple(h for h in intent.handles if outcomes[h] == "aborted")
        visible = intent.committed + committed
        state: Literal["done", "partial", "abandoned"] = (
            "done" if not aborted else "partial" if visible else "abandoned"
        )
        record = intent.with_state(
            state,
            handles=aborted,
            committed=visible,
            at_ms=self._clock(),
            tids_in_use=intent.tids_in_use if tids_in_use is None else tids_in_use,
            base=log_state.base(intent.query_id),
        )
        if not record.streaming and state != "partial":
            try:
                self._store.forget(record.query_id, sorted({h.task for h in intent.handles}))
            except BrokerError as e:  # the intent stays pending: a later recovery resolves it again
                log.warning("could not delete the finished batch write's record: %s", e)
            self._note(log_state, record, None)
        else:
            self._note(log_state, record, self._store.append(record))
        self._count(
            intent.query_id,
            batches=int(state == "done"),
            transactions=len(committed),
            records=sum(h.records for h in committed),
            partial=int(state == "partial"),
            abandoned=int(state == "abandoned"),
        )
        return record

    def _unfinished(self, record: IntentRecord) -> str:
        """The error for a batch the broker partly or wholly aborted before the commit reached it."""
        aborted = ", ".join(h.transactional_id for h in record.handles)
        what = (
            f"batch {record.batch_id} of query {record.query_id} is {record.state}: the broker had aborted "
            f"{len(record.handles)} of its transactions ({aborted}) before the commit reached them "
            "(kafka.transaction.timeout.ms passed, or another producer took the same transactional ids)"
        )
        if record.committed:
            tasks = ", ".join(str(h.task) for h in record.committed)
            rows = sum(h.records for h in record.committed)
            what += f"; the rows of tasks {tasks} ({rows} records) are visible"
        else:
            what += "; nothing of it is visible"
        if not record.streaming:
            return (
                what
                + ". Rerun the job"
                + (" (the visible rows would be written again)" if record.committed else "")
            )
        rest = "only the other tasks' rows" if record.committed else "the batch"
        return (
            f"{what}. Restart the query: Spark replays the batch and sparkafka writes {rest} exactly once "
            "(exact when the replay produces the same rows per task: deterministic transforms, unchanged "
            "partitioning)"
        )

    def _skip_committed(
        self, query_id: str, batch_id: int, committed: tuple[TxnHandle, ...], results: Sequence[TaskResult]
    ) -> list[TxnHandle]:
        """A partial batch's replay: abort the visible tasks' new transactions, keep the others."""
        by_task = {r.task: r for r in results}
        handles = [r.handle for r in results if r.handle is not None]
        for done in committed:
            now = by_task[done.task].records if done.task in by_task else 0
            if now != done.records:
                self._abort_quietly(query_id, handles, "the replay of a partly committed batch differs")
                visible = ", ".join(f"{h.task} ({h.records} records)" for h in committed)
                raise TransactionError(
                    f"batch {batch_id} of query {query_id} was partly committed (tasks {visible} are "
                    f"visible) and its replay differs: task {done.task} has {now} records now, "
                    f"{done.records} then, so the rest cannot be published exactly once. Nothing of the "
                    "replay was written. Replays match when transforms are deterministic and the "
                    "partitioning is unchanged. Resolve with `sparkafka txn resolve --prefix "
                    f"{self._prefix} --query {query_id} mark-done --yes` (the batch counts as written; its "
                    "other rows are not written) or `... rewrite --yes` (the replay writes the whole batch; "
                    "the visible rows appear twice)"
                )
        tasks = {h.task for h in committed}
        self._abort_quietly(
            query_id,
            [h for h in handles if h.task in tasks],
            f"tasks {sorted(tasks)} of batch {batch_id} are visible",
        )
        return [h for h in handles if h.task not in tasks]

    def _refuse_if_old(self, intent: IntentRecord, results: Sequence[TaskResult]) -> None:
        """Abort and fail a batch whose oldest transaction (of ``results``, the ones to commit) is too old.

        ``intent`` is the intent that would be written. A streaming batch's refusal is recorded: as
        ``abandoned`` with ``too_old``, or, for a partial batch's replay, as ``partial`` still naming the
        tasks whose rows are visible. ``sparkafka txn list`` shows it, and ``sparkafka offsets replan`` takes
        an abandoned one as proof that nothing of the batch is visible.
        """
        if not results:
            return
        batch_id, query_id = intent.batch_id, intent.query_id
        timeout = self._settings.transaction_timeout_ms
        margin = timeout_margin_ms(timeout)
        age = self._clock() - min(r.started_ms for r in results)
        if age <= timeout - margin:
            if age > timeout // 2:
                log.warning(
                    "batch %d: its oldest transaction is %d ms old, over half of transaction.timeout.ms=%d",
                    batch_id,
                    age,
                    timeout,
                )
            return
        handles = [r.handle for r in results if r.handle is not None]
        self._abort_quietly(query_id, handles, f"batch {batch_id} is too old to commit safely")
        state: BatchState = "partial" if intent.committed else "abandoned"
        if intent.streaming:
            refusal = intent.with_state(state, handles=(), at_ms=self._clock(), too_old=(age, timeout))
            try:
                self._store.append(refusal)
            except BrokerError as e:  # the replay then runs and is refused again, later: nothing is lost
                log.warning("could not record that batch %d was too old to commit: %s", batch_id, e)
        if intent.committed:
            tasks = ", ".join(str(h.task) for h in intent.committed)
            rows = sum(h.records for h in intent.committed)
            visible = f"the rows of tasks {tasks} ({rows} records) stay visible and the others' are not"
        else:
            visible = "nothing of the batch is visible"
        raise TransactionError(
            f"batch {batch_id} of query {query_id} was not committed: its oldest transaction is "
            f"{age / 1000:.1f} s old, past {(timeout - margin) / 1000:.1f} s (kafka.transaction.timeout.ms="
            f"{timeout} less a margin of {margin / 1000:.0f} s), so the broker could abort it while the "
            f"commit runs; its transactions were aborted and {visible}. " + self._too_old_remedies(batch_id)
        )

    def _too_old_remedies(self, batch_id: int) -> str:
        """What makes a batch that was too old to commit go through: only what works for its replay."""
        checkpoint = self._settings.checkpoint or "CHECKPOINT"
        return (
            f"Spark replays batch {batch_id} with the same rows, so either raise "
            "kafka.transaction.timeout.ms (up to the broker's transaction.max.timeout.ms, 15 minutes "
            "unless raised), or give the query "
            "as many cores as the batch has tasks, or plan the batch again smaller: set "
            "maxOffsetsPerTrigger on the source, then run `sparkafka offsets replan --checkpoint "
            f"{checkpoint} {self._settings.connection} --prefix {self._prefix} --execute` "
            "before restarting"
        )

    def _append_intent(self, intent: IntentRecord, state: LogState) -> None:
        """Append the intent, decided on ``state`` (which then holds it); on failure read the log back before
        deciding anything.

        The intent counts only if it continues the query's state (``intents.fold``): when anything came
        into the log between ``state``'s read and the intent, the log is read again, and an intent that
        another record of the query came before (a driver that stalled, a record that landed late) fails
        the batch before any EndTxn, its transactions aborted (no one rolls an ignored intent forward).
        """
        query_id, batch_id = intent.query_id, intent.batch_id
        try:
            offset = self._store.append(intent)
        except IntentWriteError as e:
            failure: Exception = e
        else:
            if state.appended(intent, offset):
                return
            state.replace(self._store.read())  # something came in between: did the intent count?
            current = state.latest.get(query_id)
            if current is not None and (current == intent or current.base == offset):
                return
            aborted = self._abort_quietly(query_id, intent.handles, "its intent does not count")
            left = (
                "its transactions were aborted and nothing of the batch is visible"
                if aborted == len(intent.handles)
                else "its transactions were aborted where the broker answered, the others are fenced by the "
                "replay's tasks or time out: nothing of the batch becomes visible"
            )
            raise TransactionError(
                f"batch {batch_id} of query {query_id} was not committed: another record of the query came "
                "into the commit-intent log between this driver's read and its intent (a driver that "
                f"stalled, or a record that landed late), so the intent does not count; {left}. Spark "
                "replays the batch on restart"
            )
        try:
            read = self._store.read()
        except BrokerError as e:
            read, failure = None, e
        found = read.record_for(query_id, batch_id) if read is not None else None
        if read is not None and found == intent:
            log.warning("the intent of batch %d was written after all (read back)", batch_id)
            state.replace(read)
            return
        _IN_DOUBT.update(intent.handles)
        raise TransactionError(
            f"batch {intent.batch_id} of query {intent.query_id} was not committed: its commit intent could "
            f"not be confirmed ({failure}). Its transactions are left as they are, since the intent may "
            "still be stored; on restart recovery resolves them, or the replay's tasks abort them"
        ) from failure

    def _note(self, state: LogState, record: IntentRecord, offset: int | None) -> None:
        """Keep ``state`` what a read of the log would fold, after this process appended ``record`` at
        ``offset``: read again when anything came in between (it may have been taken, or not)."""
        if not state.appended(record, offset):
            state.replace(self._store.read())

    def _abort_quietly(self, query_id: str | None, handles: Iterable[TxnHandle], why: str) -> int:
        """Abort ``handles``' transactions; how many the broker answered (the others time out)."""
        handles = list(handles)
        if not handles:
            return 0
        log.info("aborting %d transaction(s): %s", len(handles), why)
        aborted = 0
        for handle in handles:
            try:
                self._ender.end(handle, commit=False)
                aborted += 1
            except TransactionError as e:  # unknown outcome: the broker aborts it on fence or timeout
                log.warning("abort: %s", e)
        if query_id is not None:
            self._count(query_id, aborted=aborted)
        return aborted

    def _fence_quietly(self, transactional_ids: Sequence[str], why: str) -> None:
        """Fence each of ``transactional_ids`` (aborting what it holds open); a fence that fails is logged:
        the broker aborts the transaction after ``transaction.timeout.ms``.

        The first fence that fails ends the fencing: these ids are there because their tasks' own aborts
        went unconfirmed, most often a coordinator not answering, which each further fence would wait out
        again (each up to a minute) while Spark's abort holds the query's thread.
        """
        for i, tid in enumerate(transactional_ids):
            log.info("fencing transactional id %s: %s", tid, why)
            try:
                self._fencer.fence(tid)
            except Exception as e:  # noqa: BLE001 - Spark's abort must not fail on it
                log.warning(
                    "could not fence transactional id %s (the broker aborts the open transactions of it and "
                    "of %s after kafka.transaction.timeout.ms): %s",
                    tid,
                    ", ".join(transactional_ids[i + 1 :]) or "no other",
                    e,
                )
                return

    def _fence(self, tasks: range) -> None:
        """Abort whatever transactional ids no longer used by any task hold (parallelism went down)."""
        for task in tasks:
            tid = transactional_id(self._prefix, task)
            self._fencer.fence(tid)
            log.info("fenced unused transactional id %s", tid)
