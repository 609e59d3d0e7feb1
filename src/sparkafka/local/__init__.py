"""Local development helpers: Apache Kafka and tansu launchers, the demo, process groups, local Spark."""

from sparkafka.local.broker import EmbeddedBroker, find_tansu_binary, free_port
from sparkafka.local.kafka_broker import ApacheKafka

__all__ = ["ApacheKafka", "EmbeddedBroker", "find_tansu_binary", "free_port"]
