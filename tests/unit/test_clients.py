"""The client layer's retry policy and ListOffsets handling, with a fake admin client and a fake clock."""

from __future__ import annotations

import base64
import inspect
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kafka.errors
import pytest
from confluent_kafka import KafkaError, KafkaException

from sparkafka.client import broker_gaps
from sparkafka.client.core import (
    DEFAULT_TIMEOUT_S,
    LEADER_ELECTION_S,
    cached,
    error_code,
    is_leaderless,
    is_retriable,
    learn_topics,
    with_retries,
)
from sparkafka.client.metadata import AdminMetadata
from sparkafka.errors import AuthorizationError, BrokerError, PartitionsGoneError
from sparkafka.options import DEFAULT_METADATA_TIMEOUT_MS
from sparkafka.sink.intents import IntentLog
from sparkafka.structs import TimestampedOffset, TopicPartition

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
        self.metadata_asked = 0

    def list_topics(self, timeout: float) -> _Meta:
        self.metadata_asked += 1
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


# --- Leader elections: every lookup rides through answers given while a partition has no leader ---------

NO_LEADERS = "Failed to query partition leaders: No leaders found"  # librdkafka 2.16's ListOffsets wording


def no_leaders() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._NOENT, NO_LEADERS))


@pytest.mark.parametrize(
    ("error", "leaderless", "retriable"),
    [
        (no_leaders(), True, True),
        (KafkaException(KafkaError(KafkaError._NOENT)), False, False),  # "Local: No such entry": generic
        (KafkaException(KafkaError(KafkaError._NOENT, "no such group")), False, False),
        (kafka_error(KafkaError.LEADER_NOT_AVAILABLE), True, True),
        (kafka_error(KafkaError.NOT_LEADER_FOR_PARTITION), True, True),
        (kafka_error(KafkaError.FENCED_LEADER_EPOCH), True, True),
        (kafka_error(KafkaError.UNKNOWN_LEADER_EPOCH), True, True),
        (kafka_error(KafkaError.NOT_ENOUGH_REPLICAS), True, True),
        (kafka_error(KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND), True, True),
        (kafka_error(KafkaError.OFFSET_NOT_AVAILABLE), True, True),
        (kafka_error(KafkaError.REQUEST_TIMED_OUT), True, True),
        (kafka_error(KafkaError.NOT_COORDINATOR), True, True),
        (kafka_error(KafkaError.COORDINATOR_NOT_AVAILABLE), True, True),
        (kafka_error(KafkaError.COORDINATOR_LOAD_IN_PROGRESS), True, True),
        (kafka_error(KafkaError.NOT_CONTROLLER), True, True),
        (kafka_error(KafkaError._TRANSPORT), True, True),
        (kafka_error(KafkaError._ALL_BROKERS_DOWN), True, True),
        (kafka_error(KafkaError._TIMED_OUT), True, True),
        (kafka_error(KafkaError._WAIT_COORD), True, True),
        # A new topic not yet known everywhere: retried, and told from a deleted one by the metadata.
        (kafka_error(KafkaError.UNKNOWN_TOPIC_OR_PART), False, True),
        (kafka_error(KafkaError._RESOLVE), False, True),
        # Permanent: the topic has fewer partitions, or no such topic, or no right to it.
        (kafka_error(KafkaError._UNKNOWN_PARTITION), False, False),
        (kafka_error(KafkaError._UNKNOWN_TOPIC), False, False),
        (kafka_error(KafkaError.TOPIC_AUTHORIZATION_FAILED), False, False),
        (kafka_error(KafkaError.INVALID_REPLICATION_FACTOR), False, False),
        # kafka-python's errors: codes in ``errno``, the client's own verdict in ``retriable``.
        (kafka.errors.NotLeaderForPartitionError(), True, True),
        (kafka.errors.LeaderNotAvailableError(), True, True),
        (kafka.errors.NotEnoughReplicasError(), True, True),
        (kafka.errors.FencedLeaderEpochError(), True, True),
        (kafka.errors.NotCoordinatorError(), True, True),
        (kafka.errors.CoordinatorNotAvailableError(), True, True),
        (kafka.errors.CoordinatorLoadInProgressError(), True, True),
        (kafka.errors.RequestTimedOutError(), True, True),
        (kafka.errors.KafkaConnectionError(), False, True),
        (kafka.errors.NodeNotReadyError(), False, True),
        (kafka.errors.UnknownTopicOrPartitionError(), False, True),
        (kafka.errors.TopicAuthorizationFailedError(), False, False),
        # Not Kafka errors: an OSError's errno is no Kafka code (6 would read as NOT_LEADER).
        (OSError(6, "No such device or address"), False, False),
        (TimeoutError(), False, True),
        (ValueError("bad json"), False, False),
    ],
    ids=lambda v: v if isinstance(v, bool) else f"{type(v).__name__}:{error_code(v)}:{v}"[:60],
)
def test_leaderless_and_retriable_classification(
    error: BaseException, leaderless: bool, retriable: bool
) -> None:
    assert is_leaderless(error) is leaderless
    assert is_retriable(error) is retriable
    inner = error.args[0] if isinstance(error, KafkaException) else None
    if inner is not None:  # per-partition errors arrive as bare KafkaErrors: classified the same
        assert (is_leaderless(inner), is_retriable(inner)) == (leaderless, retriable)


def test_the_default_timeouts_ride_through_an_election() -> None:
    # broker.session.timeout.ms (9 s) before a dead broker's partitions get a new leader, then the
    # election; each default must outlast it several times over.
    assert LEADER_ELECTION_S >= 9.0
    assert DEFAULT_TIMEOUT_S >= 3 * LEADER_ELECTION_S
    assert DEFAULT_METADATA_TIMEOUT_MS / 1000 >= DEFAULT_TIMEOUT_S
    for f in (AdminMetadata, IntentLog, broker_gaps.latest_is_exact, broker_gaps.fetched_end_offsets):
        assert inspect.signature(f).parameters["timeout_s"].default >= DEFAULT_TIMEOUT_S, f


def test_with_retries_rides_through_12_s_without_leaders() -> None:
    clock = FakeClock()
    until = clock.now + 12.0

    def call(_left: float) -> str:
        if clock.now < until:
            raise no_leaders()
        return "ok"

    assert with_retries("x", CONF, call, DEFAULT_TIMEOUT_S, clock=clock, sleep=clock.sleep) == "ok"
    assert 12.0 <= sum(clock.slept) < 14.0  # backoff capped at 1 s: done within a second of the election
    assert max(clock.slept) == 1.0


def test_a_non_leader_error_still_fails_at_once() -> None:
    clock = FakeClock()
    errors: list[BaseException] = [KafkaException(KafkaError(KafkaError._NOENT))]
    with pytest.raises(BrokerError, match="_NOENT"):
        with_retries("x", CONF, flaky(errors), DEFAULT_TIMEOUT_S, clock=clock, sleep=clock.sleep)
    assert clock.slept == []


class LeaderlessAdmin:
    """A one-broker-down cluster on a fake clock: ListOffsets says "No leaders found" until ``until``.

    Records each ListOffsets request's timeout and each metadata request (the refresh between retries).
    """

    def __init__(self, clock: FakeClock, until: float, topics: dict[str, int], offset: int = 7) -> None:
        self.clock, self.until, self.topics, self.offset = clock, until, topics, offset
        self.request_timeouts: list[float] = []
        self.metadata_requests = 0

    def list_topics(self, timeout: float) -> _Meta:
        self.metadata_requests += 1
        return _Meta(self.topics)

    def list_offsets(self, request: dict[Any, Any], request_timeout: float, **_kwargs: Any) -> dict[Any, Any]:
        self.request_timeouts.append(request_timeout)
        if self.clock.now < self.until:
            failure = no_leaders()  # librdkafka fails every partition's future with the same error
            return {ctp: _Failing(failure) for ctp in request}
        return {ctp: _Answer(self.offset) for ctp in request}


class _Failing:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    def result(self, _timeout: float) -> Any:
        raise self.error


INTENTS = TopicPartition("_sparkafka-intents-p", 0)


def test_end_offset_lookup_rides_through_12_s_without_leaders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker_gaps, "_exact", {CONF["bootstrap.servers"]: True})  # Apache Kafka: no probe
    clock = FakeClock()
    admin = LeaderlessAdmin(clock, clock.now + 12.0, {INTENTS.topic: 1})
    meta = AdminMetadata(CONF, clock=clock, sleep=clock.sleep, admin=admin)
    assert meta.latest([INTENTS]) == {INTENTS: 7}
    assert 12.0 <= sum(clock.slept) < 14.0
    # Every leaderless answer refreshed the metadata (to reach the new leader) and checked the topic is
    # still there; each request was cut off well before the deadline (it may wait for a dead leader).
    assert admin.metadata_requests == len(admin.request_timeouts) - 1
    assert max(admin.request_timeouts) <= LEADER_ELECTION_S


def test_no_leaders_for_a_deleted_topic_is_reported_gone_at_once() -> None:
    clock = FakeClock()
    admin = LeaderlessAdmin(clock, clock.now + 1000.0, {"other": 1})
    meta = AdminMetadata(CONF, clock=clock, sleep=clock.sleep, admin=admin)
    with pytest.raises(PartitionsGoneError, match="no longer exist") as info:
        meta.earliest([INTENTS])
    assert info.value.partitions == {INTENTS}
    assert clock.slept == []


def test_leaderless_lookup_gives_up_at_the_timeout_naming_the_servers() -> None:
    clock = FakeClock()
    admin = LeaderlessAdmin(clock, clock.now + 1000.0, {INTENTS.topic: 1})
    meta = AdminMetadata(CONF, clock=clock, sleep=clock.sleep, admin=admin)
    with pytest.raises(
        BrokerError, match=r"failed against bootstrap servers 127\.0\.0\.1:1: .*No leaders found"
    ):
        meta.latest([INTENTS])
    assert sum(clock.slept) <= DEFAULT_TIMEOUT_S


def test_a_non_retriable_partition_error_fails_the_lookup_at_once() -> None:
    leaderless = ("err", KafkaError.LEADER_NOT_AVAILABLE)
    denied = ("err", KafkaError.TOPIC_AUTHORIZATION_FAILED)
    admin = FakeAdmin([{A0: leaderless, B0: denied}], {"a": 2, "b": 1})
    meta, clock = metadata(admin)
    with pytest.raises(AuthorizationError, match=r"^user ANONYMOUS may not DESCRIBE topic b: grant it with "):
        meta.latest([A0, B0])
    assert clock.slept == []


class _GroupPartition:
    def __init__(self, tp: TopicPartition, offset: int, error: KafkaError | None = None) -> None:
        self.topic, self.partition, self.offset, self.error = tp.topic, tp.partition, offset, error


class _GroupAnswer:
    def __init__(self, partitions: list[_GroupPartition]) -> None:
        self.topic_partitions = partitions

    def result(self, _timeout: float) -> _GroupAnswer:
        return self


class GroupAdmin:
    """Answers OffsetFetch / OffsetCommit from a script of per-partition answers, one list per round."""

    def __init__(self, rounds: list[list[_GroupPartition]]) -> None:
        self.rounds = rounds
        self.closed = False

    def _next(self) -> dict[str, _GroupAnswer]:
        return {"g": _GroupAnswer(self.rounds.pop(0))}

    def committed(self, _partitions: Any, timeout: float) -> list[_GroupPartition]:
        """OffsetFetch as a Consumer of the group answers it (``AdminMetadata`` reads offsets so)."""
        return self.rounds.pop(0)

    def close(self) -> None:
        self.closed = True

    def alter_consumer_group_offsets(self, _request: Any, **_kwargs: Any) -> dict[str, _GroupAnswer]:
        return self._next()


def test_group_offsets_answered_without_a_coordinator_are_asked_again() -> None:
    moving = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    admin = GroupAdmin([[_GroupPartition(A0, -1001, moving)], [_GroupPartition(A0, 42)]])
    clock = FakeClock()
    meta = AdminMetadata(CONF, clock=clock, sleep=clock.sleep, admin=admin, group_reader=lambda _g: admin)
    assert meta.committed("g", [A0]) == {A0: 42}  # not None ("nothing committed") from the first answer
    assert clock.slept == [0.05]
    assert admin.closed


def test_setting_group_offsets_is_retried_through_a_coordinator_move_but_refusals_are_not() -> None:
    moved = KafkaError(KafkaError.NOT_COORDINATOR)
    refused = KafkaError(KafkaError.UNKNOWN_MEMBER_ID)
    admin = GroupAdmin([[_GroupPartition(A0, 5, moved)], [_GroupPartition(A0, 5)]])
    clock = FakeClock()
    AdminMetadata(CONF, clock=clock, sleep=clock.sleep, admin=admin).alter_committed("g", {A0: 5})
    assert clock.slept == [0.05]
    admin = GroupAdmin([[_GroupPartition(A0, 5, refused)]])
    with pytest.raises(BrokerError, match=r"a-0: .*UNKNOWN_MEMBER_ID"):
        AdminMetadata(CONF, clock=clock, sleep=clock.sleep, admin=admin).alter_committed("g", {A0: 5})


class _TopicsConsumer:
    def __init__(self, errors: list[BaseException]) -> None:
        self.errors = errors
        self.asked: list[str] = []

    def list_topics(self, topic: str, timeout: float) -> None:
        self.asked.append(topic)
        if self.errors:
            raise self.errors.pop(0)


def test_learning_topics_ahead_skips_a_leaderless_moment_and_asks_again_later() -> None:
    consumer = _TopicsConsumer([kafka_error(KafkaError._TRANSPORT)])
    learn_topics(consumer, {"t"}, 1.0)  # no raise: only a shortcut
    learn_topics(consumer, {"t"}, 1.0)
    learn_topics(consumer, {"t"}, 1.0)
    assert consumer.asked == ["t", "t"]  # asked again after the failure, then known


def test_learning_topics_ahead_still_raises_permanent_errors() -> None:
    consumer = _TopicsConsumer([kafka_error(KafkaError.TOPIC_AUTHORIZATION_FAILED)])
    with pytest.raises(KafkaException):
        learn_topics(consumer, {"t"}, 1.0)


def test_an_offset_below_zero_without_an_error_is_asked_again_after_refreshing_metadata() -> None:
    # librdkafka's answer for the partitions of a leader it could not reach (seen after a broker kill).
    admin = FakeAdmin([{A0: -1001, A1: 4}, {A0: 0}], {"a": 2})
    meta, clock = metadata(admin)
    assert meta.earliest([A0, A1]) == {A0: 0, A1: 4}
    assert admin.requests == [{A0, A1}, {A0}]
    assert clock.slept == [0.05]
    assert admin.metadata_asked == 1  # the refreshed metadata lets the retry reach the new leader


def test_no_record_that_new_stays_minus_one_by_timestamp() -> None:
    admin = FakeAdmin([{A0: -1}], {"a": 2})
    meta, _ = metadata(admin)
    assert meta.for_timestamp([A0], 123) == {A0: -1}


def _admin_handle_lines(settings: dict[str, str]) -> list[str]:
    """What librdkafka logs at once for a handle made as an AdminClient is, from ``settings``.

    An AdminClient is a producer-type handle: a Producer acts alike (cimpl's own: tests stand in for
    confluent_kafka.Producer). Without bootstrap.servers it connects nowhere (and warns about that).
    """
    import logging

    from confluent_kafka import cimpl

    class Lines(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.lines: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(record.getMessage())

    handler = Lines()
    logger = logging.getLogger(f"test-admin-{id(handler)}")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    handle = cimpl.Producer({**settings, "logger": logger})
    handle.poll(0)
    return handler.lines


def test_an_admin_client_gets_no_consumer_setting_it_would_warn_about() -> None:
    """A reader's settings (kafka.* plus the reader's own) made an AdminClient print a CONFWARN line for
    each consumer-only one; ``admin_settings`` leaves them out."""
    from sparkafka.client.core import admin_settings
    from sparkafka.source.fetch import _reader_settings

    def warnings(settings: dict[str, str]) -> list[str]:
        lines = _admin_handle_lines(settings)
        return [line for line in lines if "CONFWARN" in line and "consumer property" in line]

    reader = _reader_settings({"fetch.min.bytes": "1"})
    assert warnings(reader)  # the check can fail: an AdminClient does warn about these
    assert warnings(admin_settings(reader)) == []


def test_an_admin_client_asks_for_no_producer_id_with_a_producers_settings() -> None:
    """An AdminClient made from a producer's settings (a --command-config shared with an application) asked
    the broker for a producer id: on a fresh broker ``sparkafka lag`` then printed librdkafka's "GETPID ...
    Coordinator load in progress" under its table. ``admin_settings`` leaves producer-only settings out."""
    from sparkafka.client.core import admin_settings

    def asks_for_a_producer_id(settings: dict[str, str]) -> bool:
        lines = _admin_handle_lines({**settings, "debug": "eos"})
        return any("-> RequestPID" in line for line in lines)  # librdkafka's idempotence state machine

    app = {"enable.idempotence": "true", "acks": "all", "linger.ms": "5"}
    assert asks_for_a_producer_id(app)  # the check can fail: such a handle does ask
    assert not asks_for_a_producer_id(admin_settings(app))


class _Future:
    def __init__(self, value: Any = None, error: int | None = None) -> None:
        self.value, self.error = value, error

    def result(self, _timeout: float) -> Any:
        if self.error is not None:
            raise kafka_error(self.error)
        return self.value


class _Described:
    def __init__(self, partitions: int, topic_id: Any) -> None:
        self.partitions = [None] * partitions
        self.topic_id = topic_id


class DescribingAdmin(FakeAdmin):
    """Answers DescribeTopics (partition counts and ids) and ListTopics, counting the requests."""

    def __init__(self, topics: dict[str, int], ids: dict[str, Any]) -> None:
        super().__init__([], topics)
        self.ids = ids
        self.described: list[list[str]] = []

    def describe_topics(self, collection: Any, **_kwargs: Any) -> dict[str, _Future]:
        names = list(collection.topic_names)
        self.described.append(names)
        return {
            n: _Future(_Described(self.topics[n], self.ids[n]))
            if n in self.topics
            else _Future(error=KafkaError.UNKNOWN_TOPIC_OR_PART)
            for n in names
        }


def test_discovery_takes_ids_in_kafkas_text_form_with_one_request_per_subscription() -> None:
    from confluent_kafka import Uuid

    from sparkafka.source.admin import SourceMetadata
    from sparkafka.source.options import Subscription

    # librdkafka's str() of this id is 8U/j8L8uSD6S7nNFuplY8g (standard base64); Kafka prints it URL-safe.
    raw = base64.b64decode("8U/j8L8uSD6S7nNFuplY8g==")
    uuid = Uuid(int.from_bytes(raw[:8], "big", signed=True), int.from_bytes(raw[8:], "big", signed=True))
    admin = DescribingAdmin({"a": 2, "b": 1, "old": 1}, {"a": uuid, "b": uuid, "old": Uuid(0, 0)})
    clock = FakeClock()
    meta = SourceMetadata(CONF, 30, clock=clock, sleep=clock.sleep, admin=admin)
    found = meta.discover(Subscription(topics=("a", "missing", "old")))
    assert found == ({A0, A1, TopicPartition("old", 0)}, {"a": "8U_j8L8uSD6S7nNFuplY8g"}, _Meta.cluster_id)
    assert (admin.described, admin.metadata_asked) == ([["a", "missing", "old"]], 1)  # and the cluster's id
    assert meta.discover(Subscription(partitions=(A1, TopicPartition("a", 5))))[0] == {A1}
    assert meta.discover(Subscription(pattern="a|b"))[0] == {A0, A1, B0}
    assert (admin.described[-1], admin.metadata_asked) == (["a", "b"], 2)  # a pattern lists topics first


def test_a_discovery_without_ids_is_one_request_for_any_subscription() -> None:
    """``load()``'s check (``source.admin.check_source``) needs the partitions alone: one DescribeTopics for
    ``subscribe`` and ``assign``, one topic list for a pattern, and no cluster id."""
    from confluent_kafka import Uuid

    from sparkafka.source.admin import SourceMetadata
    from sparkafka.source.options import Subscription

    uuid = Uuid(1, 2)
    admin = DescribingAdmin({"a": 2, "b": 1}, {"a": uuid, "b": uuid})
    clock = FakeClock()
    meta = SourceMetadata(CONF, 30, clock=clock, sleep=clock.sleep, admin=admin)
    assert meta.discover(Subscription(topics=("a", "missing")), topic_ids=False) == ({A0, A1}, {}, None)
    assert (admin.described, admin.metadata_asked) == ([["a", "missing"]], 0)
    assigned = Subscription(partitions=(A1, TopicPartition("a", 5), B0))
    assert meta.discover(assigned, topic_ids=False) == ({A1, B0}, {}, None)
    assert meta.discover(Subscription(pattern="a|b"), topic_ids=False) == ({A0, A1, B0}, {}, None)
    assert (len(admin.described), admin.metadata_asked) == (2, 1)  # the pattern's topic list alone


def test_a_broker_that_cannot_describe_topics_is_answered_from_its_topic_list_without_ids() -> None:
    class Unsupported(DescribingAdmin):
        def describe_topics(self, collection: Any, **_kwargs: Any) -> dict[str, _Future]:
            return {n: _Future(error=KafkaError._UNSUPPORTED_FEATURE) for n in collection.topic_names}

    admin = Unsupported({"a": 2, "b": 1}, {})
    meta, _ = metadata(admin)
    assert meta.describe_topics(["a", "missing"]) == {"a": (2, None)}


def test_user_topics_named_with_two_underscores_are_read_as_spark_reads_them() -> None:
    """Only Kafka's internal topics are left out (as Admin.listTopics does for Spark), not every `__` name."""
    from confluent_kafka import Uuid

    from sparkafka.source.admin import SourceMetadata
    from sparkafka.source.options import Subscription

    names = {"__orders": 1, "__consumer_offsets": 2, "__transaction_state": 1, "__share_group_state": 1}
    admin = DescribingAdmin(names, dict.fromkeys(names, Uuid(0, 0)))
    clock = FakeClock()
    meta = SourceMetadata(CONF, 30, clock=clock, sleep=clock.sleep, admin=admin)
    assert set(meta.topics()) == {"__orders"}
    assert meta.discover(Subscription(pattern="_"))[0] == {TopicPartition("__orders", 0)}
    assert meta.discover(Subscription(topics=("__orders",)))[0] == {TopicPartition("__orders", 0)}


def test_no_module_reads_group_offsets_through_the_admin_client() -> None:
    """librdkafka's AdminClient ListConsumerGroupOffsets crashes the process (SIGSEGV) when OffsetFetch is
    answered NOT_COORDINATOR (librdkafka issue 5040): it took a test worker down on a fresh secured broker.
    ``AdminMetadata._committed`` and the tests' ``group_offsets`` read through a Consumer of the group."""
    root = Path(__file__).resolve().parents[2]
    callers = [
        str(path.relative_to(root))
        for folder in ("src", "tests/support", "tests/integration", "bench", "scripts")
        for path in sorted((root / folder).rglob("*.py"))
        if "list_consumer_group_offsets(" in path.read_text()
    ]
    assert callers == []


class _Event:
    def __init__(self, code: int) -> None:
        self._error = KafkaError(code)

    def error(self) -> KafkaError:
        return self._error


class GroupReader:
    """A Consumer of the group as ``AdminMetadata._committed`` uses it: ``committed`` answers from a script
    (an offset per partition, or an exception), ``poll`` hands over the error events it was given."""

    def __init__(
        self,
        answers: list[dict[TopicPartition, int] | BaseException],
        events: list[int],
        clock: FakeClock | None = None,
        takes_s: float = 0.0,
    ) -> None:
        self.answers, self.events = answers, [_Event(c) for c in events]
        self.asked: list[list[TopicPartition]] = []
        self.timeouts: list[float] = []
        self.closed = False
        self.clock, self.takes_s = clock, takes_s

    def committed(self, partitions: list[Any], timeout: float) -> list[_GroupPartition]:
        self.asked.append([TopicPartition(p.topic, p.partition) for p in partitions])
        self.timeouts.append(timeout)
        if self.clock is not None:
            self.clock.now += self.takes_s  # the answer took this long
        answer = self.answers[0] if len(self.answers) == 1 else self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return [_GroupPartition(tp, answer.get(tp, -1001)) for tp in self.asked[-1]]

    def poll(self, _timeout: float) -> _Event | None:
        return self.events.pop(0) if self.events else None

    def close(self) -> None:
        self.closed = True


def group_metadata(
    reader: GroupReader, topics: dict[str, int], clock: FakeClock | None = None, timeout_s: float = 30
) -> tuple[AdminMetadata, FakeClock]:
    clock = clock or FakeClock()
    admin = FakeAdmin([], topics)
    meta = AdminMetadata(
        CONF, timeout_s, clock=clock, sleep=clock.sleep, admin=admin, group_reader=lambda _g: reader
    )
    return meta, clock


def test_every_committed_partition_is_asked_in_chunks_and_only_the_committed_ones_are_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sparkafka.client.metadata as metadata_module

    monkeypatch.setattr(metadata_module, "OFFSET_FETCH_CHUNK", 2)
    reader = GroupReader([{A1: 4, B0: 0}], [])
    meta, _ = group_metadata(reader, {"a": 2, "b": 1, "__consumer_offsets": 50})
    assert meta.committed("g") == {A1: 4, B0: 0}  # a-0 has nothing committed: left out; internal never asked
    assert reader.asked == [[A0, A1], [B0]]
    assert reader.closed


def test_each_chunk_waits_only_for_the_time_its_lookup_has_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of one lookup share its deadline: the third of three slow answers may not wait 5 s again."""
    import sparkafka.client.metadata as metadata_module

    monkeypatch.setattr(metadata_module, "OFFSET_FETCH_CHUNK", 1)
    clock = FakeClock()
    reader = GroupReader([{A0: 1, A1: 2, B0: 3}], [], clock=clock, takes_s=4.0)
    meta, _ = group_metadata(reader, {"a": 2, "b": 1}, clock, timeout_s=10)
    assert meta.committed("g") == {A0: 1, A1: 2, B0: 3}
    assert reader.timeouts == [5.0, 5.0, 2.0]  # 10 s in all: 4 s and 4 s spent, 2 s left for the last


def test_a_group_the_user_may_not_describe_is_one_sentence_at_once_not_a_time_out() -> None:
    """librdkafka's consumer waits out its whole timeout when FindCoordinator is refused by ACL, and says
    so only as an error event: that event is the answer."""
    timed_out = kafka_error(KafkaError._TIMED_OUT)
    reader = GroupReader([timed_out], [KafkaError.GROUP_AUTHORIZATION_FAILED])
    meta, clock = group_metadata(reader, {"a": 1})
    with pytest.raises(AuthorizationError, match=r"may not DESCRIBE group g\b"):
        meta.committed("g", [A0])
    assert clock.slept == []  # refused at the first answer
    assert reader.closed


def test_a_coordinator_slow_to_answer_is_asked_again_within_the_time() -> None:
    reader = GroupReader([kafka_error(KafkaError._TIMED_OUT), {A0: 3}], [])
    meta, clock = group_metadata(reader, {"a": 1})
    assert meta.committed("g", [A0]) == {A0: 3}
    assert clock.slept == [0.05]


def test_the_read_back_for_a_partitions_last_record_asks_contiguous_windows_reaching_at_most_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Windows 64, then 16 times wider, each range ending where the one before began (a read goes on to
    the end of the log all the same: nothing is read there, and a fetch cannot stop short of a record),
    reaching LAST_LOOK_BACK offsets back at most; then None (nothing a reader reads there)."""
    import sparkafka.source.admin as admin_module
    from sparkafka.source.admin import LAST_LOOK_BACK, SourceMetadata

    windows: list[tuple[int, int]] = []

    def nothing_readable(
        _conf: Any, ranges: dict[TopicPartition, tuple[int, int]], _timeout_s: float
    ) -> dict[TopicPartition, Any]:
        windows.extend(ranges.values())
        return dict.fromkeys(ranges)

    monkeypatch.setattr(admin_module, "last_times", nothing_readable)
    meta = SourceMetadata(CONF, 30, admin=FakeAdmin([], {"a": 1}))
    end = 10_000_000
    assert meta.last({A0: end}) == {A0: None}
    assert windows[0] == (end - 64, end)
    assert all(w[1] == v[0] for v, w in itertools.pairwise(windows))  # contiguous, none again
    assert windows[-1][0] == end - LAST_LOOK_BACK  # and no further


def test_the_read_back_answers_the_last_record_of_the_first_window_that_has_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sparkafka.source.admin as admin_module
    from sparkafka.source.admin import SourceMetadata

    def record_at_100(
        _conf: Any, ranges: dict[TopicPartition, tuple[int, int]], _timeout_s: float
    ) -> dict[TopicPartition, Any]:
        return {tp: TimestampedOffset(100, 7) if s <= 100 < e else None for tp, (s, e) in ranges.items()}

    monkeypatch.setattr(admin_module, "last_times", record_at_100)
    meta = SourceMetadata(CONF, 30, admin=FakeAdmin([], {"a": 1}))
    assert meta.last({A0: 5_000}) == {A0: TimestampedOffset(100, 7)}  # in the third window, (0, 3976)
