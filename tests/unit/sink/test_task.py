"""Where a sink task meets an error, and whether it is ``permanent`` (``sparkafka.errors``' table): the
topics a ``topic`` column names, a row with no topic, records the producer or the broker refuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException

from sparkafka.errors import AuthorizationError, BrokerError, DeliveryError, is_permanent
from sparkafka.sink.delivery import Deliveries, refuses_record
from sparkafka.sink.options import InputColumns, parse_sink_options
from sparkafka.sink.task import _Output

WITHOUT_TOPIC = parse_sink_options({"kafka.bootstrap.servers": "b:9092"})


class Meta:
    """A topic's metadata as ``list_topics`` gives it."""

    def __init__(self, error: KafkaError | None = None, partitions: int = 0) -> None:
        self.error = error
        self.partitions = dict.fromkeys(range(partitions))


class Producer:
    """A producer whose metadata holds ``topics`` and whose ``produce`` calls ``on_produce``."""

    def __init__(
        self, topics: dict[str, Meta], on_produce: Callable[..., None] = lambda *a, **k: None
    ) -> None:
        self.topics, self.on_produce = topics, on_produce
        self.produced: list[tuple[str, Any]] = []

    def list_topics(self, topic: str, timeout: float) -> Any:
        class Cluster:
            topics = {topic: self.topics[topic]} if topic in self.topics else {}

        return Cluster()

    def produce(self, topic: str, value: Any, *args: Any, **kwargs: Any) -> None:
        self.on_produce(topic, value)
        self.produced.append((topic, value))

    def poll(self, timeout: float) -> int:
        return 0


def rows(topics: list[str | None]) -> pa.RecordBatch:
    values = [f"v{i}".encode() for i in range(len(topics))]
    return pa.RecordBatch.from_arrays(
        [pa.array(values, pa.binary()), pa.array(topics, pa.string())], ["value", "topic"]
    )


def write(producer: Producer, topics: list[str | None]) -> int:
    return _Output(producer, WITHOUT_TOPIC, InputColumns(topic=True), 0).produce_all(iter([rows(topics)]))


def test_a_topic_column_naming_a_topic_the_broker_does_not_know_is_permanent() -> None:
    producer = Producer(
        {"out": Meta(partitions=2), "gone": Meta(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))}
    )
    assert write(producer, ["out", "out"]) == 2
    with pytest.raises(
        BrokerError, match=r"topic 'gone' does not exist \(the sink does not create topics\)"
    ) as e:
        write(producer, ["out", "gone"])
    assert is_permanent(e.value)
    with pytest.raises(BrokerError, match="topic 'never' does not exist") as e:
        write(producer, ["never"])  # not in the answer at all
    assert is_permanent(e.value)


@pytest.mark.parametrize(
    ("meta", "why"),
    [(Meta(KafkaError(KafkaError.LEADER_NOT_AVAILABLE)), "Leader not available"), (Meta(), "no partitions")],
)
def test_a_topic_that_is_not_ready_yet_fails_the_task_for_a_retry(meta: Meta, why: str) -> None:
    """A topic being created (a broker that creates topics on first use answers LEADER_NOT_AVAILABLE, or
    a leader being elected: a retry finds it."""
    with pytest.raises(BrokerError, match=f"topic 'new' is not ready to write to: .*{why}") as e:
        write(Producer({"new": meta}), ["new"])
    assert not is_permanent(e.value)


def test_a_topic_column_denied_by_acl_is_permanent() -> None:
    denied = Meta(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    with pytest.raises(AuthorizationError, match="topic secret") as e:
        write(Producer({"secret": denied}), ["secret"])
    assert is_permanent(e.value)


def test_a_row_with_a_null_topic_and_no_topic_option_is_permanent() -> None:
    with pytest.raises(BrokerError, match="a row has a null topic and the sink has no option topic") as e:
        write(Producer({"out": Meta(partitions=1)}), ["out", None])
    assert is_permanent(e.value)


def refusing(code: int) -> Callable[..., None]:
    def produce(topic: str, value: Any) -> None:
        raise KafkaException(KafkaError(code))

    return produce


@pytest.mark.parametrize(
    ("code", "permanent"),
    [(KafkaError.MSG_SIZE_TOO_LARGE, True), (KafkaError._FATAL, False), (KafkaError._STATE, False)],
)
def test_a_record_the_producer_refuses_for_what_it_is_is_permanent(code: int, permanent: bool) -> None:
    """``produce()`` raises MSG_SIZE_TOO_LARGE for a record over ``kafka.message.max.bytes`` (the
    producer's own check); a producer in a fatal or abortable state is not the record's fault."""
    producer = Producer({"out": Meta(partitions=1)}, refusing(code))
    with pytest.raises(BrokerError, match="producing to the topic column failed") as e:
        write(producer, ["out"])
    assert is_permanent(e.value) is permanent


@pytest.mark.parametrize(
    ("errors", "permanent"),
    [
        ([KafkaError.MSG_SIZE_TOO_LARGE], True),
        ([KafkaError._PURGE_QUEUE, KafkaError.MSG_SIZE_TOO_LARGE], True),
        ([KafkaError.INVALID_RECORD], True),
        ([KafkaError.RECORD_LIST_TOO_LARGE], True),
        ([KafkaError.INVALID_TIMESTAMP], True),
        ([KafkaError._MSG_TIMED_OUT], False),
        ([KafkaError.NOT_ENOUGH_REPLICAS], False),
        ([KafkaError._PURGE_QUEUE], False),
    ],
)
def test_failed_deliveries_are_permanent_when_the_broker_refused_a_record(
    errors: list[int], permanent: bool
) -> None:
    class Message:
        def topic(self) -> str:
            return "out"

        def partition(self) -> int:
            return 0

    deliveries = Deliveries({})
    for code in errors:
        deliveries(KafkaError(code), Message())
    failure = deliveries.failure()
    assert isinstance(failure, DeliveryError)
    assert is_permanent(failure) is permanent
    assert deliveries.failure() is None  # forgotten: a cached producer's next flush is judged afresh
    assert not deliveries.refused


def test_unproven_and_undelivered_records_are_not_permanent() -> None:
    deliveries = Deliveries({})
    deliveries.implicit_ack("IMPLICITACK [thrd:b:9092/1]: out [2] 1 message(s) implicitly acked")
    implicit = deliveries.failure()
    assert isinstance(implicit, DeliveryError)
    assert not is_permanent(implicit)
    undelivered = deliveries.failure(left=3, timeout_s=300)
    assert isinstance(undelivered, DeliveryError)
    assert not is_permanent(undelivered)


def test_refused_records_are_named_by_librdkafkas_codes_or_their_names_in_text() -> None:
    assert refuses_record(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    assert refuses_record("MSG_SIZE_TOO_LARGE")
    assert not refuses_record(KafkaError(KafkaError._MSG_TIMED_OUT))
    assert not refuses_record(29)  # a bare code (TOPIC_AUTHORIZATION_FAILED): not a record's fault
