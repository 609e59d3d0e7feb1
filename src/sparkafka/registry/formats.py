"""The registry's wire formats by name: the one table that lists them (a new format adds a row here).

Used in the driver (planning, deriving a writer schema) and in Spark's Python workers (the codec).
"""

from __future__ import annotations

from sparkafka.registry.avro import AVRO
from sparkafka.registry.client import Format
from sparkafka.registry.jsonschema import JSON_SCHEMA
from sparkafka.registry.protobuf import PROTOBUF
from sparkafka.registry.wireformat import WireFormat

__all__ = ["WIRE_FORMATS", "wire_format"]

WIRE_FORMATS: dict[Format, WireFormat] = {"avro": AVRO, "protobuf": PROTOBUF, "json_schema": JSON_SCHEMA}


def wire_format(name: Format) -> WireFormat:
    """The format ``name`` names (one of ``client.FORMATS``, checked when options are parsed)."""
    return WIRE_FORMATS[name]
