"""An in-memory model of Apache Kafka's transaction coordinator (transaction version 1), for unit tests.

The rules follow ``core/src/main/scala/kafka/coordinator/transaction/TransactionCoordinator.scala``
(Kafka 3.9 / 4.x) as far as the sink relies on them, summarised in
``shared/notes/apache-kafka-rules.md``:

- InitProducerId bumps the id's epoch; a transaction still Ongoing is aborted first.
- An Ongoing transaction past ``start + transaction.timeout.ms`` is aborted by the coordinator, which bumps
  the epoch (``abortTimedOutTransactions`` -> ``prepareFenceProducerEpoch``).
- EndTxn with another epoch: PRODUCER_FENCED; on CompleteCommit a commit answers NONE and an abort
  INVALID_TXN_STATE; on CompleteAbort the reverse; on Empty INVALID_TXN_STATE; an unknown id or producer
  id: INVALID_PRODUCER_ID_MAPPING.
- Every transaction ends with a COMMIT or ABORT marker in the log, carrying its producer id and the epoch
  the transaction ended with (a timeout or fencing abort carries the bumped epoch); ids not in a
  transaction can be forgotten (``transactional.id.expiration.ms``), records deleted (retention).

Also the tests' fake intent log, clock and fault hook, and the parts the committer takes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sparkafka.client.raw_log import Marker
from sparkafka.errors import TransactionError
from sparkafka.sink.intents import IntentRecord, IntentWriteError, LogState, fold
from sparkafka.sink.outcomes import Finding, judge
from sparkafka.sink.task import TaskResult
from sparkafka.sink.twophase import CommitSettings, TwoPhaseCommitter
from sparkafka.sink.txn_control import EndAnswer, MarkerProbe, TxnHandle, classify

NONE, INVALID_PRODUCER_ID_MAPPING, INVALID_TXN_STATE, PRODUCER_FENCED = 0, 49, 48, 90


class Clock:
    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


@dataclass
class _Id:
    pid: int
    epoch: int
    state: str = "Empty"  # Empty, Ongoing, CompleteCommit, CompleteAbort
    start_ms: int = 0


@dataclass(frozen=True)
class Entry:
    """One entry of the output partition's log: a data record, or a transaction marker (``row`` None)."""

    pid: int
    epoch: int
    row: bytes | None
    commit: bool = False


class Coordinator:
    """Transactional ids, their transactions, and the one output partition they write to (``out-0``).

    The log holds data records and COMMIT/ABORT markers with their producer id and epoch, as Kafka's does:
    ``visible`` is what a read_committed consumer sees, ``markers_of`` what a raw fetch shows.
    """

    def __init__(self, clock: Clock, timeout_ms: int) -> None:
        self.clock = clock
        self.timeout_ms = timeout_ms
        self.ids: dict[str, _Id] = {}
        self.log: list[Entry] = []
        self.log_start = 0
        self._next_pid = 1000

    @property
    def visible(self) -> list[bytes]:
        """The records a read_committed consumer sees, in log order (up to the first open transaction)."""
        shown: list[bytes] = []
        pending: dict[int, list[bytes]] = {}
        for entry in self.log[self.log_start :]:
            if entry.row is not None:
                pending.setdefault(entry.pid, []).append(entry.row)
            elif entry.commit:
                shown.extend(pending.pop(entry.pid, []))
            else:
                pending.pop(entry.pid, None)
        return shown

    def _marker(self, txn: _Id, commit: bool) -> None:
        self.log.append(Entry(txn.pid, txn.epoch, None, commit))
        txn.state = "CompleteCommit" if commit else "CompleteAbort"

    def _expire(self) -> None:
        for txn in self.ids.values():
            if txn.state == "Ongoing" and self.clock() > txn.start_ms + self.timeout_ms:
                txn.epoch += 1  # prepareFenceProducerEpoch, then the abort (markers carry the new epoch)
                self._marker(txn, commit=False)

    def init_producer_id(self, tid: str) -> tuple[int, int]:
        self._expire()
        txn = self.ids.get(tid)
        if txn is None:
            self._next_pid += 1
            self.ids[tid] = txn = _Id(self._next_pid, 0)
            return txn.pid, txn.epoch
        if txn.state == "Ongoing":
            txn.epoch += 1
            self._marker(txn, commit=False)
        txn.epoch += 1
        txn.state = "Empty"
        return txn.pid, txn.epoch

    def produce(self, tid: str, pid: int, epoch: int, rows: list[bytes]) -> None:
        self._expire()
        txn = self.ids[tid]
        if (txn.pid, txn.epoch) != (pid, epoch):
            raise TransactionError(f"{tid}: fenced while producing")
        if txn.state != "Ongoing":
            txn.state, txn.start_ms = "Ongoing", self.clock()
        self.log.extend(Entry(pid, epoch, row) for row in rows)

    def end_txn(self, tid: str, pid: int, epoch: int, commit: bool) -> int:
        self._expire()
        txn = self.ids.get(tid)
        if txn is None or txn.pid != pid:
            return INVALID_PRODUCER_ID_MAPPING
        if txn.epoch != epoch:
            return PRODUCER_FENCED
        if txn.state == "Ongoing":
            self._marker(txn, commit)
            return NONE
        if txn.state == "CompleteCommit":
            return NONE if commit else INVALID_TXN_STATE
        if txn.state == "CompleteAbort":
            return INVALID_TXN_STATE if commit else NONE
        return INVALID_TXN_STATE

    def open_transactions(self) -> list[str]:
        self._expire()
        return [tid for tid, txn in self.ids.items() if txn.state == "Ongoing"]

    def forget_ids(self) -> None:
        """``transactional.id.expiration.ms`` passes: every id not in a transaction is forgotten."""
        self._expire()
        self.ids = {tid: txn for tid, txn in self.ids.items() if txn.state == "Ongoing"}

    def delete_records(self) -> None:
        """Retention (or DeleteRecords) removes everything written so far."""
        self.log_start = len(self.log)


class ModelEnder:
    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        self.sent: list[tuple[TxnHandle, bool]] = []

    def end(self, handle: TxnHandle, commit: bool) -> EndAnswer:
        self.sent.append((handle, commit))
        code = self.coordinator.end_txn(handle.transactional_id, handle.producer_id, handle.epoch, commit)
        answer = classify(code, commit)
        if answer is None:
            raise TransactionError(f"EndTxn for {handle.transactional_id}: error {code}")
        return answer

    def close(self) -> None:
        pass


class ModelEvidence:
    """``DataEvidence`` over the model's log: positions are its end, markers found by scanning it."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        self.searches = 0

    def mark_positions(self, handles: Sequence[TxnHandle]) -> tuple[TxnHandle, ...]:
        end = len(self.coordinator.log)
        return tuple(h.with_probe_offset(end) if h.probe else h for h in handles)

    def find(self, handle: TxnHandle, intent_at_ms: int, now_ms: int) -> Finding:
        self.searches += 1
        assert handle.probe is not None
        start, log = handle.probe.offset, self.coordinator.log
        if start < self.coordinator.log_start:
            return judge(handle, None, gone=f"out-0 no longer holds offset {start}")
        for offset in range(start, len(log)):
            entry = log[offset]
            if entry.row is None and entry.pid == handle.producer_id:
                return judge(handle, Marker(offset, entry.commit, entry.epoch))
        return judge(handle, None)


class ModelFencer:
    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator

    def fence(self, transactional_id: str) -> None:
        self.coordinator.init_producer_id(transactional_id)


class MemoryLog:
    """The intent log as a list of (key, record); ``fail_next`` makes the next append time out."""

    def __init__(self) -> None:
        self.entries: list[tuple[bytes | None, IntentRecord | None]] = []
        self.fail_next: str | None = None
        """"lost" (not stored), "landed" (stored all the same) or "held" (stored when ``land_held`` says: a
        request the network or the broker held past its client's time-out)."""
        self.held: list[IntentRecord] = []
        self.reads = 0
        self.forgotten_tasks: list[tuple[str, int]] = []

    def land_held(self) -> None:
        """The held appends are carried out now, after whatever was appended since."""
        held, self.held = self.held, []
        self.entries.extend((r.key(), r) for r in held)

    def triples(self) -> list[tuple[int, bytes | None, IntentRecord | None]]:
        """The log as (offset, key, record): an entry's offset is its index."""
        return [(i, key, record) for i, (key, record) in enumerate(self.entries)]

    def read(self) -> LogState:
        self.reads += 1
        return fold(self.triples())

    def append(self, record: IntentRecord) -> int:
        failure, self.fail_next = self.fail_next, None
        if failure == "held":
            self.held.append(record)
        elif failure != "lost":
            self.entries.append((record.key(), record))
        if failure:
            raise IntentWriteError("writing to the intent log timed out", ambiguous=True)
        return len(self.entries) - 1

    def forget(self, query_id: str, tasks: Iterable[int] = ()) -> None:
        self.entries.append((query_id.encode(), None))
        self.forgotten_tasks.extend((query_id, t) for t in tasks)


class Crash(BaseException):
    """The driver process dies at a fault point."""


def crash_at(point: str | None) -> Callable[[str], None]:
    def fault(name: str) -> None:
        if name == point:
            raise Crash(name)

    return fault


def no_fault(_name: str) -> None:
    return None


class World:
    """One broker (coordinator + intent log) and the Spark side around a prefix's committers."""

    def __init__(self, prefix: str = "p", timeout_ms: int = 60_000, take_over: bool = False) -> None:
        self.clock = Clock()
        self.coordinator = Coordinator(self.clock, timeout_ms)
        self.log = MemoryLog()
        self.settings = CommitSettings(prefix, timeout_ms, take_over)
        self.counters: Counter[str] = Counter()
        self.ender = ModelEnder(self.coordinator)
        self.evidence = ModelEvidence(self.coordinator)

    def count(self, query_id: str, **increments: int) -> None:
        self.counters.update(increments)

    def committer(self, faults: Callable[[str], None] = no_fault) -> TwoPhaseCommitter:
        return TwoPhaseCommitter(
            self.settings,
            self.log,
            self.ender,
            ModelFencer(self.coordinator),
            self.evidence,
            clock=self.clock,
            faults=faults,
            count=self.count,
        )

    def run_tasks(self, rows: list[list[bytes]], started_ago_ms: list[int] | None = None) -> list[TaskResult]:
        """Each task, as ``writer._write`` and ``task.write_task`` do: claim an id above every one in use,
        InitProducerId on ``<prefix>-<task>``, produce its rows, flush (left open)."""
        results = []
        in_use = self.log.read().tids_in_use
        for task, task_rows in enumerate(rows):
            if task >= in_use:
                self.log.append(IntentRecord("", -1, "claim", (), task + 1))
            tid = f"{self.settings.prefix}-{task}"
            pid, epoch = self.coordinator.init_producer_id(tid)
            ago = started_ago_ms[task] if started_ago_ms else 0
            started = self.clock() - ago
            if not task_rows:
                results.append(TaskResult(task, 0, None, started))
                continue
            self.clock.advance(-ago)  # the broker's transaction start is when the task produced
            self.coordinator.produce(tid, pid, epoch, task_rows)
            self.clock.advance(ago)
            handle = TxnHandle(tid, pid, epoch, len(task_rows), task, MarkerProbe("out", 0))
            results.append(TaskResult(task, len(task_rows), handle, started))
        return results

    def make_writer(self, query_id: str | None) -> LogState:
        """What constructing a writer does on the driver: recover, then the owner check."""
        committer = self.committer()
        state = committer.recover()
        if query_id is not None:
            committer.check_owner(state, query_id)
        return state

    def sink_runner_commit(
        self,
        query_id: str,
        batch_id: int,
        results: list[TaskResult],
        streaming: bool = True,
        faults: Callable[[str], None] = no_fault,
    ) -> None:
        """What Spark's streaming sink runner does: make a writer, then commit with its recovered state."""
        state = self.make_writer(query_id)
        self.committer(faults).commit(query_id, batch_id, results, streaming, recovered=state)
