"""The one error hierarchy of sparkafka: every error we raise is a ``SparkafkaError``."""

from __future__ import annotations

__all__ = [
    "BrokerError",
    "ConfigError",
    "DataLossError",
    "SparkafkaError",
    "TransactionError",
]


class SparkafkaError(Exception):
    """Root of every error sparkafka raises on purpose."""


class ConfigError(SparkafkaError, ValueError):
    """An option or setting is missing, unknown or has a value that is not allowed.

    The message names the option, what was given and what is allowed.
    """


class BrokerError(SparkafkaError):
    """The Kafka broker could not be reached, or answered with an error we cannot work around."""

    retriable: bool = False


class DataLossError(SparkafkaError):
    """Offsets the query needs are gone (retention, a deleted topic or partition) and failOnDataLoss is on."""


class TransactionError(SparkafkaError):
    """A Kafka transaction could not be begun, committed, resumed or aborted."""
