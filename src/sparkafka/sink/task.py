"""Executor side of the sink: produce one Spark task's rows, flush, and report what the driver needs.

exactly_once: the task opens a transaction under ``<prefix>-<task index>`` (fencing, and so aborting, any
transaction an earlier attempt of the same task left open), produces, flushes (the pre-commit), and drops
its producer without closing it, which leaves the flushed transaction open for the driver to commit
(``close()`` would abort it). at_least_once: a producer cached per worker process, flushed before the
task reports success; a task that fails first waits (bounded) for its records' reports (``_drain``): the
worker's next task must not read them as its own. none: the same producer, never flushed by a task, so its
reports are earlier tasks' as much as this one's: none is taken as a task's error, and a failed task
leaves the producer (and its flush at the worker's exit) as it is.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkafka.client.conf import against_servers
from sparkafka.client.core import cached, new_producer, uncache, with_retries
from sparkafka.client.security import Access, denied_by
from sparkafka.errors import BrokerError, SparkafkaError, TransactionError, is_permanent
from sparkafka.sink.delivery import (
    TOO_LARGE_HINT,
    Deliveries,
    librdkafka_int,
    producer_settings,
    refuses_record,
)
from sparkafka.sink.identity import open_transactional_producer
from sparkafka.sink.intents import IntentLog, intent_topic, witness_key
from sparkafka.sink.options import InputColumns, SinkOptions
from sparkafka.sink.routing import Router
from sparkafka.sink.txn_control import MarkerProbe, TxnHandle

__all__ = ["TaskAbort", "TaskResult", "transactional_id", "write_task"]

log = logging.getLogger(__name__)


def transactional_id(prefix: str, task: int) -> str:
    """Deterministic per task index, never per attempt: a retry fences the attempt before it."""
    return f"{prefix}-{task}"


@dataclass
class TaskResult:
    """What one writer task reports to the driver in its commit message (it must pickle).

    ``handle`` is the task's flushed, still open transaction under exactly-once (None when the task wrote
    nothing, or under the other guarantees); ``started_ms`` is when the result was made, in wall-clock ms.
    """

    task: int
    records: int
    handle: TxnHandle | None = None
    started_ms: int = field(default_factory=lambda: int(time.time() * 1000))


@dataclass(frozen=True)
class TaskAbort:
    """A failed exactly-once task's abort of its transaction, as its refusal carries it to the driver (it
    must pickle)."""

    transactional_id: str
    confirmed: bool
    """Whether the broker confirmed the abort. If not (the coordinator did not answer within the task's
    10 s), the transaction may stay open, holding back read_committed readers of every partition it wrote,
    until the broker's ``transaction.timeout.ms``: Spark's abort then fences the id (``writer``)."""


def _plain_producer(conf: Mapping[str, str], delivery: str) -> tuple[Any, Deliveries]:
    """The worker process's producer for ``delivery`` (at_least_once or none: one each, so that what a
    ``none`` sink never flushes does not fail another query's flush)."""

    def make() -> tuple[Any, Deliveries]:
        deliveries = Deliveries(conf)
        return new_producer(producer_settings(conf, deliveries, f"sink-{delivery}")), deliveries

    return cached(f"sink-producer-{delivery}", conf, make, lambda made: made[0].flush(_DRAIN_S))


_DRAIN_S = 30.0
"""How long a plain producer's records may take to be answered once its task failed (``_drain``), and at
the worker's exit."""


def _drain(
    producer: Any, deliveries: Deliveries, error: Exception, conf: Mapping[str, str], delivery: str
) -> SparkafkaError | None:
    """After a plain-producer task's ``error``: what became of the task's records, before the task ends.

    The producer and its ``Deliveries`` serve the worker's later tasks (``_plain_producer``): a failed
    task's record reported later, refused by the broker say, would be read by the next task's flush as
    its own and fail it, as a refusal of a batch of perhaps another query. So the task waits for its
    records' reports (at most ``_DRAIN_S``) and takes them: a record refused for what it is is returned
    as the task's error when ``error`` is one a retry may heal (the retry would meet the refusal again);
    anything else is logged. A producer still holding records after that is forgotten by the worker's
    cache (the next task makes another), so their reports reach no later task.
    """
    left = -1
    with contextlib.suppress(Exception):  # a producer in a fatal state: the task's error is raised
        left = producer.flush(_DRAIN_S)
        producer.poll(0)  # a log line queued just before the last record left (``_flush``)
    if left != 0:
        uncache(f"sink-producer-{delivery}", conf)
    reported = deliveries.failure(max(left, 0), _DRAIN_S)
    if reported is None:
        return None
    if reported.permanent and not is_permanent(error):
        return reported
    log.info("the failed task's other records: %s", reported)
    return None


DEFAULT_PROPAGATION_MS = 30_000
"""librdkafka's default ``topic.metadata.propagation.max.ms``."""

_BACKOFF_S = (0.1, 1.0)
"""The first and the longest wait between two metadata requests for a topic the broker does not know."""


class _Counts:
    """Partition counts per topic, looked up once per task through the producer's metadata.

    A topic the broker says it does not know (UNKNOWN_TOPIC_OR_PART, or absent from the answer) is asked
    about again, with a back-off from 0.1 s to 1 s, until librdkafka's ``topic.metadata.propagation.max.ms``
    (the producer's setting, 30 s by default: librdkafka waits as long itself before it fails a record for
    an unknown topic) after the first such answer: a topic just created reaches each broker's metadata a
    moment later. Still unknown then, it is a ``permanent`` error (a ``topic`` column's value names it; the
    sink does not create topics, ``sink.delivery.NO_TOPIC_CREATION``). One that is known but not ready yet
    (a leader being elected) is not permanent: the task fails for Spark's retry.

    ``clock`` (monotonic seconds) and ``sleep`` are the waiting's, injectable for tests.
    """

    def __init__(
        self,
        producer: Any,
        conf: Mapping[str, str],
        timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._producer = producer
        self._conf = conf
        self._timeout_s = timeout_s
        self._clock = clock
        self._sleep = sleep
        given = librdkafka_int(str(conf.get("topic.metadata.propagation.max.ms", "")))
        self._propagation_s = (DEFAULT_PROPAGATION_MS if given is None else max(given, 0)) / 1000
        self._counts: dict[str, int] = {}

    def __call__(self, topic: str) -> int:
        if topic not in self._counts:
            self._counts[topic] = self._look_up(topic)
        return self._counts[topic]

    def _look_up(self, topic: str) -> int:
        first_unknown: float | None = None
        backoff = _BACKOFF_S[0]
        while True:
            meta = with_retries(
                f"looking up topic {topic!r}",
                self._conf,
                lambda left: self._producer.list_topics(topic=topic, timeout=left).topics.get(topic),
                self._timeout_s,
            )
            refusal = denied_by(meta.error, self._conf, Access("WRITE", "topic", topic)) if meta else None
            if refusal is not None:
                raise refusal
            if meta is not None and not _unknown_topic(meta.error):
                if meta.error is not None or not meta.partitions:
                    why = meta.error or "no partitions"
                    raise BrokerError(f"topic {topic!r} is not ready to write to: {why}")
                return len(meta.partitions)
            now = self._clock()
            first_unknown = now if first_unknown is None else first_unknown
            left = first_unknown + self._propagation_s - now
            if left <= 0:
                raise BrokerError(
                    f"topic {topic!r} does not exist (the sink does not create topics)", permanent=True
                )
            self._sleep(min(backoff, left))
            backoff = min(backoff * 2, _BACKOFF_S[1])


def _unknown_topic(error: Any) -> bool:
    """Whether a topic's metadata error says the broker has no such topic (UNKNOWN_TOPIC_OR_PART)."""
    from confluent_kafka import KafkaError

    return error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def _counts(producer: Any, options: SinkOptions) -> _Counts:
    return _Counts(producer, options.kafka, options.metadata_timeout_ms / 1000)


def _produce(producer: Any, topic: str, value: Any, **kwargs: Any) -> None:
    while True:
        try:
            producer.produce(topic, value, **kwargs)
        except BufferError:
            producer.poll(0.05)  # the local queue is full: let deliveries drain
        else:
            return


def _produce_simple(producer: Any, topic: str, values: list[Any], keys: list[Any], parts: list[int]) -> None:
    """The common case's loop: one topic, no headers or timestamps; positional arguments, no kwargs."""
    produce = producer.produce
    for i, (value, key, partition) in enumerate(zip(values, keys, parts, strict=True)):
        try:
            produce(topic, value, key, partition)
        except BufferError:
            producer.poll(0.05)  # the local queue is full: let deliveries drain
            _produce(producer, topic, value, key=key, partition=partition)
        if i % 10_000 == 9_999:
            producer.poll(0)


def _sizes(values: pa.Array) -> Any:
    """Byte length of each value (0 for null), for the sticky partitioner: a numpy array, no Python ints."""
    return pc.fill_null(pc.binary_length(values), 0).to_numpy(zero_copy_only=False)


def _producing_failed(
    producer: Any, deliveries: Deliveries | None, failed: Exception, where: str
) -> SparkafkaError:
    """The error a task raises when ``produce()`` raised ``failed`` (a ``KafkaException``) for ``where``.

    What the deliveries reported comes first, after one ``poll(0)`` serves what is queued: when the broker
    refuses a Produce request of a transactional producer (MSG_SIZE_TOO_LARGE: a batch over the topic's
    max.message.bytes; librdkafka 2.16 does not split it), librdkafka sets the transaction's abortable
    error from its broker thread, so the task's next ``produce()`` raises _STATE while the refused records'
    report, the cause, waits in the queue. A record ``produce()`` refuses itself (MSG_SIZE_TOO_LARGE over
    kafka.message.max.bytes) is the cause unless the report is a refusal too; a report a retry may heal is
    then logged. Without ``deliveries`` (deliveryGuarantee=none), ``produce()``'s error alone.
    """
    error = failed.args[0] if failed.args else failed
    name = getattr(error, "name", None)
    hint = TOO_LARGE_HINT if callable(name) and name() == "MSG_SIZE_TOO_LARGE" else ""
    raised = BrokerError(f"producing to {where} failed: {error}{hint}", permanent=refuses_record(error))
    if deliveries is None:  # deliveryGuarantee=none: the reports may be earlier tasks' (``_write_plain``)
        return raised
    with contextlib.suppress(Exception):  # a producer in a fatal state: its error is what is raised
        producer.poll(0)
    reported = deliveries.failure()
    if reported is None:
        return raised
    if raised.permanent and not reported.permanent:
        log.info("records before the one refused: %s", reported)
        return raised
    return reported


class _Output:
    """One task's producing: where its rows go, how many went, and what ``produce()`` raising means
    (``_producing_failed``: never a raw ``KafkaException``)."""

    def __init__(
        self,
        producer: Any,
        options: SinkOptions,
        columns: InputColumns,
        task: int,
        deliveries: Deliveries | None,
    ) -> None:
        self.producer = producer
        self.options = options
        self.columns = columns
        self.deliveries = deliveries
        self.router = Router(options.partitioner, task, _counts(producer, options))
        self.records = 0

    def produce_all(self, batches: Iterator[pa.RecordBatch]) -> int:
        """Produce every batch's rows; the number of records produced."""
        for batch in batches:
            with self._producing(self.options.topic or "the topic column"):
                self._produce_rows(batch)
        return self.records

    def produce_one(self, topic: str, value: bytes, **kwargs: Any) -> None:
        """Produce one record that is not a row (the witness), ``produce_all``'s errors and all."""
        with self._producing(topic):
            _produce(self.producer, topic, value, **kwargs)

    @contextlib.contextmanager
    def _producing(self, where: str) -> Iterator[None]:
        from confluent_kafka import KafkaException

        try:
            yield
        except KafkaException as e:
            raise _producing_failed(self.producer, self.deliveries, e, where) from e

    def _produce_rows(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        if n == 0:
            return
        producer, options, columns, router = self.producer, self.options, self.columns, self.router
        col: dict[str, pa.Array] = {}
        for i, name in enumerate(batch.schema.names):  # exact names, the first of duplicates (input_columns)
            col.setdefault(name, batch.column(i))
        values = col["value"].to_pylist()
        # Arrow's string -> binary cast is the UTF-8 encoding Java's StringSerializer uses, without a loop.
        keys: list[Any] = col["key"].cast(pa.binary()).to_pylist() if columns.key else [None] * n
        parts: list[Any] = col["partition"].to_pylist() if columns.partition else [None] * n
        stamps = pc.divide(col["timestamp"].cast(pa.int64()), 1000).to_pylist() if columns.timestamp else None
        headers = col["headers"].to_pylist() if columns.headers else None
        if stamps is None and headers is None and not columns.topic:
            topic = options.topic
            assert topic is not None
            if not columns.partition:
                parts = router.partitions(topic, keys, _sizes(col["value"]))
            elif None in parts:
                rows = zip(parts, keys, _sizes(col["value"]), strict=True)
                parts = [p if p is not None else router.partition(topic, k, s) for p, k, s in rows]
            _produce_simple(producer, topic, values, keys, parts)
            self.records += n
            return
        topics = col["topic"].to_pylist() if columns.topic else [options.topic] * n
        for i in range(n):
            topic = topics[i] or options.topic
            if topic is None:
                raise BrokerError("a row has a null topic and the sink has no option topic", permanent=True)
            value, key = values[i], keys[i]
            partition = parts[i]
            if partition is None:
                size = len(value) if value is not None else 0
                partition = router.partition(topic, key, size)
            kwargs: dict[str, Any] = {"key": key, "partition": partition}
            if stamps is not None and stamps[i] is not None:
                kwargs["timestamp"] = stamps[i]
            if headers is not None and headers[i]:
                kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            _produce(producer, topic, value, **kwargs)
            if i % 10_000 == 9_999:
                producer.poll(0)
        self.records += n


def write_task(
    options: SinkOptions,
    columns: InputColumns,
    batches: Iterator[pa.RecordBatch],
    task: int,
    query_id: str = "",
    *,
    aborts: list[TaskAbort] | None = None,
) -> TaskResult:
    """Write one task's rows; see the module docstring for what each delivery guarantee does.

    Under exactly_once the transaction also carries one witness record into the prefix's intent log
    (``intents.witness_key``): its marker there is what the driver reads when the broker cannot say what
    became of the transaction (``sparkafka.sink.outcomes``). A task that fails after opening its
    transaction aborts it and, before raising, appends the abort (``TaskAbort``) to ``aborts``.
    """
    if options.delivery != "exactly_once":
        return _write_plain(options, columns, batches, task)
    return _write_transactional(options, columns, batches, task, query_id, aborts=aborts)


def _write_plain(
    options: SinkOptions, columns: InputColumns, batches: Iterator[pa.RecordBatch], task: int
) -> TaskResult:
    """at_least_once and none, on the worker's producer."""
    producer, deliveries = _plain_producer(options.kafka, options.delivery)
    if options.delivery == "none":  # never flushed: what earlier tasks' deliveries said, said once here
        earlier = deliveries.failure()
        if earlier is not None:
            log.warning("deliveryGuarantee=none: earlier records of this worker: %s", earlier)
    if options.delivery == "none":
        # Never flushed, so the worker's producer also holds earlier tasks' records, and its reports are
        # theirs as much as this task's: none is taken as this task's error, and a failed task neither
        # waits for them nor drops the producer (its exit flush is what sends those records).
        return TaskResult(task, _Output(producer, options, columns, task, None).produce_all(batches))
    try:
        count = _Output(producer, options, columns, task, deliveries).produce_all(batches)
        _flush(producer, deliveries)
    except Exception as e:
        cause = _drain(producer, deliveries, e, options.kafka, options.delivery)
        if cause is not None:
            raise cause from e
        raise
    return TaskResult(task, count)


def _write_transactional(
    options: SinkOptions,
    columns: InputColumns,
    batches: Iterator[pa.RecordBatch],
    task: int,
    query_id: str,
    *,
    aborts: list[TaskAbort] | None,
) -> TaskResult:
    """exactly_once: the task's transaction, flushed and left open for the driver."""
    assert options.transactional_id_prefix is not None
    tid = transactional_id(options.transactional_id_prefix, task)
    witness = MarkerProbe(intent_topic(options.transactional_id_prefix), 0)
    # The witness goes into the intent topic, which a prefix's first write makes (IntentLog): normally this
    # batch's claim, but a task that claims nothing may find it missing (deleted under a running query), and
    # a produce must neither wait out delivery.timeout.ms for it nor auto-create it without compaction.
    # Once per worker process per topic (IntentLog caches what it made or found).
    IntentLog(options.kafka, options.transactional_id_prefix, options.metadata_timeout_ms / 1000).create()
    deliveries = Deliveries(options.kafka)
    result = TaskResult(task, 0)
    producer, pid, epoch = open_transactional_producer(
        producer_settings(options.kafka, deliveries, tid, transactional=True),
        tid,
        topic=options.topic,
        prefix=options.transactional_id_prefix,
    )
    try:
        producer.begin_transaction()
        output = _Output(producer, options, columns, task, deliveries)
        result.records = output.produce_all(batches)
        if result.records:
            output.produce_one(witness.topic, b"{}", key=witness_key(query_id, task), partition=0)
        _flush(producer, deliveries)
    except BaseException as e:
        abort = TaskAbort(tid, confirmed=_abort_after_error(producer))
        if aborts is not None:
            aborts.append(abort)
        cause = _refused_meanwhile(producer, deliveries, e)
        if abort.confirmed:
            # Closed here, not left to the traceback: a producer kept alive finishes its abort in the
            # background and may bump the epoch of the id after the task's next attempt took it, fencing
            # that attempt (measured in the broker-kill chaos test: ADDPARTS "old epoch", then _FENCED).
            # close() only after an abort that succeeded: librdkafka's close aborts and flushes with no time
            # limit, so after a failed abort (coordinator unreachable) it could hang the task for good.
            with contextlib.suppress(Exception):
                producer.close()
        if cause is not None:
            raise cause from e
        if _is_kafka_exception(e):  # begin_transaction(): librdkafka's state, for Spark's retry
            raise TransactionError(f"transaction {tid} failed {against_servers(options.kafka)}: {e}") from e
        raise
    if result.records == 0:  # nothing to commit; leave no open transaction behind
        try:
            producer.abort_transaction(30)
        except Exception as e:
            if aborts is not None:
                aborts.append(TaskAbort(tid, confirmed=False))
            where = against_servers(options.kafka)
            raise TransactionError(
                f"aborting transaction {tid}, which wrote nothing, failed {where}: {e}"
            ) from e
        producer.close()
        return result
    result.handle = TxnHandle(tid, pid, epoch, result.records, task, witness)
    # Released without close(): the flushed transaction stays open for the driver's commit.
    del producer
    return result


def _abort_after_error(producer: Any) -> bool:
    """Abort a failed task's transaction; whether the broker confirmed it (if not, the transaction may stay
    open until the broker's ``transaction.timeout.ms``, or until its id is fenced, and the producer's
    records are purged instead)."""
    try:
        producer.abort_transaction(10)
    except Exception:  # noqa: BLE001 - the task's own error is what is raised
        with contextlib.suppress(Exception):
            producer.purge()
        return False
    return True


def _refused_meanwhile(producer: Any, deliveries: Deliveries, error: BaseException) -> SparkafkaError | None:
    """The record refused for what it is (a ``permanent`` delivery failure) that the deliveries hold once
    the task's producing ended on ``error``, when ``error`` itself may be healed by a retry; else None.

    A refusal reported after the task met its error is still its cause: the broker's answer that set
    librdkafka's abortable error can be queued just after ``produce()`` raised _STATE (the broker thread
    sets the error first), and by the time the transaction is aborted it is.
    """
    if not isinstance(error, Exception) or is_permanent(error):
        return None
    with contextlib.suppress(Exception):
        producer.poll(0)
    reported = deliveries.failure()
    if reported is not None and reported.permanent:
        return reported
    return None


def _is_kafka_exception(error: BaseException) -> bool:
    from confluent_kafka import KafkaException

    return isinstance(error, KafkaException)


def _flush(producer: Any, deliveries: Deliveries, timeout_s: float = 300.0) -> None:
    """Flush, then raise what the deliveries said (``Deliveries.failure``): a failed or unproven record.

    The ``poll(0)`` serves a log line librdkafka queued just before its last record left the queue, which
    ``flush()`` can return without (``sink.delivery``): an implicit ack is never missed."""
    left = producer.flush(timeout_s)
    producer.poll(0)
    failure = deliveries.failure(left, timeout_s)
    if failure is not None:
        raise failure
