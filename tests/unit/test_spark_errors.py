"""A failure inside a task or a streaming query ends in sparkafka's sentence; its type is kept."""

from __future__ import annotations

import pytest

from sparkafka import spark_errors
from sparkafka.spark_errors import last_sentence, with_sentence_last

TASK_FAILURE = (
    "Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times, most recent failure: Lost task "
    "0.3 in stage 3.0 (TID 9) (127.0.0.1 executor driver): org.apache.spark.api.python.PythonException: "
    "sparkafka.errors.BrokerError: a record of 5000 bytes for topic t-1 is larger than the broker takes "
    "(its max.message.bytes)\n"
    "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(Py.scala:1)\n"
    "\tat org.apache.spark.sql.execution.python.PythonArrowOutput$$anon$1.read(Py.scala:2)\n"
    "\nDriver stacktrace:"
)


class CapturedLikeError(Exception):
    """PySpark's captured exceptions print their ``_desc``."""

    def __init__(self, desc: str) -> None:
        super().__init__()
        self._desc = desc

    def __str__(self) -> str:
        return self._desc


def test_the_last_sentence_is_found_without_sqlstate() -> None:
    assert last_sentence(TASK_FAILURE) == (
        "BrokerError",
        "a record of 5000 bytes for topic t-1 is larger than the broker takes (its max.message.bytes)",
    )
    assert last_sentence("x: sparkafka.errors.ConfigError: bad option SQLSTATE: 38000") == (
        "ConfigError",
        "bad option",
    )
    assert last_sentence("no sparkafka error here") is None


@pytest.mark.parametrize("error", [CapturedLikeError(TASK_FAILURE), RuntimeError(TASK_FAILURE)])
def test_the_sentence_becomes_the_last_line_and_the_type_stays(error: Exception) -> None:
    kind = type(error)
    assert with_sentence_last(error) is error
    assert type(error) is kind
    lines = str(error).splitlines()
    assert lines[-1] == (
        "sparkafka.errors.BrokerError: a record of 5000 bytes for topic t-1 is larger than the broker takes "
        "(its max.message.bytes)"
    )
    with_sentence_last(error)  # once only
    assert str(error).count("sparkafka.errors.BrokerError") == 2


def test_a_failure_at_start_already_ending_in_the_sentence_stays_two_lines() -> None:
    text = (
        "[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: sparkafka.errors."
        "ConfigError: option deliveryGuarantee='nope' is not allowed; use one of: at_least_once\n"
        " SQLSTATE: 38000"
    )
    assert str(with_sentence_last(RuntimeError(text))) == text


def test_other_failures_are_untouched() -> None:
    error = RuntimeError("Job aborted: java.lang.OutOfMemoryError")
    assert str(with_sentence_last(error)) == "Job aborted: java.lang.OutOfMemoryError"


def test_wrapped_calls_raise_the_same_exception_with_the_sentence_last() -> None:
    class Query:
        def awaitTermination(self) -> None:
            raise CapturedLikeError(TASK_FAILURE)

        def exception(self) -> Exception:
            return CapturedLikeError(TASK_FAILURE)

    for name in ("awaitTermination", "exception"):
        setattr(Query, name, spark_errors._surfacing(vars(Query)[name]))
    with pytest.raises(CapturedLikeError) as raised:
        Query().awaitTermination()
    assert str(raised.value).splitlines()[-1].startswith("sparkafka.errors.BrokerError: a record of 5000")
    assert str(Query().exception()).splitlines()[-1].startswith("sparkafka.errors.BrokerError: a record")


class FakeThrowable:
    """A JVM throwable as py4j shows it: ``getCondition`` on a SparkThrowable only, ``getCause``."""

    def __init__(self, condition: str | None, cause: FakeThrowable | None = None) -> None:
        self._condition = condition
        self._cause = cause

    def getCondition(self) -> str:
        if self._condition is None:
            raise AttributeError("not a SparkThrowable")  # py4j: no such method
        return self._condition

    def getCause(self) -> FakeThrowable | None:
        return self._cause


def test_the_data_loss_class_is_read_from_sparks_jvm_cause_or_from_sparkafkas_sentence() -> None:
    """Spark's connector: the class is the condition of a JVM cause and nowhere in the text (its message
    starts "Some data may have been lost"); sparkafka's: the sentence starts with it in brackets."""
    theirs = CapturedLikeError("[STREAM_FAILED] Query [id = 1] terminated with exception: Some data may have")
    theirs._origin = FakeThrowable(  # type: ignore[attr-defined]
        "STREAM_FAILED",
        FakeThrowable(None, FakeThrowable("KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE")),
    )
    assert spark_errors.data_loss_condition(theirs) == "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE"
    ours = CapturedLikeError(
        "[STREAM_FAILED] ... [PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data "
        "source perform latestOffset: sparkafka.errors.DataLossError: "
        "[KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED] Some data may have been lost: partition t-0's offset was "
        "changed from 50 to 10: ..."
    )
    ours._origin = FakeThrowable("STREAM_FAILED", FakeThrowable("PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR"))  # type: ignore[attr-defined]
    assert spark_errors.data_loss_condition(ours) == "KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED"
    assert spark_errors.data_loss_condition(RuntimeError(TASK_FAILURE)) is None
    cyclic = FakeThrowable("STREAM_FAILED")
    cyclic._cause = cyclic
    failure = CapturedLikeError("no class")
    failure._origin = cyclic  # type: ignore[attr-defined]
    assert spark_errors.data_loss_condition(failure) is None


QUERY_FAILURE = (
    "[STREAM_FAILED] Query q1 [id = 4c53ba41, runId = 59fe779f] terminated with exception: "
    "[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform "
    'initialOffset: Traceback (most recent call last):\n  File "reader.py", line 113\n'
    "sparkafka.errors.ConfigError: Unable to retrieve any partitions for topic(s) t (subscribe=t): they do "
    "not exist. Create them first, or check the names\n SQLSTATE: 38000 SQLSTATE: XXKST\n"
    "=== Streaming Query ===\nIdentifier: q1 [id = 4c53ba41, runId = 59fe779f]\n"
    "sparkafka.errors.ConfigError: Unable to retrieve any partitions for topic(s) t (subscribe=t): they do "
    "not exist. Create them first, or check the names"
)


def test_a_query_s_failure_becomes_spark_s_head_and_the_sentence_once() -> None:
    error = CapturedLikeError(QUERY_FAILURE)
    assert with_sentence_last(error) is error
    assert str(error) == (
        "[STREAM_FAILED] Query q1 [id = 4c53ba41, runId = 59fe779f] terminated with exception: "
        "sparkafka.errors.ConfigError: Unable to retrieve any partitions for topic(s) t (subscribe=t): they "
        "do not exist. Create them first, or check the names"
    )
    assert error.spark_report == QUERY_FAILURE  # type: ignore[attr-defined]
    with_sentence_last(error)
    assert str(error).count("sparkafka.errors.") == 1


def test_a_query_s_failure_raised_by_await_has_the_caller_s_frames_only() -> None:
    def await_termination() -> None:
        raise CapturedLikeError(QUERY_FAILURE)

    def bug() -> None:
        raise CapturedLikeError("[STREAM_FAILED] Query [id = a, runId = b] terminated with exception: boom")

    for method, frames in ((await_termination, 1), (bug, 2)):
        with pytest.raises(CapturedLikeError) as raised:
            spark_errors._surfacing(method)()
        tb, seen = raised.tb, 0
        while tb is not None:
            seen += tb.tb_frame.f_code.co_name in ("wrapper", "await_termination", "bug")
            tb = tb.tb_next
        assert seen == frames  # ours: the wrapper alone; a failure without a sentence keeps its frames
