"""sparkafka: Apache Flink's Kafka connector semantics for Spark Structured Streaming."""

from sparkafka.errors import BrokerError, ConfigError, DataLossError, SparkafkaError, TransactionError
from sparkafka.structs import TopicPartition

__version__ = "0.1.0"


def register(spark: object) -> None:
    """Register sparkafka's data sources with a SparkSession: ``format("sparkafka")`` for read and write."""
    from sparkafka.datasource import register as _register

    _register(spark)


__all__ = [
    "BrokerError",
    "ConfigError",
    "DataLossError",
    "SparkafkaError",
    "TopicPartition",
    "TransactionError",
    "__version__",
    "register",
]
