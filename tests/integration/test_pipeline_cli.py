"""``sparkafka run``: a pipeline file end to end on the real broker, Ctrl-C, rerun, bad files."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tomllib
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from sparkafka.local.procs import GroupProcess
from tests.support.kafka import Kafka
from tests.support.wait import wait_until

SPARKAFKA = [sys.executable, "-m", "sparkafka.cli"]

PIPELINE = """
name = "test-pipeline"
checkpoint = "ck"
trigger = "1 second"

[spark.config]
"spark.sql.shuffle.partitions" = "7"

[source]
decode = "json"
schema = "order_id STRING, amount DOUBLE"
[source.options]
"kafka.bootstrap.servers" = "${{BOOTSTRAP}}"
subscribe = "{src}"
startingOffsets = "earliest"
"kafka.group.id" = "{group}"
"kafka.sasl.password" = "hunter2"

[transform]
sql = "SELECT order_id, amount FROM source WHERE NOT _malformed AND amount > 0"

[sink]
key = "order_id"
value = "order_id"
[sink.options]
"kafka.bootstrap.servers" = "${{BOOTSTRAP}}"
topic = "{dst}"
deliveryGuarantee = "exactly_once"
transactionalIdPrefix = "{prefix}"
"kafka.sasl.password" = "hunter2"
"""


def orders(start: int, count: int) -> list[str]:
    out = []
    for i in range(start, start + count):
        if i % 10 == 3:
            out.append("{not json")  # malformed: dropped
        elif i % 10 == 7:
            out.append(json.dumps({"order_id": f"o{i}", "amount": -1.0}))  # filtered out
        else:
            out.append(json.dumps({"order_id": f"o{i}", "amount": 10.0 + i}))
    return out


def valid(start: int, count: int) -> Counter[bytes]:
    return Counter(f"o{i}".encode() for i in range(start, start + count) if i % 10 not in (3, 7))


def start(pipeline: Path, *args: str, env: dict[str, str], output: int = subprocess.PIPE) -> GroupProcess:
    """``sparkafka run pipeline *args`` in its own process group, stdout and stderr to ``output``."""
    return GroupProcess(
        [*SPARKAFKA, "run", str(pipeline), *args],
        env={**os.environ, **env},
        stdout=output,
        stderr=subprocess.STDOUT,
    )


def run_until(
    proc: GroupProcess,
    done: Callable[[], bool],
    timeout_s: float = 240,
    detail: Callable[[], str] | None = None,
) -> str:
    """Wait for ``done``, then Ctrl-C the runner (SIGINT to its process group) and collect its output;
    ``detail`` says what was seen when it times out."""
    with proc:
        wait_until(done, timeout_s, "the pipeline's output", process=proc, interval_s=0.5, detail=detail)
        out = proc.interrupt(signal.SIGINT, timeout_s=120)
    assert proc.returncode == 0, out
    return out


@pytest.mark.lines
def test_pipeline_runs_stops_on_ctrl_c_and_resumes_exactly_once(
    kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    src, dst = kafka.topic(partitions=2), kafka.topic(partitions=2)
    prefix = f"pipe-{uuid.uuid4().hex[:6]}"
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(PIPELINE.format(src=src, dst=dst, group=f"g-{prefix}", prefix=prefix))
    log_json = tmp_path / "batches.jsonl"
    kafka.produce(src, orders(0, 100), partitions=2)

    dry = subprocess.run(
        [*SPARKAFKA, "run", str(pipeline), "--dry-run"],
        env={**os.environ, "BOOTSTRAP": bootstrap},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dry.returncode == 0, dry.stderr
    assert "hunter2" not in dry.stdout + dry.stderr
    assert "'kafka.sasl.password': '********'" in dry.stdout
    assert "view source: struct<order_id:string,amount:double,_malformed:boolean" in dry.stdout
    # [spark.config] wins over sparkafka's own defaults (which set 2 shuffle partitions).
    assert "'spark.sql.shuffle.partitions': '7'" in dry.stdout

    env = {"BOOTSTRAP": bootstrap, "COLUMNS": "160"}
    out = run_until(
        start(pipeline, "--log-json", str(log_json), env=env),
        lambda: kafka.committed_values(dst) == valid(0, 100),
    )
    assert "hunter2" not in out
    assert "summary: pipeline test-pipeline:" in out
    # Not a terminal: one plain line per batch, nothing cut to a width.
    assert any(line.startswith("batch ") and "group commits ok/failed" in line for line in out.splitlines())
    lines = [json.loads(line) for line in log_json.read_text().splitlines()]
    assert lines
    assert sum(line["input_rows"] for line in lines) == 100
    # Per-batch fields add up to the cumulative (_total) ones.
    assert lines[-1]["records_out_total"] == sum(valid(0, 100).values())
    assert sum(line["records_out"] for line in lines) == lines[-1]["records_out_total"]
    assert {
        "batch",
        "input_per_s",
        "processed_per_s",
        "duration_ms",
        "behind",
        "commits_succeeded_total",
    } <= set(lines[0])

    # Rerun on the same checkpoint: only the new orders are processed, nothing twice.
    kafka.produce(src, orders(100, 60), partitions=2)
    run_until(
        start(pipeline, "--log-json", str(log_json), env=env),
        lambda: kafka.committed_values(dst) == valid(0, 160),
    )
    assert kafka.committed_values(dst) == valid(0, 160)
    lines = [json.loads(line) for line in log_json.read_text().splitlines()]
    assert sum(line["input_rows"] for line in lines) == 160
    # The canary password appears nowhere the run wrote: checkpoint (offsets, commits, metadata), JSON lines.
    written = [f for f in tmp_path.rglob("*") if f.is_file() and f != pipeline]
    assert any(f.parent.name == "offsets" for f in written)
    from sparkafka.metrics_files import default_metrics_path

    written += [default_metrics_path("sink", prefix), default_metrics_path("source", f"g-{prefix}")]
    assert all(f.exists() for f in written[-2:])
    leaks = [f for f in written if b"hunter2" in f.read_bytes()]
    assert leaks == []
    # Nor in the commit intents (transactional ids, producer ids, epochs) the exactly-once sink wrote.
    intents = kafka.committed(f"_sparkafka-intents-{prefix}")
    assert intents
    assert not [r for r in intents if b"hunter2" in (r.value or b"") + (r.key or b"")]


def test_bad_pipeline_file_exits_2_naming_file_and_field(tmp_path: Path) -> None:
    pipeline = tmp_path / "bad.toml"
    pipeline.write_text('checkpoint = "ck"\ntrigger = "sometimes"\n[source]\n[sink]\n')
    result = subprocess.run(
        [*SPARKAFKA, "run", str(pipeline)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2
    assert f"{pipeline}: trigger = 'sometimes'" in result.stderr
    assert "Traceback" not in result.stderr


def kafka_only_examples() -> list[Path]:
    """The examples that need only Kafka; those with a [schema_registry] run in test_registry.py, which
    registers their schemas and produces their input first."""
    examples = sorted((Path(__file__).parents[2] / "examples").glob("*.toml"))
    return [e for e in examples if "[schema_registry]" not in e.read_text()]


# The examples' own names for what they share with other runs on a broker: topics, the group and the
# transactionalIdPrefix (a new checkpoint under an old prefix is refused while the old owner may be live).
_EXAMPLE_NAMES = re.compile(
    r'((?:\bsubscribe|\btopic|\bdead_letter_topic|\btransactionalIdPrefix|"kafka\.group\.id")\s*=\s*")([^"$]+)"'
)


def example_for_run(example: Path, directory: Path, run: str) -> Path:
    """``example`` copied into ``directory`` with each topic, group and prefix it names suffixed ``-run``.

    ``orders`` becomes ``orders-<run>``, in every example alike, so examples that share a topic still share
    it; the static tables it joins are copied beside it. A broker that is not empty (an external one, a
    rerun) then holds nothing under these names but what this run writes.
    """
    directory.mkdir(parents=True, exist_ok=True)
    text, renamed = _EXAMPLE_NAMES.subn(lambda m: f'{m.group(1)}{m.group(2)}-{run}"', example.read_text())
    config = tomllib.loads(text)
    source, sink = config["source"], config["sink"]
    named = [
        source["options"].get("subscribe"),
        source["options"].get("kafka.group.id"),
        source.get("dead_letter_topic"),
        sink["options"].get("topic"),
        sink["options"].get("transactionalIdPrefix"),
    ]
    names = [n for n in named if n is not None]
    # Each name renamed once, and nothing else (a name this pattern misses would fail here, not later).
    assert renamed == len(names), f"{example.name}: {names}"
    assert all(n.endswith(f"-{run}") for n in names), f"{example.name}: {names}"
    for table in config.get("table", []):
        shutil.copy(example.parent / table["path"], directory / table["path"])
    out = directory / example.name
    out.write_text(text)
    return out


def test_every_example_plans_against_spark(
    spark: object, kafka: Kafka, bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--dry-run``'s plan of each example. Its ``load()`` asks the brokers for the source's topics, as a
    run's does, so they are made first (under this run's names)."""
    from sparkafka.pipeline.config import load_pipeline
    from sparkafka.pipeline.plan import describe_plan

    monkeypatch.setenv("BOOTSTRAP", bootstrap)
    monkeypatch.setenv("SPARKAFKA_STATE", str(tmp_path))
    run = uuid.uuid4().hex[:8]
    examples = [example_for_run(e, tmp_path / "examples", run) for e in kafka_only_examples()]
    assert examples
    sources = {tomllib.loads(e.read_text())["source"]["options"]["subscribe"] for e in examples}
    kafka.create_topics(sorted(sources), 1)
    for example in examples:
        plan = describe_plan(spark, load_pipeline(example))
        assert "output: struct<key:string,value:string>" in plan, plan


def test_every_example_runs_to_completion_on_the_broker(kafka: Kafka, bootstrap: str, tmp_path: Path) -> None:
    from sparkafka.local.demo import FLUSH_CUSTOMER, Order, make_orders
    from sparkafka.local.tansu_workarounds import exact_latest_producer_conf

    # The examples' topics, groups and prefixes, suffixed for this run: the broker may hold earlier runs'.
    run = uuid.uuid4().hex[:8]
    source, enriched_topic, revenue_topic = f"orders-{run}", f"orders-eur-{run}", f"revenue-{run}"
    kafka.create_topics([source, enriched_topic, revenue_topic], 2)
    orders = make_orders(300, 2, seed=11)
    orders.append(Order(300, FLUSH_CUSTOMER, 1.0, "EUR", orders[-1].event_time_ms + 5 * 60_000))
    from confluent_kafka import Producer

    producer = Producer(exact_latest_producer_conf(kafka.conf))
    for o in orders:
        producer.produce(source, o.value(), key=o.key())
    assert producer.flush(30) == 0

    scratch = tmp_path / "tmp"  # the runs' temp dirs: each run's Spark scratch is made, and removed, there
    scratch.mkdir()
    env = {**os.environ, "BOOTSTRAP": bootstrap, "SPARKAFKA_STATE": str(tmp_path), "COLUMNS": "160"}
    env["TMPDIR"] = str(scratch)
    examples = [example_for_run(e, tmp_path / "examples", run) for e in kafka_only_examples()]
    reported: dict[str, int] = {}
    for example in examples:
        result = subprocess.run(
            [*SPARKAFKA, "run", str(example), "--available-now", "--metrics-port", "0"],  # any free port
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, f"{example.name}: {result.stdout}{result.stderr}"
        summary = [line for line in result.stdout.splitlines() if line.startswith("summary: ")]
        match = re.search(r"records out ([\d,]+)", summary[-1])
        assert match, summary
        reported[example.stem] = int(match.group(1).replace(",", ""))
        assert list(scratch.glob("sparkafka-spark-*")) == []  # the run's own scratch left with it
    enriched = [r.value for r in kafka.committed(enriched_topic)]
    assert len(enriched) == sum(not o.malformed for o in orders)
    revenue = [json.loads(r.value or b"") for r in kafka.committed(revenue_topic)]
    assert sum(row["orders"] for row in revenue if row["customer"] != FLUSH_CUSTOMER) == sum(
        not o.malformed and o.customer != FLUSH_CUSTOMER for o in orders
    )
    # The summaries add up to what the topics got, windows closed by a batch that read nothing included.
    assert reported == {"orders_enrich": len(enriched), "revenue_per_minute": len(revenue)}


MALFORMED_PIPELINE = """
checkpoint = "{checkpoint}"
trigger = "availableNow"

[source]
decode = "json"
schema = "order_id STRING, amount DOUBLE"
on_malformed = "{policy}"
{dead_letter}
[source.options]
"kafka.bootstrap.servers" = "{bootstrap}"
subscribe = "{src}"
startingOffsets = "earliest"

[sink]
key = "order_id"
value = "order_id"
[sink.options]
"kafka.bootstrap.servers" = "{bootstrap}"
topic = "{dst}"
deliveryGuarantee = "exactly_once"
transactionalIdPrefix = "{prefix}"
"""


@pytest.mark.parametrize("policy", ["skip", "dead_letter", "fail"])
def test_undecodable_values_are_skipped_dead_lettered_or_fail_the_batch_counted(
    spark: object,
    kafka: Kafka,
    bootstrap: str,
    tmp_path: Path,
    policy: str,
) -> None:
    from sparkafka.ops.query_progress import MALFORMED_METRIC
    from sparkafka.pipeline.config import load_pipeline
    from sparkafka.pipeline.plan import build_query

    src, dst, dlq = kafka.topic(partitions=2), kafka.topic(partitions=2), kafka.topic(partitions=1)
    values = orders(0, 50)  # every 10th from 3 is "{not json": 5 undecodable
    kafka.produce(src, values, partitions=2)
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        MALFORMED_PIPELINE.format(
            checkpoint=tmp_path / "ck",
            policy=policy,
            dead_letter=f'dead_letter_topic = "{dlq}"' if policy == "dead_letter" else "",
            bootstrap=bootstrap,
            src=src,
            dst=dst,
            prefix=f"m-{uuid.uuid4().hex[:6]}",
        )
    )
    query = build_query(spark, load_pipeline(pipeline))
    if policy == "fail":
        from pyspark.errors import StreamingQueryException

        with pytest.raises(StreamingQueryException) as failed:
            query.awaitTermination(120)
        error = str(failed.value)
        assert "undecodable record at " + src in error
        assert "source.on_malformed = fail" in error
        assert kafka.committed_values(dst) == Counter()  # the failed batch left nothing visible
        return
    assert query.awaitTermination(120)
    assert query.exception() is None
    # Filtered (amount <= 0) orders are not excluded here: no SQL, so every decodable order goes out.
    decodable = Counter(f"o{i}".encode() for i in range(50) if i % 10 != 3)
    assert kafka.committed_values(dst) == decodable
    counted = sum(
        int(p["observedMetrics"][MALFORMED_METRIC]["n"])
        for p in query.recentProgress
        if MALFORMED_METRIC in (p["observedMetrics"] or {})
    )
    assert counted == 5
    if policy == "dead_letter":
        dead = kafka.committed(dlq)
        assert sorted(r.value for r in dead) == [b"{not json"] * 5
        assert {r.key for r in dead} == {f"k{i}".encode() for i in range(50) if i % 10 == 3}


@pytest.mark.parametrize("fault", ["address", "topic", "table", "sql"])
def test_run_fails_fast_with_its_own_sentence_last(
    kafka: Kafka, bootstrap: str, tmp_path: Path, fault: str
) -> None:
    from sparkafka.local.broker import free_port

    src, dst = kafka.topic(partitions=1), kafka.topic(partitions=1)
    prefix = f"fail-{uuid.uuid4().hex[:6]}"
    text = PIPELINE.format(src=src, dst=dst, group=f"g-{prefix}", prefix=prefix)
    address = bootstrap
    expected = {
        "address": "no Kafka broker answered",
        "topic": "source.options subscribe=",
        "table": "table[0].path",
        "sql": "transform.sql: ",
    }[fault]
    if fault == "address":
        address = f"127.0.0.1:{free_port()}"  # nothing listens there
    elif fault == "topic":
        text = text.replace(f'subscribe = "{src}"', f'subscribe = "no-such-topic-{prefix}"')
    elif fault == "table":
        text += '\n[[table]]\nname = "rates"\npath = "missing.csv"\n'
    else:
        text = text.replace("FROM source WHERE", "FROM source WHER")
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(text)
    result = subprocess.run(
        [*SPARKAFKA, "run", str(pipeline)],
        env={**os.environ, "BOOTSTRAP": address},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one stream, in the order a terminal shows it
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 2, result.stdout
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("sparkafka run: "), last
    assert expected in last
    assert "Traceback" not in result.stdout
    assert "Connection refused" not in result.stdout  # librdkafka's noise: the sentence replaces it


def test_dead_letters_carry_their_origin_and_survive_exactly_once_recovery(
    spark: object, kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    """The driver is killed after the batch's commit intent (dead letters in its transactions); the rerun
    (the pipeline's query in the test's SparkSession, as a new driver) finishes that commit: every dead
    letter once, with the original key, value, timestamp and headers and where it came from."""
    import sparkafka
    from sparkafka.pipeline.config import load_pipeline
    from sparkafka.pipeline.plan import DEAD_LETTER_ERROR_CLASSES, build_query

    src, dst, dlq = kafka.topic(partitions=2), kafka.topic(partitions=2), kafka.topic(partitions=1)
    stamp = 1_700_000_000_000
    kafka.produce(src, orders(0, 40), partitions=2, headers=[("trace", b"abc")], timestamp=stamp)
    prefix = f"dl-{uuid.uuid4().hex[:6]}"
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        'name = "dead-letters"\n'
        + MALFORMED_PIPELINE.format(
            checkpoint=tmp_path / "ck",
            policy="dead_letter",
            dead_letter=f'dead_letter_topic = "{dlq}"',
            bootstrap=bootstrap,
            src=src,
            dst=dst,
            prefix=prefix,
        )
    )
    marker = tmp_path / "fault.marker"
    env = {"SPARKAFKA_TEST_FAULT": "after_intent:pause", "SPARKAFKA_TEST_FAULT_MARKER": str(marker)}
    with start(pipeline, env=env, output=subprocess.DEVNULL) as killed:  # SIGKILLed on the way out
        wait_until(marker.exists, 240, "the commit's fault point", process=killed)
    # Decided, not committed: neither the output nor a dead letter is visible yet.
    assert set(kafka.pending_transactions(prefix).values()) == {"Ongoing"}  # undecided: no markers coming
    assert kafka.visible_now(dst) == kafka.visible_now(dlq) == Counter()
    rerun = build_query(spark, load_pipeline(pipeline))
    assert rerun.awaitTermination(300)
    assert rerun.exception() is None
    # The killed commit (the one batch, 40 records: 36 orders and 4 dead letters) was finished from its
    # intent, and Spark's replay of it was aborted, not written again.
    counters = sparkafka.sink_metrics(prefix)
    assert (counters["recovered"], counters["replays"], counters["records"]) == (1, 1, 40)

    assert kafka.committed_values(dst) == Counter(f"o{i}".encode() for i in range(40) if i % 10 != 3)
    dead = sorted(kafka.committed(dlq), key=lambda r: r.key or b"")
    malformed = sorted((i for i in range(40) if i % 10 == 3), key=lambda i: f"k{i}")
    assert [r.key for r in dead] == [f"k{i}".encode() for i in malformed]  # each once
    for record, i in zip(dead, malformed, strict=True):
        assert record.value == b"{not json"
        assert record.timestamp == stamp
        headers = dict(record.headers)
        assert record.headers[0] == ("trace", b"abc")  # the original headers come first
        assert headers["sparkafka.error.topic"] == src.encode()
        assert headers["sparkafka.error.partition"] == str(i % 2).encode()
        assert headers["sparkafka.error.offset"] == str(i // 2).encode()  # one record per batch, round robin
        assert headers["sparkafka.error.class"] == DEAD_LETTER_ERROR_CLASSES["json"].encode()
        assert b"source.schema" in (headers["sparkafka.error.message"] or b"")
        assert headers["sparkafka.error.pipeline"] == b"dead-letters"


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``/metrics`` parsed by prometheus_client's own text parser: (name, sorted labels) -> value."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_endpoint_counts_what_the_run_did(kafka: Kafka, bootstrap: str, tmp_path: Path) -> None:
    from sparkafka.local.broker import free_port

    src, dst = kafka.topic(partitions=2), kafka.topic(partitions=2)
    prefix = f"prom-{uuid.uuid4().hex[:6]}"
    group = f"g-{prefix}"
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(PIPELINE.format(src=src, dst=dst, group=group, prefix=prefix))
    kafka.produce(src, orders(0, 60), partitions=2)
    port = free_port()
    proc = start(pipeline, "--metrics-port", str(port), env={"BOOTSTRAP": bootstrap})
    q = (("query", "test-pipeline"),)  # the pipeline's name as written
    group_ok = ("sparkafka_group_commits_total", (("group", group), *q, ("result", "ok")))
    written = sum(valid(0, 60).values())
    scraped: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}

    def caught_up() -> bool:
        nonlocal scraped
        try:
            scraped = scrape(port)
        except OSError:  # not listening yet
            return False
        behind = [v for (name, _), v in scraped.items() if name == "sparkafka_records_behind_latest"]
        return (
            scraped.get(("sparkafka_input_records_total", q)) == 60
            and scraped.get(("sparkafka_output_records_total", q)) == written
            and len(behind) == 2
            and not any(behind)
            # A batch's offsets go to the group when the next is planned, and are counted once the commit
            # is answered: a later progress than the last batch's (seen missing on a busy machine).
            and scraped.get(group_ok, 0) >= 1
        )

    out = run_until(proc, caught_up, detail=lambda: f"last scrape: {scraped}")
    assert "Prometheus metrics on http://127.0.0.1:" in out
    assert kafka.committed_values(dst) == valid(0, 60)  # what the counter says is what the topic has
    assert scraped[("sparkafka_batches_total", q)] >= 1
    assert scraped[("sparkafka_batch_duration_seconds_count", q)] == scraped[("sparkafka_batches_total", q)]
    assert scraped[("sparkafka_transactions_committed_total", q)] >= 1
    assert scraped[group_ok] >= 1


def test_a_metrics_port_in_use_fails_at_start_naming_it(kafka: Kafka, bootstrap: str, tmp_path: Path) -> None:
    import socket

    src, dst = kafka.topic(partitions=1), kafka.topic(partitions=1)
    prefix = f"port-{uuid.uuid4().hex[:6]}"
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(PIPELINE.format(src=src, dst=dst, group=f"g-{prefix}", prefix=prefix))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [*SPARKAFKA, "run", str(pipeline), "--metrics-port", str(port)],
            env={**os.environ, "BOOTSTRAP": bootstrap},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert result.returncode == 2, result.stdout + result.stderr
    last = (result.stdout + result.stderr).strip().splitlines()[-1]
    assert last.startswith(
        f"sparkafka run: {pipeline}: metrics.port: metrics port {port} on 127.0.0.1 cannot"
    )
    assert "pipeline test-pipeline started" not in result.stdout  # refused before Spark and the query
