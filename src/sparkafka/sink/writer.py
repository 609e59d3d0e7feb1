"""Spark-facing adapters for writing: thin layers over ``task`` (executors) and ``twophase`` (driver).

Process model (measured, PySpark 4.3): ``streamWriter()`` is called for every micro-batch in a planner
process before the batch's tasks start, and again in Spark's sink runner, which calls ``commit`` or
``abort`` on that fresh instance. Exactly-once recovery therefore runs in the constructor: a crashed
commit is resolved before a replayed batch's tasks fence the transactional ids again, which keeps every
EndTxn answer exact (see ``twophase``). The prefix owner check runs there too, where the query id can be
known: a streaming query's from its checkpoint's ``metadata`` file (local checkpoints; otherwise at
commit), a batch write's from its job id. The sink runner's instance hands the state its recovery read to
its one ``commit``, so a batch reads the intent log twice, not three times; a pickled copy (the tasks', or
the planner's writer a batch write commits on) carries no state and reads again.

A task that meets an error no retry can heal (``errors.is_permanent``: a setting, an ACL, a topic that does
not exist, a record the broker refuses) does not fail: it returns a commit message carrying the error (its
transaction, under exactly_once, already aborted as a failing task's is; no handle) and the commit raises it
before deciding anything of the batch, so nothing of the batch is committed and Spark calls ``abort``, which
aborts the other tasks' transactions, and fences the id of a refusing task whose own abort the broker did not
confirm (``TaskAbort``; no intent names its transaction, since the commit raised before writing one). Under
exactly_once one batch is let through: the replay of a batch the intent log has as done, whose rows are
committed, is skipped as every such replay is (``TwoPhaseCommitter.commit``), or Spark would replay it,
refused, on every restart. A failing task would be retried ``spark.task.maxFailures`` times, each attempt
failing the same way and each logged with the worker's traceback; a failing commit is not retried, and the
query or job fails once with the sentence (measured, PySpark 4.3: no task attempt failed). Other errors still
fail the task, so that Spark's retry can heal them.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from sparkafka.errors import ConfigError, SparkafkaError, is_permanent
from sparkafka.metrics_files import add_counts, query_sink_path
from sparkafka.sink.access import require_sink_access
from sparkafka.sink.commit_parts import claim_transactional_ids
from sparkafka.sink.faults import fault_point
from sparkafka.sink.intents import LogState
from sparkafka.sink.modes import StreamBatch
from sparkafka.sink.options import InputColumns, SinkOptions
from sparkafka.sink.task import TaskAbort, TaskResult, write_task
from sparkafka.sink.twophase import TwoPhaseCommitter
from sparkafka.spark_lines import StreamArrowWriter

__all__ = ["SPECULATION_ENV", "KafkaBatchWriter", "KafkaCommitMessage", "KafkaStreamWriter"]

log = logging.getLogger(__name__)

_QUERY_ID = "sql.streaming.queryId"
_MIN_TIMEOUT_MS = 60_000
SPECULATION_ENV = "SPARKAFKA_SPARK_SPECULATION"
"""Set by ``sparkafka.register`` in the Python workers' environment to the application's spark.speculation
(the planner process that makes writers has no SparkConf)."""


_warned_short: set[tuple[str | None, int]] = set()


def warn_if_short_timeout(options: SinkOptions) -> bool:
    """Warn, once per prefix and timeout in this process, when transactions may time out before recovery.

    Writers are made every micro-batch, in a planner process Spark keeps: the warning would otherwise
    repeat each batch. Returns whether it warned now.
    """
    key = (options.transactional_id_prefix, options.transaction_timeout_ms)
    if options.transaction_timeout_ms >= _MIN_TIMEOUT_MS or key in _warned_short:
        return False
    _warned_short.add(key)
    log.warning(
        "kafka.transaction.timeout.ms=%d is short: it must exceed the trigger interval plus the time to "
        "recover after a crash, or the broker aborts transactions that were about to be committed "
        "(sparkafka then writes the batch again on restart; see the guarantees in docs/writing.md)",
        options.transaction_timeout_ms,
    )
    return True


def check_no_speculation() -> None:
    """Refuse exactly_once under speculation: two attempts of one task share its transactional id.

    PySpark runs a task's ``write()`` before the commit coordinator picks an attempt, so a speculative
    attempt's InitProducerId would abort the other attempt's flushed transaction.
    """
    if os.environ.get(SPECULATION_ENV, "").lower() == "true":
        raise ConfigError(
            "deliveryGuarantee=exactly_once cannot run with spark.speculation=true: two attempts of one "
            "task share its transactional id and abort each other's transactions. Set spark.speculation="
            "false for this application, or use deliveryGuarantee=at_least_once"
        )


def query_id_from_checkpoint(location: str | None) -> str | None:
    """The streaming query id Spark keeps in ``<checkpointLocation>/metadata``; None if not readable here."""
    if not location:
        return None
    path = location.removeprefix("file://") if location.startswith("file://") else location
    path = path.removeprefix("file:")
    if "://" in path:
        return None  # a remote file system: the owner check waits for the commit, which knows the id
    try:
        return str(json.loads((Path(path) / "metadata").read_text())["id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What a writer task sends the driver: its result or its refusal, and the query it wrote for."""

    result: TaskResult | None
    """What the task wrote; None when it refused."""
    query_id: str | None
    """The query the task wrote for (None if unknown)."""
    refusal: SparkafkaError | None = None
    """The error that no retry can heal which ended the task (``errors.is_permanent``), for the commit to
    raise; the task handed over nothing to commit (under exactly_once its transaction was aborted)."""
    abort: TaskAbort | None = None
    """With a refusal, under exactly_once: the task's abort of its transaction. Spark's abort fences the id
    when the broker did not confirm it (``_Writer._abort``)."""


def _task_context() -> tuple[int, str | None]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return 0, None
    return context.partitionId(), context.getLocalProperty(_QUERY_ID)


def _results(messages: Sequence[WriterCommitMessage | None]) -> tuple[str | None, list[TaskResult]]:
    """The query the messages name (None unless exactly one) and the results of the tasks that wrote
    (refusals have none)."""
    ours = [m for m in messages if isinstance(m, KafkaCommitMessage)]
    query_ids = {m.query_id for m in ours}
    results = [m.result for m in ours if m.result is not None]
    return (next(iter(query_ids)) if len(query_ids) == 1 else None), results


def _unconfirmed_aborts(messages: Sequence[WriterCommitMessage | None]) -> list[str]:
    """The transactional ids of refusing tasks whose abort the broker did not confirm (``TaskAbort``)."""
    return [
        m.abort.transactional_id
        for m in messages
        if isinstance(m, KafkaCommitMessage) and m.abort is not None and not m.abort.confirmed
    ]


def _refusal(messages: Sequence[WriterCommitMessage | None]) -> SparkafkaError | None:
    """The first task's refusal, if a task refused: the batch must not be committed; None if none did.

    Raised first in every commit (every guarantee, streaming and batch), before anything is written or
    ended: Spark then calls ``abort`` with the same messages. Under exactly_once only a batch the intent log
    has as done is let through, as the replay it is (``TwoPhaseCommitter.commit``). Other tasks' refusals
    with another sentence are logged (one error is raised).
    """
    refusals = [m.refusal for m in messages if isinstance(m, KafkaCommitMessage) and m.refusal is not None]
    if not refusals:
        return None
    first = refusals[0]
    for other in sorted({str(r) for r in refusals[1:]} - {str(first)}):
        log.error("another task of the batch refused as well: %s", other)
    return first


class _Writer:
    def __init__(
        self, options: SinkOptions, columns: InputColumns, query_id: str | None, streaming: bool
    ) -> None:
        self._options = options
        self._columns = columns
        self._streaming = streaming
        self._tids_in_use = 0
        self._recovered: LogState | None = None
        require_sink_access(options)
        if options.delivery == "exactly_once":
            check_no_speculation()
            warn_if_short_timeout(options)
            committer = TwoPhaseCommitter.for_options(options)
            state = committer.recover()
            if query_id is not None:
                committer.check_owner(state, query_id)
            self._tids_in_use = state.tids_in_use
            self._recovered = state
            require_sink_access(options)  # again: the recovery made the intent log if it was missing

    def __getstate__(self) -> dict[str, object]:
        """Pickled for tasks (and, for a batch write, for its commit): the recovered state stays behind.

        It is valid only in the process that read it, right after: a writer unpickled elsewhere reads the
        log again before committing.
        """
        return {**self.__dict__, "_recovered": None}

    def _write(self, iterator: Iterator[pa.RecordBatch], query_id: str | None) -> KafkaCommitMessage:
        task, streaming_query = _task_context()

        def batches() -> Iterator[pa.RecordBatch]:
            for batch in iterator:
                yield batch
                fault_point("task_mid_write")  # after some rows went into the transaction

        query = streaming_query or query_id
        aborts: list[TaskAbort] = []
        try:
            if self._options.delivery == "exactly_once" and task >= self._tids_in_use:
                claim_transactional_ids(self._options, task + 1)
            result = write_task(self._options, self._columns, batches(), task, query or "", aborts=aborts)
        except SparkafkaError as e:
            if not is_permanent(e):
                raise  # the task fails: Spark's retry may heal it
            # Not logged above INFO: the commit raises it, and a worker's warnings reach the console.
            log.info("task %d refused the batch (the commit raises it): %s", task, e)
            return KafkaCommitMessage(None, query, e, aborts[0] if aborts else None)
        return KafkaCommitMessage(result, query)

    def _commit(
        self, messages: Sequence[WriterCommitMessage | None], batch_id: int, query_id: str | None = None
    ) -> None:
        """Commit ``batch_id`` of ``query_id`` (default: the query the messages name); first, raise a
        task's refusal (``_refusal``), unless, under exactly_once, the batch is already committed."""
        refusal = _refusal(messages)
        named, results = _results(messages)
        query_id = query_id or named
        if self._options.delivery != "exactly_once":
            if refusal is not None:
                raise refusal
            fault_point("commit_start")
            if query_id is not None:  # tasks flushed (at_least_once) before reporting success
                # The query's counters file (exactly-once batches are counted by the committer).
                add_counts(
                    query_sink_path(query_id), {"batches": 1, "records": sum(r.records for r in results)}
                )
            return
        # A streaming commit runs on a writer Spark's sink runner has just made in this process: its
        # recovery is the commit's first step (one intent-log read less per batch). Used once.
        recovered, self._recovered = self._recovered, None
        if query_id is None:
            if refusal is not None:
                raise refusal
            raise ValueError("commit messages name no single query id")
        TwoPhaseCommitter.for_options(self._options).commit(
            query_id,
            batch_id,
            results,
            self._streaming,
            recovered=recovered,
            refusal=refusal,
            fence=_unconfirmed_aborts(messages),
        )

    def _abort(
        self, messages: Sequence[WriterCommitMessage | None], batch_id: int, query_id: str | None = None
    ) -> None:
        if self._options.delivery != "exactly_once":
            return
        named, results = _results(messages)
        query_id = query_id or named
        TwoPhaseCommitter.for_options(self._options).abort(
            query_id, batch_id, results, fence=_unconfirmed_aborts(messages)
        )


class KafkaStreamWriter(_Writer, StreamArrowWriter):  # type: ignore[misc]
    """``writeStream.format("sparkafka")``: Arrow batches in on every PySpark line (``spark_lines``)."""

    def __init__(self, options: SinkOptions, columns: InputColumns) -> None:
        """Made for every micro-batch, before its tasks start: exactly-once recovery runs here."""
        super().__init__(options, columns, query_id_from_checkpoint(options.checkpoint_location), True)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self._write(iterator, None)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        self._commit(messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        self._abort(messages, batchId)


class KafkaBatchWriter(_Writer, DataSourceArrowWriter):
    """``df.write.format("sparkafka")``: one job, committed like one micro-batch (batch id 0).

    With ``stream`` it is instead micro-batch ``stream.batch_id`` of streaming query ``stream.query_id``,
    written from ``foreachBatch`` (update mode, ``sparkafka.sink.modes``): committed, recovered, replayed
    and owner-checked exactly as the streaming writer does that batch (the intent log cannot tell them
    apart), so a batch Spark replays after a crash is not written twice.
    """

    def __init__(
        self, options: SinkOptions, columns: InputColumns, stream: StreamBatch | None = None
    ) -> None:
        """Name the job ``batch-<uuid>`` (or the streaming query); recovery and the owner check run here.

        Made by Spark in a Python worker on the driver before any task starts; pickled for the tasks and
        for the commit, which runs in another such worker.
        """
        self._stream = stream
        self._job = stream.query_id if stream is not None else f"batch-{uuid.uuid4()}"
        super().__init__(options, columns, self._job, stream is not None)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self._write(iterator, self._job)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self._stream is None:
            self._commit(messages, 0)
        else:
            self._commit(messages, self._stream.batch_id, self._stream.query_id)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self._stream is None:
            self._abort(messages, 0)
        else:
            self._abort(messages, self._stream.batch_id, self._stream.query_id)
