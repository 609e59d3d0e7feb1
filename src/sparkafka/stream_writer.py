"""``writeStream.format("sparkafka").outputMode("update")``: run the query as foreachBatch, exactly once.

Spark refuses update mode for a Python sink when the query starts; ``sparkafka.sink.modes`` says why and
how each micro-batch is then committed. This module is the thin Spark-facing part: ``install`` (called by
``sparkafka.register``, in the user's driver process) wraps PySpark's classic ``DataStreamWriter`` so that

- ``format``, ``outputMode``, ``option``, ``options``, ``foreach`` and ``foreachBatch`` record what they
  set (``StreamWriterSettings``) and otherwise behave as before: same JVM calls, same return value (the
  writer itself), same errors;
- ``start``, for ``format("sparkafka")``, first makes every check the sink's writer would make before its
  tasks (``sink.at_start``: options, input columns, the brokers' answer, the topic, the ACLs), so a
  mistake is one sentence raised by ``start`` itself rather than a query failing at its first batch;
  then, in update mode only, turns the query into ``foreachBatch`` with an ``UpdateModeBatches`` before
  Spark starts it. Everything else on the writer (checkpoint location,
  trigger, query name) is Spark's as set. Every other format and mode starts untouched.
  ``toTable`` is left alone: it writes to a catalog table, and Spark refuses foreachBatch there
  (measured: ``[DATA_SOURCE_NOT_FOUND] ... foreachBatch``).

Wrapping is idempotent (once per process) and changes nothing for a writer made before it: such a writer
recorded nothing, so it starts as Spark would (and Spark refuses update mode for it, as before).

What the user sees: the query's sink is ``ForeachBatchSink`` in the Spark UI and in progress reports
(``numOutputRows`` is -1 there); ``sparkafka.sink_metrics`` counts its batches and records under the
query's id as for the streaming sink.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any

from sparkafka.errors import ConfigError, SparkafkaError
from sparkafka.sink.modes import (
    FORMAT,
    StreamBatch,
    StreamWriterSettings,
    batch_write_options,
    runs_as_foreach_batch,
)

__all__ = ["UpdateModeBatches", "install", "settings_of", "wrap"]

log = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"
"""The local property Spark's stream execution thread sets to the query's id; the foreachBatch function
runs on that thread (PySpark's callback server, pinned threads), and so do the jobs it submits."""

_SETTINGS = "_sparkafka_settings"
_WRAPPED = "_sparkafka_wrapped"
_WRAPPING = threading.Lock()


def settings_of(writer: Any) -> StreamWriterSettings | None:
    """What ``writer`` (a DataStreamWriter) recorded; None if nothing was set on it since ``install``."""
    found = vars(writer).get(_SETTINGS)
    return found if isinstance(found, StreamWriterSettings) else None


def _settings(writer: Any) -> StreamWriterSettings:
    found = settings_of(writer)
    if found is None:
        found = StreamWriterSettings()
        setattr(writer, _SETTINGS, found)
    return found


class UpdateModeBatches:
    """The ``foreachBatch`` function of an update-mode query: each micro-batch through the sink.

    Called by Spark in the driver's Python process, on the query's thread, once per micro-batch (again
    with the same batch id when Spark replays a batch after a failure or restart). It writes the batch
    with ``df.write.format("sparkafka")``, the user's options and the query and batch id
    (``batch_write_options``): exactly-once batches are committed under that id, at-least-once ones
    flushed before it returns.
    """

    def __init__(self, options: dict[str, str]) -> None:
        """``options``: the sink's options as the user set them on the stream writer."""
        self._options = options

    def __call__(self, df: Any, batch_id: int) -> None:
        """Write micro-batch ``batch_id`` (``df``) of the query running on this thread."""
        query_id = df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        if not query_id:  # not on a streaming query's thread: called by hand
            raise ConfigError(
                "sparkafka's update-mode writer runs only as the foreachBatch function Spark calls for a "
                'streaming query started with writeStream.format("sparkafka").outputMode("update")'
            )
        writer = df.write.format(FORMAT).mode("append")
        for key, value in batch_write_options(self._options, StreamBatch(query_id, batch_id)).items():
            writer = writer.option(key, value)
        writer.save()


Check = Callable[[dict[str, str], Any], None]
"""What ``start`` checks of a sparkafka sink before Spark starts the query: (options, the query's columns)."""


def check_options(options: dict[str, str], schema: Any) -> None:
    """The sink's options, parsed and checked against the query's columns (no broker asked)."""
    from sparkafka.sink.options import input_columns, parse_sink_options

    input_columns(schema, parse_sink_options(options))


def check_before_tasks(options: dict[str, str], schema: Any) -> None:
    """Every check the sink's writer makes before its tasks (``sink.at_start.check_sink``): options,
    columns, the brokers' answer, the topic, the ACLs; run in the user's process by ``start``."""
    from sparkafka.sink.at_start import check_sink

    check_sink(options, schema, True, once=True)


def _check_at_start(writer: Any, check: Check) -> None:
    """Run ``check`` on a sparkafka writer's options and columns (``start`` raises its sentence)."""
    settings = settings_of(writer)
    if settings is not None and (settings.format or "").strip().lower() == FORMAT:
        check(settings.option_map(), writer._df.schema)


def _as_foreach_batch(writer: Any, foreach_batch: Callable[..., Any]) -> None:
    """Turn ``writer``'s query into foreachBatch if it is sparkafka in update mode (see the module)."""
    settings = settings_of(writer)
    if settings is None or not runs_as_foreach_batch(settings):
        return
    options = settings.option_map()
    log.info(
        'format("%s") in update mode: the query runs as foreachBatch, each micro-batch written by the '
        "sink under its batch id (docs/writing.md: output modes)",
        FORMAT,
    )
    foreach_batch(writer, UpdateModeBatches(options))


def _text(value: Any) -> str:
    """An option's value as PySpark sends it to the JVM (``pyspark.sql.readwriter.to_str``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def install() -> None:
    """Wrap PySpark's classic ``DataStreamWriter`` once per process (see the module docstring)."""
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    wrap(DataStreamWriter, check_before_tasks)


def wrap(cls: Any, check: Check = check_options) -> None:
    """Wrap the methods of ``cls``, PySpark's ``DataStreamWriter`` or a class with its methods (tests).

    ``check``: what ``start`` checks of a sparkafka sink first (tests: the options alone, no broker).
    Idempotent: a class already wrapped is left as it is.
    """
    with _WRAPPING:
        if not vars(cls).get(_WRAPPED):
            _wrap(cls, check)


def _wrap(cls: Any, check: Check) -> None:
    fmt, mode, option, options = cls.format, cls.outputMode, cls.option, cls.options
    foreach, foreach_batch, start = cls.foreach, cls.foreachBatch, cls.start

    @functools.wraps(fmt)
    def format_(self: Any, source: str) -> Any:
        result = fmt(self, source)
        _settings(self).format = source
        return result

    @functools.wraps(mode)
    def output_mode(self: Any, outputMode: str) -> Any:  # noqa: N803 - PySpark's keyword
        result = mode(self, outputMode)
        _settings(self).output_mode = outputMode
        return result

    @functools.wraps(option)
    def option_(self: Any, key: str, value: Any) -> Any:
        result = option(self, key, value)
        if value is not None:
            _settings(self).set_option(key, _text(value))
        return result

    @functools.wraps(options)
    def options_(self: Any, **given: Any) -> Any:
        result = options(self, **given)
        for key, value in given.items():
            if value is not None:
                _settings(self).set_option(key, _text(value))
        return result

    def user_sink(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(self: Any, f: Any) -> Any:
            result = original(self, f)
            _settings(self).format = None
            return result

        return wrapper

    signature = inspect.signature(start)

    @functools.wraps(start)
    def start_(self: Any, *args: Any, **kwargs: Any) -> Any:
        given = signature.bind(self, *args, **kwargs).arguments
        _apply(self, given)
        try:
            _check_at_start(self, check)
        except SparkafkaError as e:  # the user's start() line, then the sentence (a bug keeps its traceback)
            raise e.with_traceback(None) from None
        _as_foreach_batch(self, foreach_batch)
        return start(self, given.get("path"))

    cls.format, cls.outputMode, cls.option, cls.options = format_, output_mode, option_, options_
    cls.foreach, cls.foreachBatch = user_sink(foreach), user_sink(foreach_batch)
    cls.start = start_
    setattr(cls, _WRAPPED, True)


def _apply(writer: Any, given: dict[str, Any]) -> None:
    """``start``'s keyword settings (bound to its parameters), set in the order PySpark's own ``start``
    sets them, so they are recorded before the query is turned into foreachBatch; PySpark's ``start``
    then gets the path alone."""
    writer.options(**given.get("options", {}))
    if given.get("outputMode") is not None:
        writer.outputMode(given["outputMode"])
    if given.get("partitionBy") is not None:
        writer.partitionBy(given["partitionBy"])
    if given.get("format") is not None:
        writer.format(given["format"])
    if given.get("queryName") is not None:
        writer.queryName(given["queryName"])
