"""The Kafka streaming and batch source."""

from sparkafka.source.options import SourceOptions, parse_source_options

__all__ = ["SourceOptions", "parse_source_options"]
