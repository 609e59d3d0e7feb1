"""``sparkafka topics``: its argument parsing and tables, without a broker (the integration tests run it)."""

from __future__ import annotations

import pytest

from sparkafka.cli import _operation_s, build_parser
from sparkafka.cli.topics import (
    PartitionInfo,
    TopicDetail,
    TopicInfo,
    is_internal,
    parse_configs,
    render_describe,
    render_list,
)
from sparkafka.errors import ConfigError


def test_configs_are_key_value_pairs_and_a_key_is_given_once() -> None:
    assert parse_configs(["cleanup.policy=compact", "retention.ms=86400000", "x=a=b"]) == {
        "cleanup.policy": "compact",
        "retention.ms": "86400000",
        "x": "a=b",
    }
    with pytest.raises(ConfigError, match="write KEY=VALUE"):
        parse_configs(["retention.ms"])
    with pytest.raises(ConfigError, match="given twice"):
        parse_configs(["retention.ms=1", "retention.ms=2"])


def test_kafkas_and_sparkafkas_own_topics_are_internal() -> None:
    assert is_internal("__consumer_offsets")
    assert is_internal("__transaction_state")
    assert is_internal("_sparkafka-intents-orders")
    assert not is_internal("orders")
    assert not is_internal("_orders")
    assert not is_internal("__orders")  # a user's topic: only Kafka's own are internal


def test_the_list_hides_internal_topics_unless_asked_and_says_so() -> None:
    topics = [
        TopicInfo("__consumer_offsets", 10, 1, True),
        TopicInfo("_sparkafka-intents-p", 1, 1, True),
        TopicInfo("orders", 4, 3, False),
    ]
    lines = render_list(topics).splitlines()
    assert [line.split()[0] for line in lines[1:-1]] == ["orders"]
    assert lines[-1] == "1 topic; 2 internal topics hidden (--all shows them)"
    everything = render_list(topics, show_internal=True).splitlines()
    assert len(everything) == 5
    assert everything[1].endswith("(internal)")
    assert everything[-1] == "3 topics"


def test_describe_shows_partitions_and_the_topics_own_configs() -> None:
    detail = TopicDetail(
        TopicInfo("orders", 2, 1, False),
        (PartitionInfo(0, 1, (1,), (1,), 0, 1489), PartitionInfo(1, -1, (1,), (), 0, 1511)),
        {"retention.ms": "86400000"},
    )
    lines = render_describe(detail).splitlines()
    assert lines[0] == "topic orders: 2 partitions, replication factor 1"
    assert lines[2].split() == ["0", "1", "1", "1", "0", "1489"]
    assert lines[3].split() == ["1", "none", "1", "-", "0", "1511"]
    assert lines[-1] == "configs set on the topic: retention.ms=86400000"


def test_the_command_line() -> None:
    args = build_parser().parse_args(
        [
            "topics",
            "create",
            "orders",
            "--partitions",
            "4",
            "--replication",
            "3",
            "--config",
            "a=b",
            "--bootstrap-servers",
            "h:9092",
        ]
    )
    assert (args.name, args.partitions, args.replication, args.config) == ("orders", 4, 3, ["a=b"])
    defaults = build_parser().parse_args(["topics", "create", "orders", "--bootstrap-servers", "h:9092"])
    assert (defaults.partitions, defaults.replication, defaults.timeout) == (1, None, None)
    assert _operation_s(defaults) == 30.0  # each operation's bound unless --timeout
    assert build_parser().parse_args(["topics", "list", "--all", "--bootstrap-servers", "h:9092"]).all
