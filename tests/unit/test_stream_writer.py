"""The DataStreamWriter wrapper (``sparkafka.stream_writer``): what it records, what it intercepts, and
that PySpark's writer behaves as before otherwise. No JVM: the JVM writer is a fake recording its calls."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from pyspark.sql.types import StringType, StructField, StructType

from sparkafka.errors import ConfigError
from sparkafka.stream_writer import UpdateModeBatches, install, settings_of, wrap

SCHEMA = StructType([StructField("key", StringType()), StructField("value", StringType())])
SINK = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out"}


class FakeJvmWriter:
    """The JVM DataStreamWriter as py4j shows it: each setter returns the writer; calls are recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> Any:
            self.calls.append((name, *args))
            return "query" if name == "start" else self

        return call


class FakeJvm:
    """``sc._jvm`` for PySpark's trigger and partitionBy: any class or method path, one result."""

    def __getattr__(self, name: str) -> FakeJvm:
        return self

    def __call__(self, *args: Any) -> str:
        return "jvm-object"


class PySparkLikeWriter:
    """PySpark's classic DataStreamWriter, its JVM calls and ``start`` as written in 4.3 (shortened)."""

    def __init__(self, schema: StructType = SCHEMA) -> None:
        self._df = SimpleNamespace(schema=schema)
        self._jwrite = FakeJvmWriter()
        self.batch_function: Any = None

    def format(self, source: str) -> PySparkLikeWriter:
        self._jwrite = self._jwrite.format(source)
        return self

    def outputMode(self, outputMode: str) -> PySparkLikeWriter:  # noqa: N803 - PySpark's names
        self._jwrite = self._jwrite.outputMode(outputMode)
        return self

    def option(self, key: str, value: Any) -> PySparkLikeWriter:
        if value is None:
            return self
        self._jwrite = self._jwrite.option(key, str(value).lower() if isinstance(value, bool) else str(value))
        return self

    def options(self, **options: Any) -> PySparkLikeWriter:
        for key, value in options.items():
            self.option(key, value)
        return self

    def partitionBy(self, *cols: Any) -> PySparkLikeWriter:
        self._jwrite = self._jwrite.partitionBy(cols)
        return self

    def queryName(self, queryName: str) -> PySparkLikeWriter:  # noqa: N803 - PySpark's names
        self._jwrite = self._jwrite.queryName(queryName)
        return self

    def foreach(self, f: Any) -> PySparkLikeWriter:
        self._jwrite.foreach(f)
        return self

    def foreachBatch(self, func: Any) -> PySparkLikeWriter:
        self.batch_function = func
        self._jwrite.foreachBatch(func)
        return self

    def start(
        self,
        path: str | None = None,
        format: str | None = None,
        outputMode: str | None = None,  # noqa: N803 - PySpark's keyword
        partitionBy: Any = None,  # noqa: N803 - PySpark's keyword
        queryName: str | None = None,  # noqa: N803 - PySpark's keyword
        **options: Any,
    ) -> Any:
        self.options(**options)
        if outputMode is not None:
            self.outputMode(outputMode)
        if partitionBy is not None:
            self.partitionBy(partitionBy)
        if format is not None:
            self.format(format)
        if queryName is not None:
            self.queryName(queryName)
        return self._jwrite.start() if path is None else self._jwrite.start(path)


class Wrapped(PySparkLikeWriter):
    pass


wrap(Wrapped)
wrap(Wrapped)  # idempotent: wrapping twice wraps once


def started(writer: PySparkLikeWriter) -> list[tuple[Any, ...]]:
    return [c for c in writer._jwrite.calls if c[0] in ("foreachBatch", "start")]


def test_sparkafka_in_update_mode_starts_as_foreach_batch_with_the_user_s_options() -> None:
    writer = Wrapped()
    assert (
        writer.format("sparkafka").outputMode("update").options(**SINK).option("checkpointLocation", "/ck")
        is writer
    )
    assert writer.start() == "query"
    assert isinstance(writer.batch_function, UpdateModeBatches)
    assert started(writer) == [("foreachBatch", writer.batch_function), ("start",)]
    assert writer.batch_function._options == {**SINK, "checkpointLocation": "/ck"}


def test_start_s_own_keywords_count_as_set_before_the_query_starts() -> None:
    writer = Wrapped()
    writer.start(format="sparkafka", outputMode="update", queryName="q", **SINK)
    assert isinstance(writer.batch_function, UpdateModeBatches)
    assert ("queryName", "q") in writer._jwrite.calls
    assert writer._jwrite.calls[-1] == ("start",)


@pytest.mark.parametrize(
    "setup",
    [
        lambda w: w.format("sparkafka").outputMode("append"),
        lambda w: w.format("sparkafka").outputMode("complete"),
        lambda w: w.format("sparkafka"),
        lambda w: w.format("console").outputMode("update"),
        lambda w: w.format("sparkafka").outputMode("update").foreachBatch(print),  # the user's own sink
        lambda w: w.outputMode("update").foreach(print).format("parquet"),
    ],
    ids=["append", "complete", "default-mode", "other-format", "foreachBatch-after", "foreach-then-format"],
)
def test_every_other_writer_starts_untouched(setup: Any) -> None:
    writer = Wrapped()
    setup(writer.options(**SINK))
    before = list(writer._jwrite.calls)
    user_function = writer.batch_function
    writer.start("/some/path")
    assert writer._jwrite.calls == [*before, ("start", "/some/path")]
    assert writer.batch_function is user_function


def test_the_user_s_foreach_batch_set_before_format_sparkafka_is_replaced_as_spark_would() -> None:
    writer = Wrapped().foreachBatch(print).format("sparkafka").outputMode("update").options(**SINK)
    writer.start()
    assert isinstance(writer.batch_function, UpdateModeBatches)  # the JVM writer's sink is sparkafka's


def test_bad_sink_options_or_columns_fail_at_start_before_the_query_exists() -> None:
    writer = Wrapped().format("sparkafka").outputMode("update").option("kafka.bootstrap.servers", "a:1")
    with pytest.raises(ConfigError, match="needs option topic"):
        writer.start()
    no_value = Wrapped(StructType([StructField("key", StringType())]))
    with pytest.raises(ConfigError, match="needs a column named value"):
        no_value.format("sparkafka").outputMode("update").options(**SINK).start()
    assert started(writer) == []
    assert started(no_value) == []


def test_a_writer_made_before_wrapping_recorded_nothing_and_starts_as_spark_would() -> None:
    class Late(PySparkLikeWriter):
        pass

    writer = Late().format("sparkafka").outputMode("update").options(**SINK)
    wrap(Late)
    writer.start()
    assert settings_of(writer) is None
    assert started(writer) == [("start",)]  # Spark then refuses update mode, as it always did


def test_the_batch_function_writes_the_micro_batch_under_the_query_s_id() -> None:
    saved: list[dict[str, str]] = []

    class Write:
        def __init__(self) -> None:
            self.options: dict[str, str] = {}

        def format(self, name: str) -> Write:
            assert name == "sparkafka"
            return self

        def mode(self, mode: str) -> Write:
            assert mode == "append"
            return self

        def option(self, key: str, value: str) -> Write:
            self.options[key] = value
            return self

        def save(self) -> None:
            saved.append(self.options)

    def frame(query_id: str | None) -> Any:
        context = SimpleNamespace(getLocalProperty=lambda key: query_id)
        return SimpleNamespace(sparkSession=SimpleNamespace(sparkContext=context), write=Write())

    function = UpdateModeBatches(dict(SINK))
    function(frame("q-1"), 4)
    assert saved == [{**SINK, "_sparkafka.streamQueryId": "q-1", "_sparkafka.streamBatchId": "4"}]
    with pytest.raises(ConfigError, match="runs only as the foreachBatch function"):
        function(frame(None), 5)


def test_pyspark_s_writer_keeps_its_behaviour_once_installed() -> None:
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    install()
    install()
    writer: Any = object.__new__(DataStreamWriter)  # no JVM: the JVM writer is the fake
    writer._jwrite = FakeJvmWriter()
    writer._spark = SimpleNamespace(_sc=SimpleNamespace(_jvm=FakeJvm()))
    assert writer.format("sparkafka") is writer
    assert writer.outputMode("append") is writer
    assert writer.option("topic", "out") is writer
    assert writer.option("ignored", None) is writer
    assert writer.options(flag=True, n=3, skipped=None) is writer
    assert writer.queryName("q") is writer
    assert writer.trigger(availableNow=True) is writer
    assert writer.partitionBy("key") is writer
    assert writer._jwrite.calls == [
        ("format", "sparkafka"),
        ("outputMode", "append"),
        ("option", "topic", "out"),
        ("option", "flag", "true"),
        ("option", "n", "3"),
        ("queryName", "q"),
        ("trigger", "jvm-object"),
        ("partitionBy", "jvm-object"),
    ]
    settings = settings_of(writer)
    assert settings is not None
    assert (settings.format, settings.output_mode) == ("sparkafka", "append")
    assert settings.option_map() == {"topic": "out", "flag": "true", "n": "3"}
    # Another format (a sparkafka sink's start asks the brokers first: tests/integration/test_after_start.py)
    assert writer.format("console").start().__class__.__name__ == "StreamingQuery"  # PySpark's, unchanged
    assert writer._jwrite.calls[-1] == ("start",)


def test_start_raises_the_sink_check_s_sentence_before_the_query_exists() -> None:
    asked: list[tuple[dict[str, str], Any]] = []

    def check(options: dict[str, str], schema: Any) -> None:
        asked.append((options, schema))
        if options.get("topic") == "missing":
            raise ConfigError("option topic=missing: no such topic")

    class Checked(PySparkLikeWriter):
        pass

    wrap(Checked, check)
    Checked().format("console").options(topic="missing").start()  # another format: not asked
    assert asked == []
    ok = Checked().format("sparkafka").options(**SINK)
    assert ok.start() == "query"
    assert asked == [(SINK, SCHEMA)]
    refused = Checked().format("SparkAfka").options(**{**SINK, "topic": "missing"})
    with pytest.raises(ConfigError, match="no such topic") as raised:
        refused.start()
    assert started(refused) == []
    assert raised.traceback[-1].name == "start_"  # the user's start() line, then the sentence
