"""Protobuf in the registry's formats: descriptors from registered schemas, Spark types, decode, encode.

The registry hands out Protobuf schemas as base64 ``FileDescriptorProto``s (``format=serialized``), with
the files they import as references; ``descriptor`` builds a pool from them. Runs in Spark's Python workers
(per record: ``decoder``/``encoder``) and in the driver (``arrow_type``, ``derive``).

Mapping to Spark: messages are structs, repeated fields arrays, map fields maps, enums their value's
name, ``google.protobuf.Timestamp`` a timestamp, 64-bit unsigned integers longs with the same bits (as
Java reads them). Records are parsed with the reader's message, by field number, as Protobuf does: added
fields read as their default, removed ones are skipped, renamed ones keep their values. Proto3 scalars have
no null: an unset one reads as its default (0, "", false).
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sparkafka.errors import ConfigError
from sparkafka.registry.wireformat import Decode, Encode, Files, Reader, RecordUnreadableError

__all__ = ["PROTOBUF", "arrow_type", "decoder", "derive", "descriptor", "encoder"]

TIMESTAMP = "google.protobuf.Timestamp"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _pool() -> Any:
    from google.protobuf import (
        any_pb2,
        duration_pb2,
        empty_pb2,
        struct_pb2,
        timestamp_pb2,
        wrappers_pb2,
    )
    from google.protobuf.descriptor_pool import DescriptorPool

    pool = DescriptorPool()
    for module in (any_pb2, duration_pb2, empty_pb2, struct_pb2, timestamp_pb2, wrappers_pb2):
        pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
    return pool


def file_proto(text: str, name: str) -> Any:
    """A FileDescriptorProto from the registry's base64 text, named ``name`` (its import path)."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    proto = descriptor_pb2.FileDescriptorProto()
    try:
        proto.ParseFromString(base64.standard_b64decode(text.encode("ascii")))
    except (DecodeError, ValueError) as e:
        raise ConfigError(
            f"not a serialized Protobuf schema ({e}); the registry must answer format=serialized"
        ) from None
    proto.name = name
    return proto


def descriptor(files: Files, indexes: list[int] | str | None) -> Any:
    """A message Descriptor in the last of ``files``: at the message-index path ``indexes``, or by name.

    ``files`` are (import name, base64 text) with dependencies first, as ``codec`` collects them from the
    registry's references. A name is full or simple; None means the file's first message.
    """
    pool = _pool()
    for name, text in files:
        if name.startswith("google/protobuf/"):
            continue
        try:
            pool.Add(file_proto(text, name))
        except TypeError as e:  # a conflicting or unresolvable file
            raise ConfigError(f"Protobuf schema {name}: {e}") from None
    fd = pool.FindFileByName(files[-1][0])
    if isinstance(indexes, list):
        return message_at(fd, indexes)
    return message_named(fd, indexes)


def message_named(fd: Any, name: str | None) -> Any:
    """The message ``name`` (``shop.Order``, ``Order`` or ``Order.Line``) in the file; None: the first."""
    found: list[Any] = []
    stack = list(fd.message_types_by_name.values())
    if not stack:
        raise ConfigError(f"Protobuf schema {fd.name} declares no message")
    if name is None:
        return stack[0]
    while stack:
        desc = stack.pop(0)
        relative = desc.full_name[len(fd.package) + 1 :] if fd.package else desc.full_name
        if name in (desc.full_name, relative):
            return desc
        found.append(relative)
        stack.extend(desc.nested_types)
    raise ConfigError(f"Protobuf schema has no message {name!r}; it has {', '.join(found)}")


def message_at(fd: Any, indexes: list[int]) -> Any:
    """The message a Confluent message-index path names: ``[1, 0]`` = first nested type of the second."""
    types = list(fd.message_types_by_name.values())
    desc = None
    for i in indexes:
        if not 0 <= i < len(types):
            raise ValueError(f"message index {i} is out of range ({len(types)} message types there)")
        desc = types[i]
        types = list(desc.nested_types)
    if desc is None:
        raise ValueError("empty message index path")
    return desc


def index_path(desc: Any) -> list[int]:
    """The message-index path of ``desc`` in its file (inverse of ``message_at``)."""
    path = []
    while desc is not None:
        siblings = (
            desc.containing_type.nested_types
            if desc.containing_type
            else list(desc.file.message_types_by_name.values())
        )
        path.append(list(siblings).index(desc))
        desc = desc.containing_type
    return path[::-1]


def _is_map(field: Any) -> bool:
    t = field.message_type
    return bool(field.is_repeated and t is not None and t.GetOptions().map_entry)


def _scalar_type(field: Any) -> pa.DataType:
    f = field
    table = {
        f.TYPE_DOUBLE: pa.float64(),
        f.TYPE_FLOAT: pa.float32(),
        f.TYPE_INT64: pa.int64(),
        f.TYPE_SINT64: pa.int64(),
        f.TYPE_SFIXED64: pa.int64(),
        f.TYPE_UINT64: pa.int64(),
        f.TYPE_FIXED64: pa.int64(),
        f.TYPE_INT32: pa.int32(),
        f.TYPE_SINT32: pa.int32(),
        f.TYPE_SFIXED32: pa.int32(),
        f.TYPE_UINT32: pa.int64(),
        f.TYPE_FIXED32: pa.int64(),
        f.TYPE_BOOL: pa.bool_(),
        f.TYPE_STRING: pa.string(),
        f.TYPE_BYTES: pa.binary(),
        f.TYPE_ENUM: pa.string(),
    }
    return table[field.type]


def arrow_type(desc: Any, seen: tuple[str, ...] = ()) -> pa.DataType:
    """The Arrow (so Spark) type of a message: a struct of its fields."""
    if desc.full_name == TIMESTAMP:
        return pa.timestamp("us", tz="UTC")
    if desc.full_name in seen:
        raise ConfigError(f"Protobuf message {desc.full_name} is recursive: Spark types cannot be recursive")
    return pa.struct([pa.field(f.name, _field_type(f, (*seen, desc.full_name))) for f in desc.fields])


def _field_type(field: Any, seen: tuple[str, ...]) -> pa.DataType:
    if _is_map(field):
        entry = field.message_type
        return pa.map_(
            _field_type(entry.fields_by_name["key"], seen), _field_type(entry.fields_by_name["value"], seen)
        )
    inner = arrow_type(field.message_type, seen) if field.message_type is not None else _scalar_type(field)
    return pa.list_(inner) if field.is_repeated else inner


def _to_python(desc: Any) -> Callable[[Any], Any]:
    """A converter from a ``desc`` message to a dict of Python values shaped as ``arrow_type(desc)``."""
    if desc.full_name == TIMESTAMP:
        return lambda m: _EPOCH + dt.timedelta(seconds=m.seconds, microseconds=m.nanos // 1000)
    converters: list[tuple[str, bool, Callable[[Any], Any]]] = []
    for field in desc.fields:
        name = field.name
        if _is_map(field):
            key_conv = _value_converter(field.message_type.fields_by_name["key"])
            val_conv = _value_converter(field.message_type.fields_by_name["value"])
            converters.append((name, False, _map_converter(key_conv, val_conv)))
        elif field.is_repeated:
            conv = _value_converter(field)
            converters.append((name, False, _list_converter(conv)))
        elif field.message_type is not None:
            converters.append((name, True, _value_converter(field)))
        else:
            converters.append((name, False, _value_converter(field)))

    def convert(message: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, presence, conv in converters:
            if presence and not message.HasField(name):
                out[name] = None
            else:
                out[name] = conv(getattr(message, name))
        return out

    return convert


def _map_converter(key: Callable[[Any], Any], value: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: [(key(a), value(b)) for a, b in v.items()]


def _list_converter(item: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: [item(x) for x in v]


def _value_converter(field: Any) -> Callable[[Any], Any]:
    if field.message_type is not None:
        return _to_python(field.message_type)
    if field.type in (field.TYPE_UINT64, field.TYPE_FIXED64):
        return _signed64
    if field.enum_type is not None:
        names = {v.number: v.name for v in field.enum_type.values}
        return lambda v: names.get(v, str(v))
    return _identity


def _identity(v: Any) -> Any:
    return v


def _signed64(v: int) -> int:
    """A uint64 as Spark's long holds it: the same 64 bits, as Java's Protobuf reads it.

    Values above 2**63-1 come out negative.
    """
    return v - (1 << 64) if v >= 1 << 63 else v


def decoder(desc: Any) -> Callable[[bytes, int], Any]:
    """``decode(data, start)``: the message at ``data[start:]`` as a dict (fields by name)."""
    from google.protobuf.message_factory import GetMessageClass

    cls = GetMessageClass(desc)
    convert = _to_python(desc)

    def decode(data: bytes, start: int) -> Any:
        message = cls()
        message.ParseFromString(data[start:])
        return convert(message)

    return decode


def encoder(desc: Any) -> Callable[[Any], bytes]:
    """``encode(value)``: a dict (fields by name, as Spark rows give them) as a serialized message."""
    from google.protobuf.message_factory import GetMessageClass

    cls = GetMessageClass(desc)

    def encode(value: Any) -> bytes:
        message = cls()
        _fill(message, desc, value)
        return bytes(message.SerializeToString())

    return encode


def _fill(message: Any, desc: Any, value: Any) -> None:
    if desc.full_name == TIMESTAMP:
        micros = (value - _EPOCH) // dt.timedelta(microseconds=1)
        message.seconds, message.nanos = divmod(micros, 1_000_000)[0], (micros % 1_000_000) * 1000
        return
    for field in desc.fields:
        v = value.get(field.name)
        if v is None:
            continue
        if _is_map(field):
            _fill_map(getattr(message, field.name), field.message_type.fields_by_name["value"], v)
        elif field.is_repeated:
            _fill_list(getattr(message, field.name), field, v)
        elif field.message_type is not None:
            _fill(getattr(message, field.name), field.message_type, v)
        else:
            setattr(message, field.name, _scalar(field, v))


def _fill_map(target: Any, entry: Any, v: Any) -> None:
    for k, item in v.items() if isinstance(v, dict) else v:
        if item is None:
            continue
        if entry.message_type is not None:
            _fill(target[k], entry.message_type, item)
        else:
            target[k] = _scalar(entry, item)


def _fill_list(target: Any, field: Any, v: Any) -> None:
    for item in v:
        if item is None:
            continue
        if field.message_type is not None:
            _fill(target.add(), field.message_type, item)
        else:
            target.append(_scalar(field, item))


def _scalar(field: Any, v: Any) -> Any:
    if field.enum_type is not None and isinstance(v, str):
        value = field.enum_type.values_by_name.get(v)
        if value is None:
            raise ValueError(f"{v!r} is not a value of enum {field.enum_type.full_name}")
        return value.number
    if field.type == field.TYPE_STRING and not isinstance(v, str):
        return str(v)
    if field.type in (field.TYPE_DOUBLE, field.TYPE_FLOAT):
        return float(v)
    if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
        return (v - _EPOCH.date()).days
    if field.type in (field.TYPE_UINT64, field.TYPE_FIXED64) and v < 0:
        return v + (1 << 64)
    return v


def derive(t: pa.DataType, name: str, package: str = "") -> str:
    """A proto3 schema (base64 FileDescriptorProto, as the registry takes it) for values of Arrow type ``t``.

    Fields are numbered 1.. in column order; nested structs are nested messages, arrays repeated fields,
    maps map fields, timestamps ``google.protobuf.Timestamp``, dates days since the epoch (int32),
    decimals strings.
    """
    from google.protobuf import descriptor_pb2

    if not pa.types.is_struct(t):
        raise ConfigError(f"Protobuf encodes messages: the value must be a struct, not {t}")
    fd = descriptor_pb2.FileDescriptorProto(name=f"{name}.proto", syntax="proto3")
    if package:
        fd.package = package
    message = fd.message_type.add(name=name)
    _message(message, t, fd)
    return base64.standard_b64encode(fd.SerializeToString()).decode("ascii")


def _message(message: Any, t: pa.DataType, fd: Any) -> None:
    from google.protobuf import descriptor_pb2

    fdp = descriptor_pb2.FieldDescriptorProto
    for number, f in enumerate(t, start=1):
        field = message.field.add(name=f.name, number=number, label=fdp.LABEL_OPTIONAL)
        ft = f.type
        if pa.types.is_list(ft) or pa.types.is_large_list(ft):
            field.label = fdp.LABEL_REPEATED
            ft = ft.value_type
        if pa.types.is_map(ft):
            entry = message.nested_type.add(name=_camel(f.name) + "Entry")
            entry.options.map_entry = True
            _typed(
                entry.field.add(name="key", number=1, label=fdp.LABEL_OPTIONAL), ft.key_type, entry, fd, "Key"
            )
            _typed(
                entry.field.add(name="value", number=2, label=fdp.LABEL_OPTIONAL),
                ft.item_type,
                entry,
                fd,
                "Value",
            )
            field.label = fdp.LABEL_REPEATED
            field.type = fdp.TYPE_MESSAGE
            field.type_name = entry.name
            continue
        _typed(field, ft, message, fd, _camel(f.name))


def _typed(field: Any, t: pa.DataType, parent: Any, fd: Any, type_name: str) -> None:
    from google.protobuf import descriptor_pb2

    fdp = descriptor_pb2.FieldDescriptorProto
    if pa.types.is_struct(t):
        nested = parent.nested_type.add(name=type_name)
        _message(nested, t, fd)
        field.type, field.type_name = fdp.TYPE_MESSAGE, type_name
        return
    if pa.types.is_timestamp(t):
        if "google/protobuf/timestamp.proto" not in fd.dependency:
            fd.dependency.append("google/protobuf/timestamp.proto")
        field.type, field.type_name = fdp.TYPE_MESSAGE, f".{TIMESTAMP}"
        return
    simple = [
        (pa.types.is_boolean, fdp.TYPE_BOOL),
        (pa.types.is_int64, fdp.TYPE_INT64),
        (pa.types.is_integer, fdp.TYPE_INT32),
        (pa.types.is_float32, fdp.TYPE_FLOAT),
        (pa.types.is_float64, fdp.TYPE_DOUBLE),
        (lambda x: pa.types.is_string(x) or pa.types.is_decimal(x), fdp.TYPE_STRING),
        (pa.types.is_binary, fdp.TYPE_BYTES),
        (pa.types.is_date32, fdp.TYPE_INT32),
    ]
    for check, kind in simple:
        if check(t):
            field.type = kind
            return
    raise ConfigError(f"{field.name}: Spark type {t} has no Protobuf encoding here")


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_")) or "Field"


@dataclass(frozen=True)
class _Protobuf:
    """Protobuf as a ``WireFormat``: records name their message by index; read by field number."""

    name: str = "protobuf"
    message_indexes: bool = True
    text_is_json: bool = False

    def reader(self, files: Files, message: str | None) -> Reader:
        desc = descriptor(files, message)
        return Reader(desc, arrow_type(desc), tuple(files))

    def decoder(self, reader: Reader, writer: Files | None, indexes: list[int]) -> Decode:
        # Read with the reader's message, by field number, as Protobuf (and Confluent's deserializer) do:
        # a renamed field keeps its values, a removed one is skipped, an added one is its default.
        written = descriptor(reader.files if writer is None else writer, indexes)
        if written.full_name != reader.schema.full_name:
            raise RecordUnreadableError(
                f"written as message {written.full_name}, read as {reader.schema.full_name}"
            )
        return _message_decoder(reader.schema)

    def encoder(self, writer: Files) -> tuple[Encode, list[int]]:
        desc = descriptor(writer, [0])
        return encoder(desc), index_path(desc)

    def derive(self, t: pa.DataType, name: str, namespace: str) -> str:
        return derive(t, name, namespace)


@functools.lru_cache(maxsize=64)
def _message_decoder(desc: Any) -> Decode:
    """One decoder per reader message and process, whichever writer schema ids its records carry."""
    return decoder(desc)


PROTOBUF = _Protobuf()
