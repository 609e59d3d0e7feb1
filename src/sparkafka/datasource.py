"""The ``sparkafka`` data source: the one class Spark sees; it hands off to the source and sink packages.

First errors are one sentence, first: bad options are ``ConfigError`` at ``load()`` (reads) or when the
writer is made, reported without a traceback (``sentence_errors``), the first contact with the brokers
(``first_contact``) fails within 5 s when none answers, as ``sparkafka run``'s pre-flight does, and a read's
topics that do not exist or that the user may not read fail at ``load()`` too
(``source.admin.check_source``).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, ClassVar

from pyspark.errors import AnalysisException
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from sparkafka.client.contact import first_contact
from sparkafka.driver_facts import adopt, facts_of, split_facts
from sparkafka.driver_facts import install as install_driver_facts
from sparkafka.errors import ConfigError
from sparkafka.source.options import parse_source_options
from sparkafka.spark_lines import sentence_errors

__all__ = [
    "KafkaDataSource",
    "register",
    "shipped_archive",
    "source_schema",
]

log = logging.getLogger(__name__)


def source_schema(include_headers: bool) -> StructType:
    """The source's output schema, derived from the Arrow schema the readers yield (one definition)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from sparkafka.source.fetch import arrow_schema

    return from_arrow_schema(arrow_schema(include_headers))


class KafkaDataSource(DataSource):
    """``format("sparkafka")``: read from and write to Kafka with Flink's connector semantics."""

    registered: ClassVar[bool] = True
    """Whether ``register`` registered this class (PySpark's lookup finds ``pyspark_sparkafka``'s)."""

    def __init__(self, options: dict[str, str]) -> None:
        # Spark's planner makes the data source, then pickles it to the processes that read and write.
        rest, self.driver_facts = split_facts(options)
        super().__init__(rest)

    def _options(self) -> Any:
        """The options, the driver's facts (``sparkafka.driver_facts``) put into this process first."""
        adopt(self.driver_facts)
        return self.options

    @property
    def _told(self) -> bool:
        """Whether ``register`` ran in the driver: it registered this class, or it adds the facts."""
        return self.registered or self.driver_facts is not None

    @classmethod
    def name(cls) -> str:
        return "sparkafka"

    @sentence_errors
    def schema(self) -> StructType:
        # Spark asks for the schema at load(): validating here reports bad options, brokers that do not
        # answer, and topics that are missing or refused (check_source), before a query starts
        # (endingOffsets is checked again, for streams, when the stream reader is made). Not asked when the
        # user gives a schema; the readers' lookups then report instead.
        from sparkafka.source.admin import check_source

        options = parse_source_options(self._options(), batch=True, quiet=True)
        first_contact(options.kafka, self.options, options.metadata_timeout_ms)
        check_source(options)
        return source_schema(options.include_headers)

    @sentence_errors
    def reader(self, schema: StructType) -> DataSourceReader:
        from sparkafka.source.reader import KafkaBatchReader

        return KafkaBatchReader(parse_source_options(self._options(), batch=True))

    @sentence_errors
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from sparkafka.source.reader import KafkaStreamReader

        return KafkaStreamReader(parse_source_options(self._options()))

    @sentence_errors
    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from sparkafka.sink.at_start import check_sink
        from sparkafka.sink.writer import KafkaStreamWriter

        options, columns = check_sink(self._options(), schema, self._told, once=True)
        return KafkaStreamWriter(options, columns)

    @sentence_errors
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from sparkafka.sink.at_start import check_sink
        from sparkafka.sink.modes import split_stream_batch
        from sparkafka.sink.writer import KafkaBatchWriter

        if overwrite:
            # Spark's JVM refuses ErrorIfExists (its default) and Ignore for every Python data source
            # before this runs; Overwrite reaches here, and a Kafka topic cannot be overwritten.
            raise ConfigError(
                'a Kafka topic can only be appended to: write with .mode("append") (Spark\'s default mode, '
                "ErrorIfExists, is refused by Spark for Python data sources)"
            )
        # A micro-batch of an update-mode query (sparkafka.sink.modes) names its query and batch id.
        raw, stream = split_stream_batch(self._options())
        options, columns = check_sink(raw, schema, self._told, once=stream is not None)
        return KafkaBatchWriter(options, columns, stream)


def register(spark: Any) -> None:
    """Register every data source of this package with ``spark`` (``format("sparkafka")``).

    Runs in the user's driver process. Also passes what the Python workers cannot see themselves through
    the context's worker environment (before registering, so the data source's workers get it):
    where a ``--py-files`` archive is, ``spark.speculation`` (the exactly-once sink refuses it), Spark's
    ``defaultParallelism`` (the source's default number of reader tasks, ``source.assignment``),
    ``spark.network.timeout`` (the source's default ``pollTimeoutMs``) and this process's pid with the
    application's name and id (the marks of the source's group commits, ``source.driver_process``); where
    Spark keeps the ``pyspark_sparkafka`` it found instead (PySpark 4.0), with each query
    (``sparkafka.driver_facts``).
    And wraps PySpark's ``DataStreamWriter`` once per process, so that ``outputMode("update")`` works
    for ``format("sparkafka")`` and its ``start`` checks the sink before the query starts
    (``sparkafka.stream_writer``; not on Spark Connect), and the calls that run a job or wait for a query,
    so that a failure in a task or a query ends in sparkafka's sentence (``sparkafka.spark_errors``), which
    Spark's driver log then does not repeat (``sparkafka.spark_logs``).
    """
    if is_connect(spark):
        log.warning(CONNECT_NOTE)
        try:
            spark.dataSource.register(KafkaDataSource)
        except AnalysisException as e:
            if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
                raise
            install_driver_facts(connect=True)  # PySpark 4.0's server keeps the pyspark_sparkafka it found
        return
    from sparkafka import spark_errors, spark_logs
    from sparkafka.stream_writer import install

    _ship_archive_to_driver_runners(spark)
    spark.sparkContext.environment.update(facts_of(spark))
    _workers_on_this_interpreter(spark)
    try:
        spark.dataSource.register(KafkaDataSource)
    except AnalysisException as e:
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
            raise
        # PySpark 4.0: the pyspark_sparkafka Spark found stays (sparkafka.driver_facts says how it is told).
        log.info("format(\"sparkafka\") is pyspark_sparkafka's here: the driver's facts go with each query")
        install_driver_facts()
    install()
    spark_errors.install()
    spark_logs.quiet_sentence_failures(spark)


CONNECT_NOTE = (
    "sparkafka on Spark Connect: the data source runs in the server's Python, so sparkafka must be "
    "installed there (the server's driver and executors; Spark 4.3 does not ship addArtifacts files to "
    "streaming sources and sinks), exactly_once needs spark.speculation=false in the server's config (not "
    "checked from a client), and metrics files are written on the server's host: read them there, or use "
    "the query's progress or the server's Prometheus endpoint (docs/deploy.md: Spark Connect)"
)


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect client session (no SparkContext on this side)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _workers_on_this_interpreter(spark: Any) -> None:
    # PySpark starts Python workers with PYSPARK_PYTHON, else "python3" from PATH: a script run as
    # .venv/bin/python without activating the venv got workers without sparkafka ("No module named
    # 'sparkafka'", measured). In local mode the workers run here, so they get this interpreter, or the one
    # spark.pyspark.python names: Spark's docs say that setting chooses the workers' Python, but outside
    # spark-submit PySpark ignores it (SparkContext.pythonExec reads only PYSPARK_PYTHON; measured: a
    # builder's spark.pyspark.python left the workers on python3). The data source's workers use the
    # interpreter the context has when it is registered, hence before register.
    sc = spark.sparkContext
    chosen = sc.getConf().get("spark.pyspark.python")  # Spark's rule: it takes precedence over PYSPARK_PYTHON
    if not chosen and os.environ.get("PYSPARK_PYTHON"):
        return
    if not str(sc.master).startswith("local"):
        return  # executors elsewhere: their interpreter is PYSPARK_PYTHON's to say (docs/deploy.md)
    wanted = chosen or sys.executable
    if sc.pythonExec != wanted:
        log.info("Python workers run %s (PYSPARK_PYTHON is unset)", wanted)
        sc.pythonExec = wanted


def shipped_archive() -> str | None:
    """The .zip sparkafka was imported from (``spark-submit --py-files``); None when it is installed."""
    import zipimport

    # This module's own loader: inside the archive it is the zipimporter of the archive sparkafka is in.
    loader = __spec__.loader if __spec__ else None
    return loader.archive if isinstance(loader, zipimport.zipimporter) else None


def _ship_archive_to_driver_runners(spark: Any) -> None:
    # Spark 4's driver-side runners for streaming Python data sources (PythonStreamingSourceRunner and the
    # sink's commit runner) look for --py-files under SparkFiles/"streaming_job", where spark-submit never
    # puts them, so unpickling our reader fails there with "No module named 'sparkafka'" (measured on a
    # standalone cluster). A PYTHONPATH in the context's environment reaches every Python worker the
    # registered data source starts; on executors it is merged with their own copies of --py-files.
    archive = shipped_archive()
    if archive is None:
        return
    env = spark.sparkContext.environment
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if archive not in paths:
        env["PYTHONPATH"] = os.pathsep.join([archive, *paths])
        log.info("sparkafka ships from %s: added to the Python workers' PYTHONPATH", archive)
