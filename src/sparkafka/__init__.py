"""sparkafka: Apache Flink's Kafka connector semantics for Spark Structured Streaming."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkafka.errors import BrokerError, ConfigError, DataLossError, SparkafkaError, TransactionError
from sparkafka.structs import TopicPartition

if TYPE_CHECKING:
    from sparkafka.source.commits import SourceMetrics

__version__ = "0.4.0"


def register(spark: object) -> None:
    """Register sparkafka's data sources with a SparkSession: ``format("sparkafka")`` for read and write."""
    from sparkafka.datasource import register as _register

    _register(spark)


def data_loss_condition(error: BaseException) -> str | None:
    """Spark's error class (``KAFKA_DATA_LOSS.<case>``) of a data-loss failure a query or action raised,
    from sparkafka or from Spark's ``format("kafka")``; None for any other failure.

    Spark's connector gives the class to a JVM cause of the exception PySpark raises, sparkafka to the first
    words of its sentence (a Python data source passes Spark only text): this reads either
    (``sparkafka.spark_errors``).
    """
    from sparkafka.spark_errors import data_loss_condition as _condition

    return _condition(error)


def source_metrics(group_id: str, metrics_file: str | None = None) -> SourceMetrics | None:
    """Group-commit metrics of the streaming source that commits for ``group_id``.

    ``commits_succeeded``, ``commits_failed``, the offsets last committed per partition and the last error,
    as written by the running (or last) query's source on every change; None before the first commit.
    The counts are totals over every run on this host, as ``sink_metrics``' are, until the file is retired
    (``sparkafka metrics retire``).
    Pass ``metrics_file`` when the source was given the option metricsFile.
    """
    from sparkafka.source.commits import read_source_metrics

    return read_source_metrics(group_id, metrics_file)


def sink_metrics(transactional_id_prefix: str, query_id: str | None = None) -> dict[str, int]:
    """Counters of the exactly-once sink with this prefix on this host.

    Totals over all its queries and runs, or only streaming query ``query_id``'s (a batch write's id is
    ``batch-<uuid>``).

    ``batches`` committed, ``transactions`` committed, ``records`` in them, ``replays`` (replayed batches
    not written again), ``recovered`` (pending intents resolved by recovery), ``partial`` and ``abandoned``
    (batches the broker partly or wholly aborted before the commit reached them; see docs/writing.md), and
    ``aborted`` (transactions the sink aborted itself: replays, batches Spark gave up on, refused batches).
    """
    from sparkafka.metrics_files import read_sink_metrics

    return read_sink_metrics(transactional_id_prefix, query_id)


__all__ = [
    "BrokerError",
    "ConfigError",
    "DataLossError",
    "SparkafkaError",
    "TopicPartition",
    "TransactionError",
    "__version__",
    "data_loss_condition",
    "register",
    "sink_metrics",
    "source_metrics",
]
