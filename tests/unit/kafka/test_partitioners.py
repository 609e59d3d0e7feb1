from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkafka.kafka import RoundRobinPartitioner, StickyPartitioner, partition_for_key


def test_partition_for_key_java_vectors() -> None:
    # toPositive(murmur2("foobar")) = -790332482 & 0x7fffffff = 1357151166.
    assert partition_for_key(b"foobar", 50) == 1357151166 % 50
    assert partition_for_key(b"21", 12) == (-973932308 & 0x7FFFFFFF) % 12
    assert partition_for_key(b"abc", 3) == 479470107 % 3


@given(st.binary(max_size=32), st.integers(1, 1000))
def test_partition_for_key_in_range_and_stable(key: bytes, n: int) -> None:
    p = partition_for_key(key, n)
    assert 0 <= p < n
    assert partition_for_key(key, n) == p


def test_partition_for_key_rejects_zero_partitions() -> None:
    with pytest.raises(ValueError, match="num_partitions"):
        partition_for_key(b"k", 0)


def test_round_robin_cycles_per_topic() -> None:
    rr = RoundRobinPartitioner()
    assert [rr.partition("a", 3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    # Another topic has its own counter.
    assert rr.partition("b", 3) == 0
    assert [rr.partition("c", 5, available=[1, 3]) for _ in range(4)] == [1, 3, 1, 3]


def test_sticky_stays_until_batch_is_full_then_switches() -> None:
    sp = StickyPartitioner(batch_size=100, rng=random.Random(7))
    first = [sp.partition("t", 4, record_size=10) for _ in range(10)]
    assert len(set(first)) == 1
    nxt = sp.partition("t", 4, record_size=10)
    assert nxt != first[0]


@given(st.integers(2, 12), st.integers(0, 2**32))
def test_sticky_spreads_load_over_time(n: int, seed: int) -> None:
    sp = StickyPartitioner(batch_size=50, rng=random.Random(seed))
    counts = Counter(sp.partition("t", n, record_size=10) for _ in range(5 * 400 * n))
    assert set(counts) == set(range(n))
    assert all(c % 5 == 0 for c in counts.values())


def test_sticky_respects_available_partitions() -> None:
    sp = StickyPartitioner(batch_size=10, rng=random.Random(1))
    assert {sp.partition("t", 6, record_size=5, available=[2, 4]) for _ in range(100)} == {2, 4}


@given(
    st.lists(st.integers(0, 5000), max_size=300), st.integers(1, 8), st.integers(1, 20000), st.integers(0, 99)
)
def test_sticky_bulk_matches_one_by_one(sizes: list[int], n: int, batch: int, seed: int) -> None:
    one = StickyPartitioner(batch, random.Random(seed))
    bulk = StickyPartitioner(batch, random.Random(seed))
    assert bulk.partitions("t", n, sizes) == [one.partition("t", n, s) for s in sizes]


@given(
    st.lists(st.integers(0, 3000), max_size=200),
    st.lists(st.integers(0, 3000), max_size=200),
    st.integers(1, 5),
    st.integers(1, 9000),
    st.integers(0, 99),
)
def test_sticky_bulk_carries_over_between_calls(
    first: list[int], second: list[int], n: int, batch: int, seed: int
) -> None:
    one = StickyPartitioner(batch, random.Random(seed))
    bulk = StickyPartitioner(batch, random.Random(seed))
    got = bulk.partitions("t", n, first) + bulk.partitions("t", n, second)
    assert got == [one.partition("t", n, s) for s in first + second]
