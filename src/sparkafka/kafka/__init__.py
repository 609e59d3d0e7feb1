"""Kafka's client algorithms, bit-for-bit with the Java originals; pure Python, no Spark."""

from sparkafka.kafka.assignors import flink_subtask_for, range_assign, round_robin_assign, sticky_assign
from sparkafka.kafka.hashing import coordinator_partition, java_string_hash, murmur2, to_int32, to_positive
from sparkafka.kafka.partitioners import RoundRobinPartitioner, StickyPartitioner, partition_for_key
from sparkafka.structs import TopicPartition

__all__ = [
    "RoundRobinPartitioner",
    "StickyPartitioner",
    "TopicPartition",
    "coordinator_partition",
    "flink_subtask_for",
    "java_string_hash",
    "murmur2",
    "partition_for_key",
    "range_assign",
    "round_robin_assign",
    "sticky_assign",
    "to_int32",
    "to_positive",
]
