"""The ``sparkafka`` data source: the one class Spark sees; it hands off to the source and sink packages."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from sparkafka.source.options import parse_source_options

__all__ = ["KafkaDataSource", "register", "shipped_archive", "source_schema"]

log = logging.getLogger(__name__)


def source_schema(include_headers: bool) -> StructType:
    """The source's output schema, derived from the Arrow schema the readers yield (one definition)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from sparkafka.source.fetch import arrow_schema

    return from_arrow_schema(arrow_schema(include_headers))


class KafkaDataSource(DataSource):
    """``format("sparkafka")``: read from and write to Kafka with Flink's connector semantics."""

    @classmethod
    def name(cls) -> str:
        return "sparkafka"

    def schema(self) -> StructType:
        # Spark asks for the schema at load(): validating here reports bad options before a query starts.
        # (endingOffsets is checked again, for streams, when the stream reader is made.)
        options = parse_source_options(self.options, batch=True)
        return source_schema(options.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        from sparkafka.source.reader import KafkaBatchReader

        return KafkaBatchReader(parse_source_options(self.options, batch=True))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from sparkafka.source.reader import KafkaStreamReader

        return KafkaStreamReader(parse_source_options(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from sparkafka.sink.options import input_columns, parse_sink_options
        from sparkafka.sink.writer import KafkaStreamWriter

        options = parse_sink_options(self.options)
        return KafkaStreamWriter(options, input_columns(schema, options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from sparkafka.errors import ConfigError
        from sparkafka.sink.options import input_columns, parse_sink_options
        from sparkafka.sink.writer import KafkaBatchWriter

        if overwrite:
            # Spark's JVM refuses ErrorIfExists (its default) and Ignore for every Python data source
            # before this runs; Overwrite reaches here, and a Kafka topic cannot be overwritten.
            raise ConfigError(
                'a Kafka topic can only be appended to: write with .mode("append") (Spark\'s default mode, '
                "ErrorIfExists, is refused by Spark for Python data sources)"
            )
        options = parse_sink_options(self.options)
        return KafkaBatchWriter(options, input_columns(schema, options))


def register(spark: Any) -> None:
    """Register every data source of this package with ``spark`` (``format("sparkafka")``).

    Runs in the user's driver process. Also passes what the Python workers cannot see themselves through
    the context's worker environment (before registering, so the data source's workers get it):
    where a ``--py-files`` archive is, and ``spark.speculation`` (the exactly-once sink refuses it).
    """
    if is_connect(spark):
        log.warning(CONNECT_NOTE)
        spark.dataSource.register(KafkaDataSource)
        return
    _ship_archive_to_driver_runners(spark)
    _tell_workers_about_speculation(spark)
    _workers_on_this_interpreter(spark)
    spark.dataSource.register(KafkaDataSource)


CONNECT_NOTE = (
    "sparkafka on Spark Connect: the data source runs in the server's Python, so sparkafka must be "
    "installed there (the server's driver and executors; Spark 4.3 does not ship addArtifacts files to "
    "streaming sources and sinks), exactly_once needs spark.speculation=false in the server's config (not "
    "checked from a client), and metrics files are written on the server's host: read them there, or use "
    "the query's progress or the server's Prometheus endpoint (README: Spark Connect)"
)


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect client session (no SparkContext on this side)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _workers_on_this_interpreter(spark: Any) -> None:
    # PySpark starts Python workers with PYSPARK_PYTHON, else "python3" from PATH: a script run as
    # .venv/bin/python without activating the venv got workers without sparkafka ("No module named
    # 'sparkafka'", measured). In local mode the workers run here, so they get this interpreter. The data
    # source's workers use the interpreter the context has when it is registered, hence before register.
    sc = spark.sparkContext
    if os.environ.get("PYSPARK_PYTHON") or sc.getConf().get("spark.pyspark.python"):
        return
    if not str(sc.master).startswith("local"):
        return  # executors elsewhere: their interpreter is PYSPARK_PYTHON's to say (docs/deploy.md)
    if sc.pythonExec != sys.executable:
        log.info("Python workers run %s (PYSPARK_PYTHON is unset)", sys.executable)
        sc.pythonExec = sys.executable


def _tell_workers_about_speculation(spark: Any) -> None:
    from sparkafka.sink.writer import SPECULATION_ENV

    speculation = spark.sparkContext.getConf().get("spark.speculation", "false")
    spark.sparkContext.environment[SPECULATION_ENV] = str(speculation).strip().lower()


def shipped_archive() -> str | None:
    """The .zip sparkafka was imported from (``spark-submit --py-files``); None when it is installed."""
    import zipimport

    import sparkafka

    loader = sparkafka.__spec__.loader if sparkafka.__spec__ else None
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
