"""Schema Registry formats through real Spark and the broker: pipelines, the source, the sink, interop.

Records are written and read back with confluent-kafka's own serializers too, so the framing is Confluent's,
not only our own agreeing with itself. The registry is ``registry_url`` (the test server or a real one).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_pipeline_cli import example_for_run
from tests.support.kafka import Kafka

SPARKAFKA = [sys.executable, "-m", "sparkafka.cli"]
EXAMPLES = Path(__file__).parents[2] / "examples"

ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "currency", "type": "string"},
        {"name": "event_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
ORDER_V2 = {
    **ORDER_V1,
    "fields": [*ORDER_V1["fields"], {"name": "channel", "type": "string", "default": "web"}],
}
RATES = {"EUR": 1.0, "USD": 0.92, "GBP": 1.17}


def test_avro_example_reads_two_writer_versions_and_writes_avro_exactly_once(
    spark: Any,
    kafka: Kafka,
    bootstrap: str,
    registry_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from sparkafka.local.tansu_workarounds import exact_latest_producer_conf

    # The example's topics (so subjects), group and prefix, suffixed for this run: a real registry or broker
    # may hold earlier runs', and the sink refuses a new checkpoint on a prefix another query may still own.
    run = uuid.uuid4().hex[:6]
    example = example_for_run(EXAMPLES / "orders_avro.toml", tmp_path / "examples", run)
    source, output, dlq = f"orders-avro-{run}", f"orders-avro-eur-{run}", f"orders-avro-dlq-{run}"
    kafka.create_topics([source, output], 2)
    kafka.create_topics([dlq], 1)
    client = SchemaRegistryClient({"url": registry_url})
    ctx = SerializationContext(source, MessageField.VALUE)
    v1 = AvroSerializer(client, json.dumps(ORDER_V1))
    v2 = AvroSerializer(client, json.dumps(ORDER_V2))
    base = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
    expected: Counter[tuple[str, str, float, str]] = Counter()
    producer = Producer(exact_latest_producer_conf(kafka.conf))
    for i in range(120):
        order = {
            "order_id": f"{run}-{i}",
            "customer": f"c{i % 7}",
            "amount": -1.0 if i % 11 == 5 else 10.0 + i,
            "currency": ("EUR", "USD", "GBP")[i % 3],
            "event_time": base + dt.timedelta(seconds=i),
        }
        # The two writer versions interleave, so every batch mixes them.
        value = v2({**order, "channel": "app"}, ctx) if i % 2 else v1(order, ctx)
        producer.produce(source, value, key=order["customer"].encode(), partition=i % 2)
        if order["amount"] > 0:
            channel = "app" if i % 2 else "web"  # v1 records read with v2's default
            expected[
                (
                    order["order_id"],
                    order["customer"],
                    round(order["amount"] * RATES[order["currency"]], 2),
                    channel,
                )
            ] += 1
    junk = [b"not avro at all", b"\x00\x00\x01\x86\xa0\x02xx"]  # no magic byte; schema id 100000 unknown
    for value in junk:
        producer.produce(source, value, key=b"junk", partition=0)
    assert producer.flush(30) == 0

    env = {
        **os.environ,
        "BOOTSTRAP": bootstrap,
        "SPARKAFKA_STATE": str(tmp_path),
        "SCHEMA_REGISTRY_URL": registry_url,
        "COLUMNS": "160",
    }

    result = subprocess.run(  # as the README runs it
        [*SPARKAFKA, "run", str(example), "--available-now"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out_ctx = SerializationContext(output, MessageField.VALUE)
    reader = AvroDeserializer(client)  # confluent-kafka's own reader, with the schema our sink registered

    def written() -> Counter[tuple[str, str, float, str]]:
        got: Counter[tuple[str, str, float, str]] = Counter()
        for record in kafka.committed(output):
            row = reader(record.value, out_ctx)
            got[(row["order_id"], row["customer"], row["amount_eur"], row["channel"])] += 1
            assert record.key is not None
        return got

    assert written() == expected
    registered = client.get_latest_version(f"{output}-value")
    assert json.loads(registered.schema.schema_str)["name"] == "OrderEur"
    dead = kafka.committed(dlq)
    assert [r.key for r in dead] == [b"junk", b"junk"]
    assert sorted(r.value for r in dead) == sorted(junk)
    headers = [dict(r.headers or []) for r in dead]
    assert {h["sparkafka.error.class"] for h in headers} == {b"UndecodableAvro"}
    messages = b" | ".join(h["sparkafka.error.message"] for h in headers)
    assert b"no magic byte" in messages
    assert b"schema id 100000 is not in the registry" in messages

    # A rerun on the same checkpoint (the pipeline's query, here in the test's session) reads nothing new and
    # writes nothing twice.
    from sparkafka.pipeline.config import load_pipeline
    from sparkafka.pipeline.plan import build_query

    for name in ("BOOTSTRAP", "SPARKAFKA_STATE", "SCHEMA_REGISTRY_URL"):
        monkeypatch.setenv(name, env[name])
    rerun = build_query(spark, dataclasses.replace(load_pipeline(example), trigger=None))  # --available-now
    assert rerun.awaitTermination(300)
    assert rerun.exception() is None
    assert sum(p["numInputRows"] for p in rerun.recentProgress) == 0
    assert written() == expected
    assert len(kafka.committed(dlq)) == len(junk)


def _order_file() -> Any:
    """shop/order.proto: Ping first (so Order's message index is 1), Order with a nested Line, a map, an
    enum and a Timestamp. Built as a descriptor (no protoc here), registered as confluent-kafka does."""
    from google.protobuf import descriptor_pb2, timestamp_pb2
    from google.protobuf.descriptor_pool import DescriptorPool

    f = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3")
    fd.dependency.append("google/protobuf/timestamp.proto")
    fd.message_type.add(name="Ping").field.add(
        name="id", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL
    )
    order = fd.message_type.add(name="Order")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    line.field.add(name="qty", number=2, type=f.TYPE_INT32, label=f.LABEL_OPTIONAL)
    entry = order.nested_type.add(name="TagsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=f.TYPE_INT64, label=f.LABEL_OPTIONAL)
    status = order.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="PAID", number=1)
    order.field.add(name="id", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    order.field.add(
        name="lines", number=2, type=f.TYPE_MESSAGE, type_name=".shop.Order.Line", label=f.LABEL_REPEATED
    )
    order.field.add(
        name="tags", number=3, type=f.TYPE_MESSAGE, type_name=".shop.Order.TagsEntry", label=f.LABEL_REPEATED
    )
    order.field.add(
        name="status", number=4, type=f.TYPE_ENUM, type_name=".shop.Order.Status", label=f.LABEL_OPTIONAL
    )
    order.field.add(
        name="at",
        number=5,
        type=f.TYPE_MESSAGE,
        type_name=".google.protobuf.Timestamp",
        label=f.LABEL_OPTIONAL,
    )
    pool = DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(fd)
    return pool


def test_protobuf_nested_messages_and_message_indexes_through_the_source(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, registry_url: str, new_topic: Callable[..., str]
) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf.message_factory import GetMessageClass

    from sparkafka.local.tansu_workarounds import exact_latest_producer_conf
    from sparkafka.registry import from_registry

    pool = _order_file()
    order_cls = GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    line_cls = GetMessageClass(pool.FindMessageTypeByName("shop.Order.Line"))
    client = SchemaRegistryClient({"url": registry_url})
    orders, lines = new_topic(partitions=2), new_topic()
    conf = {"use.deprecated.format": False}
    write_order = ProtobufSerializer(order_cls, client, conf)
    write_line = ProtobufSerializer(line_cls, client, conf)
    producer = Producer(exact_latest_producer_conf(kafka_conf))
    at = dt.datetime(2026, 11, 23, 8, 30, tzinfo=dt.UTC)
    for i in range(6):
        msg = order_cls(id=f"o{i}", status=i % 2)
        msg.lines.add(sku="apple", qty=i)
        msg.lines.add(sku="pear", qty=2 * i)
        msg.tags["prio"] = i
        msg.at.FromDatetime(at.replace(tzinfo=None))
        data = write_order(msg, SerializationContext(orders, MessageField.VALUE))
        assert data[5:7] == b"\x02\x02"  # message indexes [1] (zig-zag): Order is the file's second message
        producer.produce(orders, data, partition=i % 2)
        producer.produce(
            lines, write_line(line_cls(sku=f"s{i}", qty=i), SerializationContext(lines, MessageField.VALUE))
        )
    assert producer.flush(30) == 0

    def read(topic: str, message: str) -> list[dict[str, Any]]:
        raw = (
            spark.read.format("sparkafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .load()
        )
        decoded = raw.select(
            from_registry("value", registry_url, "protobuf", subject=f"{topic}-value", message=message).alias(
                "v"
            )
        )
        return [r["v"].asDict(recursive=True) for r in decoded.collect()]

    got = sorted(read(orders, "Order"), key=lambda r: r["id"])
    assert [r["id"] for r in got] == [f"o{i}" for i in range(6)]
    assert got[3] == {
        "id": "o3",
        "lines": [{"sku": "apple", "qty": 3}, {"sku": "pear", "qty": 6}],
        "tags": {"prio": 3},
        "status": "PAID",
        "at": at.astimezone().replace(tzinfo=None),  # collect() gives local wall-clock time
    }
    assert sorted(r["sku"] for r in read(lines, "Order.Line")) == [f"s{i}" for i in range(6)]


def test_json_schema_records_decode_and_bad_ones_carry_their_error(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, registry_url: str, new_topic: Callable[..., str]
) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from sparkafka.local.tansu_workarounds import exact_latest_producer_conf
    from sparkafka.registry import from_registry
    from sparkafka.registry.wire import frame

    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Payment",
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "cents": {"type": "integer"},
            "card": {"type": "object", "properties": {"last4": {"type": "string"}}},
        },
        "required": ["id", "cents"],
    }
    topic = new_topic()
    client = SchemaRegistryClient({"url": registry_url})
    write = JSONSerializer(json.dumps(schema), client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer = Producer(exact_latest_producer_conf(kafka_conf))
    for i in range(4):
        producer.produce(topic, write({"id": f"p{i}", "cents": 100 * i, "card": {"last4": "4242"}}, ctx))
    schema_id = client.get_latest_version(f"{topic}-value").schema_id
    producer.produce(topic, frame(schema_id, b'{"id": "bad", "cents": "ten"}'))  # slipped past validation
    producer.produce(topic, frame(schema_id, b"{truncated"))
    assert producer.flush(30) == 0

    raw = (
        spark.read.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    rows = (
        raw.select(
            "offset",
            from_registry(
                "value", registry_url, "json_schema", subject=f"{topic}-value", errors="column"
            ).alias("d"),
        )
        .orderBy("offset")
        .collect()
    )
    values = [r["d"]["value"] and r["d"]["value"].asDict(recursive=True) for r in rows]
    errors = [r["d"]["error"] for r in rows]
    assert values[:4] == [{"id": f"p{i}", "cents": 100 * i, "card": {"last4": "4242"}} for i in range(4)]
    assert errors[:4] == [None] * 4
    assert values[4:] == [None, None]
    assert "cents: expected an integer" in errors[4]
    assert "JSONDecodeError" in errors[5]


ROUND_TRIP = """
checkpoint = "{checkpoint}"
trigger = "availableNow"

[schema_registry]
url = "{registry}"

[source]
decode = "json"
schema = "order_id STRING, customer STRING, amount DOUBLE, lines ARRAY<STRUCT<sku: STRING, qty: INT>>"
[source.options]
"kafka.bootstrap.servers" = "{bootstrap}"
subscribe = "{src}"
startingOffsets = "earliest"

[transform]
sql = "SELECT order_id, customer, amount, lines FROM source WHERE NOT _malformed"

[sink]
key = "customer"
encode = "{fmt}"
{key_encode}
record_name = "Order"
record_namespace = "shop"
[sink.options]
"kafka.bootstrap.servers" = "{bootstrap}"
topic = "{dst}"
deliveryGuarantee = "exactly_once"
transactionalIdPrefix = "{prefix}"
"""

READ_BACK = """
checkpoint = "{checkpoint}"
trigger = "availableNow"

[schema_registry]
url = "{registry}"

[source]
decode = "{fmt}"
{key_decode}
on_malformed = "fail"
[source.options]
"kafka.bootstrap.servers" = "{bootstrap}"
subscribe = "{dst}"
startingOffsets = "earliest"

[transform]
sql = "SELECT to_json(struct(_key AS customer, order_id, amount, lines)) AS value FROM source"

[sink]
[sink.options]
"kafka.bootstrap.servers" = "{bootstrap}"
topic = "{back}"
deliveryGuarantee = "exactly_once"
transactionalIdPrefix = "{prefix}-back"
"""


def _confluent_reader(fmt: str, registry_url: str, schema_id: int) -> Callable[[bytes, str], dict[str, Any]]:
    """confluent-kafka's own deserializer for what our sink wrote."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": registry_url})
    if fmt == "avro":
        from confluent_kafka.schema_registry.avro import AvroDeserializer

        avro_reader = AvroDeserializer(client)
        return lambda data, topic: avro_reader(data, SerializationContext(topic, MessageField.VALUE))
    if fmt == "json_schema":
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer

        schema = client.get_schema(schema_id)
        json_reader = JSONDeserializer(schema.schema_str, schema_registry_client=client)
        return lambda data, topic: json_reader(data, SerializationContext(topic, MessageField.VALUE))
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from google.protobuf import descriptor_pb2, json_format, timestamp_pb2
    from google.protobuf.descriptor_pool import DescriptorPool
    from google.protobuf.message_factory import GetMessageClass

    proto = descriptor_pb2.FileDescriptorProto()
    proto.ParseFromString(base64.b64decode(client.get_schema(schema_id, fmt="serialized").schema_str))
    pool = DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(proto)
    cls = GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    proto_reader = ProtobufDeserializer(cls, {"use.deprecated.format": False})

    def read(data: bytes, topic: str) -> dict[str, Any]:
        message = proto_reader(data, SerializationContext(topic, MessageField.VALUE))
        return json_format.MessageToDict(message, preserving_proto_field_name=True)

    return read


@pytest.mark.parametrize("fmt", ["avro", "protobuf", "json_schema"])
def test_sink_encodes_exactly_once_and_the_source_decodes_it_back(
    spark: Any,
    kafka: Kafka,
    bootstrap: str,
    registry_url: str,
    tmp_path: Path,
    fmt: str,
) -> None:
    from sparkafka.pipeline.config import load_pipeline
    from sparkafka.pipeline.plan import build_query
    from sparkafka.registry.wire import schema_id_of

    src, dst, back = kafka.topic(partitions=2), kafka.topic(partitions=2), kafka.topic()
    prefix = f"rt-{uuid.uuid4().hex[:6]}"
    keyed = (
        fmt == "avro"
    )  # the key as an Avro string too (a primitive schema; Protobuf encodes messages only)
    fields = {
        "registry": registry_url,
        "bootstrap": bootstrap,
        "src": src,
        "dst": dst,
        "back": back,
        "fmt": fmt,
        "prefix": prefix,
        "key_encode": 'key_encode = "avro"' if keyed else "",
        "key_decode": 'key_decode = "avro"' if keyed else "",
    }

    def order(i: int) -> dict[str, Any]:
        return {
            "order_id": f"o{i}",
            "customer": f"c{i % 3}",
            "amount": 1.5 * i,
            "lines": [{"sku": "s", "qty": i}],
        }

    def run(template: str, checkpoint: str) -> None:
        path = tmp_path / f"{checkpoint}.toml"
        path.write_text(template.format(checkpoint=tmp_path / checkpoint, **fields))
        query = build_query(spark, load_pipeline(path))
        assert query.awaitTermination(180)
        assert query.exception() is None

    kafka.produce(src, [json.dumps(order(i)) for i in range(10)], partitions=2)
    run(ROUND_TRIP, "write")
    kafka.produce(src, [json.dumps(order(i)) for i in range(10, 16)], partitions=2)
    run(ROUND_TRIP, "write")  # the same checkpoint: only the new orders, once

    written = kafka.committed(dst)
    assert len(written) == 16
    schema_id = schema_id_of(written[0].value)
    read = _confluent_reader(fmt, registry_url, schema_id)
    theirs = sorted((read(r.value, dst) for r in written), key=lambda o: int(o["order_id"][1:]))
    assert [o["order_id"] for o in theirs] == [f"o{i}" for i in range(16)]
    assert theirs[4]["lines"] == [{"sku": "s", "qty": 4}]
    if keyed:
        assert {r.key[5:] for r in written} == {b"\x04c0", b"\x04c1", b"\x04c2"}  # Avro strings, framed

    run(READ_BACK, "read")
    ours = [json.loads(r.value) for r in kafka.committed(back)]
    # The customer comes back from the key: an Avro string decoded, or the plain key as text.
    assert sorted(ours, key=lambda o: int(o["order_id"][1:])) == [order(i) for i in range(16)]
