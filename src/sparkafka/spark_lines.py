"""What differs between the PySpark lines sparkafka runs on (4.0 to 4.3), decided once, by what the installed
PySpark offers, never by its version string.

Imported by the Spark-facing modules in every process that uses them (the driver, Spark's planner and
source/sink runner processes, the Python workers); nothing else in sparkafka asks which PySpark it runs on.
It also says how a failure in one of Spark's Python processes reaches the user (``in_python_worker``,
``sentence_errors``), for the data source (``sparkafka.datasource``) and the source's stream reader alike,
which run in those processes and sit on different layers.

Read from each line's released sources (``pyspark/sql/datasource.py``, the streaming source runner, the
workers) and run on each line by CI's matrix:

============================================ ====== ====== ====== ======
what sparkafka uses                           4.0    4.1    4.2    4.3
============================================ ====== ====== ====== ======
admission control for a Python stream source  no     no     yes    yes
(``latestOffset(start, limit)``, read limits,
``Trigger.AvailableNow``: ``ADMISSION_CONTROL``)
an Arrow writer for a stream sink             no     yes    yes    yes
(``DataSourceStreamArrowWriter``)
``SPARK_PYTHON_RUNTIME`` in Python workers     no     no     yes    yes
``pyspark.sql.functions.arrow_udf``            no     yes    yes    yes
``spark.dataSource.register`` replaces a       no     yes    yes    yes
``pyspark_*`` data source Spark found
============================================ ====== ====== ====== ======

Where a line lacks one, sparkafka keeps the semantics another way:

- **No admission control** (4.0, 4.1): Spark calls ``latestOffset()`` with no arguments and gives no read
  limit, so the source caps the batch itself (``maxOffsetsPerTrigger``, event-time alignment) from the end
  of the batch it planned last (``KafkaStreamReader``). Spark never reports the latest offset (a query's
  progress shows no lag) and runs ``Trigger.AvailableNow`` as a single batch (``Trigger.Once``): with
  ``maxOffsetsPerTrigger`` that batch is capped, so the source says so once when it starts.
- **No Arrow stream writer** (4.0): the stream writer is a ``DataSourceStreamWriter`` that is also a
  ``DataSourceArrowWriter``: 4.0's write worker gives Arrow batches to any writer of that class, streaming or
  not (``write_into_data_source.py``), so the same code writes on every line.
- **No ``SPARK_PYTHON_RUNTIME``** (4.0, 4.1): a Python worker is told by the variables Spark's worker factory
  sets for every Python process it starts (``in_python_worker``).
- **No replacing a found data source** (4.0): ``register`` learns it from Spark's refusal
  (``DATA_SOURCE_ALREADY_EXISTS``), keeps ``pyspark_sparkafka``'s, and sends the driver's facts with each
  query instead of the worker environment, which that one's processes never get (``sparkafka.driver_facts``).
- **No ``arrow_udf``** (4.0): the Schema Registry formats refuse at ``load()``/``start()`` in one sentence
  naming PySpark 4.1 (``ARROW_UDF``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import pyspark
from pyspark.sql import datasource as _datasource
from pyspark.sql import functions as _functions

from sparkafka.errors import ConfigError, SparkafkaError

__all__ = [
    "ADMISSION_CONTROL",
    "ARROW_STREAM_WRITER",
    "ARROW_UDF",
    "HIDE_TRACEBACK_ENV",
    "PYSPARK_VERSION",
    "ReadAllAvailable",
    "ReadLimit",
    "ReadMaxRows",
    "StreamArrowWriter",
    "SupportsTriggerAvailableNow",
    "features",
    "from_arrow_type",
    "in_python_worker",
    "require_arrow_udf",
    "sentence_errors",
    "to_arrow_type",
]

P = ParamSpec("P")
R = TypeVar("R")

PYSPARK_VERSION: str = pyspark.__version__
"""For what is printed (``sparkafka doctor``, ``--version``); never compared to decide anything."""

try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    ADMISSION_CONTROL = True
except ImportError:  # PySpark 4.0, 4.1: Spark calls latestOffset() alone and never asks for a limit
    ADMISSION_CONTROL = False

    class ReadLimit:  # type: ignore[no-redef]
        """Stands for PySpark 4.2's read limits where the line has none (only sparkafka reads it)."""

    @dataclass(frozen=True)
    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        """No limit: read up to the latest offset."""

    @dataclass(frozen=True)
    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        """At most ``max_rows`` rows a batch."""

        max_rows: int

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Spark of this line never calls it: its ``Trigger.AvailableNow`` is one batch."""

        def prepareForTriggerAvailableNow(self) -> None:
            """Never called on this line."""


ARROW_STREAM_WRITER = hasattr(_datasource, "DataSourceStreamArrowWriter")

StreamArrowWriter: Any
"""The base of sparkafka's stream writer: ``write(iterator of pyarrow.RecordBatch)`` on every line."""
if ARROW_STREAM_WRITER:
    StreamArrowWriter = _datasource.DataSourceStreamArrowWriter
else:  # PySpark 4.0: its write worker dispatches on DataSourceArrowWriter, streaming or not

    class StreamArrowWriter(_datasource.DataSourceStreamWriter, _datasource.DataSourceArrowWriter):  # type: ignore[misc, no-redef]
        """A stream writer 4.0's write worker gives Arrow batches to (see the module docstring)."""


ARROW_UDF = hasattr(_functions, "arrow_udf")


def require_arrow_udf(what: str) -> None:
    """Refuse ``what`` (a Schema Registry format's decoding or encoding) in one sentence on a PySpark
    without ``arrow_udf``: planned on the driver, so it fails at ``load()``/``start()``."""
    if not ARROW_UDF:
        raise ConfigError(
            f"{what} needs PySpark 4.1 or later (pyspark.sql.functions.arrow_udf), and this is PySpark "
            f"{PYSPARK_VERSION}: upgrade PySpark, or decode in your own code (pyspark_avro, from_json)"
        )


_WORKER_VARIABLES = (
    "PYTHON_WORKER_FACTORY_SECRET",
    "PYTHON_WORKER_FACTORY_PORT",
    "PYTHON_WORKER_FACTORY_SOCK_PATH",
)
"""What Spark's worker factory sets for each Python process it starts, on every line (4.0 to 4.3)."""


def in_python_worker() -> bool:
    """Whether this process is one of Spark's Python workers or planner/runner processes (which exit after
    they report a failure): 4.2 and later say so in ``SPARK_PYTHON_RUNTIME``; every line sets the worker
    factory's variables."""
    if os.environ.get("SPARK_PYTHON_RUNTIME") == "PYTHON_WORKER":
        return True
    return any(name in os.environ for name in _WORKER_VARIABLES)


HIDE_TRACEBACK_ENV = "SPARK_HIDE_TRACEBACK"
"""PySpark's worker prints only ``Type: message`` of a failure, no traceback, when this is set at the time
it reports it (``pyspark.util.handle_worker_exception``); the JVM sets it for every worker when
``spark.sql.execution.pyspark.udf.hideTraceback.enabled`` is on."""


def sentence_errors(method: Callable[P, R]) -> Callable[P, R]:
    """Wrap a Spark-facing method so that a ``SparkafkaError`` it raises reaches the user as its sentence.

    Spark wraps a data source's failure as ``[PYTHON_DATA_SOURCE_ERROR] Failed to ...: <the worker's
    report>`` and PySpark's worker reports the whole traceback: the user's exception ran 11 to 26 lines,
    sparkafka's sentence second to last (measured: a bad startingOffsets, 11 lines; a kafka.* typo, 26).
    Our errors are sentences that name the option and the fix, so for them, and only for them, the
    worker is told to report ``sparkafka.errors.ConfigError: <sentence>`` alone, on the message's first
    line (2 lines in all; the second is Spark's `` SQLSTATE: 38000``). Other exceptions (bugs) keep their
    traceback. Only inside a Spark Python worker (``in_python_worker``), which exits after
    reporting a failure (``worker_run``, the streaming source runner, ``worker.main`` all ``sys.exit``, on
    every line), so the setting dies with the failure it was made for; elsewhere (tests, a driver) nothing
    is changed.
    """

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except SparkafkaError:
            if in_python_worker():
                os.environ[HIDE_TRACEBACK_ENV] = "1"
            raise

    return wrapper


def to_arrow_type(spark_type: Any) -> Any:
    """PySpark's Arrow type for a Spark type, timestamps in UTC (4.2 and later take ``timezone=``; 4.0 and
    4.1 give UTC timestamps by default)."""
    from pyspark.sql.pandas.types import to_arrow_type as convert

    try:
        return convert(spark_type, timezone="UTC")
    except TypeError:  # 4.0, 4.1: no timezone keyword; timestamp_utc=True is their default
        return convert(spark_type)


def from_arrow_type(arrow_type: Any) -> Any:
    """PySpark's Spark type for an Arrow type, a timestamp without a zone as TIMESTAMP_NTZ on every line
    (4.2 made that the default; 4.0 and 4.1 read it as TIMESTAMP unless told)."""
    from pyspark.sql.pandas.types import from_arrow_type as convert

    return convert(arrow_type, prefer_timestamp_ntz=True)


def features() -> dict[str, bool]:
    """What this PySpark gives sparkafka, for ``sparkafka doctor`` and the docs' table."""
    return {
        "Trigger.AvailableNow and read limits for a Python stream source": ADMISSION_CONTROL,
        "Arrow batches into a stream sink (DataSourceStreamArrowWriter)": ARROW_STREAM_WRITER,
        "arrow_udf (Schema Registry formats)": ARROW_UDF,
    }
