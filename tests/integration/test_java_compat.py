"""Our Java-exact hashes against the JVM that Spark runs: String.hashCode and what derives from it."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkafka.kafka import coordinator_partition, flink_subtask_for, java_string_hash


@settings(max_examples=300, deadline=None)
@given(s=st.text(max_size=50), partition=st.integers(0, 100), parallelism=st.integers(1, 16))
def test_string_hash_code_matches_the_jvm(spark: Any, s: str, partition: int, parallelism: int) -> None:
    jvm = spark.sparkContext._jvm
    jvm_hash = jvm.java.util.Objects.hashCode(s)
    assert java_string_hash(s) == jvm_hash
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0; Math.abs leaves it negative.
    jvm_abs = 0 if jvm_hash == -(2**31) else jvm.java.lang.Math.abs(jvm_hash)
    assert coordinator_partition(s) == jvm_abs % 50
    # Flink: ((hashCode * 31) & 0x7FFFFFFF) % n; the mask keeps the low 31 bits, the same with Java's wrap.
    start = ((jvm_hash * 31) & 0x7FFFFFFF) % parallelism
    assert flink_subtask_for(s, partition, parallelism) == (start + partition) % parallelism
