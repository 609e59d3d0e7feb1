"""A failure that happens inside a Spark task or a streaming query, with sparkafka's sentence last.

Runs in the user's driver process, installed by ``sparkafka.register`` (classic sessions). What only fails
in a task (a record the broker refuses, a topic a ``topic`` column names that does not exist, a batch the
broker aborted) reaches the driver inside Spark's exception: ``Job aborted due to stage failure: ...
PythonException: sparkafka.errors.BrokerError: <the sentence>`` followed by the task's JVM stack and
"Driver stacktrace:", or, from a streaming query, ``[STREAM_FAILED] ...`` followed by the query's plan
(measured: the sentence on one line of 30 to 300, and once per failed attempt). Here the API calls a user
makes to run a job or wait for a query see that exception first:

- a query's failure (``[STREAM_FAILED] Query ... terminated with exception: ...``) that names a sparkafka
  sentence becomes Spark's head and the sentence, ``[STREAM_FAILED] Query [id = ..., runId = ...]
  terminated with exception: sparkafka.errors.<Class>: <sentence>``, one line, raised with the caller's
  frames only (PySpark's and py4j's say nothing more); Spark's whole report (the worker's traceback, the
  query's plan) stays in the exception's ``spark_report`` attribute. With ``sparkafka.spark_logs`` keeping
  Spark's log of it out, that is all the user sees: measured, 7 to 12 lines after ``start()``, the
  sentence once (97 to 103 lines, three times, before).
- any other failure (a batch job's) gets one more line at the end of its message, the last sentence
  sparkafka put in it, as ``sparkafka.errors.<Class>: <sentence>``.

The exception keeps its type (``StreamingQueryException``, ...), so handlers that catch Spark's exceptions
are unchanged; exceptions without a sparkafka sentence are untouched.

``data_loss_condition`` reads Spark's error class of a data-loss failure from either connector's exception.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from typing import Any

from sparkafka.spark_logs import awaited

__all__ = ["data_loss_condition", "install", "last_sentence", "with_sentence_last"]

_SENTENCE = re.compile(r"sparkafka\.errors\.(\w+): (.+)")
_DATA_LOSS = re.compile(r"\[(KAFKA_DATA_LOSS\.[A-Z_]+)\]")
_CAUSES = 16
"""How deep ``data_loss_condition`` follows a JVM exception's causes (a query's failure nests 2 to 5)."""
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\s*$")
_MARK = "_sparkafka_sentence"
_SHORT = "short"
_STREAM_FAILED = re.compile(r"((?:\[STREAM_FAILED\] )?Query .*?\[id = [^\]]*\] terminated with exception)")
"""The head of a failed query's message (PySpark's ``StreamingQueryException``), named or not."""
_WRAPPING = threading.Lock()


def last_sentence(text: str) -> tuple[str, str] | None:
    """(error class, sentence) of the last sparkafka error named in ``text``, or None.

    Each line is looked at on its own: the sentence is one line (Spark's `` SQLSTATE: ...`` suffix, when
    on the same line, is left out).
    """
    found = _SENTENCE.findall(text)
    if not found:
        return None
    name, sentence = found[-1]
    return name, _SQLSTATE.sub("", sentence).strip()


def data_loss_condition(error: BaseException) -> str | None:
    """Spark's error class (``KAFKA_DATA_LOSS.<case>``) of a data-loss failure, from either connector.

    Runs in the user's driver process, on what a query or action raised. Spark's ``format("kafka")``
    gives the class to its own exception, which reaches PySpark as a cause: the exception a user catches
    is ``StreamingQueryException`` (``getCondition()`` is ``STREAM_FAILED``) or a job's failure, and the class
    is nowhere in its text (measured: Spark's connector 4.2.0 on PySpark 4.3). A Python data source can pass
    Spark only text, so sparkafka's sentence starts with the class in brackets. Hence: the first
    ``KAFKA_DATA_LOSS.*`` condition among the JVM causes of a PySpark exception (classic sessions: PySpark
    keeps the JVM exception in ``_origin``), else the first class in brackets in the text; None if neither.
    """
    origin = getattr(error, "_origin", None)
    for _ in range(_CAUSES):
        if origin is None:
            break
        try:
            condition = origin.getCondition()  # py4j: fails on a throwable that is not a SparkThrowable
        except Exception:  # noqa: BLE001 - no condition there; its cause may have one
            condition = None
        if isinstance(condition, str) and condition.startswith("KAFKA_DATA_LOSS."):
            return condition
        try:
            origin = origin.getCause()
        except Exception:  # noqa: BLE001 - not a JVM throwable after all
            break
    found = _DATA_LOSS.search(str(error))
    return found.group(1) if found else None


def with_sentence_last(error: BaseException) -> BaseException:
    """``error`` with ``sparkafka.errors.<Class>: <sentence>`` as its message's last line, if it names one;
    a query's failure shortened to Spark's head and that line (see the module).

    PySpark's captured exceptions print their ``_desc``; other exceptions their ``args``. Done once per
    exception object. Returns ``error`` itself.
    """
    if getattr(error, _MARK, False):
        return error
    text = str(error)
    found = last_sentence(text)
    if found is None:
        return error
    line = f"sparkafka.errors.{found[0]}: {found[1]}"
    desc = getattr(error, "_desc", None)
    stream = _STREAM_FAILED.match(desc) if isinstance(desc, str) else None
    if stream is not None:  # a query's failure: Spark's words, then the sentence alone
        error.spark_report = desc  # type: ignore[attr-defined]
        error._desc = f"{stream.group(1)}: {line}"  # type: ignore[attr-defined]
        setattr(error, _MARK, _SHORT)
        return error
    if _ends_with(text, found[1]):
        return error
    if isinstance(desc, str):
        error._desc = f"{error._desc.rstrip()}\n{line}"  # type: ignore[attr-defined]
    elif len(error.args) == 1 and isinstance(error.args[0], str):
        error.args = (f"{error.args[0].rstrip()}\n{line}",)
    else:
        return error
    setattr(error, _MARK, True)
    return error


def _ends_with(text: str, sentence: str) -> bool:
    """Whether nothing but Spark's ``SQLSTATE`` line follows the last line holding ``sentence``: a failure
    reported at start (two lines, the sentence first) is left as it is."""
    lines = [line for line in text.splitlines() if line.strip()]
    last = max((i for i, line in enumerate(lines) if sentence in line), default=-1)
    return last >= 0 and all(_SQLSTATE.fullmatch(" " + line) for line in lines[last + 1 :])


def _surfacing(method: Callable[..., Any]) -> Callable[..., Any]:
    awaits = _AWAITS.get(method.__name__)

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            if awaits is None:
                result = method(*args, **kwargs)
            else:
                with awaited(functools.partial(awaits, args[0])):
                    result = method(*args, **kwargs)
        except Exception as e:
            if getattr(with_sentence_last(e), _MARK, None) == _SHORT:
                # PySpark's and py4j's frames say nothing the sentence does not: the user's line, then it
                raise e.with_traceback(None) from None
            raise
        if isinstance(result, BaseException):  # StreamingQuery.exception()
            return with_sentence_last(result)
        return result

    wrapper._sparkafka_wrapped = True  # type: ignore[attr-defined]
    return wrapper


_AWAITS: dict[str, Callable[[Any], str]] = {
    "awaitTermination": lambda query: str(query.id),
    "processAllAvailable": lambda query: str(query.id),
    "awaitAnyTermination": lambda manager: "*",
}
"""The calls that wait for a query and raise its failure, and which query's (``spark_logs.awaited``)."""

_ENTRY_POINTS = {
    "pyspark.sql.readwriter:DataFrameWriter": ("save", "saveAsTable", "insertInto"),
    "pyspark.sql.classic.dataframe:DataFrame": (
        "collect",
        "count",
        "toPandas",
        "toArrow",
        "toLocalIterator",
        "_show_string",
        "foreach",
        "foreachPartition",
    ),
    "pyspark.sql.streaming.query:StreamingQuery": ("awaitTermination", "processAllAvailable", "exception"),
    "pyspark.sql.streaming.query:StreamingQueryManager": ("awaitAnyTermination",),
}
"""The calls that run a job or wait for a query, by class: where a task's failure reaches the user."""


def install() -> None:
    """Wrap the entry points once per process (idempotent); a class PySpark does not have is skipped."""
    import importlib

    with _WRAPPING:
        for where, methods in _ENTRY_POINTS.items():
            module_name, _, class_name = where.partition(":")
            try:
                cls = getattr(importlib.import_module(module_name), class_name)
            except (ImportError, AttributeError):
                continue
            for name in methods:
                method = vars(cls).get(name)
                if method is not None and not getattr(method, "_sparkafka_wrapped", False):
                    setattr(cls, name, _surfacing(method))
