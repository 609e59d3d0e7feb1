"""The README's Python examples run, as written, against the test broker, registry and SparkSession.

Only addresses, topic names and paths are substituted (the README's 127.0.0.1:9092 is the test broker,
its topic orders a fresh topic), so an example that stops working fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.kafka import Kafka

README = Path(__file__).parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_the_readme_has_the_examples_this_test_knows() -> None:
    assert len(BLOCKS) == 7, "a Python example was added to or removed from the README: update this test"


def test_every_readme_python_example_runs(
    spark: Any,
    kafka: Kafka,
    bootstrap: str,
    registry_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import os

    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    orders = kafka.topic(partitions=2)
    kafka.create_topics([f"{orders}-enriched"], 1)
    kafka.produce(orders, [json.dumps({"n": i}) for i in range(5)], partitions=2)
    schema = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
    AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(schema))(
        {"id": "a"}, SerializationContext(orders, MessageField.VALUE)
    )  # registers <orders>-value, which the registry example reads with
    monkeypatch.setenv("KAFKA_PASSWORD", "not-a-real-password")

    def substituted(block: str) -> str:
        code = block.replace("127.0.0.1:PORT", bootstrap).replace("127.0.0.1:9092", bootstrap)
        code = code.replace("http://127.0.0.1:8081", registry_url)
        code = code.replace("/data/ck/orders-enricher", str(tmp_path / "ck"))
        return re.sub(r'"orders(-[^"]*)?"', lambda m: f'"{orders}{m.group(1) or ""}"', code)

    stream = (
        spark.readStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", orders)
        .option("startingOffsets", "earliest")
        .load()
    )
    namespace: dict[str, Any] = {
        "spark": spark,
        "os": os,
        "df": stream.selectExpr("CAST(key AS STRING) AS customer", "CAST(value AS STRING) AS order_json"),
    }
    for block in BLOCKS:
        exec(compile(substituted(block), "README.md", "exec"), namespace)  # the README's own code
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "5"  # my_job.py counted the five records
    assert printed[1].startswith("127.0.0.1:")  # the embedded broker example printed its address
    started = spark.streams.active
    assert len(started) == 1  # the exactly-once example started its query
    for query in started:
        query.stop()
    assert namespace["out"].schema.simpleString() == "struct<value:binary>"
