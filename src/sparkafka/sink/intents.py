"""The durable commit-intent log: a compacted one-partition Kafka topic per transactional-id prefix.

Runs on the driver (the planner and the sink's commit runner), and on an executor only for ``claim``.

Record states (``BatchState``), each record the newest state of one query, keyed by its query id:

- ``intent``: the decision to commit a batch's transactions (its handles) is taken. Written before the
  first EndTxn; after it, the batch is only ever rolled forward (every handle is sent EndTxn(commit)).
- ``done``: every transaction of the batch is committed. A replay of that batch is aborted, not written.
- ``abandoned``: the broker had aborted every one of the batch's transactions before they could be
  committed (transaction timeout, or fencing); nothing of the batch is visible and Spark's replay writes
  it again.
- ``partial``: some transactions committed, the others had been aborted by the broker. ``committed`` names
  the tasks whose rows are visible; the replay publishes only the other tasks' rows (exact when a replayed
  task produces the same rows, see ``TwoPhaseCommitter``).
- ``claim`` (key ``#claim``): task indexes up to ``tids_in_use`` are about to be used (written by a task
  before it first uses an id above every earlier one), so a later commit can fence ids left unused.

The log stays bounded: a streaming query overwrites its own key every batch (compaction keeps one record
per query), and a batch write's key is deleted (a tombstone) once the job is done or abandoned.

**A record can land late, and a writer can decide on an old read.** Appends go through a plain producer,
and one the driver gave up on (a flush that timed out, a read-back that did not find it: the batch failed)
can still be carried out after later records (a request the broker had queued, or the network held); a
driver that stalled (a long pause, a partitioned host) can decide on a log it read before another driver's
records. So each record names the record of its query it continues (``IntentRecord.base``: the offset of
the query's state when its writer decided), and folding ignores it when the query's state is already past
that: a compare-and-set on the log's own order, with no clock in it (a record whose base lies beyond the
state continues records compaction removed, and is taken). The writer of an intent checks that nothing of
its query came between its read and its append (``TwoPhaseCommitter``), so an ignored intent is never
rolled forward by anyone. Measured before, folding
by log order (``tests/integration/test_intent_log_faults.py``): an intent held by the network until the
batch's replay had committed was read as pending, resolved as ``abandoned``, and the batch's next replay
wrote its rows twice. Compaction keeps a key's last record whatever it says, so a writer that finds a
query's last record ignored writes the query's state again (``LogState.shadowed``,
``TwoPhaseCommitter.recover``). Records written before ``base`` existed are taken in log order, as then.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar, get_args

from sparkafka.client.conf import against_servers
from sparkafka.client.core import (
    admin_client,
    is_retriable,
    new_consumer,
    new_producer,
    next_messages,
    with_retries,
)
from sparkafka.client.metadata import AdminMetadata
from sparkafka.client.security import Access, denied_by, is_group_denial
from sparkafka.errors import BrokerError
from sparkafka.sink.delivery import NO_TOPIC_CREATION
from sparkafka.sink.txn_control import TxnHandle
from sparkafka.structs import INTERNAL_TOPIC_PREFIX, TopicPartition

__all__ = [
    "WITNESS_PREFIX",
    "BatchState",
    "IntentLog",
    "IntentRecord",
    "IntentWriteError",
    "LogState",
    "fold",
    "intent_topic",
    "witness_key",
]


class _NotVisibleYetError(Exception):
    """A topic just created is not yet in the metadata with leaders (retried)."""


log = logging.getLogger(__name__)

T = TypeVar("T")

BatchState = Literal["intent", "done", "abandoned", "partial", "claim"]
_STATES: tuple[str, ...] = get_args(BatchState)

FOLD_MAX_AGE_S = 3600.0
"""How long after its last read a process may go on from the log it folded, reading only what follows.

Past it the log is folded again from its start: compaction removes a tombstone ``delete.retention.ms``
(24 h by default) after cleaning it, so a key deleted after a fold that old could be missed.
"""

CLAIM_KEY = "#claim"

WITNESS_PREFIX = b"#witness/"
"""Keys of the records tasks write inside their transactions (``witness_key``); folding skips them."""


def witness_key(query_id: str, task: int) -> bytes:
    """The key of the witness record task ``task`` of ``query_id`` writes into its transaction.

    Its COMMIT or ABORT marker in this log is the evidence ``sparkafka.sink.outcomes`` reads when the broker
    cannot say what became of the transaction. One key per query and task: the record stays the newest of
    its key until a later batch of the query commits, which happens only once this one is settled, so
    compaction never removes it (nor its marker) while it may be needed.
    """
    return f"#witness/{query_id}/{task}".encode()


def intent_topic(prefix: str) -> str:
    """The name of the commit-intent log of transactional-id prefix ``prefix``."""
    return f"{INTERNAL_TOPIC_PREFIX}intents-{prefix}"


@dataclass(frozen=True)
class IntentRecord:
    """One record of the log: the newest state of one query's newest batch (see the module docstring)."""

    query_id: str
    batch_id: int
    state: BatchState
    handles: tuple[TxnHandle, ...] = ()
    """``intent``: the transactions to commit. ``abandoned``/``partial``: the ones the broker aborted."""
    tids_in_use: int = 0
    """How many transactional ids (``<prefix>-0`` ...) may hold transactions after this batch."""
    committed: tuple[TxnHandle, ...] = ()
    """Transactions of this batch already committed (their tasks' rows are visible)."""
    streaming: bool = True
    """False for a batch write (``df.write``), whose key is deleted once the job is finished."""
    at_ms: int = 0
    """Wall-clock time of writing, in ms: shows when the owner of the prefix was last active."""
    too_old: tuple[int, int] | None = None
    """``abandoned`` because the batch was too old to commit: (its oldest transaction's age, the
    ``transaction.timeout.ms`` it had), in ms. Nothing of it is visible; its replay has the same rows."""
    base: int | None = None
    """The log offset of the query's record this one continues (its writer's read of the query's state;
    -1: it read none). Folding takes this record only while that record is the query's state. None in
    records written before it existed (taken in log order)."""

    def key(self) -> bytes:
        """The record's Kafka key: the query id, or ``#claim`` for a claim."""
        return (CLAIM_KEY if self.state == "claim" else self.query_id).encode()

    def to_json(self) -> bytes:
        """The record's Kafka value: compact JSON, keys sorted (``from_json`` reads it back)."""
        data = {
            "query": self.query_id,
            "batch": self.batch_id,
            "state": self.state,
            "txns": [h.to_json() for h in self.handles],
            "tids": self.tids_in_use,
            "committed": [h.to_json() for h in self.committed],
            "streaming": self.streaming,
            "at": self.at_ms,
        }
        if self.too_old is not None:
            data["old"] = list(self.too_old)
        if self.base is not None:
            data["base"] = self.base
        return json.dumps(data, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> IntentRecord:
        """A record from its Kafka value; an unknown state raises ValueError."""
        data = json.loads(raw)
        state = str(data["state"])
        if state not in _STATES:
            raise ValueError(f"unknown intent state {state!r}")
        return cls(
            query_id=str(data["query"]),
            batch_id=int(data["batch"]),
            state=state,  # type: ignore[arg-type]  # checked against BatchState above
            handles=tuple(TxnHandle.from_json(h) for h in data.get("txns", [])),
            tids_in_use=int(data.get("tids", 0)),
            committed=tuple(TxnHandle.from_json(h) for h in data.get("committed", [])),
            streaming=bool(data.get("streaming", True)),
            at_ms=int(data.get("at", 0)),
            too_old=(int(data["old"][0]), int(data["old"][1])) if data.get("old") else None,
            base=int(data["base"]) if data.get("base") is not None else None,
        )

    def with_state(self, state: BatchState, **changes: Any) -> IntentRecord:
        """A copy of this record in ``state``, with ``changes`` to its other fields."""
        return replace(self, state=state, **changes)


@dataclass
class LogState:
    """The log folded: per query its newest record, and the transactional ids that may be in use."""

    latest: dict[str, IntentRecord] = field(default_factory=dict)
    tids_in_use: int = 0
    offsets: dict[str, int] = field(default_factory=dict)
    """The log offset of each query's state (``latest``): what a record continuing it names as ``base``."""
    shadowed: set[str] = field(default_factory=set)
    """Queries whose last record in the log is one folding ignored (it landed late): compaction would keep
    that one, so their state is to be written again."""
    end: int = 0
    """The offset folding read up to (the next record's): what a writer decided on."""

    def copy(self) -> LogState:
        """A copy whose fields can be changed without changing this one (records are immutable)."""
        return LogState(dict(self.latest), self.tids_in_use, dict(self.offsets), set(self.shadowed), self.end)

    def base(self, query_id: str) -> int:
        """What a record of ``query_id`` decided on this state names as its ``base``."""
        return self.offsets.get(query_id, -1)

    def appended(self, record: IntentRecord, offset: int | None) -> bool:
        """``record``, which this process appended at ``offset``, is its query's state now, as a read would
        fold it, when nothing came into the log between this state's read and it (``offset`` is ``end``;
        None: a batch write's key deleted): then True. Otherwise nothing is changed and False says so: the
        caller reads the log again (``replace``), since only a read knows whether the record was taken."""
        if offset is not None and offset != self.end:
            return False
        self.latest[record.query_id] = record
        self.shadowed.discard(record.query_id)
        if offset is not None:
            self.offsets[record.query_id] = offset
            self.end = offset + 1
        return True

    def replace(self, other: LogState) -> None:
        """Become ``other`` (a fresh read), in place: callers hold this object."""
        self.latest, self.tids_in_use, self.offsets = (
            dict(other.latest),
            other.tids_in_use,
            dict(other.offsets),
        )
        self.shadowed, self.end = set(other.shadowed), other.end

    @property
    def pending(self) -> list[IntentRecord]:
        """Intents whose outcome is not yet known, oldest first: recovery resolves them."""
        return sorted((r for r in self.latest.values() if r.state == "intent"), key=lambda r: r.at_ms)

    def record_for(self, query_id: str, batch_id: int) -> IntentRecord | None:
        """The query's newest record if it is about batch ``batch_id``, else None."""
        record = self.latest.get(query_id)
        return record if record is not None and record.batch_id == batch_id else None

    def is_done(self, query_id: str, batch_id: int) -> bool:
        """Whether batch ``batch_id`` of the query is fully committed (Spark runs batches in order)."""
        record = self.latest.get(query_id)
        if record is None:
            return False
        return batch_id < record.batch_id or (batch_id == record.batch_id and record.state == "done")

    def owner(self) -> IntentRecord | None:
        """The streaming query that wrote last: the prefix's owner (batch writes own it only while open)."""
        streaming = [r for r in self.latest.values() if r.streaming]
        return max(streaming, key=lambda r: r.at_ms) if streaming else None


def fold(
    records: Iterable[tuple[int, bytes | None, IntentRecord | None]], state: LogState | None = None
) -> LogState:
    """The state after ``(offset, key, record)`` triples in log order; a ``None`` record is a tombstone.

    A record of a query is its state unless it was decided on an older state than the one folded so far
    (its ``base`` is below the state's offset): that one landed late or was decided on an old read, and is
    ignored, its ``tids_in_use`` too (see the module docstring). A record that continues the state (``base``
    at its offset) is taken, and so is one whose ``base`` lies beyond it: compaction removed the records in
    between (it keeps a key's last record of what it cleaned), which this fold, made before, had not read
    (measured in the soak: a process's cached fold rejected every later record of its query, and a replay
    was written twice). Records without a ``base`` (an older version's) are taken in log order. With
    ``state`` (changed in place and returned), the records are those that follow what it folded.
    """
    state = LogState() if state is None else state
    for offset, key, record in records:
        state.end = max(state.end, offset + 1)
        if key is not None and key.startswith(WITNESS_PREFIX):
            continue
        if record is None:
            if key is not None:
                state.latest.pop(key.decode(), None)
                state.offsets.pop(key.decode(), None)
                state.shadowed.discard(key.decode())
            continue
        if record.state == "claim":
            state.tids_in_use = max(state.tids_in_use, record.tids_in_use)
            continue
        query = record.query_id
        current = state.latest.get(query)
        if record == current:  # the same record again (a retried append stored twice): nothing new
            continue
        if current is not None and record.base is not None and record.base < state.offsets.get(query, -1):
            log.warning(
                "ignoring a commit-intent record that landed late or was decided on an old read: %s of batch "
                "%d of query %s at offset %d (the query's state is %s of batch %d at offset %s)",
                record.state,
                record.batch_id,
                query,
                offset,
                current.state,
                current.batch_id,
                state.offsets.get(query),
            )
            state.shadowed.add(query)
            continue
        state.shadowed.discard(query)
        state.tids_in_use = record.tids_in_use
        state.latest[query] = record
        state.offsets[query] = offset
    return state


class IntentWriteError(BrokerError):
    """Appending a record failed. ``ambiguous``: it may have been written all the same (a timeout)."""

    def __init__(self, message: str, ambiguous: bool) -> None:
        """An error with ``message``; ``ambiguous`` when the record may have been written."""
        super().__init__(message)
        self.ambiguous = ambiguous


_ensured: set[tuple[str | None, str]] = set()
"""(bootstrap servers, topic) known to exist in this process: writers are made every micro-batch."""
_existing: set[tuple[str | None, str]] = set()
"""(bootstrap servers, topic) found to exist by a read here, before this process wrote to it."""


@dataclass(frozen=True)
class _Folded:
    """A log folded up to (not including) ``end``, at monotonic time ``at_s``."""

    end: int
    at_s: float
    state: LogState


_folded: dict[tuple[str | None, str], _Folded] = {}
"""Per (bootstrap servers, topic), this process's last fold: the next read folds only what follows it."""


def topic_settings(brokers: int) -> tuple[int, dict[str, str]]:
    """Replication factor and configs of a new intent topic on a cluster of ``brokers`` brokers.

    Durable where the cluster allows: three replicas, two of them in sync for an acks=all write. Compacted,
    with hourly segments so compaction (which skips the active segment) keeps the log near one record per
    query.
    """
    rf = max(1, min(3, brokers))
    return rf, {
        "cleanup.policy": "compact",
        "min.insync.replicas": str(min(2, rf)),
        "segment.ms": "3600000",
    }


def _authenticates(conf: Mapping[str, str]) -> bool:
    """Whether the client logs in (SASL or TLS): brokers that may hide topics by ACL from a listing."""
    return str(conf.get("security.protocol", "PLAINTEXT")).upper() != "PLAINTEXT"


class IntentLog:
    """Reads and appends intent records (the real ``IntentStore``). Creates the topic on its first write.

    Lazily: a writer that never wrote (a query that failed or stopped before its first batch, a process
    that only reads) leaves no topic behind; until the first write, a read finds an empty log. The first
    write is a task's claim of transactional ids or the driver's first intent, whichever comes first (for
    a streaming query, batch 0, which Spark runs even when it is empty); a task about to write its witness
    record makes sure of it too (``sink.task.write_task``).
    """

    def __init__(
        self, conf: Mapping[str, str], prefix: str, timeout_s: float = 30.0, create: bool = True
    ) -> None:
        """The log of ``prefix``; ``timeout_s`` bounds each request; ``create``: make it on the first write
        (False: never; the tools that only read)."""
        self._conf = {k: v for k, v in conf.items() if not k.startswith("transaction")}
        self.topic = intent_topic(prefix)
        self._timeout_s = timeout_s
        self._create = create

    def create(self) -> None:
        """Make the topic now, as the first write would (tasks about to write their witness records into it,
        tools and tests that write to it by other means)."""
        self._ensure_topic()

    def _ensure_topic(self) -> None:
        from confluent_kafka.admin import NewTopic

        key = (self._conf.get("bootstrap.servers"), self.topic)
        if key in _ensured:
            return
        brokers, replicas = AdminMetadata(self._conf, self._timeout_s).replicas()
        if self.topic in replicas:
            if replicas[self.topic] == 1 and brokers > 1:
                log.warning(
                    "the commit-intent topic %s has a single replica on a cluster of %d brokers: losing "
                    "that broker loses the record of which batches are committed (recreate it with "
                    "replication factor 3, or raise it with kafka-reassign-partitions)",
                    self.topic,
                    brokers,
                )
            _ensured.add(key)
            return
        rf, config = topic_settings(brokers)
        admin = admin_client(self._conf)

        def create(left: float) -> None:
            futures = admin.create_topics([NewTopic(self.topic, 1, rf, config=config)], request_timeout=left)
            try:
                futures[self.topic].result(left)
            except Exception as e:  # confluent-kafka's KafkaException; only "exists" is fine
                if "TOPIC_ALREADY_EXISTS" not in str(e):
                    raise

        self._retry(
            f"creating the commit-intent topic {self.topic} (missing, or not visible to this user)",
            create,
            Access("CREATE", "topic", self.topic),
        )

        def visible(left: float) -> None:
            # CreateTopics answers once the controller has the topic; a broker's metadata has it moments
            # later. Looked up at once, the new topic reads as deleted ("No leaders found", not in the
            # metadata: measured once in the demo on Apache Kafka 4.4). All topics are asked for, as in
            # ``exists``: naming it could auto-create it.
            topic = admin.list_topics(timeout=left).topics.get(self.topic)
            if (
                topic is None
                or topic.error is not None
                or any(p.leader < 0 for p in topic.partitions.values())
            ):
                raise _NotVisibleYetError(self.topic)

        with_retries(
            f"waiting for the new commit-intent topic {self.topic} to have a leader",
            self._conf,
            visible,
            self._timeout_s,
            retriable=lambda e: isinstance(e, _NotVisibleYetError) or is_retriable(e),
        )
        _ensured.add(key)

    def _retry(self, what: str, call: Callable[[float], T], access: Access | None = None) -> T:
        return with_retries(what, self._conf, call, self._timeout_s, access=access)

    def exists(self) -> bool:
        """Whether the topic exists, asked without creating it (``sparkafka txn`` only reads).

        Every topic's metadata is asked for, not this topic's: a Metadata request naming a topic creates it
        on a broker with ``auto.create.topics.enable=true`` (Apache Kafka's default; librdkafka's admin
        client asks with topic creation allowed). Measured: ``sparkafka txn list --prefix nosuch`` created
        ``_sparkafka-intents-nosuch`` that way.
        """
        admin = admin_client(self._conf)
        meta = self._retry(f"looking up {self.topic}", lambda left: admin.list_topics(timeout=left))
        topic = meta.topics.get(self.topic)
        found = topic is not None and topic.error is None
        if found:
            _existing.add((self._conf.get("bootstrap.servers"), self.topic))
        return found

    def read(self) -> LogState:
        """Fold the log, read up to the end of the partition as the broker acknowledges it; a log not yet
        created (nothing written with this prefix) is empty."""
        key = (self._conf.get("bootstrap.servers"), self.topic)
        if key not in _ensured and key not in _existing and not self.exists():
            if not _authenticates(self._conf):
                return LogState()
            # With ACLs a topic this user may not DESCRIBE is missing from the listing too: never read as
            # empty (a pending batch would be missed); made first, as before lazy creation, or refused.
            if self._create:
                self._ensure_topic()
        access = Access("READ", "topic", self.topic)
        return self._retry(f"reading the commit-intent topic {self.topic}", self._read_once, access)

    def _read_once(self, timeout_s: float) -> LogState:
        """One read: the whole log folded, from its start or from where this process folded it last.

        Every record counts, however much was written after it: a query's newest record can sit below
        hundreds of another query's (a prefix taken over), and deciding a replay or an owner from a tail
        would then miss it. The log is compacted (about one record per query plus the active segment), and
        a process keeps its fold (``_folded``) so that each later read fetches only the records appended
        since: the planner and the sink runner read it at every batch. A fold is redone from the start when
        it was last read more than ``FOLD_MAX_AGE_S`` ago, or when the log no longer holds its offsets (a
        recreated topic).

        The end is ListOffsets(latest), the high watermark, which on Apache Kafka covers every record
        acknowledged with acks=all. Where that answer is wrong (tansu: it lags records another process has
        just had acknowledged), ``AdminMetadata.latest`` resolves the end by fetching (``broker_gaps``).
        Reading to a known end rather than to the end-of-partition event matters for latency: a fetch at
        the end of the log is held for ``fetch.wait.max.ms`` (500 ms by default), and this runs several
        times per exactly-once batch.
        """
        tp = TopicPartition(self.topic, 0)
        meta = AdminMetadata({**self._conf, "isolation.level": "read_uncommitted"}, timeout_s)
        end = meta.latest([tp])[tp]
        earliest = meta.earliest([tp])[tp]
        key = (self._conf.get("bootstrap.servers"), self.topic)
        last = _folded.get(key)
        now = time.monotonic()
        if last is not None and earliest <= last.end <= end and now - last.at_s < FOLD_MAX_AGE_S:
            start, state = last.end, last.state.copy()
        else:
            start, state = earliest, LogState()
        fold(self._records(start, end, timeout_s), state)
        state.end = max(state.end, end)
        _folded[key] = _Folded(end, now, state.copy())
        return state

    def _records(
        self, start: int, end: int, timeout_s: float
    ) -> list[tuple[int, bytes | None, IntentRecord | None]]:
        """The (offset, key, record) triples at offsets ``start`` .. ``end - 1`` (compaction may have removed
        some)."""
        from confluent_kafka import KafkaException
        from confluent_kafka import TopicPartition as CTopicPartition

        records: list[tuple[int, bytes | None, IntentRecord | None]] = []
        if end <= start:
            return records
        consumer = new_consumer(
            {
                **self._conf,
                "group.id": "sparkafka-intents",  # required by librdkafka; never joined or committed
                "enable.auto.commit": "false",
                "isolation.level": "read_uncommitted",
            }
        )
        deadline = time.monotonic() + timeout_s
        try:
            consumer.assign([CTopicPartition(self.topic, 0, start)])
            position = start
            while position < end:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"offsets {position}..{end - 1} not read within {timeout_s:.1f} s")
                msgs = next_messages(consumer, 1000, min(left, 0.5))
                for msg in msgs:
                    if msg.error() is not None and is_group_denial(msg.error()):
                        continue  # its group is never used (see the group.id above); the read goes on
                    if msg.error() is not None:
                        raise KafkaException(msg.error())
                    if msg.offset() >= end:
                        continue
                    key, value = msg.key(), msg.value()
                    if key is None or not key.startswith(WITNESS_PREFIX):  # tasks' witnesses: not states
                        records.append((msg.offset(), key, IntentRecord.from_json(value) if value else None))
                    position = max(position, msg.offset() + 1)
                if position < end:  # offsets with no record to show: the markers of tasks' transactions
                    (now,) = consumer.position([CTopicPartition(self.topic, 0)])
                    position = max(position, now.offset)
        finally:
            consumer.close()
        return records

    def _where(self) -> str:
        return " " + against_servers(self._conf)

    def append(self, record: IntentRecord) -> int:
        """Write ``record`` durably (acks=all) before returning its offset.

        Raises:
            IntentWriteError: ``ambiguous`` when the write timed out (it may still have been stored).
        """
        return self._produce(record.key(), record.to_json(), f"{record.state} of batch {record.batch_id}")

    def forget(self, query_id: str, tasks: Iterable[int] = ()) -> None:
        """Delete a finished batch write's key and its tasks' witness keys (tombstones; compaction drops
        each with what it deletes)."""
        self._produce(query_id.encode(), None, f"the tombstone of {query_id}")
        for task in tasks:
            self._produce(witness_key(query_id, task), None, f"the tombstone of {query_id}'s task {task}")

    def _produce(self, key: bytes, value: bytes | None, what: str) -> int:
        if self._create:
            self._ensure_topic()
        # Not an idempotent producer: its producer-id handshake costs about 0.5 s per producer on some
        # brokers (measured on tansu), and a retried duplicate is harmless (folding takes a record equal to
        # its query's state as nothing new).
        from confluent_kafka import KafkaError

        errors: list[Any] = []
        offsets: list[int] = []

        def delivered(error: Any, message: Any) -> None:
            errors.append(error)
            if error is None:
                offsets.append(message.offset())

        settings = {
            **self._conf,
            "enable.idempotence": "false",
            "acks": "all",
            "linger.ms": "0",
            "allow.auto.create.topics": NO_TOPIC_CREATION,  # never without compaction (``create``)
        }
        producer = new_producer(settings)
        producer.produce(self.topic, value, key=key, on_delivery=delivered)
        left = producer.flush(self._timeout_s)
        failed = [e for e in errors if e is not None]
        if not left and not failed and offsets:
            return int(offsets[0])
        for error in failed:
            refusal = denied_by(error, self._conf, Access("WRITE", "topic", self.topic), f"writing {what}")
            if refusal is not None:
                raise refusal
        timed_out = bool(left) or any(e.code() == KafkaError._MSG_TIMED_OUT for e in failed)
        if left:
            producer.purge()  # give up locally; a request already sent may still land
            producer.flush(0)
        raise IntentWriteError(
            f"writing {what} to {self.topic} failed{self._where()}: {'timed out' if left else failed[0]}",
            ambiguous=timed_out,
        )
