"""What ``load()`` checks with the brokers (``source.admin.check_source``), against a fake AdminClient.

One lookup after the first contact; then topics that do not exist, an ending map that does not name the
partitions read and, on a cluster that knows the user, a missing READ on a topic are refused. What only
some reads of the same options need is left to the readers: a starting map (a resumed stream ignores it)
and READ on the group (only a stream that commits needs it).
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from sparkafka.errors import AuthorizationError, ConfigError
from sparkafka.source.admin import check_source
from sparkafka.source.options import parse_source_options

SASL = {
    "kafka.security.protocol": "SASL_SSL",
    "kafka.sasl.mechanism": "SCRAM-SHA-512",
    "kafka.sasl.username": "etl",
    "kafka.sasl.password": "pw",
}


class _Future:
    def __init__(self, value: Any = None, error: int | None = None) -> None:
        self.value, self.error = value, error

    def result(self, _timeout: float) -> Any:
        if self.error is not None:
            raise KafkaException(KafkaError(self.error))
        return self.value


class _Op:
    def __init__(self, name: str) -> None:
        self.name = name


class _Described:
    def __init__(self, partitions: int, allowed: tuple[str, ...]) -> None:
        self.partitions = [None] * partitions
        self.topic_id = None
        self.authorized_operations = [_Op(o) for o in allowed]


class Admin:
    """A cluster of ``topics`` (partition counts) on which the user may do ``allowed`` to every topic;
    records each request: ``("describe", names)``, ``("list",)``, ``("group", names)``."""

    def __init__(self, topics: dict[str, int], allowed: tuple[str, ...] = ("READ",)) -> None:
        self.topics = topics
        self.allowed = allowed
        self.asked: list[tuple[Any, ...]] = []

    def describe_topics(self, collection: Any, include_authorized_operations: bool = False, **_: Any) -> Any:
        names = list(collection.topic_names)
        self.asked.append(("acl" if include_authorized_operations else "describe", names))
        allowed = self.allowed if include_authorized_operations else ()
        return {
            n: _Future(_Described(self.topics[n], allowed))
            if n in self.topics
            else _Future(error=KafkaError.UNKNOWN_TOPIC_OR_PART)
            for n in names
        }

    def list_topics(self, timeout: float) -> Any:
        self.asked.append(("list",))
        topics = {
            n: type("T", (), {"partitions": dict.fromkeys(range(c)), "error": None})()
            for n, c in self.topics.items()
        }
        return type("M", (), {"topics": topics, "cluster_id": None})()

    def describe_consumer_groups(self, names: list[str], **_: Any) -> Any:
        self.asked.append(("group", names))
        return {n: _Future(type("G", (), {"authorized_operations": []})()) for n in names}


def check(admin: Admin, **options: str) -> None:
    check_source(
        parse_source_options({"kafka.bootstrap.servers": "b:1", **options}, batch=True, quiet=True),
        admin=admin,
    )


def test_missing_topics_are_refused_after_one_lookup() -> None:
    admin = Admin({"orders": 2})
    with pytest.raises(ConfigError) as raised:
        check(admin, subscribe="orders,ordres")
    assert str(raised.value) == (
        "Unable to retrieve any partitions for topic(s) ordres (subscribe=orders,ordres): they do not exist. "
        "Create them first, or check the names"
    )
    assert admin.asked == [("describe", ["orders", "ordres"])]
    with pytest.raises(ConfigError, match=r"topic\(s\) gone \(assign=gone-0,orders-1\): they do not exist"):
        check(admin, assign='{"orders": [1], "gone": [0]}')
    check(Admin({"orders": 2}), assign='{"orders": [1, 7]}')  # orders-7 is left out, as in Spark


def test_a_pattern_that_matches_nothing_is_refused_after_one_lookup() -> None:
    admin = Admin({"orders": 2})
    with pytest.raises(ConfigError) as raised:
        check(admin, subscribePattern="^pay")
    assert str(raised.value).startswith(
        "Unable to retrieve any partitions with subscribePattern='^pay': nothing"
    )
    assert admin.asked == [("list",)]
    check(admin, subscribePattern="ord")


@pytest.mark.parametrize("option", ["endingOffsets", "endingOffsetsByTimestamp"])
def test_an_ending_map_that_leaves_a_partition_out_is_refused(option: str) -> None:
    with pytest.raises(ConfigError, match=f"^option {option} must name exactly .*: it leaves out orders-1"):
        check(Admin({"orders": 2}), subscribe="orders", **{option: '{"orders": {"0": 5}}'})
    check(Admin({"orders": 2}), subscribe="orders", **{option: '{"orders": {"0": 5, "1": 5}}'})


def test_a_starting_map_is_left_to_the_start_a_resumed_stream_ignores_it() -> None:
    """A stream that resumes from its checkpoint ignores startingOffsets (as in Spark), and ``load()``
    cannot tell it from a new one: a map written before a partition was added must not stop it."""
    check(Admin({"orders": 3}), subscribe="orders", startingOffsets='{"orders": {"0": 5, "1": 5}}')
    check(Admin({"orders": 3}), subscribe="orders", startingOffsetsByTimestamp='{"orders": {"0": 5}}')


def test_a_missing_read_grant_on_a_topic_is_refused_and_the_group_is_left_to_the_stream() -> None:
    denied = Admin({"orders": 2}, allowed=("DESCRIBE",))
    with pytest.raises(AuthorizationError) as raised:
        check(denied, subscribe="orders", **SASL, **{"kafka.group.id": "etl"})
    assert str(raised.value).startswith(
        "user etl may not READ topic orders: grant it with sparkafka acls grant"
    )
    granted = Admin({"orders": 2})
    check(granted, subscribe="orders", **SASL, **{"kafka.group.id": "etl"})
    assert granted.asked == [("describe", ["orders"]), ("acl", ["orders"])]  # no group: a batch never commits


def test_on_plaintext_no_grant_is_asked() -> None:
    admin = Admin({"orders": 2}, allowed=("DESCRIBE",))
    check(admin, subscribe="orders")
    assert admin.asked == [("describe", ["orders"])]
