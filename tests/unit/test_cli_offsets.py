"""``sparkafka offsets reset --to timestamp:`` trusts a broker's timestamp lookups only where they are right.

The issue: on a broker without working timestamp lookups (tansu answers 0 for every timestamp) the reset
proposed 0 for every partition, without a warning. The decision, without a broker: Apache Kafka is trusted
at no cost, any other broker is probed, a wrong answer refuses, a probe that cannot run warns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from sparkafka.errors import ConfigError
from sparkafka.ops.group_offsets import ResetPlan, ResetTarget, check_timestamp_lookups, render_reset
from sparkafka.ops.probes import Capability
from sparkafka.structs import TopicPartition

CONF = {"bootstrap.servers": "b:9092"}


def probe_answering(offset: int) -> tuple[list[str], Callable[[Mapping[str, str]], Capability]]:
    calls: list[str] = []

    def probe(conf: Mapping[str, str]) -> Capability:
        calls.append(conf["bootstrap.servers"])
        return Capability(
            "offsets_for_times", offset == 2, f"offset for timestamp 2500000 is {offset} (want 2)"
        )

    return calls, probe


def test_apache_kafka_is_trusted_without_a_probe() -> None:
    calls, probe = probe_answering(0)
    assert check_timestamp_lookups(CONF, "QFjFiiHlQM6fUsuAoPOCOw", "timestamp:5", probe) == ""
    assert calls == []


def test_a_broker_answering_right_is_trusted_after_the_probe() -> None:
    calls, probe = probe_answering(2)
    assert check_timestamp_lookups(CONF, "tansu_cluster", "timestamp:5", probe) == ""
    assert calls == ["b:9092"]


def test_a_broker_answering_wrong_is_refused_saying_why_and_what_to_do() -> None:
    _, probe = probe_answering(0)
    with pytest.raises(ConfigError) as refused:
        check_timestamp_lookups(CONF, "tansu_cluster", "timestamp:1700000000000", probe)
    message = str(refused.value)
    assert message.startswith(
        "--to timestamp:1700000000000: the broker at b:9092 answers timestamp lookups wrong"
    )
    assert "offset for timestamp 2500000 is 0 (want 2)" in message
    assert "--to json:" in message
    assert "checkpoint:DIR" in message


def test_a_probe_that_cannot_run_leaves_a_warning_on_the_plan() -> None:
    def probe(conf: Mapping[str, str]) -> Capability:
        raise PermissionError("TOPIC_AUTHORIZATION_FAILED")

    warning = check_timestamp_lookups(CONF, None, "timestamp:5", probe)
    assert "could not check" in warning
    assert "TOPIC_AUTHORIZATION_FAILED" in warning
    plan = ResetPlan(
        "g",
        ResetTarget("timestamp", 5, source="timestamp:5"),
        [(TopicPartition("t", 0), None, 3)],
        None,
        False,
        warning,
    )
    assert render_reset(plan).splitlines()[0] == f"warning: {warning}"


def test_a_reset_waits_for_a_sparkafka_query_that_committed_within_the_window() -> None:
    from sparkafka.ops.group_offsets import running_query_refusal
    from sparkafka.source.commits import LIVE_WINDOW_S, CommitMark
    from sparkafka.structs import TopicPartition

    now = 1_800_000_000_000
    recent = CommitMark("r1", "host-a", 42, now - 12_000).to_metadata()
    old = CommitMark("r0", "host-b", 7, now - int(LIVE_WINDOW_S * 1000) - 1).to_metadata()
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    refusal = running_query_refusal("g", {tp0: old, tp1: recent}, now)
    assert refusal is not None
    assert refusal.startswith(
        "group 'g' is committed to by a running sparkafka query (Spark's source runner pid 42 on host-a"
    )
    assert "last commit 12 s ago" in refusal
    assert refusal.endswith("or pass --force if it is already stopped")
    assert running_query_refusal("g", {tp0: old}, now) is None  # stopped long ago
    assert running_query_refusal("g", {tp0: "", tp1: "another tool's note"}, now) is None


MARKED_BY_A_REGISTERED_DRIVER = (
    'sparkafka {"at":1799999988000,"driver":{"app":"orders-etl","appId":"local-1764000000000","pid":100},'
    '"host":"host-a","pid":300,"run":"r1"}'
)
"""A commit's mark as the source runner (pid 300) writes it for a driver (pid 100) that ran register."""


def test_a_reset_refusal_names_the_driver_the_user_started_not_sparks_source_runner() -> None:
    """The commits are sent from Spark's Python source runner, a process the user never started: the
    refusal names the application and its driver's pid (issue 50)."""
    from sparkafka.ops.group_offsets import running_query_refusal
    from sparkafka.structs import TopicPartition

    refusal = running_query_refusal(
        "g", {TopicPartition("t", 0): MARKED_BY_A_REGISTERED_DRIVER}, 1_800_000_000_000
    )
    assert refusal is not None
    assert refusal.startswith(
        "group 'g' is committed to by a running sparkafka query (application 'orders-etl' "
        "(local-1764000000000), driver pid 100 on host-a, last commit 12 s ago), which would overwrite"
    )
    assert "300" not in refusal
