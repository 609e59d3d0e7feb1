"""The one error hierarchy of sparkafka: every error we raise is a ``SparkafkaError``.

Which errors no retry can heal (``SparkafkaError.permanent``, read by ``is_permanent``): each class says,
and a ``BrokerError`` raised for a condition that stays says so of itself, where the table names:

=========================================  =========  ===================================================
error                                      permanent  why
=========================================  =========  ===================================================
``ConfigError``                            always     a setting, or the software installed, stays wrong
``AuthenticationError``                    always     a password, certificate or mechanism stays wrong
``AuthorizationError``                     always     an ACL stays missing until someone grants it
``BrokerError(..., permanent=True)``       as raised  what the data asks of the cluster: a topic that does
                                                      not exist (a ``topic`` column) or a row with no topic
                                                      (``sink.task``), a record the producer or the broker
                                                      refuses (``sink.delivery.REFUSED_RECORD``: too
                                                      large, invalid, timestamp out of range)
any other ``BrokerError``, including       never      timeouts, a broker restarting, a leader moving, an
``DeliveryError`` (unproven writes)                   unproven delivery: a retry may succeed
``TransactionError`` and the rest          never
=========================================  =========  ===================================================

A sink task that meets a permanent error does not fail: it reports the error to the driver, whose commit
raises it before anything of the batch is committed (``sink.writer``), so Spark neither retries the task
(``spark.task.maxFailures`` attempts, each failing the same way) nor prints it once per attempt.

Every error pickles with its class, message and attributes, whatever its ``__init__`` takes: a task hands
its error to the driver that way.
"""

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
    "is_permanent",
]


class SparkafkaError(Exception):
    """Root of every error sparkafka raises on purpose."""

    permanent: bool = False
    """Whether doing the same again fails the same way, so that no retry can heal it (the module's table).
    The class says it; ``permanent=True`` at the raise site says it of one error."""

    def __init__(self, *args: object, permanent: bool | None = None) -> None:
        """An error with ``args`` (its message); ``permanent`` overrides the class's ``permanent``."""
        super().__init__(*args)
        if permanent is not None:
            self.permanent = permanent

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as class, ``args`` and attributes, without calling ``__init__`` (whose arguments
        ``args`` need not match: ``AuthorizationError``'s, ``PartitionsGoneError``'s)."""
        return _restore, (type(self), self.args), self.__dict__


def _restore(cls: type[SparkafkaError], args: tuple[Any, ...]) -> SparkafkaError:
    """An unpickled error: ``cls`` with ``args``; pickle then sets its attributes."""
    error = cls.__new__(cls)
    error.args = args
    return error


def is_permanent(error: BaseException) -> bool:
    """Whether ``error`` is a sparkafka error that no retry can heal (``SparkafkaError.permanent``)."""
    return isinstance(error, SparkafkaError) and error.permanent


class ConfigError(SparkafkaError, ValueError):
    """An option or setting is missing, unknown or has a value that is not allowed.

    The message names the option, what was given and what is allowed.
    """

    permanent = True


class BrokerError(SparkafkaError):
    """The Kafka broker could not be reached, or answered with an error we cannot work around.

    Retriable broker errors never reach the user as this: the client layer (``sparkafka.client.core``) retries
    them until the caller's timeout, and only then raises this, naming the bootstrap servers. Not
    ``permanent`` unless raised so (the module's table).
    """


class AuthenticationError(BrokerError):
    """The brokers answered but would not let the client in: a TLS or SASL failure, named in one sentence.

    Never retried: a wrong password, an untrusted certificate or a mechanism the brokers do not enable
    stays wrong (``sparkafka.client.security`` words each).
    """

    permanent = True


class AuthorizationError(BrokerError):
    """The brokers refused an operation by ACL: the message names the user, the operation and the resource.

    Never retried. Raised where the refusal is met (driver or task) by ``sparkafka.client.security``.
    """

    permanent = True

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
    anything of it is committed, so that Spark's retry writes its rows again. ``permanent`` when the
    producer or the broker refused a record for what it is (too large, invalid): a retry sends it again."""


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
