"""``on_malformed = "dead_letter"`` reads the source once, whatever the plan: counted rows, scans, offsets.

The plan unions the SQL's output and the dead letters, both from one ``readStream``; Spark used to scan the
source once per branch (2N input rows for N records, two fetches of each batch, the source twice in the
offset log). Each test counts what the query read (its progress' input rows against the records in the
batch's offset range), how many scans the executed plan ran, the sources in the offset log (and that
``sparkafka offsets show`` takes the checkpoint), and what landed in the sink's and the dead-letter topic.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.kafka import Kafka
from tests.support.wait import wait_until

SPARKAFKA = [sys.executable, "-m", "sparkafka.cli"]
N = 60
MALFORMED = [i for i in range(N) if i % 10 == 3]
BASE = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
RATES = {"EUR": 1.0, "USD": 0.5}

PIPELINE = """
name = "dead-letters-once"
checkpoint = "{checkpoint}"
trigger = "availableNow"

[source]
decode = "json"
schema = "order_id STRING, amount DOUBLE, currency STRING, event_time TIMESTAMP"
on_malformed = "dead_letter"
dead_letter_topic = "{dlq}"
{watermark}
[source.options]
"kafka.bootstrap.servers" = "{bootstrap}"
subscribe = "{src}"
startingOffsets = "earliest"

[[table]]
name = "rates"
path = "rates.csv"
{transform}
[sink]
key = "{key}"
value = "{value}"
[sink.options]
"kafka.bootstrap.servers" = "{bootstrap}"
topic = "{dst}"
deliveryGuarantee = "exactly_once"
transactionalIdPrefix = "{prefix}"
"""

# Plan shapes: no SQL; a filter and a join to a static table; a windowed aggregation keeping state across
# batches (foreachBatch could not keep it). Each: (watermark, transform, key, value).
SHAPES = {
    "no_sql": ("", "", "order_id", "order_id"),
    "join": (
        "",
        '[transform]\nsql = """\nSELECT o.order_id, round(o.amount * r.to_eur, 2) AS eur\n'
        'FROM source o JOIN rates r ON o.currency = r.currency\nWHERE o.amount > 0;  -- positive only\n"""\n',
        "order_id",
        "concat(order_id, '=', CAST(eur AS STRING))",
    ),
    "window": (
        'watermark = { column = "event_time", delay = "10 seconds" }',
        '[transform]\nsql = """\nSELECT currency, window.start AS minute, count(*) AS orders FROM source\n'
        'GROUP BY currency, window(event_time, \'1 minute\')\n"""\n',
        "currency",
        "concat_ws('|', currency, CAST(unix_seconds(minute) AS STRING), CAST(orders AS STRING))",
    ),
}


def order(i: int) -> dict[str, Any]:
    """Order ``i``: amounts -1 for every 10th from 7 (filtered by the join shape's SQL); the last one an
    hour later than the rest, so the window shape's watermark closes every window before it."""
    minute = 60 if i == N - 1 else i // 20
    return {
        "order_id": f"o{i}",
        "amount": -1.0 if i % 10 == 7 else 10.0 + i,
        "currency": ("EUR", "USD")[i % 2],
        "event_time": (BASE + dt.timedelta(minutes=minute, seconds=i % 20)).isoformat(),
    }


def values() -> list[str]:
    return ["{not json" if i in MALFORMED else json.dumps(order(i)) for i in range(N)]


def expected(shape: str) -> Counter[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record the SQL's output gets, as the sink writes it."""
    good = [order(i) for i in range(N) if i not in MALFORMED]
    if shape == "no_sql":
        return Counter((o["order_id"].encode(), o["order_id"].encode()) for o in good)
    if shape == "join":
        return Counter(
            (
                o["order_id"].encode(),
                f"{o['order_id']}={round(o['amount'] * RATES[o['currency']], 2)}".encode(),
            )
            for o in good
            if o["amount"] > 0
        )
    windows: Counter[tuple[str, int]] = Counter()
    for o in good[:-1]:  # the last order's window is still open: the watermark is 10 s behind it
        start = dt.datetime.fromisoformat(o["event_time"]).replace(second=0)
        windows[(o["currency"], int(start.timestamp()))] += 1
    return Counter((c.encode(), f"{c}|{m}|{n}".encode()) for (c, m), n in windows.items())


def write_pipeline(tmp_path: Path, shape: str, kafka: Kafka, bootstrap: str) -> tuple[Path, str, str, str]:
    """The pipeline file of ``shape`` over a new source topic holding ``values()``: (file, src, dst, dlq)."""
    src, dst, dlq = kafka.topic(partitions=2), kafka.topic(partitions=2), kafka.topic(partitions=1)
    kafka.produce(src, values(), partitions=2)
    (tmp_path / "rates.csv").write_text("currency,to_eur\n" + "".join(f"{c},{r}\n" for c, r in RATES.items()))
    watermark, transform, key, value = SHAPES[shape]
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        PIPELINE.format(
            checkpoint=tmp_path / "ck",
            dlq=dlq,
            watermark=watermark,
            bootstrap=bootstrap,
            src=src,
            transform=transform,
            key=key,
            value=value,
            dst=dst,
            prefix=f"dlo-{uuid.uuid4().hex[:6]}",
        )
    )
    return pipeline, src, dst, dlq


def run(spark: Any, pipeline: Path) -> Any:
    """The pipeline's query run to its end (availableNow); its progress and last plan stay readable."""
    from sparkafka.pipeline.config import load_pipeline
    from sparkafka.pipeline.plan import build_query

    query = build_query(spark, load_pipeline(pipeline))
    assert query.awaitTermination(240)
    assert query.exception() is None
    return query


def records_in_range(source: dict[str, Any]) -> int:
    """The records between a progress source's start and end offsets (start None: the log's start, 0)."""

    from sparkafka.ops.query_progress import offsets_of  # leaves out the topic ids kept beside the offsets

    def total(text: Any) -> int:
        return sum(int(o) for parts in offsets_of(text).values() for o in parts.values())

    return total(source["endOffset"]) - total(source["startOffset"])


def scans(spark: Any, query: Any, batch: int) -> int:
    """Source scans Spark ran for ``batch``: the ``MicroBatchScan`` nodes of its SQL execution's plan as
    Spark's UI store keeps it (AQE's final plan, where it has one). Each scan is one fetch of the batch."""
    store = spark._jsparkSession.sharedState().statusStore()
    tail = f"runId = {query.runId}\nbatch = {batch}"
    tree = ""

    def planned() -> bool:
        nonlocal tree
        # The UI's listener fills the store asynchronously. Only the newest executions are read: nothing
        # but this query ran in the session since its batch, and reading all of a long-lived session's
        # (up to 1,000, by index, through py4j) took seconds a poll.
        count = int(store.executionsCount())
        newest = store.executionsList(max(count - 100, 0), 100).iterator()
        executions = [newest.next() for _ in range(min(count, 100))]
        plans = [e.physicalPlanDescription() for e in executions if e.description().endswith(tail)]
        tree = plans[-1].split("\n\n", 1)[0] if plans else ""  # the node tree, before the nodes' details
        return bool(tree) and ("AdaptiveSparkPlan" not in tree or "== Final Plan ==" in tree)

    wait_until(planned, 60, f"batch {batch}'s plan in Spark's UI store", detail=lambda: tree)
    if "== Final Plan ==" in tree:
        tree = tree.split("== Final Plan ==", 1)[1].split("== Initial Plan ==", 1)[0]
    return len(re.findall(r"MicroBatchScan \(\d+\)", tree))


def offset_log_sources(checkpoint: Path, batch: int) -> list[str]:
    lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    return [line for line in lines[2:] if line.strip()]  # "v1", the batch's metadata, one line per source


def assert_read_once(spark: Any, query: Any, checkpoint: Path, records: int) -> None:
    """Each record read once: input rows = records, per batch = its offset range; one source, one scan."""
    from sparkafka.ops.group_offsets import read_checkpoint
    from sparkafka.ops.query_progress import MALFORMED_METRIC

    progress = [p for p in query.recentProgress if p["sources"]]
    assert sum(p["numInputRows"] for p in progress) == records
    for p in progress:
        assert len(p["sources"]) == 1
        assert p["numInputRows"] == p["sources"][0]["numInputRows"] == records_in_range(p["sources"][0])
        if p["numInputRows"]:
            assert scans(spark, query, int(p["batchId"])) == 1
    batches = sorted(int(f.name) for f in (checkpoint / "offsets").iterdir() if f.name.isdigit())
    assert batches
    assert all(len(offset_log_sources(checkpoint, b)) == 1 for b in batches)
    assert read_checkpoint(checkpoint).batch == batches[-1]  # what `sparkafka offsets show` reads
    counted = sum(
        int(p["observedMetrics"][MALFORMED_METRIC]["n"])
        for p in query.recentProgress
        if MALFORMED_METRIC in (p["observedMetrics"] or {})
    )
    assert counted == len(MALFORMED)


def assert_dead_letters(kafka: Kafka, dlq: str, src: str) -> None:
    """Every undecodable record once in ``dlq``: its key, value, and where it came from."""
    dead = sorted(kafka.committed(dlq), key=lambda r: int((r.key or b"k0")[1:]))
    assert [(r.key, r.value) for r in dead] == [(f"k{i}".encode(), b"{not json") for i in MALFORMED]
    for record, i in zip(dead, MALFORMED, strict=True):
        headers = dict(record.headers or [])
        assert headers["sparkafka.error.topic"] == src.encode()
        assert headers["sparkafka.error.partition"] == str(i % 2).encode()
        assert headers["sparkafka.error.offset"] == str(i // 2).encode()
        assert headers["sparkafka.error.class"] == b"UndecodableJson"
        assert headers["sparkafka.error.pipeline"] == b"dead-letters-once"


@pytest.mark.parametrize("shape", list(SHAPES))
def test_json_dead_letters_read_the_source_once(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path, shape: str
) -> None:
    pipeline, src, dst, dlq = write_pipeline(tmp_path, shape, kafka, bootstrap)
    query = run(spark, pipeline)
    assert_read_once(spark, query, tmp_path / "ck", N)
    assert Counter((r.key, r.value) for r in kafka.committed(dst)) == expected(shape)
    assert_dead_letters(kafka, dlq, src)


def test_offsets_show_takes_a_dead_letter_checkpoint(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    pipeline, src, _, _ = write_pipeline(tmp_path, "no_sql", kafka, bootstrap)
    run(spark, pipeline)
    shown = subprocess.run(
        [
            *SPARKAFKA,
            "offsets",
            "show",
            "--bootstrap-servers",
            bootstrap,
            "--checkpoint",
            str(tmp_path / "ck"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "checkpoint: last committed batch 0" in shown.stdout
    rows = [line.split() for line in shown.stdout.splitlines() if line.startswith(src)]
    assert [(r[1], r[2]) for r in rows] == [("0", str(N // 2)), ("1", str(N // 2))]


def test_avro_dead_letters_read_the_source_once(
    spark: Any, kafka: Kafka, bootstrap: str, registry_url: str, tmp_path: Path
) -> None:
    """The registry decoding (Arrow UDFs below the split) and encoding (above it), a join, exactly once."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from sparkafka.local.tansu_workarounds import exact_latest_producer_conf

    schema = {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "order_id", "type": "string"},
            {"name": "amount", "type": "double"},
            {"name": "currency", "type": "string"},
        ],
    }
    src, dst, dlq = kafka.topic(partitions=2), kafka.topic(partitions=2), kafka.topic(partitions=1)
    client = SchemaRegistryClient({"url": registry_url})
    serialize = AvroSerializer(client, json.dumps(schema))
    ctx = SerializationContext(src, MessageField.VALUE)
    producer = Producer(exact_latest_producer_conf(kafka.conf))
    junk = {3: b"not avro at all", 20: b"\x00\x00\x01\x86\xa0\x02xx"}  # no magic byte; unknown schema id
    total = 41
    for i in range(total):
        o = {"order_id": f"a{i}", "amount": 10.0 + i, "currency": ("EUR", "USD")[i % 2]}
        value = junk.get(i) or serialize(o, ctx)
        producer.produce(src, value, key=f"k{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    (tmp_path / "rates.csv").write_text("currency,to_eur\n" + "".join(f"{c},{r}\n" for c, r in RATES.items()))
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(f"""
name = "avro-dead-letters"
checkpoint = "{tmp_path / "ck"}"
trigger = "availableNow"
[schema_registry]
url = "{registry_url}"
[source]
decode = "avro"
on_malformed = "dead_letter"
dead_letter_topic = "{dlq}"
options = {{ "kafka.bootstrap.servers" = "{bootstrap}", subscribe = "{src}", startingOffsets = "earliest" }}
[[table]]
name = "rates"
path = "rates.csv"
[transform]
sql = "SELECT o.order_id, round(o.amount * r.to_eur, 2) AS eur FROM source o JOIN rates r USING (currency)"
[sink]
key = "order_id"
encode = "avro"
record_name = "OrderEur"
options = {{ "kafka.bootstrap.servers" = "{bootstrap}", topic = "{dst}", deliveryGuarantee = "exactly_once", \
transactionalIdPrefix = "dla-{uuid.uuid4().hex[:6]}" }}
""")
    query = run(spark, pipeline)
    progress = [p for p in query.recentProgress if p["sources"]]
    assert sum(p["numInputRows"] for p in progress) == total
    assert all(p["numInputRows"] == records_in_range(p["sources"][0]) for p in progress)
    assert scans(spark, query, 0) == 1
    assert all(len(offset_log_sources(tmp_path / "ck", int(p["batchId"]))) == 1 for p in progress)

    reader = AvroDeserializer(client)
    out_ctx = SerializationContext(dst, MessageField.VALUE)
    written = Counter((r.key, tuple(reader(r.value, out_ctx).values())) for r in kafka.committed(dst))
    assert written == Counter(
        (f"a{i}".encode(), (f"a{i}", round((10.0 + i) * RATES[("EUR", "USD")[i % 2]], 2)))
        for i in range(total)
        if i not in junk
    )
    dead = sorted(kafka.committed(dlq), key=lambda r: int((r.key or b"k0")[1:]))
    assert [(r.key, r.value) for r in dead] == [(f"k{i}".encode(), v) for i, v in sorted(junk.items())]
    assert {dict(r.headers or [])["sparkafka.error.class"] for r in dead} == {b"UndecodableAvro"}


def test_a_checkpoint_of_the_two_scan_plan_resumes_on_it(
    spark: Any,
    kafka: Kafka,
    bootstrap: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A checkpoint written by the earlier plan (the source twice in its offset log) cannot be resumed by
    a plan with one source: the pipeline keeps the earlier plan on it, warns, and loses or doubles nothing."""
    from sparkafka.pipeline import plan

    pipeline, src, dst, dlq = write_pipeline(tmp_path, "no_sql", kafka, bootstrap)
    with monkeypatch.context() as patched:  # the first run as earlier versions planned it
        patched.setattr(plan, "two_scan_checkpoint", lambda _checkpoint: True)
        query = run(spark, pipeline)
    assert scans(spark, query, 0) == 2
    assert sum(p["numInputRows"] for p in query.recentProgress) == 2 * N  # each record read twice
    assert len(offset_log_sources(tmp_path / "ck", 0)) == 2
    assert plan.two_scan_checkpoint(str(tmp_path / "ck"))

    more = [json.dumps(order(i)) for i in range(10)] + ["{not json either"]
    kafka.produce(src, more, partitions=2)
    with caplog.at_level(logging.WARNING, logger="sparkafka.pipeline.plan"):
        query = run(spark, pipeline)
    assert "lists its source twice" in caplog.text
    assert sum(p["numInputRows"] for p in query.recentProgress) == 2 * len(more)
    assert len(offset_log_sources(tmp_path / "ck", 1)) == 2
    assert Counter((r.key, r.value) for r in kafka.committed(dst)) == expected("no_sql") + Counter(
        (f"o{i}".encode(), f"o{i}".encode()) for i in range(10)
    )
    assert sorted(r.value for r in kafka.committed(dlq)) == sorted(
        [b"{not json"] * len(MALFORMED) + [b"{not json either"]
    )


def test_dead_letter_plan_refuses_exchange_reuse_off_and_describes_its_output(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sparkafka.errors import ConfigError
    from sparkafka.pipeline.config import load_pipeline
    from sparkafka.pipeline.plan import build_query, describe_plan

    pipeline, *_ = write_pipeline(tmp_path, "join", kafka, bootstrap)
    cfg = load_pipeline(pipeline)
    described = describe_plan(spark, cfg)
    assert (
        "output: struct<key:binary,value:binary,topic:string,timestamp:timestamp,"
        "headers:array<struct<key:string,value:binary>>>"
    ) in described
    spark.conf.set("spark.sql.exchange.reuse", "false")
    try:
        with pytest.raises(ConfigError, match=r"spark.sql.exchange.reuse = false .* remove the setting"):
            build_query(spark, cfg)
    finally:
        spark.conf.unset("spark.sql.exchange.reuse")
    assert not os.path.exists(tmp_path / "ck" / "offsets")  # refused before the query started
