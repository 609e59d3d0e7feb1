"""A new user's first hour, measured: each first error is one sentence, first, and fast.

From the API, Spark wraps a data source's failure as ``[PYTHON_DATA_SOURCE_ERROR] Failed to ...: <report>``
and a ``SQLSTATE`` line; sparkafka's errors are reported without the worker's traceback, so the sentence is
on the first line (before: 11 to 26 lines, the sentence second to last). From ``sparkafka run``, the
pre-flight answers a bad schema type and a copied pipeline's prefix in one line, before Spark starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from sparkafka.local.broker import free_port
from tests.support.kafka import Kafka

SPARKAFKA = [sys.executable, "-m", "sparkafka.cli"]
SENTENCE = "sparkafka.errors.ConfigError: "


def _lines(error: BaseException) -> list[str]:
    return str(error).splitlines()


def _read(spark: Any, bootstrap: str, stream: bool = False, **options: str) -> Any:
    reader = spark.readStream if stream else spark.read
    reader = reader.format("sparkafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.mark.parametrize("stream", [False, True])
def test_a_bad_source_option_is_the_first_line(spark: Any, bootstrap: str, stream: bool) -> None:
    with pytest.raises(Exception) as raised:  # noqa: PT011 - PySpark's AnalysisException, checked below
        _read(spark, bootstrap, stream, subscribe="t", startingOffsets="nope")
    lines = _lines(raised.value)
    assert lines[0].startswith("[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: ")
    assert f"{SENTENCE}option startingOffsets='nope' is not allowed; use group, earliest, latest" in lines[0]
    assert len(lines) == 2, lines  # the second is Spark's " SQLSTATE: 38000" (11 lines before)
    assert "Traceback" not in str(raised.value)


def test_a_bad_sink_option_is_the_first_line(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    writer = (
        spark.range(3)
        .selectExpr("CAST(id AS STRING) AS value")
        .write.mode("append")
        .format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "t")
        .option("deliveryGuarantee", "nope")
    )
    with pytest.raises(Exception) as raised:  # noqa: PT011 - PySpark's AnalysisException
        writer.save()
    lines = _lines(raised.value)
    assert f"{SENTENCE}option deliveryGuarantee='nope' is not allowed" in lines[0]
    assert len(lines) == 2, lines
    query = (
        spark.readStream.format("rate")
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
        .writeStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "t")
        .option("deliveryGuarantee", "nope")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        with pytest.raises(Exception) as raised:  # noqa: PT011 - StreamingQueryException
            query.awaitTermination(120)
    finally:
        query.stop()
    # Spark's StreamingQueryException adds the query and its plan below; the sentence is on line one.
    assert f"{SENTENCE}option deliveryGuarantee='nope' is not allowed" in _lines(raised.value)[0]
    assert "Traceback" not in str(raised.value)


def test_a_kafka_property_typo_gets_did_you_mean(spark: Any, bootstrap: str) -> None:
    with pytest.raises(Exception) as raised:  # noqa: PT011 - PySpark's AnalysisException
        _read(spark, bootstrap, subscribe="t", **{"kafka.fetch.max.byte": "1000"})
    lines = _lines(raised.value)
    assert lines[0].endswith(
        f"{SENTENCE}option kafka.fetch.max.byte is not a librdkafka setting: "
        "did you mean kafka.fetch.max.bytes?"
    )
    assert len(lines) == 2, lines  # 26 lines before, ending in cimpl.KafkaException


def test_a_kafka_setting_without_its_prefix_gets_the_prefixed_name(spark: Any, bootstrap: str) -> None:
    reader = spark.read.format("sparkafka").option("bootstrap.servers", bootstrap).option("subscribe", "t")
    with pytest.raises(Exception) as raised:  # noqa: PT011 - PySpark's AnalysisException
        reader.load()
    first = _lines(raised.value)[0]
    assert first.endswith("bootstrap.servers (did you mean kafka.bootstrap.servers?)")
    assert "Valid options" not in first


WRONG_ADDRESS = """
import json, os, sys, time
from pyspark.sql import SparkSession
import sparkafka

builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
for key in ("spark.driver.host", "spark.driver.bindAddress"):
    builder = builder.config(key, "127.0.0.1")
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
sparkafka.register(spark)
results = {}
for name, reader in (("batch", spark.read), ("stream", spark.readStream)):
    start = time.monotonic()
    try:
        reader = reader.format("sparkafka").option("kafka.bootstrap.servers", sys.argv[1])
        reader.option("subscribe", "t").load()
        results[name] = {"error": None}
    except Exception as e:
        results[name] = {"seconds": time.monotonic() - start, "error": str(e)}
spark.stop()
print("RESULT " + json.dumps(results), flush=True)
"""


def test_a_wrong_address_fails_load_in_seconds_without_librdkafka_noise(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    script = tmp_path / "wrong_address.py"
    script.write_text(WRONG_ADDRESS)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, str(script), address],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    result = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    for name, outcome in json.loads(result[len("RESULT ") :]).items():
        message = outcome["error"]
        assert message is not None, name
        first = message.splitlines()[0]
        assert (
            f"listing topics failed against bootstrap servers {address} (option kafka.bootstrap.servers): "
            in first
        )
        assert "no Kafka broker answered within 5 s; is it running, and is the address right?" in first
        assert len(message.splitlines()) == 2, message
        assert outcome["seconds"] < 15, outcome  # 5 s and the planner's start (35 s before)
    noise = [line for line in done.stderr.splitlines() if "Connection refused" in line]
    assert len(noise) <= 3, noise  # 581 lines before


RATE_LIMITED = """
import sys, time
from sparkafka.client.core import admin_client

admin = admin_client({"bootstrap.servers": sys.argv[1], "reconnect.backoff.ms": "10"})
deadline = time.monotonic() + 4
while time.monotonic() < deadline:
    try:
        admin.list_topics(timeout=0.5)
    except Exception:
        pass
time.sleep(1.5)  # the log lines are served once a second
"""


def test_librdkafka_lines_go_through_python_logging_rate_limited(tmp_path: Path) -> None:
    script = tmp_path / "rate_limited.py"
    script.write_text(RATE_LIMITED)
    done = subprocess.run(
        [sys.executable, str(script), f"127.0.0.1:{free_port()}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    refused = [line for line in done.stderr.splitlines() if "Connection refused" in line]
    # Without the logger, librdkafka writes about 20 such lines a second straight to stderr.
    assert 1 <= len(refused) <= 3, done.stderr
    assert refused[-1].endswith("(more like this are held back for 60 s)"), refused
    assert not any(line.startswith("%3|") for line in done.stderr.splitlines())  # librdkafka's own format


PIPELINE = """
name = "{name}"
checkpoint = "{checkpoint}"
trigger = "availableNow"
[source]
decode = "json"
schema = "{schema}"
options = {{ "kafka.bootstrap.servers" = "{bootstrap}", subscribe = "{src}", startingOffsets = "earliest" }}
[sink]
value = "to_json(struct(*))"
[sink.options]
"kafka.bootstrap.servers" = "{bootstrap}"
topic = "{dst}"
deliveryGuarantee = "exactly_once"
transactionalIdPrefix = "{prefix}"
"""


def _run(path: Path) -> tuple[int, list[str], float]:
    start = time.monotonic()
    done = subprocess.run(
        [*SPARKAFKA, "run", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one stream, as a terminal shows it
        text=True,
        timeout=300,
        check=False,
    )
    return done.returncode, done.stdout.strip().splitlines(), time.monotonic() - start


def _pipeline(tmp_path: Path, name: str, **fields: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(PIPELINE.format(name=name, checkpoint=tmp_path / f"ck-{name}", **fields))
    return path


def test_a_bad_schema_type_is_named_before_spark_starts(kafka: Kafka, bootstrap: str, tmp_path: Path) -> None:
    src, dst = kafka.topic(), kafka.topic()
    path = _pipeline(
        tmp_path, "bad", schema="id STRING, temp DUBBLE", bootstrap=bootstrap, src=src, dst=dst, prefix="p"
    )
    code, lines, seconds = _run(path)
    assert code == 2, lines
    assert lines == [
        f"sparkafka run: {path}: source.schema field temp: unknown type DUBBLE; did you mean DOUBLE?"
    ]
    assert seconds < 10  # no Spark (before: 18 s, "Syntax error at or near 'STRING'")


def test_a_copied_pipeline_with_the_same_prefix_fails_preflight_in_one_line(
    kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    from sparkafka.pipeline.config import load_pipeline
    from sparkafka.pipeline.preflight import preflight

    src, dst = kafka.topic(), kafka.topic()
    kafka.produce(src, [json.dumps({"id": f"o{i}", "temp": 1.5}) for i in range(5)])
    prefix = f"copied-{uuid.uuid4().hex[:6]}"
    fields = {
        "schema": "id STRING, temp DOUBLE",
        "bootstrap": bootstrap,
        "src": src,
        "dst": dst,
        "prefix": prefix,
    }
    first = _pipeline(tmp_path, "first", **fields)
    code, lines, _ = _run(first)
    assert code == 0, lines
    copy = _pipeline(tmp_path, "copy", **fields)
    code, lines, seconds = _run(copy)
    assert code == 2, lines
    assert len(lines) == 1, lines  # 78 lines, mostly a Java stack, before
    owner = json.loads((tmp_path / "ck-first" / "metadata").read_text())["id"]
    assert lines[0].startswith(
        f"sparkafka run: {copy}: sink.options (checkpoint {tmp_path / 'ck-copy'} is new"
    )
    assert f"option transactionalIdPrefix='{prefix}' belongs to streaming query {owner}" in lines[0]
    assert "Use another transactionalIdPrefix" in lines[0]
    assert "takeOverTransactionalIdPrefix=true" in lines[0]
    assert seconds < 10  # no Spark (12 s before)
    assert not (tmp_path / "ck-copy").exists()
    preflight(load_pipeline(first))  # the owner's own pipeline passes its pre-flight
