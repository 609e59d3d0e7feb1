"""The registry formats without Spark: framing, decoding with resolution, per-record faults, setup errors."""

from __future__ import annotations

import ast
import functools
import inspect
import json
import socket
from collections.abc import Iterator

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkafka.errors import ConfigError, RegistryError
from sparkafka.registry import avro, codec, jsonschema, protobuf
from sparkafka.registry.client import FORMATS, parse_registry, register_or_lookup, subject_name
from sparkafka.registry.codec import decode_array, encode_array
from sparkafka.registry.formats import WIRE_FORMATS
from sparkafka.registry.spark import decode_spec, encode_spec
from sparkafka.registry.wire import (
    FrameError,
    frame,
    read_message_indexes,
    schema_id_of,
    write_message_indexes,
)
from sparkafka.registry.wireformat import Decode, Encode, Files, Reader, RecordUnreadableError
from tests.support.schema_registry import TestSchemaRegistry, avro_can_read

V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "currency", "type": "string", "default": "EUR"}]}
V3_NO_DEFAULT = {**V1, "fields": [*V1["fields"], {"name": "vat", "type": "double"}]}


@pytest.fixture
def registry() -> Iterator[TestSchemaRegistry]:
    with TestSchemaRegistry() as server:
        yield server


def _avro_bytes(schema: dict, schema_id: int, value: dict) -> bytes:
    return frame(schema_id, avro.encoder(avro.parse(json.dumps(schema)))(value))


@given(st.lists(st.integers(min_value=0, max_value=2**31 - 1), min_size=1, max_size=8))
def test_message_indexes_round_trip_and_match_confluents_encoding(indexes: list[int]) -> None:
    import io

    from confluent_kafka.schema_registry._sync.protobuf import ProtobufSerializer

    buf = io.BytesIO()
    ProtobufSerializer._encode_varints(buf, indexes)
    assert write_message_indexes(indexes) == buf.getvalue()
    data = frame(7, b"payload", write_message_indexes(indexes))
    assert schema_id_of(data) == 7
    assert read_message_indexes(data) == (indexes, len(data) - len(b"payload"))


def test_frames_without_magic_byte_or_too_short_are_refused_naming_why() -> None:
    with pytest.raises(FrameError, match="no magic byte: the first byte is 123"):
        schema_id_of(b"{not framed}")
    with pytest.raises(FrameError, match="too short"):
        schema_id_of(b"\x00\x00")


def test_records_of_two_writer_versions_resolve_to_the_latest_reader(registry: TestSchemaRegistry) -> None:
    cfg = parse_registry({"url": registry.url})
    id1 = register_or_lookup(cfg, "avro", "o-value", json.dumps(V1), True).schema_id
    id2 = register_or_lookup(cfg, "avro", "o-value", json.dumps(V2), True).schema_id
    mixed = [
        _avro_bytes(V1, id1, {"id": "a", "amount": 1.0}),
        _avro_bytes(V2, id2, {"id": "b", "amount": 2.0, "currency": "USD"}),
        None,
        _avro_bytes(V1, id1, {"id": "c", "amount": 3.0}),
    ]
    latest = decode_array(decode_spec(cfg, "avro", "o-value"), pa.array(mixed, pa.binary()))
    assert latest.field("value").to_pylist() == [
        {"id": "a", "amount": 1.0, "currency": "EUR"},  # the reader's default for a field v1 lacks
        {"id": "b", "amount": 2.0, "currency": "USD"},
        None,
        {"id": "c", "amount": 3.0, "currency": "EUR"},
    ]
    assert latest.field("error").to_pylist() == [None] * 4
    first = decode_array(decode_spec(cfg, "avro", "o-value", version=1), pa.array(mixed, pa.binary()))
    assert first.field("value").to_pylist()[1] == {"id": "b", "amount": 2.0}  # a removed field is skipped


def test_per_record_faults_come_back_as_errors_and_the_rest_decodes(registry: TestSchemaRegistry) -> None:
    cfg = parse_registry({"url": registry.url})
    id1 = register_or_lookup(cfg, "avro", "f-value", json.dumps(V1), True).schema_id
    good = _avro_bytes(V1, id1, {"id": "a", "amount": 1.0})
    records = [good, b"plain text", frame(99999, b"\x02a"), good[:7], good]
    out = decode_array(decode_spec(cfg, "avro", "f-value"), pa.array(records, pa.binary()))
    errors = out.field("error").to_pylist()
    assert (
        out.field("value").to_pylist()[0] == out.field("value").to_pylist()[4] == {"id": "a", "amount": 1.0}
    )
    assert errors[0] is None
    assert errors[4] is None
    assert "no magic byte" in errors[1]
    assert f"schema id 99999 is not in the registry at {registry.url}" in errors[2]
    assert f"undecodable with schema id {id1}" in errors[3]


def test_an_unknown_writer_id_is_asked_for_once_not_per_record(registry: TestSchemaRegistry) -> None:
    cfg = parse_registry({"url": registry.url})
    id1 = register_or_lookup(cfg, "avro", "u-value", json.dumps(V1), True).schema_id
    good = _avro_bytes(V1, id1, {"id": "a", "amount": 1.0})
    unknown = frame(88888, b"\x02a")
    spec = decode_spec(cfg, "avro", "u-value")
    for _ in range(2):  # two batches in one worker process
        out = decode_array(spec, pa.array([unknown, good, unknown, unknown], pa.binary()))
        errors = out.field("error").to_pylist()
        assert [e is None for e in errors] == [False, True, False, False]
        missing = f"schema id 88888 is not in the registry at {registry.url}"
        assert all(missing in errors[i] for i in (0, 2, 3))
    assert sum("/schemas/ids/88888" in r for r in registry.requests) == 1


def test_a_reader_that_cannot_read_a_writer_fails_naming_both(registry: TestSchemaRegistry) -> None:
    cfg = parse_registry({"url": registry.url})
    writer = register_or_lookup(cfg, "avro", "w-value", json.dumps(V1), True).schema_id
    reader = register_or_lookup(cfg, "avro", "r-value", json.dumps(V3_NO_DEFAULT), True).schema_id
    spec = decode_spec(cfg, "avro", schema_id=reader)
    with pytest.raises(
        RegistryError, match=rf"schema \(id {reader}\) cannot read records written with schema id"
    ):
        decode_array(spec, pa.array([_avro_bytes(V1, writer, {"id": "a", "amount": 1.0})], pa.binary()))


def test_registry_errors_name_the_registry_and_what_was_missing(registry: TestSchemaRegistry) -> None:
    with pytest.raises(RegistryError, match="no such subject") as missing:
        decode_spec(registry.url, "avro", "nobody-value")
    assert "nobody-value" in str(missing.value)
    with pytest.raises(RegistryError, match="no such schema id"):
        decode_spec(registry.url, "avro", schema_id=4242)
    cfg = parse_registry({"url": registry.url})
    register_or_lookup(cfg, "avro", "c-value", json.dumps(V1), True)
    with pytest.raises(RegistryError, match="incompatible"):
        register_or_lookup(cfg, "avro", "c-value", json.dumps(V3_NO_DEFAULT), True)
    with pytest.raises(RegistryError, match="auto_register is off"):
        register_or_lookup(cfg, "avro", "c-value", json.dumps(V2), False)
    with pytest.raises(RegistryError, match="holds a AVRO schema, not PROTOBUF"):
        decode_spec(cfg, "protobuf", "c-value")


def test_an_unreachable_registry_is_named_without_its_credentials() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    cfg = parse_registry({"url": f"http://user:pw@127.0.0.1:{port}", "timeout_s": 2})
    with pytest.raises(RegistryError, match="unreachable") as failed:
        decode_spec(cfg, "avro", "x-value")
    assert f"http://********@127.0.0.1:{port}" in str(failed.value)
    assert "pw" not in str(failed.value).replace("unreachable", "")


def test_basic_auth_secrets_never_show() -> None:
    with TestSchemaRegistry(users={"alice": "s3cret"}) as server:
        cfg = parse_registry({"url": server.url, "basic_auth_user_info": "alice:wrong"})
        with pytest.raises(RegistryError, match="basic_auth_user_info") as refused:
            decode_spec(cfg, "avro", "x-value")
        assert "wrong" not in str(refused.value)
        assert "wrong" not in repr(cfg)
        ok = parse_registry({"url": server.url, "basic_auth_user_info": "alice:s3cret"})
        register_or_lookup(ok, "avro", "x-value", json.dumps(V1), True)
        assert decode_spec(ok, "avro", "x-value").reader.subject == "x-value"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"url": "127.0.0.1:8081"}, "url = '127.0.0.1:8081': use the registry's base URL"),
        ({"url": "http://h", "password": "x"}, "schema_registry.password is not a known setting"),
        ({"url": "http://h", "basic_auth_user_info": "nocolon"}, "must be user:password"),
        ({"url": "http://h", "timeout_s": 0}, "timeout_s = 0"),
    ],
)
def test_registry_settings_are_checked_naming_the_setting(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_registry(options)


T = pa.struct(
    [
        pa.field("id", pa.string()),
        pa.field("n", pa.int64()),
        pa.field("small", pa.int32()),
        pa.field("x", pa.float64()),
        pa.field("ok", pa.bool_()),
        pa.field("blob", pa.binary()),
        pa.field("at", pa.timestamp("us", tz="UTC")),
        pa.field("sub", pa.struct([pa.field("y", pa.float64()), pa.field("tags", pa.list_(pa.string()))])),
        pa.field("m", pa.map_(pa.string(), pa.int64())),
    ]
)
ROW = {
    "id": "q",
    "n": 2**40,
    "small": -3,
    "x": 1.5,
    "ok": True,
    "blob": b"\x00\x01",
    "at": __import__("datetime").datetime(2026, 11, 23, 12, 0, 1, 5000, tzinfo=__import__("datetime").UTC),
    "sub": {"y": 2.0, "tags": ["a", "b"]},
    "m": [("k", 1)],
}


@pytest.mark.parametrize("fmt", ["avro", "protobuf", "json_schema"])
def test_a_schema_derived_from_a_spark_type_round_trips_values(
    registry: TestSchemaRegistry, fmt: str
) -> None:
    from pyspark.sql.pandas.types import from_arrow_type

    spec = encode_spec(registry.url, fmt, f"rt-{fmt}-value", from_arrow_type(T), record_name="Row")
    framed = encode_array(spec, pa.array([ROW, None], T))
    back = decode_array(decode_spec(registry.url, fmt, f"rt-{fmt}-value"), framed).to_pylist()
    assert back[1] == {"value": None, "error": None}
    got = back[0]["value"]
    expected = dict(ROW)
    if fmt == "json_schema":  # JSON has no bytes or timestamps: base64 and ISO 8601 text
        expected["blob"], expected["at"] = "AAE=", "2026-11-23T12:00:01.005000+00:00"
    assert got == expected


def test_spark_types_of_avro_schemas() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "opt", "type": ["null", "long"], "default": None},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {
                "name": "price",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            },
            {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
            {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "again", "type": ["null", "K"], "default": None},
        ],
    }
    t = avro.arrow_type(avro.parse(json.dumps(schema)))
    assert t == pa.struct(
        [
            pa.field("opt", pa.int64()),
            pa.field("day", pa.date32()),
            pa.field("ts", pa.timestamp("ms", tz="UTC")),
            pa.field("price", pa.decimal128(9, 2)),
            pa.field("kind", pa.string()),
            pa.field("uid", pa.string()),
            pa.field("again", pa.string()),
        ]
    )
    recursive = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(ConfigError, match="recursive"):
        avro.arrow_type(avro.parse(json.dumps(recursive)))
    with pytest.raises(ConfigError, match="only a type or a type with null"):
        avro.arrow_type(avro.parse(json.dumps(["string", "long"])))


def test_spark_types_of_json_schemas_and_per_record_mismatches() -> None:
    schema = {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "n": {"type": ["integer", "null"]},
            "items": {"type": "array", "items": {"$ref": "#/definitions/item"}},
            "attrs": {"type": "object", "additionalProperties": {"type": "number"}},
        },
        "definitions": {"item": {"type": "object", "properties": {"sku": {"type": "string"}}}},
    }
    t = jsonschema.arrow_type(schema)
    assert str(t) == (
        "struct<id: string, n: int64, items: list<item: struct<sku: string>>, attrs: map<string, double>>"
    )
    decode = jsonschema.decoder(t)
    assert decode(b'xxxxx{"id": "a", "n": 1, "extra": 1}', 5) == {
        "id": "a",
        "n": 1,
        "items": None,
        "attrs": None,
    }
    with pytest.raises(jsonschema.MismatchError, match="n: expected an integer"):
        decode(b'xxxxx{"id": "a", "n": "one"}', 5)


def test_protobuf_messages_by_index_path_and_name() -> None:
    import base64

    from google.protobuf import descriptor_pb2

    fd = descriptor_pb2.FileDescriptorProto(name="x.proto", package="shop", syntax="proto3")
    fd.message_type.add(name="Ping").field.add(name="id", number=1, type=9, label=1)
    order = fd.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=9, label=1)
    order.nested_type.add(name="Line").field.add(name="sku", number=1, type=9, label=1)
    text = base64.standard_b64encode(fd.SerializeToString()).decode()
    assert protobuf.descriptor([("x.proto", text)], [1, 0]).full_name == "shop.Order.Line"
    assert protobuf.descriptor([("x.proto", text)], "Order").full_name == "shop.Order"
    assert protobuf.descriptor([("x.proto", text)], None).full_name == "shop.Ping"
    line = protobuf.descriptor([("x.proto", text)], "shop.Order.Line")
    assert protobuf.index_path(line) == [1, 0]
    with pytest.raises(ConfigError, match=r"has no message 'Nope'; it has Ping, Order, Order\.Line"):
        protobuf.descriptor([("x.proto", text)], "Nope")


def test_subject_name_strategies() -> None:
    assert subject_name("topic", "orders", "shop.Order") == "orders-value"
    assert subject_name("topic", "orders", "shop.Order", "key") == "orders-key"
    assert subject_name("record", None, "shop.Order") == "shop.Order"
    assert subject_name("topic_record", "orders", "shop.Order") == "orders-shop.Order"


@pytest.mark.parametrize(
    ("reader", "writer", "why"),
    [
        (V2, V1, None),  # added with a default
        (V1, V2, None),  # removed
        (V3_NO_DEFAULT, V1, "vat: a field the writer lacks needs a default"),
        ({**V1, "fields": [{"name": "id", "type": "long"}]}, V1, "cannot be read as"),
        ({**V1, "fields": [{"name": "amount", "type": ["null", "double"]}]}, V1, None),
        ("double", "int", None),  # promotion
        ("int", "double", "cannot be read as"),
    ],
)
def test_the_test_registry_checks_avro_compatibility_by_resolution(
    reader: object, writer: object, why: str | None
) -> None:
    found = avro_can_read(reader, writer)
    assert (found is None) if why is None else (found is not None and why in found)


def test_use_latest_version_writes_with_the_registered_schema_and_its_id(
    registry: TestSchemaRegistry,
) -> None:
    cfg = parse_registry({"url": registry.url})
    subject = subject_name("record", None, "shop.Order")
    latest = register_or_lookup(cfg, "avro", subject, json.dumps(V2), True).schema_id
    spec = encode_spec(cfg, "avro", subject, use_latest_version=True)
    assert spec.writer.schema_id == latest
    framed = encode_array(spec, pa.array([{"id": "a", "amount": 1.0, "currency": "CHF"}]))
    assert schema_id_of(framed[0].as_py()) == latest
    back = decode_array(decode_spec(cfg, "avro", subject), framed).field("value").to_pylist()
    assert back == [{"id": "a", "amount": 1.0, "currency": "CHF"}]
    with pytest.raises(RegistryError, match="cannot encode a value with avro schema id"):
        encode_array(spec, pa.array([{"id": "a"}]))  # amount has no default in the schema
    with pytest.raises(ConfigError, match="needs schema="):
        encode_spec(cfg, "avro", subject)


def test_avro_references_to_other_subjects_resolve(registry: TestSchemaRegistry) -> None:
    from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient

    address = {
        "type": "record",
        "name": "Address",
        "namespace": "shop",
        "fields": [{"name": "city", "type": "string"}],
    }
    customer = {
        "type": "record",
        "name": "Customer",
        "namespace": "shop",
        "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "shop.Address"}],
    }
    client = SchemaRegistryClient({"url": registry.url})
    client.register_schema("address", Schema(json.dumps(address), "AVRO"))
    ref = SchemaReference("shop.Address", "address", 1)
    schema_id = client.register_schema("customer-value", Schema(json.dumps(customer), "AVRO", [ref]))
    spec = decode_spec(registry.url, "avro", "customer-value")
    import fastavro

    named: dict = {}
    fastavro.parse_schema(address, named_schemas=named)
    payload = avro.encoder(fastavro.parse_schema(customer, named_schemas=named))(
        {"name": "Ada", "home": {"city": "Oslo"}}
    )
    out = decode_array(spec, pa.array([frame(schema_id, payload)], pa.binary()))
    assert out.to_pylist() == [{"value": {"name": "Ada", "home": {"city": "Oslo"}}, "error": None}]


def test_a_timestamp_read_in_another_unit_fails_instead_of_scaling_by_1000(
    registry: TestSchemaRegistry,
) -> None:
    cfg = parse_registry({"url": registry.url})

    def schema(unit: str) -> dict:
        return {
            "type": "record",
            "name": "E",
            "fields": [{"name": "at", "type": {"type": "long", "logicalType": unit}}],
        }

    millis = register_or_lookup(
        cfg, "avro", "tm-value", json.dumps(schema("timestamp-millis")), True
    ).schema_id
    micros = register_or_lookup(
        cfg, "avro", "tu-value", json.dumps(schema("timestamp-micros")), True
    ).schema_id
    spec = decode_spec(cfg, "avro", schema_id=micros)
    record = frame(millis, avro.encoder(avro.parse(json.dumps(schema("timestamp-millis"))))({"at": 1000}))
    with pytest.raises(RegistryError, match="reads at as a timestamp in another unit"):
        decode_array(spec, pa.array([record], pa.binary()))


def _proto(fields: list[tuple[str, int, int]]) -> str:
    import base64

    from google.protobuf import descriptor_pb2

    fd = descriptor_pb2.FileDescriptorProto(name="e.proto", package="ev", syntax="proto3")
    message = fd.message_type.add(name="Event")
    for name, number, kind in fields:
        message.field.add(name=name, number=number, type=kind, label=1)
    return base64.standard_b64encode(fd.SerializeToString()).decode()


def test_protobuf_evolution_goes_by_field_number_and_uint64_keeps_its_bits(
    registry: TestSchemaRegistry,
) -> None:
    cfg = parse_registry({"url": registry.url})
    string, uint64 = 9, 4
    v1 = register_or_lookup(
        cfg, "protobuf", "ev-value", _proto([("id", 1, string), ("big", 2, uint64)]), True
    )
    v2 = register_or_lookup(
        cfg, "protobuf", "ev-value", _proto([("key", 1, string), ("big", 2, uint64)]), True
    )
    desc = protobuf.descriptor([("e.proto", v1.text)], None)
    payload = protobuf.encoder(desc)({"id": "a", "big": 2**64 - 1})
    record = frame(v1.schema_id, payload, write_message_indexes([0]))
    read_v2 = decode_array(decode_spec(cfg, "protobuf", "ev-value"), pa.array([record], pa.binary()))
    assert read_v2.to_pylist() == [{"value": {"key": "a", "big": -1}, "error": None}]  # renamed: same number
    assert v2.schema_id != v1.schema_id
    back = encode_array(
        encode_spec(cfg, "protobuf", "ev-value", use_latest_version=True), read_v2.field("value")
    )
    assert decode_array(decode_spec(cfg, "protobuf", "ev-value"), back).field("value").to_pylist() == [
        {"key": "a", "big": -1}
    ]


def test_use_latest_version_refuses_columns_the_schema_lacks_and_dry_runs_register_nothing(
    registry: TestSchemaRegistry,
) -> None:
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType

    cfg = parse_registry({"url": registry.url})
    register_or_lookup(cfg, "avro", "l-value", json.dumps(V1), True)
    wider = StructType(
        [
            StructField("id", StringType()),
            StructField("amount", DoubleType()),
            StructField("vat", DoubleType()),
        ]
    )
    with pytest.raises(ConfigError, match=r"subject 'l-value' has no field vat \(it has amount, id\)"):
        encode_spec(cfg, "avro", "l-value", wider, use_latest_version=True)
    planned = encode_spec(cfg, "avro", "new-value", wider, dry_run=True)
    assert planned.writer.schema_id == -1
    with pytest.raises(RegistryError, match="no such subject"):
        decode_spec(cfg, "avro", "new-value")


def _code_words(module: object) -> list[str]:
    """Every name, attribute, import and string constant in a module's code, docstrings left out."""
    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    words: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, ast.alias):
            words.append(node.name)
        elif isinstance(node, ast.ImportFrom):
            words.append(node.module or "")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words.append(node.value)
    return [w.lower() for w in words]


class _Reversed:
    """A toy wire format (the payload is the text reversed), standing in under an existing format's name."""

    name = "json_schema"
    message_indexes = False
    text_is_json = True

    def reader(self, files: Files, message: str | None) -> Reader:
        return Reader(json.loads(files[-1][1]), pa.string(), tuple(files))

    def decoder(self, reader: Reader, writer: Files | None, indexes: list[int]) -> Decode:
        if writer is not None and json.loads(writer[-1][1]) != reader.schema:
            raise RecordUnreadableError("another writer")
        return lambda data, start: data[start:].decode()[::-1]

    def encoder(self, writer: Files) -> tuple[Encode, list[int]]:
        return (lambda v: v[::-1].encode()), []

    def derive(self, t: pa.DataType, name: str, namespace: str) -> str:
        return json.dumps({"type": "string", "title": name})


def test_the_codec_asks_the_wire_format_for_everything_and_names_none(
    registry: TestSchemaRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert set(WIRE_FORMATS) == set(FORMATS)
    assert all(f.name == name for name, f in WIRE_FORMATS.items())
    code = _code_words(codec)
    assert [word for word in code for name in ("avro", "protobuf", "json") if name in word] == []

    monkeypatch.setitem(WIRE_FORMATS, "json_schema", _Reversed())
    for cached in (codec._reader, codec._decoder, codec._encoder):
        monkeypatch.setattr(codec, cached.__name__, functools.lru_cache(maxsize=64)(cached.__wrapped__))
    from pyspark.sql.types import StringType

    spec = encode_spec(registry.url, "json_schema", "toy-value", StringType(), record_name="Toy")
    framed = encode_array(spec, pa.array(["abc", None, "xy"]))
    assert framed.to_pylist()[0] == frame(spec.writer.schema_id, b"cba")
    cfg = parse_registry({"url": registry.url})
    other = frame(register_or_lookup(cfg, "json_schema", "o", '{"x": 1}', True).schema_id, b"q")
    reader = decode_spec(registry.url, "json_schema", "toy-value")
    read = decode_array(reader, pa.array([*framed.to_pylist(), other]))
    assert read.to_pylist() == [
        {"value": "abc", "error": None},
        {"value": None, "error": None},
        {"value": "xy", "error": None},
        {"value": None, "error": "json_schema value: another writer"},
    ]
