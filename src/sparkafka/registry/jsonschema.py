"""JSON Schema in the registry's formats: Spark types of schemas, decoding to a reader type, encoding.

Runs in Spark's Python workers (per record) and in the driver (``arrow_type``, ``derive``). The payload is
UTF-8 JSON. Decoding parses it and conforms it to the reader schema's Spark type: properties by name,
missing ones null, unknown ones ignored, a value of the wrong JSON type a per-record fault (so
``on_malformed`` decides). Writer schemas are not validated against per record (Confluent's deserializer
validates by default; that costs a jsonschema run per record and the reader's type check catches what
Spark cannot hold).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sparkafka.errors import ConfigError
from sparkafka.registry.wireformat import Decode, Encode, Files, Reader, RecordUnreadableError

__all__ = ["JSON_SCHEMA", "arrow_type", "conformer", "derive", "encode"]


def parse(text: str) -> dict[str, Any]:
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"not a valid JSON Schema: {e}") from None
    if not isinstance(schema, dict):
        raise ConfigError("not a valid JSON Schema: the top level must be an object")
    return schema


def arrow_type(schema: dict[str, Any]) -> pa.DataType:
    """The Arrow (so Spark) type of a JSON Schema: objects with properties are structs."""
    return _arrow(schema, schema, "", ())


def _resolve(node: dict[str, Any], root: dict[str, Any], path: str) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    if not ref.startswith("#/"):
        raise ConfigError(
            f"JSON Schema $ref {ref!r} at {path or 'the top level'}: only local references (#/...)"
        )
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
    if not isinstance(target, dict):
        raise ConfigError(f"JSON Schema $ref {ref!r} at {path or 'the top level'} points nowhere")
    return target


def _arrow(  # noqa: PLR0911, PLR0912 - a branch per JSON Schema type
    node: Any, root: dict[str, Any], path: str, refs: tuple[str, ...]
) -> pa.DataType:
    where = path or "the top level"
    if node is True or node == {}:
        return pa.string()  # anything: kept as its JSON text
    if not isinstance(node, dict):
        raise ConfigError(f"JSON Schema at {where} is not an object")
    if "$ref" in node:
        if node["$ref"] in refs:
            raise ConfigError(f"JSON Schema {node['$ref']} is recursive at {where}: Spark types cannot be")
        return _arrow(_resolve(node, root, path), root, path, (*refs, node["$ref"]))
    for combinator in ("oneOf", "anyOf"):
        if combinator in node:
            options = [o for o in node[combinator] if not (isinstance(o, dict) and o.get("type") == "null")]
            if len(options) != 1:
                raise ConfigError(f"JSON Schema {combinator} at {where}: only one type or one type with null")
            return _arrow(options[0], root, path, refs)
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) != 1:
            raise ConfigError(f"JSON Schema type {kind} at {where}: only one type or one type with null")
        kind = kinds[0]
    if kind is None and "properties" in node:
        kind = "object"
    if kind == "object":
        props = node.get("properties")
        if props:
            return pa.struct(
                [pa.field(k, _arrow(v, root, f"{path}.{k}".lstrip("."), refs)) for k, v in props.items()]
            )
        extra = node.get("additionalProperties")
        value = _arrow(extra, root, f"{path}{{}}", refs) if isinstance(extra, dict) else pa.string()
        return pa.map_(pa.string(), value)
    if kind == "array":
        return pa.list_(_arrow(node.get("items", {}), root, f"{path}[]", refs))
    simple = {"string": pa.string(), "integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_()}
    if kind in simple:
        return simple[kind]
    raise ConfigError(f"JSON Schema type {kind!r} at {where} is not supported")


class MismatchError(RecordUnreadableError, ValueError):
    """A JSON value that does not fit the reader schema's type (a per-record fault)."""


def conformer(t: pa.DataType, path: str = "") -> Callable[[Any], Any]:
    """``conform(value)``: a parsed JSON value in the shape of Arrow type ``t``, or ``MismatchError``."""
    where = path or "the value"
    if pa.types.is_struct(t):
        fields = [(f.name, conformer(f.type, f"{path}.{f.name}".lstrip("."))) for f in t]

        def struct(v: Any) -> Any:
            if v is None:
                return None
            if not isinstance(v, dict):
                raise MismatchError(f"{where}: expected an object, got {type(v).__name__}")
            return {name: conform(v.get(name)) for name, conform in fields}

        return struct
    if pa.types.is_list(t):
        item = conformer(t.value_type, f"{path}[]")

        def array(v: Any) -> Any:
            if v is None:
                return None
            if not isinstance(v, list):
                raise MismatchError(f"{where}: expected an array, got {type(v).__name__}")
            return [item(x) for x in v]

        return array
    if pa.types.is_map(t):
        value = conformer(t.item_type, f"{path}{{}}")

        def mapping(v: Any) -> Any:
            if v is None:
                return None
            if not isinstance(v, dict):
                raise MismatchError(f"{where}: expected an object, got {type(v).__name__}")
            return [(k, value(x)) for k, x in v.items()]

        return mapping
    checks: dict[str, tuple[type | tuple[type, ...], str]] = {
        "int64": (int, "an integer"),
        "double": ((int, float), "a number"),
        "bool": (bool, "a boolean"),
    }
    name = str(t)
    if name in checks:
        kinds, what = checks[name]

        def scalar(v: Any) -> Any:
            if v is None:
                return None
            if not isinstance(v, kinds) or (isinstance(v, bool) and name != "bool"):
                raise MismatchError(f"{where}: expected {what}, got {json.dumps(v)[:40]}")
            return float(v) if name == "double" else v  # type: ignore[arg-type]

        return scalar

    def text(v: Any) -> Any:
        return v if v is None or isinstance(v, str) else json.dumps(v)

    return text


def decoder(reader: pa.DataType) -> Callable[[bytes, int], Any]:
    """``decode(data, start)``: the JSON at ``data[start:]`` conformed to the reader type."""
    conform = conformer(reader)

    def decode(data: bytes, start: int) -> Any:
        return conform(json.loads(data[start:]))

    return decode


def _default(v: Any) -> Any:
    if isinstance(v, dt.datetime | dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, bytes):
        return base64.standard_b64encode(v).decode("ascii")
    raise TypeError(f"{type(v).__name__} has no JSON encoding")


def encode(value: Any) -> bytes:
    """The JSON of a value (maps as objects, timestamps ISO 8601, bytes base64, decimals strings)."""
    return json.dumps(value, separators=(",", ":"), default=_default).encode()


def derive(t: pa.DataType, title: str) -> str:
    """A JSON Schema (draft 7) for values of Arrow type ``t``; every property may be null."""
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": title, **_schema(t)}
    return json.dumps(schema, separators=(",", ":"))


def _schema(t: pa.DataType) -> dict[str, Any]:  # noqa: PLR0911 - a return per type
    if pa.types.is_struct(t):
        return {
            "type": "object",
            "properties": {f.name: {"oneOf": [{"type": "null"}, _schema(f.type)]} for f in t},
        }
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "array", "items": _schema(t.value_type)}
    if pa.types.is_map(t):
        return {"type": "object", "additionalProperties": _schema(t.item_type)}
    if pa.types.is_boolean(t):
        return {"type": "boolean"}
    if pa.types.is_integer(t):
        return {"type": "integer"}
    if pa.types.is_floating(t):
        return {"type": "number"}
    if pa.types.is_timestamp(t):
        return {"type": "string", "format": "date-time"}
    if pa.types.is_date32(t):
        return {"type": "string", "format": "date"}
    if pa.types.is_binary(t):
        return {"type": "string", "contentEncoding": "base64"}
    return {"type": "string"}


@dataclass(frozen=True)
class _JsonSchema:
    """JSON Schema as a ``WireFormat``: every record conformed to the reader's type, whatever its writer."""

    name: str = "json_schema"
    message_indexes: bool = False
    text_is_json: bool = True

    def reader(self, files: Files, message: str | None) -> Reader:
        schema = parse(files[-1][1])
        return Reader(schema, arrow_type(schema), tuple(files))

    def decoder(self, reader: Reader, writer: Files | None, indexes: list[int]) -> Decode:
        return decoder(reader.arrow)

    def encoder(self, writer: Files) -> tuple[Encode, list[int]]:
        return encode, []

    def derive(self, t: pa.DataType, name: str, namespace: str) -> str:
        return derive(t, name)


JSON_SCHEMA = _JsonSchema()
