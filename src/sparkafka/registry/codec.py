"""Decoding and encoding whole Arrow arrays of Confluent-framed records; per-process schema caches.

Runs in Spark's Python workers, one call per Arrow batch (``decode_array``, ``encode_array``), and is
pure enough to unit-test without Spark. A ``DecodeSpec``/``EncodeSpec`` is built in the driver when the
query is planned (it holds the reader schema, or the writer schema and its id) and pickled into the tasks;
each worker process then fetches every writer schema id it meets once (``client.schema_by_id`` caches) and
builds one decoder per id (``_decoder``). What differs between Avro, Protobuf and JSON Schema is
asked of the spec's ``WireFormat`` (``wireformat``; found by name in ``formats``): this module names none.

Faults of one record (no magic byte, a truncated or corrupt payload, an id the registry does not have, a
value that does not fit the reader's type) come back as that record's error text, for ``on_malformed``;
faults of the setup (the registry unreachable, a reader schema that cannot read a writer schema) raise.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sparkafka.errors import ConfigError, RegistryError
from sparkafka.registry.client import (
    Format,
    RegisteredSchema,
    RegistryConfig,
    schema_by_id,
    schema_by_version,
)
from sparkafka.registry.formats import wire_format
from sparkafka.registry.wire import (
    HEADER,
    FrameError,
    frame,
    read_message_indexes,
    schema_id_of,
    write_message_indexes,
)
from sparkafka.registry.wireformat import (
    Decode,
    Encode,
    Files,
    Reader,
    ReaderCannotReadError,
    RecordUnreadableError,
)

__all__ = ["DecodeSpec", "EncodeSpec", "decode_array", "encode_array", "reader_type", "writer_type"]

RESULT_FIELDS = ("value", "error")


@dataclass(frozen=True)
class DecodeSpec:
    """What a task needs to decode: the registry, the format and the reader schema (by id and text)."""

    registry: RegistryConfig
    format: Format
    reader: RegisteredSchema
    what: str = "value"
    """``value`` or ``key``: named in errors."""
    message: str | None = None
    """Where a format's schemas hold several messages: the reader's, by name (default the first)."""


@dataclass(frozen=True)
class EncodeSpec:
    """What a task needs to encode: the writer schema, already registered (its id goes in every record)."""

    registry: RegistryConfig
    format: Format
    writer: RegisteredSchema
    what: str = "value"


def _files(cfg: RegistryConfig, reg: RegisteredSchema, name: str = "") -> Files:
    """(import name, text) of ``reg`` and everything it references, dependencies first."""
    out: list[tuple[str, str]] = []
    for ref_name, subject, version in reg.references:
        for item in _files(cfg, schema_by_version(cfg, subject, version, reg.format), ref_name):
            if item not in out:
                out.append(item)
    out.append((name or f"schema-{reg.schema_id}", reg.text))
    return out


@functools.lru_cache(maxsize=64)
def _reader(spec: DecodeSpec) -> Reader:
    """The parsed reader schema and the Arrow type values are built as, once per spec per process."""
    return wire_format(spec.format).reader(_files(spec.registry, spec.reader), spec.message)


def spark_ready(t: pa.DataType) -> pa.DataType:
    """``t`` with every timestamp in microseconds (what Spark's TimestampType is in Arrow)."""
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC")
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, spark_ready(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(spark_ready(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(t.key_type, spark_ready(t.item_type))
    return t


def reader_type(spec: DecodeSpec) -> pa.DataType:
    """The Arrow type decoded values have (the reader schema's); computed in the driver at plan time."""
    return spark_ready(_reader(spec).arrow)


def writer_type(spec: EncodeSpec) -> pa.DataType:
    """The Arrow type the writer schema describes (what ``use_latest_version`` writes must fit)."""
    return reader_type(DecodeSpec(spec.registry, spec.format, spec.writer, spec.what))


@functools.lru_cache(maxsize=1024)
def _decoder(spec: DecodeSpec, schema_id: int, indexes: tuple[int, ...]) -> Decode:
    """The decoder of records framed with ``schema_id`` (and message ``indexes``), resolved to the reader.

    Cached per process, including for ids no record can be read with: their decoder raises the record's
    ``RecordUnreadableError``, so the registry is asked once per id, not once per record.
    """
    try:
        return _resolved_decoder(spec, schema_id, indexes)
    except RecordUnreadableError as e:
        reason = str(e)

        def unreadable(_data: bytes, _start: int) -> Any:
            raise RecordUnreadableError(reason)

        return unreadable


def _resolved_decoder(spec: DecodeSpec, schema_id: int, indexes: tuple[int, ...]) -> Decode:
    cfg = spec.registry
    reader = _reader(spec)
    try:
        found = schema_by_id(cfg, schema_id, spec.format)
    except RegistryError as e:
        if e.code in (40403, 404):
            raise RecordUnreadableError(
                f"schema id {schema_id} is not in the registry at {cfg.where}"
            ) from None
        raise
    if found.format != spec.format:
        raise RecordUnreadableError(f"schema id {schema_id} is a {found.format} schema, not {spec.format}")
    writer = None if schema_id == spec.reader.schema_id else _files(cfg, found)
    try:
        return wire_format(spec.format).decoder(reader, writer, list(indexes))
    except ReaderCannotReadError as e:
        raise _cannot_read(spec, schema_id, e) from None
    except ConfigError as e:  # a writer schema we cannot use: the setup's fault, never one record's
        raise RegistryError(
            f"the {spec.what} writer schema id {schema_id} in the registry at {cfg.where} cannot be used: {e}"
        ) from None


def _cannot_read(spec: DecodeSpec, schema_id: int, e: ReaderCannotReadError) -> RegistryError:
    return RegistryError(
        f"the {spec.what} reader schema (id {spec.reader.schema_id}{_subject(spec.reader)}) cannot read "
        f"records written with schema id {schema_id}: {e}"
    )


def decode_values(spec: DecodeSpec, values: list[bytes | None]) -> tuple[list[Any], list[str | None]]:
    """(decoded values, error texts) of framed records; None stays None. See the module for what raises."""
    out: list[Any] = []
    errors: list[str | None] = []
    last_id = -1
    last_indexes: tuple[int, ...] = ()
    decode: Decode | None = None
    indexed = wire_format(spec.format).message_indexes
    for data in values:
        if data is None:
            out.append(None)
            errors.append(None)
            continue
        try:
            schema_id = schema_id_of(data)
            indexes: tuple[int, ...] = ()
            start = HEADER
            if indexed:
                found, start = read_message_indexes(data)
                indexes = tuple(found)
            if decode is None or schema_id != last_id or indexes != last_indexes:  # most records share
                decode = _decoder(spec, schema_id, indexes)  # the previous record's writer
                last_id, last_indexes = schema_id, indexes
            out.append(decode(data, start))
            errors.append(None)
        except ReaderCannotReadError as e:
            raise _cannot_read(spec, schema_id, e) from None
        except (FrameError, RecordUnreadableError) as e:
            out.append(None)
            errors.append(f"{spec.format} {spec.what}: {e}")
        except (RegistryError, ConfigError):
            raise
        except Exception as e:  # noqa: BLE001 - whatever a corrupt payload makes a format's library raise
            out.append(None)
            errors.append(
                f"{spec.format} {spec.what}: undecodable with schema id {schema_id}: {type(e).__name__}: {e}"
            )
    return out, errors


def _subject(reg: RegisteredSchema) -> str:
    return f", subject {reg.subject} version {reg.version}" if reg.subject else ""


def _to_arrow(values: list[Any], errors: list[str | None], t: pa.DataType) -> pa.Array:
    """The values as an Arrow array of ``t``; a value Arrow refuses becomes null with an error."""
    try:
        return pa.array(values, type=t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        pass
    for i, v in enumerate(values):
        if v is None:
            continue
        try:
            pa.array([v], type=t)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as e:
            values[i] = None
            errors[i] = f"does not fit the reader schema's type: {e}"
    return pa.array(values, type=t)


def decode_array(spec: DecodeSpec, data: pa.Array) -> pa.StructArray:
    """A binary array of framed records as ``struct<value: T, error: string>`` (T the reader's type)."""
    values, errors = decode_values(spec, data.to_pylist())
    built, ready = _reader(spec).arrow, reader_type(spec)
    decoded = _to_arrow(values, errors, built)
    if built != ready:
        decoded = decoded.cast(ready)
    return pa.StructArray.from_arrays([decoded, pa.array(errors, pa.string())], names=list(RESULT_FIELDS))


@functools.lru_cache(maxsize=64)
def _encoder(spec: EncodeSpec) -> Encode:
    """Values to framed records with the writer schema: its id, message indexes where the format has them."""
    fmt, reg = wire_format(spec.format), spec.writer
    encode, indexes = fmt.encoder(_files(spec.registry, reg))
    prefix = write_message_indexes(indexes) if fmt.message_indexes else b""
    return lambda v: frame(reg.schema_id, encode(v), prefix)


def encode_values(spec: EncodeSpec, values: list[Any]) -> list[bytes | None]:
    """Framed records of Python values; a value the schema cannot take raises, naming the row's fault."""
    encode = _encoder(spec)
    out: list[bytes | None] = []
    for v in values:
        if v is None:
            out.append(None)
            continue
        try:
            out.append(encode(v))
        except Exception as e:  # noqa: BLE001 - what a format's library raises for a value the schema does not allow
            raise RegistryError(
                f"cannot encode a {spec.what} with {spec.format} schema id {spec.writer.schema_id}"
                f"{_subject(spec.writer)}: {type(e).__name__}: {e}"
            ) from None
    return out


def _maps_as_dicts(t: pa.DataType) -> Callable[[Any], Any] | None:  # noqa: PLR0911 - per type
    """Turns Arrow's maps (lists of pairs in ``to_pylist``) into dicts; None if ``t`` has no map."""
    if pa.types.is_map(t):
        values = _maps_as_dicts(t.item_type)
        if values is None:
            return lambda v: None if v is None else dict(v)
        return lambda v: None if v is None else {k: values(x) for k, x in v}
    if pa.types.is_struct(t):
        inner = [(f.name, _maps_as_dicts(f.type)) for f in t]
        convert = [(n, c) for n, c in inner if c is not None]
        if not convert:
            return None

        def struct(v: Any) -> Any:
            if v is None:
                return None
            for n, c in convert:
                v[n] = c(v[n])
            return v

        return struct
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = _maps_as_dicts(t.value_type)
        if item is None:
            return None
        return lambda v: None if v is None else [item(x) for x in v]
    return None


def encode_array(spec: EncodeSpec, data: pa.Array) -> pa.Array:
    """An array of values (structs, or the schema's primitive) as a binary array of framed records."""
    values = data.to_pylist()
    convert = _maps_as_dicts(data.type)
    if convert is not None:
        values = [convert(v) for v in values]
    return pa.array(encode_values(spec, values), pa.binary())
