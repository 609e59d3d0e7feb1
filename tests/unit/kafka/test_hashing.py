from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkafka.kafka import coordinator_partition, java_string_hash, murmur2, to_int32, to_positive

# Kafka's UtilsTest.testMurmur2, plus the empty input.
MURMUR2_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"": 275646681,
}


@pytest.mark.parametrize(("data", "expected"), MURMUR2_VECTORS.items())
def test_murmur2_matches_kafka_utils_test(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@given(st.binary(max_size=64))
def test_murmur2_is_a_signed_int32(data: bytes) -> None:
    assert -(2**31) <= murmur2(data) < 2**31


def test_to_positive_is_a_mask_not_abs() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("polygenelubricants", -(2**31)),
        # One character outside the BMP is a surrogate pair of two UTF-16 code units.
        ("\U0001f600", 31 * 0xD83D + 0xDE00),
    ],
)
def test_java_string_hash_known_values(s: str, expected: int) -> None:
    assert java_string_hash(s) == expected


@given(st.text(max_size=40))
def test_java_string_hash_recurrence(s: str) -> None:
    # h(s + c) == 31 * h(s) + c, wrapped to int32, for every UTF-16 unit c.
    extended = s + "z"
    assert java_string_hash(extended) == to_int32(31 * java_string_hash(s) + ord("z"))


def test_coordinator_partition_maps_min_value_to_zero() -> None:
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE and Utils.abs(MIN_VALUE) == 0.
    assert coordinator_partition("polygenelubricants") == 0
    assert coordinator_partition("hello") == 99162322 % 50
    assert coordinator_partition("hello", 7) == 99162322 % 7


# (string, String.hashCode(), Utils.abs(hashCode) % 50), printed by OpenJDK 17.0.15.
JVM_GOLDEN = [
    ("orders-group", -403968617, 17),
    ("analytics", -1693017210, 10),
    ("hello", 99162322, 22),
    ("topic-a", -1139260605, 5),
    ("test-topic", 639758388, 38),
    ("orders", -1008770331, 31),
    ("\U0001f600x", 54959989, 39),
    ("\u00fcn\u00efcode-topic", -1592721076, 26),
]


@pytest.mark.parametrize(("s", "hash_code", "coordinator"), JVM_GOLDEN)
def test_against_jvm_golden_values(s: str, hash_code: int, coordinator: int) -> None:
    assert java_string_hash(s) == hash_code
    assert coordinator_partition(s) == coordinator


def test_coordinator_partition_rejects_non_positive_count() -> None:
    with pytest.raises(ValueError, match="num_partitions"):
        coordinator_partition("g", 0)
