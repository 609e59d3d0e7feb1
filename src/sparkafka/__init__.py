"""sparkafka: Apache Flink's Kafka connector semantics for Spark Structured Streaming."""

from sparkafka.errors import BrokerError, ConfigError, DataLossError, SparkafkaError, TransactionError
from sparkafka.structs import TopicPartition

__version__ = "0.1.0"

__all__ = [
    "BrokerError",
    "ConfigError",
    "DataLossError",
    "SparkafkaError",
    "TopicPartition",
    "TransactionError",
    "__version__",
]
