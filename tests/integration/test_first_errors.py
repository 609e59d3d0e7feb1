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
import uuid
from pathlib import Path
from typing import Any

import pytest

from sparkafka.errors import ConfigError
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


@pytest.mark.lines
@pytest.mark.parametrize("stream", [False, True])
def test_a_bad_source_option_is_the_first_line(spark: Any, bootstrap: str, stream: bool) -> None:
    with pytest.raises(Exception) as raised:  # noqa: PT011 - PySpark's AnalysisException, checked below
        _read(spark, bootstrap, stream, subscribe="t", startingOffsets="nope")
    lines = _lines(raised.value)
    assert lines[0].startswith("[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: ")
    assert f"{SENTENCE}option startingOffsets='nope' is not allowed; use group, earliest, latest" in lines[0]
    assert len(lines) == 2, lines  # the second is Spark's " SQLSTATE: 38000" (11 lines before)
    assert "Traceback" not in str(raised.value)


@pytest.mark.lines
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
    stream = (
        spark.readStream.format("rate")
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
        .writeStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "t")
        .option("deliveryGuarantee", "nope")
        .option("checkpointLocation", str(tmp_path / "ck"))
    )
    with pytest.raises(ConfigError) as refused:  # by start() itself (the sink's checks at start)
        stream.start()
    assert str(refused.value).startswith("option deliveryGuarantee='nope' is not allowed")
    assert refused.traceback[-1].name == "start_"  # the user's start() line, then the sentence


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


MISSING = {
    "subscribe": (
        lambda t: {"subscribe": t},
        "Unable to retrieve any partitions for topic(s) {t} (subscribe={t})",
    ),
    "assign": (
        lambda t: {"assign": json.dumps({t: [0]})},
        "Unable to retrieve any partitions for topic(s) {t} (assign={t}-0)",
    ),
    "subscribePattern": (
        lambda t: {"subscribePattern": f"^{t}"},
        "Unable to retrieve any partitions with subscribePattern='^{t}': nothing matches",
    ),
}


@pytest.mark.lines
@pytest.mark.parametrize(
    ("stream", "how"),
    [(False, "subscribe"), (True, "subscribe"), (True, "assign"), (True, "subscribePattern")],
)
def test_a_topic_that_does_not_exist_is_the_first_line_at_load(
    spark: Any, bootstrap: str, stream: bool, how: str
) -> None:
    """Issue 50: a stream learnt it only after ``start()``, as a failure of about 95 lines with the
    sentence three times; now ``load()`` asks the brokers (``source.admin.check_source``)."""
    topic = f"missing-{uuid.uuid4().hex[:8]}"
    options, sentence = MISSING[how]
    with pytest.raises(Exception) as raised:  # noqa: PT011 - PySpark's AnalysisException, checked below
        _read(spark, bootstrap, stream, **options(topic))
    lines = _lines(raised.value)
    assert lines[0].startswith("[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: ")
    assert f"{SENTENCE}{sentence.format(t=topic)}" in lines[0]
    assert len(lines) == 2, lines


@pytest.mark.lines
def test_an_ending_map_that_leaves_a_partition_out_is_the_first_line_at_load(
    spark: Any, bootstrap: str, new_topic: Any
) -> None:
    topic = new_topic(partitions=2)
    with pytest.raises(Exception) as raised:  # noqa: PT011 - PySpark's AnalysisException
        _read(spark, bootstrap, subscribe=topic, endingOffsets=json.dumps({topic: {"0": 1}}))
    lines = _lines(raised.value)
    assert (
        f"{SENTENCE}option endingOffsets must name exactly the partitions the query reads, as in Spark: it "
        f"leaves out {topic}-1; give -1 (latest) for a partition to read to its end"
    ) in lines[0]
    assert len(lines) == 2, lines


def _drain(df: Any, out: Path, checkpoint: Path) -> None:
    """Run a streaming query into parquet at ``out`` until it has read all there is, then stop it."""
    writer = df.selectExpr("cast(value as string) as value").writeStream.format("parquet")
    query = writer.option("path", str(out)).option("checkpointLocation", str(checkpoint)).start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()


@pytest.mark.lines
def test_a_starting_map_is_checked_when_a_new_stream_starts_and_a_resumed_one_ignores_it(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path, require: Any
) -> None:
    """A stream's startingOffsets applies to a query without a checkpoint only (Spark's rule, and
    docs/reading.md's): ``load()``, which cannot see the checkpoint, lets the map through; a new query
    refuses a map that leaves out a partition when it starts, its sentence on the failure's first line, and
    Spark's report (``spark_report``; the exception itself without ``register``) without the Python
    traceback (the source runner's report, ``sentence_errors``: 13 lines, 23 with it); and a query resumed
    from its checkpoint with the map it was started with runs on after a partition was added."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewPartitions

    from sparkafka.client.core import admin_client

    require("create_partitions")
    topic = kafka.topic(partitions=1)
    kafka.produce(topic, ["a", "b"])
    start = json.dumps({topic: {"0": 0}})
    out, checkpoint = tmp_path / "out", tmp_path / "ck"
    _drain(_read(spark, bootstrap, True, subscribe=topic, startingOffsets=start), out, checkpoint)
    admin = admin_client(kafka.conf)  # the process's client, kept while its futures resolve
    for future in admin.create_partitions([NewPartitions(topic, 2)]).values():
        future.result(30)
    producer = Producer(kafka.conf)  # a new one: the tests' cached producer has not seen partition 1
    for partition, value in enumerate((b"c", b"d")):
        producer.produce(topic, value, partition=partition)
    assert producer.flush(30) == 0
    stale = _read(spark, bootstrap, True, subscribe=topic, startingOffsets=start)  # load() lets it through
    new = stale.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "new")).start()
    try:
        with pytest.raises(Exception) as raised:  # noqa: PT011 - StreamingQueryException
            new.awaitTermination(120)
    finally:
        new.stop()
    sentence = (
        f"{SENTENCE}option startingOffsets must name exactly the partitions the query reads, as in Spark: it "
        f"leaves out {topic}-1"
    )
    assert sentence in _lines(raised.value)[0]
    report = str(getattr(raised.value, "spark_report", raised.value))
    assert sentence in report.splitlines()[0], report
    assert "Traceback" not in report, report
    _drain(stale, out, checkpoint)  # resumed: the new partition starts at earliest
    assert sorted(r["value"] for r in spark.read.parquet(str(out)).collect()) == ["a", "b", "c", "d"]


WRONG_ADDRESS = """
import json, os, sys
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
    try:
        reader = reader.format("sparkafka").option("kafka.bootstrap.servers", sys.argv[1])
        reader.option("subscribe", "t").load()
        results[name] = {"error": None}
    except Exception as e:
        results[name] = {"error": str(e)}
spark.stop()
print("RESULT " + json.dumps(results), flush=True)
"""


def test_a_wrong_address_fails_load_at_the_first_contact_without_librdkafka_noise(tmp_path: Path) -> None:
    """load() fails at the first contact, bounded by 5 s (not at the planner, after metadataTimeoutMs' 30 s
    of retries: 35 s before). No clock is read here: the sentence is first_contact's, which names the bound
    it waited (its bound is unit-tested with a fake clock: test_first_contact_bound)."""
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
    noise = [line for line in done.stderr.splitlines() if "Connection refused" in line]
    assert len(noise) <= 3, noise  # 581 lines before


RATE_LIMITED = """
import logging, sys, time
from sparkafka.client.core import admin_client
from sparkafka.client.log import LIBRDKAFKA_LOG

class Offered(logging.Filter):  # ahead of the rate limit: counts what librdkafka logged, lets all through
    refused = 0
    def filter(self, record):
        Offered.refused += "Connection refused" in record.getMessage()
        return True

LIBRDKAFKA_LOG.filters.insert(0, Offered())
admin = admin_client({"bootstrap.servers": sys.argv[1], "reconnect.backoff.ms": "10"})
deadline = time.monotonic() + 60
while Offered.refused < 6 and time.monotonic() < deadline:  # twice the burst, as served (once a second)
    try:
        admin.list_topics(timeout=0.5)
    except Exception:
        pass
print("OFFERED", Offered.refused, flush=True)
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
    # librdkafka logged at least twice the burst (about 20 such lines a second, straight to stderr, without
    # the logger); the rate limit showed the burst, the last saying that the rest are held back.
    offered = int(done.stdout.split("OFFERED ")[1].split()[0])
    assert offered >= 6, done.stdout
    refused = [line for line in done.stderr.splitlines() if "Connection refused" in line]
    assert len(refused) == 3, done.stderr
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


def _run(path: Path, spark_home: Path | None = None) -> tuple[int, list[str]]:
    """``sparkafka run path``: its exit code and output lines. With ``spark_home``, a SPARK_HOME with no
    Spark in it: a run that starts Spark fails there instead, so an output without that failure shows
    that nothing started Spark (no clock needed)."""
    env = {**os.environ, "SPARK_HOME": str(spark_home)} if spark_home else None
    done = subprocess.run(
        [*SPARKAFKA, "run", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one stream, as a terminal shows it
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    return done.returncode, done.stdout.strip().splitlines()


def _pipeline(tmp_path: Path, name: str, **fields: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(PIPELINE.format(name=name, checkpoint=tmp_path / f"ck-{name}", **fields))
    return path


def test_a_bad_schema_type_is_named_before_spark_starts(kafka: Kafka, bootstrap: str, tmp_path: Path) -> None:
    src, dst = kafka.topic(), kafka.topic()
    fields = {"bootstrap": bootstrap, "src": src, "dst": dst, "prefix": f"p-{uuid.uuid4().hex[:6]}"}
    path = _pipeline(tmp_path, "bad", schema="id STRING, temp DUBBLE", **fields)
    no_spark = tmp_path / "no-spark"
    code, lines = _run(path, spark_home=no_spark)
    assert code == 2, lines
    # The one line, and no Spark started (before: 18 s, "Syntax error at or near 'STRING'", from Spark).
    assert lines == [
        f"sparkafka run: {path}: source.schema field temp: unknown type DUBBLE; did you mean DOUBLE?"
    ]
    # The control: the same pipeline with a good schema gets past the pre-flight, starts Spark, and says so.
    good = _pipeline(tmp_path, "good", schema="id STRING, temp DOUBLE", **fields)
    code, lines = _run(good, spark_home=no_spark)
    assert code != 0, lines
    assert str(no_spark) in "\n".join(lines), lines


def test_a_copied_pipeline_with_the_same_prefix_fails_preflight_in_one_line(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    from sparkafka.pipeline.config import load_pipeline
    from sparkafka.pipeline.plan import build_query
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
    owning = build_query(spark, load_pipeline(first))  # the prefix's owner: the first pipeline's query
    assert owning.awaitTermination(300)
    assert owning.exception() is None
    copy = _pipeline(tmp_path, "copy", **fields)
    code, lines = _run(copy, spark_home=tmp_path / "no-spark")  # refused before Spark (12 s before)
    assert code == 2, lines
    assert len(lines) == 1, lines  # 78 lines, mostly a Java stack, before
    owner = json.loads((tmp_path / "ck-first" / "metadata").read_text())["id"]
    assert lines[0].startswith(
        f"sparkafka run: {copy}: sink.options (checkpoint {tmp_path / 'ck-copy'} is new"
    )
    assert f"option transactionalIdPrefix='{prefix}' belongs to streaming query {owner}" in lines[0]
    assert "Use another transactionalIdPrefix" in lines[0]
    assert "takeOverTransactionalIdPrefix=true" in lines[0]
    assert not (tmp_path / "ck-copy").exists()
    preflight(load_pipeline(first))  # the owner's own pipeline passes its pre-flight
