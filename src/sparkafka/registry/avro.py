"""Avro in the registry's formats: Spark types of Avro schemas, decoding with schema resolution, encoding.

Runs in Spark's Python workers (decoders and encoders, per record) and in the driver (``arrow_type`` when a
query is planned, ``derive`` when a sink registers its schema). Decoding is fastavro's: each record is read
with its own writer schema and resolved to the reader schema by Avro's rules (fields the writer lacks take
the reader's default, fields the reader lacks are skipped, int->long->float->double promotions).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sparkafka.errors import ConfigError
from sparkafka.registry.wireformat import Decode, Encode, Files, Reader, ReaderCannotReadError

__all__ = ["AVRO", "arrow_type", "decoder", "derive", "encoder", "parse"]

# Logical types read as their underlying Avro type: Spark has no UUID or time-of-day column, and fastavro
# would hand back objects (uuid.UUID, datetime.time) that no Spark type takes.
_PLAIN_LOGICAL = {"uuid", "time-millis", "time-micros", "local-timestamp-millis", "local-timestamp-micros"}
# Logical types decoded as their underlying numbers, which Arrow takes as they are (``arrow_type`` keeps
# them as date and timestamp columns): building a datetime per value costs more than decoding the record.
_AS_NUMBERS = {"date", "timestamp-millis", "timestamp-micros"}


def _strip(schema: Any, drop: set[str]) -> Any:
    if isinstance(schema, list):
        return [_strip(s, drop) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strip(v, drop) for k, v in schema.items()}
    if out.get("logicalType") in drop:
        del out["logicalType"]
    return out


def parse(text: str, named: dict[str, Any] | None = None, for_decoding: bool = False) -> Any:
    """A fastavro parsed schema from its JSON text (``ConfigError`` if it is not Avro).

    ``for_decoding``: dates and timestamps are read as their numbers (``storage_type`` describes them).
    ``named``: named types of referenced schemas, parsed before (and added to by this one).
    """
    import fastavro

    drop = _PLAIN_LOGICAL | _AS_NUMBERS if for_decoding else _PLAIN_LOGICAL
    try:
        return fastavro.parse_schema(_strip(json.loads(text), drop), named_schemas=named)
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as e:
        raise ConfigError(f"not a valid Avro schema: {e}") from None


_PRIMITIVES = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


def arrow_type(schema: Any, named: dict[str, Any] | None = None) -> pa.DataType:
    """The Arrow type of a parsed Avro schema (parsed with its logical types).

    Records are structs, unions with null nullable, timestamp-millis millisecond timestamps
    (``spark_ready`` makes them microseconds). ``named``: the named types of the schemas it references
    (``parse``'s ``named``).
    """
    return _arrow(schema, dict(named or {}), "")


def _arrow(  # noqa: PLR0911, PLR0912 - a branch per Avro type
    schema: Any, named: dict[str, Any], path: str
) -> pa.DataType:
    where = path or "the top level"
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        if schema not in named:
            raise ConfigError(f"Avro type {schema!r} at {where} is unknown")
        if named[schema] is None:
            raise ConfigError(
                f"Avro record {schema!r} is recursive at {where}: Spark types cannot be recursive"
            )
        return _arrow(named[schema], named, path)
    if isinstance(schema, list):
        branches = [s for s in schema if s != "null"]
        if len(branches) != 1:
            raise ConfigError(
                f"Avro union {json.dumps(schema)} at {where}: only a type or a type with null is supported"
            )
        return _arrow(branches[0], named, path)
    kind = schema["type"]
    logical = schema.get("logicalType")
    if logical == "decimal":
        return pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0)))
    if logical == "date" and kind == "int":
        return pa.date32()
    if logical == "timestamp-millis" and kind == "long":
        return pa.timestamp("ms", tz="UTC")
    if logical == "timestamp-micros" and kind == "long":
        return pa.timestamp("us", tz="UTC")
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind in {"record", "error"}:
        name = schema["name"]
        named[name] = None  # seen: a reference to it below is recursion
        fields = [
            pa.field(f["name"], _arrow(f["type"], named, f"{path}.{f['name']}".lstrip(".")), nullable=True)
            for f in schema["fields"]
        ]
        named[name] = schema
        return pa.struct(fields)
    if kind == "enum":
        named[schema["name"]] = schema
        return pa.string()
    if kind == "fixed":
        named[schema["name"]] = schema
        return pa.binary()
    if kind == "array":
        return pa.list_(_arrow(schema["items"], named, f"{path}[]"))
    if kind == "map":
        return pa.map_(pa.string(), _arrow(schema["values"], named, f"{path}{{}}"))
    raise ConfigError(f"Avro type {kind!r} at {where} is not supported")


_UNITS = {"timestamp-millis", "timestamp-micros"}


def unit_mismatch(
    writer: Any, reader: Any, w_named: dict[str, Any], r_named: dict[str, Any], path: str = ""
) -> str | None:
    """The first field where the writer has timestamp-millis and the reader timestamp-micros, or None.

    The other way round counts too. Avro's resolution allows it (both are longs); the values would be
    off by 1000x.
    """

    def resolve(s: Any, named: dict[str, Any]) -> Any:
        if isinstance(s, str) and s in named:
            return named[s]
        if isinstance(s, list):
            branches = [b for b in s if b != "null"]
            return resolve(branches[0], named) if len(branches) == 1 else None
        return s

    w, r = resolve(writer, w_named), resolve(reader, r_named)
    if not isinstance(w, dict) or not isinstance(r, dict) or path.count(".") > 64:
        return None
    kind = r.get("type")
    if kind == "record" and w.get("type") == "record":
        fields = {f["name"]: f["type"] for f in w["fields"]}
        for f in r["fields"]:
            if f["name"] in fields:
                found = unit_mismatch(fields[f["name"]], f["type"], w_named, r_named, f"{path}.{f['name']}")
                if found:
                    return found
        return None
    if kind in ("array", "map") and w.get("type") == kind:
        key = "items" if kind == "array" else "values"
        return unit_mismatch(w[key], r[key], w_named, r_named, f"{path}[]")
    units = {w.get("logicalType"), r.get("logicalType")}
    return (path.lstrip(".") or "the value") if units == _UNITS else None


def decoder(writer: Any, reader: Any | None) -> Callable[[bytes, int], Any]:
    """``decode(data, start)``: the record at ``data[start:]`` as Python values, resolved to ``reader``.

    ``reader`` None reads with the writer schema (the same schema: no resolution cost).
    """
    from fastavro import schemaless_reader
    from fastavro.read import SchemaResolutionError

    def decode(data: bytes, start: int) -> Any:
        buf = io.BytesIO(data)
        buf.seek(start)
        try:
            return schemaless_reader(buf, writer, reader)
        except SchemaResolutionError as e:
            raise ReaderCannotReadError(
                f"{e}. Use a reader schema compatible with every writer (a new field needs a default)"
            ) from None

    return decode


def encoder(schema: Any) -> Callable[[Any], bytes]:
    """``encode(value)``: the Avro binary encoding of a Python value (dicts for records)."""
    from fastavro import schemaless_writer

    def encode(value: Any) -> bytes:
        buf = io.BytesIO()
        schemaless_writer(buf, schema, value)
        return buf.getvalue()

    return encode


def derive(t: pa.DataType, name: str, namespace: str = "") -> str:
    """An Avro schema (JSON text) for values of Arrow type ``t``, as Spark's ``to_avro`` would write them.

    Nullable fields are unions ``["null", T]`` with default null, so a later version may add or drop them
    compatibly. Nested structs are records named after their field.
    """
    schema = _avro(t, name, namespace, top=True)
    if namespace and isinstance(schema, dict):
        schema["namespace"] = namespace
    return json.dumps(schema, separators=(",", ":"))


def _avro(  # noqa: PLR0911, PLR0912 - a branch per Arrow type
    t: pa.DataType, name: str, namespace: str, top: bool = False
) -> Any:
    if pa.types.is_struct(t):
        fields = []
        for f in t:
            inner = _avro(f.type, f"{name}_{f.name}" if not top else f.name, namespace)
            fields.append({"name": f.name, "type": ["null", inner], "default": None})
        return {"type": "record", "name": name if top else f"{name}", "fields": fields}
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return "int"
    if pa.types.is_int64(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "bytes"
    if pa.types.is_decimal(t):
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "array", "items": ["null", _avro(t.value_type, f"{name}_item", namespace)]}
    if pa.types.is_map(t):
        if not pa.types.is_string(t.key_type):
            raise ConfigError(f"Avro maps have string keys; {name} has {t.key_type} keys")
        return {"type": "map", "values": ["null", _avro(t.item_type, f"{name}_value", namespace)]}
    raise ConfigError(f"{name}: Spark type {t} has no Avro encoding here")


def _parsed(files: Files, for_decoding: bool = False) -> tuple[Any, dict[str, Any]]:
    """(the last schema of ``files`` parsed, the named types it and the schemas it references declare)."""
    named: dict[str, Any] = {}
    for _, text in files[:-1]:
        parse(text, named, for_decoding)
    return parse(files[-1][1], named, for_decoding), named


@dataclass(frozen=True)
class _Avro:
    """Avro as a ``WireFormat``: each record read with its writer schema, resolved to the reader's."""

    name: str = "avro"
    message_indexes: bool = False
    text_is_json: bool = True

    def reader(self, files: Files, message: str | None) -> Reader:
        return Reader(_parsed(files, for_decoding=True)[0], arrow_type(*_parsed(files)), tuple(files))

    def decoder(self, reader: Reader, writer: Files | None, indexes: list[int]) -> Decode:
        if writer is None:
            return decoder(reader.schema, None)
        (written, w_named), (read, r_named) = _parsed(writer), _parsed(reader.files)
        field = unit_mismatch(written, read, w_named, r_named)
        if field:
            raise ReaderCannotReadError(
                f"it reads {field} as a timestamp in another unit (millis / micros): the values would be "
                "off by 1000x; use the writer's logical type in the reader"
            )
        return decoder(_parsed(writer, for_decoding=True)[0], reader.schema)

    def encoder(self, writer: Files) -> tuple[Encode, list[int]]:
        return encoder(_parsed(writer)[0]), []

    def derive(self, t: pa.DataType, name: str, namespace: str) -> str:
        return derive(t, name, namespace)


AVRO = _Avro()
