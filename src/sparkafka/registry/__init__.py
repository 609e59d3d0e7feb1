"""Confluent Schema Registry formats: Avro, Protobuf and JSON Schema in Confluent's wire format.

Library use: ``from_registry`` / ``to_registry`` (DataFrame column functions, vectorised over Arrow
batches); pipeline files use the same code through ``[source] decode`` and ``[sink] encode``.
"""

from __future__ import annotations

from sparkafka.registry.client import RegistryConfig
from sparkafka.registry.spark import SchemaRegistry, from_registry, to_registry

__all__ = ["RegistryConfig", "SchemaRegistry", "from_registry", "to_registry"]
