"""Spark-facing adapters for writing: thin layers over ``task`` (executors) and ``twophase`` (driver).

Process model (measured, PySpark 4.3): ``streamWriter()`` is called for every micro-batch in a planner
process before the batch's tasks start, and again in Spark's sink runner, which calls ``commit`` or
``abort`` on that fresh instance. Exactly-once recovery therefore runs in the constructor: a crashed
commit is finished before a replayed batch's tasks fence the transactional ids again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from sparkafka.sink.faults import fault_point
from sparkafka.sink.options import InputColumns, SinkOptions
from sparkafka.sink.task import TaskResult, write_task
from sparkafka.sink.twophase import TwoPhaseCommitter, claim_transactional_ids

__all__ = ["KafkaBatchWriter", "KafkaCommitMessage", "KafkaStreamWriter"]

log = logging.getLogger(__name__)

_QUERY_ID = "sql.streaming.queryId"
_MIN_TIMEOUT_MS = 60_000


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    result: TaskResult
    query_id: str | None


def _task_context() -> tuple[int, str | None]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return 0, None
    return context.partitionId(), context.getLocalProperty(_QUERY_ID)


def _results(messages: Sequence[WriterCommitMessage | None]) -> tuple[str | None, list[TaskResult]]:
    ours = [m for m in messages if isinstance(m, KafkaCommitMessage)]
    query_ids = {m.query_id for m in ours}
    return (next(iter(query_ids)) if len(query_ids) == 1 else None), [m.result for m in ours]


class _Writer:
    def __init__(self, options: SinkOptions, columns: InputColumns) -> None:
        self._options = options
        self._columns = columns
        self._tids_in_use = 0
        if options.delivery == "exactly_once":
            if options.transaction_timeout_ms < _MIN_TIMEOUT_MS:
                log.warning(
                    "kafka.transaction.timeout.ms=%d is short: it must exceed the trigger interval plus the "
                    "time to recover after a crash, or the broker aborts transactions that were about to be "
                    "committed (Flink warns alike)",
                    options.transaction_timeout_ms,
                )
            self._tids_in_use = TwoPhaseCommitter(options).recover().tids_in_use

    def _write(self, iterator: Iterator[pa.RecordBatch], query_id: str | None) -> KafkaCommitMessage:
        task, streaming_query = _task_context()

        def batches() -> Iterator[pa.RecordBatch]:
            for batch in iterator:
                yield batch
                fault_point("task_mid_write")  # after some rows went into the transaction

        if self._options.delivery == "exactly_once" and task >= self._tids_in_use:
            claim_transactional_ids(self._options, task + 1)
        result = write_task(self._options, self._columns, batches(), task)
        return KafkaCommitMessage(result, streaming_query or query_id)

    def _commit(self, messages: Sequence[WriterCommitMessage | None], batch_id: int) -> None:
        fault_point("commit_start")
        query_id, results = _results(messages)
        if self._options.delivery != "exactly_once":
            return  # tasks flushed (at_least_once) before reporting success
        if query_id is None:
            raise ValueError("commit messages name no single query id")
        TwoPhaseCommitter(self._options).commit(query_id, batch_id, results)

    def _abort(self, messages: Sequence[WriterCommitMessage | None], batch_id: int) -> None:
        if self._options.delivery != "exactly_once":
            return
        query_id, results = _results(messages)
        TwoPhaseCommitter(self._options).abort(query_id, batch_id, results)


class KafkaStreamWriter(_Writer, DataSourceStreamArrowWriter):
    """``writeStream.format("sparkafka")``."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self._write(iterator, None)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        self._commit(messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        self._abort(messages, batchId)


class KafkaBatchWriter(_Writer, DataSourceArrowWriter):
    """``df.write.format("sparkafka")``: one job, committed like one micro-batch (batch id 0)."""

    def __init__(self, options: SinkOptions, columns: InputColumns) -> None:
        super().__init__(options, columns)
        self._job = f"batch-{uuid.uuid4()}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self._write(iterator, self._job)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._commit(messages, 0)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._abort(messages, 0)
