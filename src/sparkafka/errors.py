"""The one error hierarchy of sparkafka: every error we raise is a ``SparkafkaError``."""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "AuthenticationError",
    "AuthorizationError",
    "BrokerError",
    "ConfigError",
    "DataLossError",
    "DeliveryError",
    "PartitionsGoneError",
    "RegistryError",
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
    """The Kafka broker could not be reached, or answered with an error we cannot work around.

    Retriable broker errors never reach the user as this: the client layer (``sparkafka.client.core``) retries
    them until the caller's timeout, and only then raises this, naming the bootstrap servers.
    """


class AuthenticationError(BrokerError):
    """The brokers answered but would not let the client in: a TLS or SASL failure, named in one sentence.

    Never retried: a wrong password, an untrusted certificate or a mechanism the brokers do not enable
    stays wrong (``sparkafka.client.security`` words each).
    """


class AuthorizationError(BrokerError):
    """The brokers refused an operation by ACL: the message names the user, the operation and the resource.

    Never retried. Raised where the refusal is met (driver or task) by ``sparkafka.client.security``.
    """

    def __init__(self, message: str, principal: str, operation: str, resource: str) -> None:
        """An error with ``message`` about ``principal`` lacking ``operation`` on ``resource``."""
        super().__init__(message)
        self.principal = principal
        """The user (SASL user name, or the client certificate's subject)."""
        self.operation = operation
        """The permission missing: ``READ``, ``WRITE``, ``DESCRIBE``, ``CREATE``."""
        self.resource = resource
        """``topic orders``, ``group etl``, ``transactional id orders-eos-*``."""


class DeliveryError(BrokerError):
    """A sink task's records were not written, or not provably (``sink.delivery``): the task fails before
    anything of it is committed, so that Spark's retry writes its rows again."""


class PartitionsGoneError(BrokerError):
    """A lookup found partitions whose topic the cluster's metadata no longer has (deleted)."""

    def __init__(self, partitions: set[Any], message: str) -> None:
        """An error with ``message`` about the gone ``partitions``."""
        super().__init__(message)
        self.partitions = partitions
        """The ``TopicPartition``s that are gone."""


class DataLossError(SparkafkaError):
    """Records the query has not read may be gone and failOnDataLoss is on: offsets removed by retention,
    a deleted or recreated topic, a log truncated below the query's position, a partition added with its
    first records gone, a checkpointed partition no longer subscribed (``source.data_loss``,
    ``source.fetch``).

    The message starts with the error class Spark's connector gives the case, in brackets as Spark prints
    a class: ``[KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED] Some data may have been lost: ...``. Raised in a
    Spark Python worker, only the message reaches the user: the class is there and nowhere else
    (``sparkafka.spark_errors.data_loss_condition`` reads it).
    """

    @property
    def condition(self) -> str | None:
        """Spark's error class of the case (``KAFKA_DATA_LOSS.<case>``), as the message starts with it."""
        found = re.match(r"\[(KAFKA_DATA_LOSS\.[A-Z_]+)\] ", str(self))
        return found.group(1) if found else None


class TransactionError(SparkafkaError):
    """A Kafka transaction could not be begun, committed, resumed or aborted."""


class RegistryError(SparkafkaError):
    """The Schema Registry could not be reached, or has no such subject, version or id, or refused a schema.

    The message names the registry (user info masked), the subject, version or id, and what to do.
    """

    def __init__(self, message: str, code: int | None = None) -> None:
        """An error with ``message`` and, when the registry gave one, its error ``code``."""
        super().__init__(message)
        self.code = code
        """The registry's error code (40401 no subject, 40402 no version, 40403 no id, 409 incompatible)."""
