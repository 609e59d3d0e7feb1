"""Java-exact hash functions used by Kafka and Flink.

Every function here returns what the Java original returns for the same input, including int32 overflow,
so that a partition or task chosen in Python is the one a Java client or Flink job would choose.
"""

from __future__ import annotations

__all__ = ["coordinator_partition", "java_string_hash", "murmur2", "to_int32", "to_positive"]

_MASK32 = 0xFFFFFFFF
_M = 0x5BD1E995
_SEED = 0x9747B28C


def to_int32(n: int) -> int:
    """Wrap an arbitrary Python int to a signed 32-bit value, as Java's int arithmetic does."""
    n &= _MASK32
    return n - 0x1_0000_0000 if n & 0x8000_0000 else n


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: ``n & 0x7fffffff`` (not ``abs``: ``MIN_VALUE`` maps to 0)."""
    return n & 0x7FFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: 32-bit MurmurHash2 with seed ``0x9747b28c``, as a signed int32.

    A port of ``org.apache.kafka.common.utils.Utils#murmur2``; arithmetic is done unsigned and masked to
    32 bits, which equals Java's wrapping ``int`` arithmetic, and ``>>>`` is a plain shift of the unsigned
    value.
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    tail_start = length & ~3
    # Four bytes at a time, little endian (Java's loop reads data[i4 + 0] as the low byte).
    for i in range(0, tail_start, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    rest = length & 3
    # Java's switch falls through from case 3 to case 1; the multiply happens once after the tail.
    if rest == 3:
        h ^= data[tail_start + 2] << 16
    if rest >= 2:
        h ^= data[tail_start + 1] << 8
    if rest >= 1:
        h ^= data[tail_start]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return to_int32(h)


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, int32 overflow.

    Characters outside the Basic Multilingual Plane count as two code units (a surrogate pair), as in Java.
    """
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK32
    return to_int32(h)


def coordinator_partition(key: str, num_partitions: int = 50) -> int:
    """The ``__consumer_offsets`` (or ``__transaction_state``) partition owning a group or transactional id.

    Kafka computes ``Utils.abs(key.hashCode()) % numPartitions`` where ``Utils.abs(Integer.MIN_VALUE) == 0``.
    """
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    h = java_string_hash(key)
    # Utils.abs: MIN_VALUE has no positive counterpart in int32, Kafka maps it to 0.
    positive = 0 if h == -0x8000_0000 else abs(h)
    return positive % num_partitions
