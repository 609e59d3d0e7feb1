"""Local development helpers: the embedded broker, broker capability probes, the committed-view oracle."""

from sparkafka.local.broker import EmbeddedBroker, find_tansu_binary, free_port

__all__ = ["EmbeddedBroker", "find_tansu_binary", "free_port"]
