"""DataFrame functions for Confluent-framed columns: ``from_registry`` decodes, ``to_registry`` encodes.

Spark-facing adapters over ``codec``: the schema work happens here, in the driver, when the function is
called (the reader schema is read from the registry once, an encoder's schema is derived from the column's
Spark type and registered or looked up), then Arrow UDFs run ``codec`` in the Python workers, one Arrow
batch per call, with each worker process caching writer schemas by id. No JVM jar is involved.

    from sparkafka.registry import SchemaRegistry, from_registry, to_registry
    sr = SchemaRegistry("http://127.0.0.1:8081")
    orders = raw.select(from_registry("value", sr, "avro", subject="orders-value").alias("o")).select("o.*")
    out = orders.select(to_registry(struct("*"), sr, "avro", subject="totals-value",
                                    schema=orders.schema).alias("value"))
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import pyarrow as pa  # at module level: PySpark resolves the Arrow UDFs' type hints in these globals

from sparkafka.errors import ConfigError, RegistryError
from sparkafka.registry.client import (
    FORMATS,
    Format,
    RegisteredSchema,
    RegistryConfig,
    latest_or_pinned,
    parse_registry,
    register_or_lookup,
)
from sparkafka.registry.codec import (
    DecodeSpec,
    EncodeSpec,
    decode_array,
    encode_array,
    reader_type,
    writer_type,
)
from sparkafka.registry.formats import WIRE_FORMATS, wire_format
from sparkafka.spark_lines import require_arrow_udf

__all__ = ["SchemaRegistry", "decode_spec", "encode_spec", "from_registry", "to_registry"]

OnError = Literal["fail", "null", "column"]


def SchemaRegistry(url: str, **settings: Any) -> RegistryConfig:
    """Schema Registry connection settings, checked now (an unknown setting raises ConfigError).

    Settings: ``url``, ``basic_auth_user_info`` ("user:password"), ``ssl_ca_location``,
    ``ssl_certificate_location``, ``ssl_key_location``, ``ssl_key_password``, ``timeout_s``.
    """
    return parse_registry({"url": url, **settings}, where="SchemaRegistry")


def _registry(registry: RegistryConfig | str | Mapping[str, Any]) -> RegistryConfig:
    if isinstance(registry, RegistryConfig):
        return registry
    if isinstance(registry, str):
        return SchemaRegistry(registry)
    return parse_registry(registry, where="registry")


def _format(fmt: str) -> Format:
    if fmt not in FORMATS:
        raise ConfigError(f"format = {fmt!r}: use one of {', '.join(FORMATS)}")
    return fmt


def decode_spec(
    registry: RegistryConfig | str | Mapping[str, Any],
    fmt: str,
    subject: str | None = None,
    version: int | None = None,
    schema_id: int | None = None,
    *,
    what: str = "value",
    message: str | None = None,
) -> DecodeSpec:
    """The reader side, resolved now (driver): by ``schema_id``, or ``subject`` at ``version`` or latest.

    ``message`` picks the Protobuf message (default the schema's first).
    """
    cfg = _registry(registry)
    reader = latest_or_pinned(cfg, _format(fmt), subject, version, schema_id)
    if message is not None and not wire_format(reader.format).message_indexes:
        indexed = [name for name, f in WIRE_FORMATS.items() if f.message_indexes]
        raise ConfigError(f"message= applies to {', '.join(indexed)} only")
    spec = DecodeSpec(cfg, reader.format, reader, what, message)
    reader_type(spec)  # a schema Spark cannot hold fails here, at plan time, naming the field
    return spec


def _spark_type(t: Any) -> Any:
    from sparkafka.spark_lines import from_arrow_type

    return from_arrow_type(t)


def _arrow_type(t: Any) -> Any:
    from pyspark.sql.types import DataType, _parse_datatype_string

    from sparkafka.spark_lines import to_arrow_type

    if isinstance(t, str):
        t = _parse_datatype_string(t)
    if not isinstance(t, DataType):
        raise ConfigError(f"schema must be a Spark DataType or DDL string, not {type(t).__name__}")
    return to_arrow_type(t)


def from_registry(
    data: Any,
    registry: RegistryConfig | str | Mapping[str, Any],
    format: str,
    *,
    subject: str | None = None,
    version: int | None = None,
    schema_id: int | None = None,
    message: str | None = None,
    errors: OnError = "fail",
) -> Any:
    """Decode a binary column of Confluent-framed records with the reader schema named here.

    Every record is read with its own writer schema (by the id it carries) and resolved to the reader
    schema (``message``: the Protobuf message to read as). ``errors``: ``fail`` (the task fails naming
    the fault), ``null``, or ``column`` (a struct
    ``<value, error>`` with the error text of each undecodable record).
    """
    spec = decode_spec(registry, format, subject, version, schema_id, message=message)
    return decode_column(data, spec, errors)


def decode_column(data: Any, spec: DecodeSpec, errors: OnError = "column") -> Any:
    """``from_registry`` for a resolved spec (the pipeline's path)."""
    from pyspark.sql import functions as sf
    from pyspark.sql.types import StringType, StructField, StructType

    if errors not in ("fail", "null", "column"):
        raise ConfigError(f"errors = {errors!r}: use fail, null or column")
    value_type = _spark_type(reader_type(spec))
    result = StructType([StructField("value", value_type), StructField("error", StringType())])

    def decode(column: pa.Array) -> pa.Array:
        out = decode_array(spec, column)
        if errors == "fail":
            bad = [e for e in out.field("error").to_pylist() if e is not None]
            if bad:
                raise RegistryError(f"undecodable record: {bad[0]} ({len(bad)} in this batch)")
        return out

    require_arrow_udf(f"decoding {spec.format} from a Schema Registry")
    udf = sf.arrow_udf(decode, result)  # type: ignore[attr-defined]
    column = udf(sf.col(data) if isinstance(data, str) else data)
    return column if errors == "column" else column.getField("value")


def encode_spec(
    registry: RegistryConfig | str | Mapping[str, Any],
    fmt: str,
    subject: str,
    schema: Any = None,
    *,
    auto_register: bool = True,
    use_latest_version: bool = False,
    record_name: str = "topLevelRecord",
    namespace: str = "",
    what: str = "value",
    dry_run: bool = False,
) -> EncodeSpec:
    """The writer side, resolved now (driver): the schema and the id every record will carry.

    ``use_latest_version``: write with the subject's latest schema (``schema``, if given, must have only
    columns that schema has). Otherwise the schema is derived from ``schema`` (a Spark type or DDL) or taken
    as given (Avro / JSON Schema text), then registered (``auto_register``) or looked up under ``subject``.
    ``dry_run`` registers nothing: a schema not registered yet gets the id -1 (for plans, never written).
    """
    cfg, fmt_ = _registry(registry), _format(fmt)
    if use_latest_version:
        writer = latest_or_pinned(cfg, fmt_, subject)
        spec = EncodeSpec(cfg, fmt_, writer, what)
        _check_fits(_arrow_type(schema) if schema is not None else None, writer_type(spec), subject)
        return spec
    if schema is None:
        raise ConfigError("to_registry needs schema= (the column's Spark type) unless use_latest_version")
    wire = wire_format(fmt_)
    if isinstance(schema, str) and schema.lstrip()[:1] in ("{", "[", '"') and wire.text_is_json:
        text = schema
        json.loads(text)
    else:
        text = wire.derive(_arrow_type(schema), record_name, namespace)
    try:
        registered = register_or_lookup(cfg, fmt_, subject, text, auto_register and not dry_run)
    except RegistryError as e:
        if not (dry_run and auto_register and e.code in (40401, 40403)):
            raise
        registered = RegisteredSchema(-1, fmt_, text, subject=subject)
    spec = EncodeSpec(cfg, fmt_, registered, what)
    writer_type(spec)
    return spec


def _check_fits(given: Any, writer: pa.DataType, subject: str) -> None:
    """Columns the subject's latest schema lacks would be dropped silently: refuse them, naming them."""
    if given is None or not pa.types.is_struct(given) or not pa.types.is_struct(writer):
        return
    known = {f.name for f in writer}
    extra = [f.name for f in given if f.name not in known]
    if extra:
        raise ConfigError(
            f"use_latest_version: the latest schema of subject {subject!r} has no field "
            f"{', '.join(extra)} (it has {', '.join(sorted(known))}); rename or drop the column, or "
            "register a schema with it"
        )


def to_registry(
    data: Any,
    registry: RegistryConfig | str | Mapping[str, Any],
    format: str,
    *,
    subject: str,
    schema: Any = None,
    auto_register: bool = True,
    use_latest_version: bool = False,
    record_name: str = "topLevelRecord",
    namespace: str = "",
) -> Any:
    """Encode a column (a struct, or a value of the schema's primitive type) as Confluent-framed bytes."""
    spec = encode_spec(
        registry,
        format,
        subject,
        schema,
        auto_register=auto_register,
        use_latest_version=use_latest_version,
        record_name=record_name,
        namespace=namespace,
    )
    return encode_column(data, spec)


def encode_column(data: Any, spec: EncodeSpec) -> Any:
    """``to_registry`` for a resolved spec (the pipeline's path)."""
    from pyspark.sql import functions as sf

    def encode(column: pa.Array) -> pa.Array:
        return encode_array(spec, column)

    require_arrow_udf("encoding for a Schema Registry")
    udf = sf.arrow_udf(encode, "binary")  # type: ignore[attr-defined]
    return udf(sf.col(data) if isinstance(data, str) else data)
