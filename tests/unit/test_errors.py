"""The error hierarchy (``sparkafka.errors``): which errors no retry can heal; every one pickles."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator

import pytest
from pyspark import cloudpickle

# Each defines SparkafkaError subclasses of its own: imported so that every class is pickled below.
import sparkafka.client.raw_log
import sparkafka.local.cluster
import sparkafka.sink.faults
import sparkafka.sink.intents
import sparkafka.source.native_fetch
from sparkafka.errors import (
    AuthenticationError,
    AuthorizationError,
    BrokerError,
    ConfigError,
    DataLossError,
    DeliveryError,
    PartitionsGoneError,
    RegistryError,
    SparkafkaError,
    TransactionError,
    is_permanent,
)
from sparkafka.structs import TopicPartition

DENIED = AuthorizationError(
    "User:etl may not WRITE topic orders: grant it with sparkafka acls grant ...",
    "User:etl",
    "WRITE",
    "topic orders",
)

# The module docstring's table, row by row.
DECISIONS: list[tuple[BaseException, bool]] = [
    (ConfigError("option topic=...: no such topic"), True),
    (AuthenticationError("authentication failed for user etl"), True),
    (DENIED, True),
    (BrokerError("topic 'x' does not exist (the sink does not create topics)", permanent=True), True),
    (
        DeliveryError("1 record(s) could not be delivered, e.g. out-0: MSG_SIZE_TOO_LARGE", permanent=True),
        True,
    ),
    (BrokerError("looking up topic 'x' failed against bootstrap servers b:9092: timed out"), False),
    (DeliveryError("librdkafka reported records delivered that the broker never acknowledged"), False),
    (DeliveryError("3 record(s) still undelivered after 300 s"), False),
    (PartitionsGoneError({TopicPartition("t", 0)}, "t-0 is gone"), False),
    (TransactionError("init_transactions for transactional id p-0 failed"), False),
    (DataLossError("[KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED] Some data may have been lost"), False),
    (RegistryError("no subject orders-value", 40401), False),
    (ValueError("not ours"), False),
    (RuntimeError("not ours"), False),
]


@pytest.mark.parametrize(
    ("error", "permanent"), DECISIONS, ids=[f"{i}-{type(e).__name__}" for i, (e, _) in enumerate(DECISIONS)]
)
def test_which_errors_no_retry_can_heal(error: BaseException, permanent: bool) -> None:
    assert is_permanent(error) is permanent


def test_an_error_can_say_it_is_permanent_either_way_and_a_class_default_holds_otherwise() -> None:
    assert BrokerError("x").permanent is False
    assert BrokerError("x", permanent=True).permanent is True
    assert ConfigError("x", permanent=False).permanent is False  # the raise site has the last word
    assert ConfigError("x").permanent is True
    assert BrokerError.permanent is False  # the class is not changed by an instance
    assert str(BrokerError("x", permanent=True)) == "x"


def every_error_class() -> Iterator[type[SparkafkaError]]:
    todo: list[type[SparkafkaError]] = [SparkafkaError]
    while todo:
        cls = todo.pop()
        yield cls
        todo.extend(cls.__subclasses__())


def sample(cls: type[SparkafkaError]) -> SparkafkaError:
    """One of ``cls``, made as its raise sites make it (each ``__init__`` takes other arguments)."""
    made: dict[type[SparkafkaError], Callable[[], SparkafkaError]] = {
        AuthorizationError: lambda: DENIED,
        PartitionsGoneError: lambda: PartitionsGoneError({TopicPartition("t", 1)}, "t-1 is gone"),
        RegistryError: lambda: RegistryError("no subject", 40401),
        sparkafka.sink.intents.IntentWriteError: lambda: sparkafka.sink.intents.IntentWriteError(
            "timed out", True
        ),
        sparkafka.client.raw_log.LogRangeGoneError: lambda: sparkafka.client.raw_log.LogRangeGoneError(
            "gone", 7
        ),
    }
    return made.get(cls, lambda: cls(f"a {cls.__name__}", permanent=True))()


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "pyspark-cloudpickle"])
def test_every_error_pickles_with_its_class_message_and_attributes(dumps: Callable[[object], bytes]) -> None:
    """A sink task hands its error to the driver's commit pickled (``sink.writer``)."""
    classes = list(every_error_class())
    assert {AuthorizationError, PartitionsGoneError, sparkafka.sink.intents.IntentWriteError} <= set(classes)
    for cls in classes:
        error = sample(cls)
        copy = pickle.loads(dumps(error))
        assert type(copy) is cls
        assert (copy.args, vars(copy), copy.permanent) == (error.args, vars(error), error.permanent)
        assert str(copy) == str(error)
    assert pickle.loads(dumps(DENIED)).principal == "User:etl"
