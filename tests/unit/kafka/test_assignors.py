from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkafka.kafka import (
    TopicPartition,
    flink_subtask_for,
    range_assign,
    round_robin_assign,
    sticky_assign,
)


def tps(topic: str, *parts: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in parts]


# (topic, start index for parallelism 3, 4, 7), printed by OpenJDK 17.0.15 from
# ((topic.hashCode() * 31) & 0x7FFFFFFF) % n.
FLINK_GOLDEN = [
    ("orders-group", 1, 1, 3),
    ("analytics", 2, 2, 6),
    ("topic-a", 1, 1, 6),
    ("test-topic", 0, 0, 5),
    ("orders", 0, 3, 3),
    ("\U0001f600x", 1, 3, 0),
]


@pytest.mark.parametrize(("topic", "s3", "s4", "s7"), FLINK_GOLDEN)
def test_flink_start_index_matches_jvm(topic: str, s3: int, s4: int, s7: int) -> None:
    for n, start in ((3, s3), (4, s4), (7, s7)):
        assert [flink_subtask_for(topic, p, n) for p in range(n + 2)] == [
            (start + p) % n for p in range(n + 2)
        ]


@given(st.text(min_size=1, max_size=30), st.integers(1, 64), st.integers(1, 200))
def test_flink_assignment_is_uniform_and_clockwise(topic: str, parallelism: int, partitions: int) -> None:
    owners = [flink_subtask_for(topic, p, parallelism) for p in range(partitions)]
    counts = Counter(owners)
    assert all(0 <= o < parallelism for o in owners)
    # Uniform: every task gets floor or ceil of partitions / parallelism.
    assert max(counts.values()) - min(counts.get(i, 0) for i in range(parallelism)) <= 1
    # Clockwise: consecutive partitions go to consecutive tasks.
    assert all((b - a) % parallelism == 1 % parallelism for a, b in itertools.pairwise(owners))


def test_flink_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="parallelism"):
        flink_subtask_for("t", 0, 0)
    with pytest.raises(ValueError, match="partition"):
        flink_subtask_for("t", -1, 2)


def test_range_ten_partitions_three_and_four_consumers() -> None:
    subs3 = {c: ["T"] for c in ("C1", "C2", "C3")}
    assert range_assign({"T": 10}, subs3) == {
        "C1": tps("T", 0, 1, 2, 3),
        "C2": tps("T", 4, 5, 6),
        "C3": tps("T", 7, 8, 9),
    }
    subs4 = {c: ["T"] for c in ("C4", "C2", "C3", "C1")}
    assert range_assign({"T": 10}, subs4) == {
        "C1": tps("T", 0, 1, 2),
        "C2": tps("T", 3, 4, 5),
        "C3": tps("T", 6, 7),
        "C4": tps("T", 8, 9),
    }


def test_range_two_topics_different_subscribers() -> None:
    subs = {"C1": ["T1"], "C2": ["T1", "T2"], "C3": ["T2"]}
    assert range_assign({"T1": 4, "T2": 6}, subs) == {
        "C1": tps("T1", 0, 1),
        "C2": tps("T1", 2, 3) + tps("T2", 0, 1, 2),
        "C3": tps("T2", 3, 4, 5),
    }


def test_round_robin_two_topics_different_subscribers() -> None:
    # The example of the seed document: T1 [P1-P4] to C1, C2; T2 [P5-P10] to C2, C3.
    subs = {"C1": ["T1"], "C2": ["T1", "T2"], "C3": ["T2"]}
    assert round_robin_assign({"T1": 4, "T2": 6}, subs) == {
        "C1": tps("T1", 0, 2),
        "C2": tps("T1", 1, 3) + tps("T2", 1, 3, 5),
        "C3": tps("T2", 0, 2, 4),
    }


def test_round_robin_ten_partitions_three_consumers() -> None:
    subs = {c: ["T"] for c in ("C1", "C2", "C3")}
    assert round_robin_assign({"T": 10}, subs) == {
        "C1": tps("T", 0, 3, 6, 9),
        "C2": tps("T", 1, 4, 7),
        "C3": tps("T", 2, 5, 8),
    }


def test_members_without_partitions_still_appear() -> None:
    subs = {"a": ["T"], "b": ["T"], "c": ["missing"]}
    for assign in (range_assign, round_robin_assign, sticky_assign):
        result = assign({"T": 1}, subs)
        assert set(result) == {"a", "b", "c"}
        assert result["c"] == []


topics_st = st.dictionaries(st.sampled_from(["t1", "t2", "t3", "t4"]), st.integers(0, 12), min_size=1)


@st.composite
def scenario(draw: st.DrawFn) -> tuple[dict[str, int], dict[str, list[str]]]:
    partitions = draw(topics_st)
    members = draw(st.lists(st.sampled_from([f"m{i}" for i in range(8)]), min_size=1, unique=True))
    topic_names = [*sorted(partitions), "absent"]
    subs = {m: draw(st.lists(st.sampled_from(topic_names), min_size=1, unique=True)) for m in members}
    return partitions, subs


def expected_partitions(partitions: dict[str, int], subs: dict[str, list[str]]) -> list[TopicPartition]:
    subscribed = {t for ts in subs.values() for t in ts}
    return sorted(TopicPartition(t, p) for t, n in partitions.items() if t in subscribed for p in range(n))


@pytest.mark.parametrize("assign", [range_assign, round_robin_assign, sticky_assign])
@given(case=scenario())
def test_every_partition_exactly_once_to_a_subscriber(assign, case) -> None:  # type: ignore[no-untyped-def]
    partitions, subs = case
    result = assign(partitions, subs)
    assert set(result) == set(subs)
    flat = [tp for parts in result.values() for tp in parts]
    assert sorted(flat) == expected_partitions(partitions, subs)
    for member, parts in result.items():
        assert parts == sorted(parts)
        assert all(tp.topic in subs[member] for tp in parts)


@pytest.mark.parametrize("assign", [round_robin_assign, sticky_assign])
@given(partitions=topics_st, n_members=st.integers(1, 8))
def test_balanced_when_all_subscribe_to_all(assign, partitions, n_members) -> None:  # type: ignore[no-untyped-def]
    subs = {f"m{i}": sorted(partitions) for i in range(n_members)}
    counts = [len(v) for v in assign(partitions, subs).values()]
    assert max(counts) - min(counts) <= 1


def test_sticky_worked_example_member_joins() -> None:
    previous = {"A": tps("T", 0, 1, 2), "B": tps("T", 3, 4, 5)}
    subs = {m: ["T"] for m in "ABC"}
    assert sticky_assign({"T": 6}, subs, previous) == {
        "A": tps("T", 0, 1),
        "B": tps("T", 3, 4),
        "C": tps("T", 2, 5),
    }


@given(
    partitions=topics_st,
    before=st.integers(1, 6),
    after=st.integers(1, 6),
)
def test_sticky_moves_the_fewest_partitions(partitions: dict[str, int], before: int, after: int) -> None:
    topics = sorted(partitions)
    old_subs = {f"m{i}": topics for i in range(before)}
    new_subs = {f"m{i}": topics for i in range(after)}
    previous = sticky_assign(partitions, old_subs)
    result = sticky_assign(partitions, new_subs, previous)
    total = sum(partitions.values())
    # The best any balanced assignment can keep: surviving members keep up to their quota, and the
    # ceil-sized quotas go to those holding the most.
    base, extra = divmod(total, after)
    held = sorted((len(previous[m]) for m in new_subs if m in previous), reverse=True)
    best = sum(min(h, base + (1 if i < extra else 0)) for i, h in enumerate(held))
    kept = sum(len(set(result[m]) & set(previous.get(m, []))) for m in new_subs)
    assert kept == best
    counts = [len(v) for v in result.values()]
    assert max(counts) - min(counts) <= 1


def test_sticky_is_stable_when_nothing_changes() -> None:
    subs = {m: ["T", "U"] for m in ("x", "y", "z")}
    first = sticky_assign({"T": 5, "U": 3}, subs)
    assert sticky_assign({"T": 5, "U": 3}, subs, first) == first


def test_sticky_drops_partitions_that_no_longer_exist() -> None:
    previous = {"A": tps("T", 0, 1, 9), "B": tps("T", 2, 3)}
    result = sticky_assign({"T": 4}, {"A": ["T"], "B": ["T"]}, previous)
    assert result == {"A": tps("T", 0, 1), "B": tps("T", 2, 3)}
