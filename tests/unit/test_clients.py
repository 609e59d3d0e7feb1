"""The client layer's retry policy and ListOffsets handling, with a fake admin client and a fake clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from sparkafka.clients import AdminMetadata, cached, is_retriable, with_retries
from sparkafka.errors import BrokerError, PartitionsGoneError
from sparkafka.structs import TopicPartition

CONF = {"bootstrap.servers": "127.0.0.1:1"}  # never contacted: every client here is a fake
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def kafka_error(code: int) -> KafkaException:
    return KafkaException(KafkaError(code))


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def flaky(errors: list[BaseException], result: Any = "ok") -> Callable[[float], Any]:
    def call(_left: float) -> Any:
        if errors:
            raise errors.pop(0)
        return result

    return call


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
    ],
)
def test_retriable_errors_are_retried_with_backoff(code: int) -> None:
    clock = FakeClock()
    errors: list[BaseException] = [kafka_error(code)] * 4
    assert with_retries("x", CONF, flaky(errors), 30, clock=clock, sleep=clock.sleep) == "ok"
    assert clock.slept == [0.05, 0.1, 0.2, 0.4]


def test_retries_stop_at_the_timeout_with_the_clear_error() -> None:
    clock = FakeClock()
    errors: list[BaseException] = [kafka_error(KafkaError.NOT_LEADER_FOR_PARTITION)] * 100
    with pytest.raises(BrokerError, match=r"looking up x failed against bootstrap servers 127\.0\.0\.1:1"):
        with_retries("looking up x", CONF, flaky(errors), 5.0, clock=clock, sleep=clock.sleep)
    assert sum(clock.slept) <= 5.0
    assert max(clock.slept) == 1.0  # backoff capped


def test_non_retriable_errors_fail_at_once() -> None:
    clock = FakeClock()
    errors: list[BaseException] = [kafka_error(KafkaError.TOPIC_AUTHORIZATION_FAILED)]
    with pytest.raises(BrokerError, match="TOPIC_AUTHORIZATION_FAILED"):
        with_retries("x", CONF, flaky(errors), 30, clock=clock, sleep=clock.sleep)
    assert clock.slept == []
    assert not is_retriable(ValueError("bad json"))
    assert is_retriable(TimeoutError())


def test_the_call_gets_the_time_left() -> None:
    clock = FakeClock()
    seen: list[float] = []

    def call(left: float) -> str:
        seen.append(left)
        if len(seen) < 3:
            raise kafka_error(KafkaError._TRANSPORT)
        return "ok"

    with_retries("x", CONF, call, 10.0, clock=clock, sleep=clock.sleep)
    assert seen == pytest.approx([10.0, 9.95, 9.85])


class _Answer:
    def __init__(self, offset: int | None = None, error: int | None = None) -> None:
        self.offset, self.error = offset, error

    def result(self, _timeout: float) -> Any:
        if self.error is not None:
            raise kafka_error(self.error)
        return self


class _Topic:
    error = None

    def __init__(self, n: int) -> None:
        self.partitions = dict.fromkeys(range(n))


class _Meta:
    cluster_id = "MkU3OEVBNTcwNTJENDM2Qg"  # the form Apache Kafka generates: no ListOffsets probe

    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = {t: _Topic(n) for t, n in topics.items()}
        self.brokers = {1: None}


class FakeAdmin:
    """Answers ListOffsets from a script: per round, per partition an offset or an error code."""

    def __init__(self, rounds: list[dict[TopicPartition, int | tuple[str, int]]], topics: dict[str, int]):
        self.rounds = rounds
        self.topics = topics
        self.requests: list[set[TopicPartition]] = []

    def list_topics(self, timeout: float) -> _Meta:
        return _Meta(self.topics)

    def list_offsets(self, request: dict[Any, Any], **_kwargs: Any) -> dict[Any, _Answer]:
        asked = {TopicPartition(c.topic, c.partition) for c in request}
        self.requests.append(asked)
        script = self.rounds.pop(0)
        out = {}
        for ctp in request:
            answer = script[TopicPartition(ctp.topic, ctp.partition)]
            out[ctp] = _Answer(error=answer[1]) if isinstance(answer, tuple) else _Answer(answer)
        return out


def metadata(admin: FakeAdmin) -> tuple[AdminMetadata, FakeClock]:
    clock = FakeClock()
    return AdminMetadata(CONF, 30, clock=clock, sleep=clock.sleep, admin=admin), clock


def test_list_offsets_retries_only_the_partitions_that_failed() -> None:
    not_leader = ("err", KafkaError.NOT_LEADER_FOR_PARTITION)
    admin = FakeAdmin([{A0: 5, A1: not_leader}, {A1: not_leader}, {A1: 9}], {"a": 2})
    meta, clock = metadata(admin)
    assert meta.latest([A0, A1]) == {A0: 5, A1: 9}
    assert admin.requests == [{A0, A1}, {A1}, {A1}]
    assert clock.slept == [0.05, 0.1]


def test_unknown_partition_of_a_new_topic_is_retried_while_metadata_has_it() -> None:
    unknown = ("err", KafkaError.UNKNOWN_TOPIC_OR_PART)
    admin = FakeAdmin([{B0: unknown}, {B0: 0}], {"a": 2, "b": 1})
    meta, _ = metadata(admin)
    assert meta.earliest([B0]) == {B0: 0}


def test_unknown_partition_of_a_deleted_topic_is_reported_gone() -> None:
    unknown = ("err", KafkaError.UNKNOWN_TOPIC_OR_PART)
    admin = FakeAdmin([{A0: 3, B0: unknown}], {"a": 2})
    meta, clock = metadata(admin)
    with pytest.raises(PartitionsGoneError, match="b-0 no longer exist") as info:
        meta.latest([A0, B0])
    assert info.value.partitions == {B0}
    assert clock.slept == []  # decided at once from metadata, not after the timeout


def test_one_client_per_kind_and_settings() -> None:
    made: list[int] = []
    first = cached("test-kind", {"a": "1"}, lambda: made.append(1) or object())
    assert cached("test-kind", {"a": "1"}, lambda: made.append(2) or object()) is first
    assert cached("test-kind", {"a": "2"}, lambda: made.append(3) or object()) is not first
    assert made == [1, 3]
