"""A new user's first hour with the ``sparkafka`` command, against real brokers (and Spark where needed).

Each test is one finding of that hour: a read command that created a topic, a dry run that said something
else than the real run, a reset planned on wrong timestamp answers, spark-submit's noise, docs without a
way to create a topic or to try the Schema Registry example.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from sparkafka.client.core import admin_client, close_all
from sparkafka.local.cluster import spark_home
from sparkafka.local.kafka_broker import ApacheKafka
from sparkafka.local.procs import GroupProcess
from sparkafka.sink.intents import IntentLog, IntentRecord, intent_topic
from sparkafka.sink.txn_control import TxnHandle
from sparkafka.structs import KAFKA_INTERNAL_TOPICS
from tests.integration.test_pipeline_cli import example_for_run
from tests.support.kafka import Kafka
from tests.support.wait import wait_until

ROOT = Path(__file__).parents[2]
REGISTRY_PAGE = (ROOT / "docs" / "schema-registry.md").read_text()


def cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sparkafka.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=cwd,
        env=env,
    )


def all_topics(conf: dict[str, str]) -> set[str]:
    """Every topic (a Metadata request for all topics creates none)."""
    return set(admin_client(conf).list_topics(timeout=30).topics)


def settled_topics(conf: dict[str, str]) -> set[str]:
    """Every topic once each creation asked for before this call shows: a sentinel topic is created (the
    controller applies creations in the order asked) and awaited, so a topic any earlier request created
    is in the metadata by then. Evidence, where a sleep would be a guess."""
    from confluent_kafka.admin import NewTopic

    sentinel = f"sentinel-{uuid.uuid4().hex[:8]}"
    for future in admin_client(conf).create_topics([NewTopic(sentinel, 1, 1)]).values():
        future.result(30)
    seen: set[str] = set()

    def shown() -> bool:
        seen.clear()
        seen.update(all_topics(conf))
        return sentinel in seen

    wait_until(shown, 30, f"the sentinel topic {sentinel} in the metadata")
    return seen - {sentinel}


@pytest.fixture(scope="module")
def auto_create_conf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """An Apache Kafka with ``auto.create.topics.enable=true`` (Kafka's default; the test broker turns it
    off): there, a Metadata request naming a topic creates it."""
    config = {"auto.create.topics.enable": "true"}
    with ApacheKafka(data_dir=tmp_path_factory.mktemp("kafka-auto"), config=config) as kafka:
        yield {"bootstrap.servers": kafka.bootstrap_servers}
        close_all()  # no cached client is left to log this broker's absence


# -- 1. a read command creates nothing ---------------------------------------------------------------------


@pytest.mark.parametrize("broker", ["kafka_conf", "auto_create_conf"])
def test_txn_of_an_unknown_prefix_says_so_in_one_line_and_creates_nothing(
    broker: str, request: pytest.FixtureRequest
) -> None:
    conf: dict[str, str] = request.getfixturevalue(broker)
    servers = conf["bootstrap.servers"]
    prefix = f"nosuch-{uuid.uuid4().hex[:8]}"
    if broker == "auto_create_conf":  # the control: there, a Metadata request naming a topic creates it
        named = f"control-{uuid.uuid4().hex[:8]}"
        Producer({**conf, "allow.auto.create.topics": "true"}).list_topics(named, timeout=30)
        assert named in settled_topics(conf)
    for args in (
        ["list"],
        ["resolve", "--query", "q", "commit"],
        ["resolve", "--query", "q", "commit", "--yes"],
    ):
        result = cli("txn", args[0], "--bootstrap-servers", servers, "--prefix", prefix, *args[1:])
        assert result.returncode == 1, result
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith(f"sparkafka txn: no such prefix: {prefix!r} has no commit-intent log")
    described = cli("topics", "describe", f"nosuch-{prefix}", "--bootstrap-servers", servers)
    assert described.returncode == 1
    assert "does not exist" in described.stderr
    # Nothing named by the commands exists (other tests' topics may come and go: only ours are asked about).
    assert not {t for t in settled_topics(conf) if prefix in t}, intent_topic(prefix)


# -- 2. the dry run says what --yes does --------------------------------------------------------------------


def test_txn_resolve_without_yes_says_exactly_what_yes_does(
    kafka_conf: dict[str, str], bootstrap: str
) -> None:
    prefix = f"dry-{uuid.uuid4().hex[:8]}"
    log = IntentLog(kafka_conf, prefix)
    now = int(time.time() * 1000)
    log.append(IntentRecord("q-done", 3, "done", tids_in_use=2, at_ms=now))
    handles = (TxnHandle(f"{prefix}-0", 7001, 0, 10, 0), TxnHandle(f"{prefix}-1", 7002, 0, 20, 1))
    log.append(IntentRecord("q-pending", 5, "intent", handles=handles, tids_in_use=2, at_ms=now + 1))
    base = ["txn", "resolve", "--bootstrap-servers", bootstrap, "--prefix", prefix]

    def both(query: str, action: str) -> tuple[subprocess.CompletedProcess[str], ...]:
        return cli(*base, "--query", query, action), cli(*base, "--query", query, action, "--yes")

    # Nothing to do: the dry run and the real run refuse with the same line.
    refusals = {
        ("q-done", "commit"): "sparkafka txn: batch 3 of query q-done is done: nothing to resolve\n",
        ("made-up", "abort"): "sparkafka txn: no such query: prefix ",
    }
    for (query, action), words in refusals.items():
        dry, real = both(query, action)
        assert (dry.returncode, real.returncode) == (1, 1), (dry, real)
        assert dry.stderr == real.stderr, (dry.stderr, real.stderr)
        assert dry.stderr.startswith(words), dry.stderr
        assert "would" not in dry.stderr
    # Something to do: the dry run names the batch and its transactions (and does nothing).
    dry = cli(*base, "--query", "q-pending", "commit")
    assert dry.returncode == 2, dry
    assert dry.stderr.startswith(
        f"would commit batch 5 of query q-pending: EndTxn(commit) for its 2 transactions ({prefix}-0, "
        f"{prefix}-1; 30 records)"
    ), dry.stderr
    assert dry.stderr.rstrip().endswith("add --yes to do it")
    # For outcomes nothing can give (ids expired, markers gone), the operator's say: counted committed.
    dry = cli(*base, "--query", "q-pending", "mark-done")
    assert dry.returncode == 2, dry
    assert dry.stderr.startswith("would mark pending batch 5 of query q-pending: EndTxn(commit) for its 2")
    assert "neither can speak for counted committed" in dry.stderr
    listing = cli("txn", "list", "--bootstrap-servers", bootstrap, "--prefix", prefix)
    assert listing.returncode == 0, listing.stderr
    assert re.search(r"q-pending\s+5\s+pending", listing.stdout), listing.stdout


# -- 4. a reset by timestamp on a broker whose timestamp answers are wrong -----------------------------------


def test_offsets_reset_by_timestamp_is_refused_on_tansu_saying_why(tansu_conf: dict[str, str]) -> None:
    kafka = Kafka(tansu_conf)
    topic = kafka.topic(partitions=2)
    kafka.produce(topic, [f"r{i}" for i in range(3)], partitions=2, timestamp=1_000_000)
    kafka.produce(topic, [f"s{i}" for i in range(3)], partitions=2, timestamp=3_000_000)
    args = ["offsets", "reset", "--bootstrap-servers", tansu_conf["bootstrap.servers"], "--group", "g"]
    result = cli(*args, "--topic", topic, "--to", "timestamp:2000000")
    assert result.returncode == 1, result
    assert result.stdout == ""  # no table of wrong offsets
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(
        f"sparkafka offsets: --to timestamp:2000000: the broker at {tansu_conf['bootstrap.servers']} answers "
        "timestamp lookups wrong (`sparkafka doctor`'s offsets_for_times check: offset for timestamp"
    ), result.stderr
    earliest = cli(*args, "--topic", topic, "--to", "earliest")  # other targets are unaffected
    assert earliest.returncode == 0, earliest.stderr


def test_offsets_reset_by_timestamp_on_apache_kafka_proposes_the_right_offsets(
    kafka: Kafka, bootstrap: str
) -> None:
    topic = kafka.topic(partitions=2)
    kafka.produce(topic, [f"r{i}" for i in range(4)], partitions=2, timestamp=1_000_000)
    kafka.produce(topic, [f"s{i}" for i in range(4)], partitions=2, timestamp=3_000_000)
    args = ["offsets", "reset", "--bootstrap-servers", bootstrap, "--group", f"g-{topic}", "--topic", topic]
    result = cli(*args, "--to", "timestamp:2000000")
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith(topic)]
    assert rows == [[topic, "0", "-", "2"], [topic, "1", "-", "2"]]  # each partition's first 3_000_000 record
    assert not result.stdout.startswith("warning")


# -- 6. sparkafka topics ------------------------------------------------------------------------------------


def test_topics_create_list_describe_and_their_one_line_errors(
    kafka_conf: dict[str, str], bootstrap: str
) -> None:
    name = f"topics-{uuid.uuid4().hex[:8]}"
    servers = ["--bootstrap-servers", bootstrap]
    created = cli(
        "topics", "create", name, "--partitions", "3", "--config", "retention.ms=86400000", *servers
    )
    assert created.returncode == 0, created.stderr
    assert (
        created.stdout == f"created topic {name}: 3 partitions, replication factor 1; retention.ms=86400000\n"
    )
    IntentLog(
        kafka_conf, f"p-{name}"
    ).create()  # an internal topic: sparkafka's commit-intent log of a prefix

    listed = cli("topics", "list", *servers)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split()[1:] for line in listed.stdout.splitlines()[1:-1]}
    assert rows[name] == ["3", "1"]
    assert not any(t in KAFKA_INTERNAL_TOPICS or t.startswith("_sparkafka-") for t in rows)
    assert re.search(r"internal topics? hidden \(--all shows", listed.stdout.splitlines()[-1])
    everything = cli("topics", "list", "--all", *servers).stdout
    assert re.search(rf"^{intent_topic(f'p-{name}')}\s+1\s+1\s+\(internal\)$", everything, re.M), everything

    Kafka(kafka_conf).produce(name, ["a", "b", "c", "d"], partitions=3)
    described = cli("topics", "describe", name, *servers)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0] == f"topic {name}: 3 partitions, replication factor 1"
    assert [line.split()[0] for line in lines[2:5]] == ["0", "1", "2"]
    assert sum(int(line.split()[-1]) for line in lines[2:5]) == 4  # the log ends
    assert lines[-1] == "configs set on the topic: retention.ms=86400000"

    errors = {
        ("create", name): f"topic {name!r} already exists (3 partitions, replication factor 1)",
        ("create", f"{name}-x", "--replication", "9"): "--replication 9: the cluster at",
        ("create", f"{name}-y", "--config", "no.such=1"): (
            f"creating topic '{name}-y' refused (an invalid config): Unknown topic config name: no.such"
        ),
        ("create", f"{name}-z", "--config", "retention.ms"): "--config retention.ms: write KEY=VALUE",
        ("describe", f"{name}-nosuch"): f"topic '{name}-nosuch' does not exist on {bootstrap}",
    }
    for args, words in errors.items():
        result = cli("topics", *args, *servers)
        assert result.returncode == 1, result
        assert result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith(f"sparkafka topics: {words}"), result.stderr
    assert not {f"{name}-x", f"{name}-y", f"{name}-z", f"{name}-nosuch"} & all_topics(kafka_conf)

    # The first contact is bounded by --timeout (first_answer's bound, unit-tested with a fake clock); the
    # sentence is load()'s and names the bound it waited, then librdkafka's reason.
    unreachable = cli("topics", "list", "--bootstrap-servers", "127.0.0.1:1", "--timeout", "2")
    assert unreachable.returncode == 1
    assert unreachable.stderr.count("\n") == 1, unreachable.stderr
    assert unreachable.stderr.startswith(
        "sparkafka topics: listing topics failed against bootstrap servers 127.0.0.1:1 (option "
        "kafka.bootstrap.servers): no Kafka broker answered within 2 s; is it running, and is the address "
        "right? (librdkafka: "
    ), unreachable.stderr


# -- 5. spark-submit prints what sparkafka run prints -------------------------------------------------------

PIPELINE = """name = "submitted"
checkpoint = "{checkpoint}"
[source]
options = {{ "kafka.bootstrap.servers" = "{bootstrap}", subscribe = "{src}", startingOffsets = "earliest" }}
[sink]
options = {{ "kafka.bootstrap.servers" = "{bootstrap}", topic = "{dst}" }}
"""


def test_a_pipeline_under_spark_submit_prints_what_sparkafka_run_prints(
    kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    src, dst = kafka.topic(partitions=2), kafka.topic(partitions=2)
    kafka.produce(src, [f'{{"n": {i}}}' for i in range(40)], partitions=2)
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(PIPELINE.format(checkpoint=tmp_path / "ck", bootstrap=bootstrap, src=src, dst=dst))
    submit = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master",
        "local[1]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        str(ROOT / "examples" / "submit_pipeline.py"),
        "run",
        str(pipeline),
        "--available-now",
    ]
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    with GroupProcess(submit, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path) as proc:
        out, err = proc.proc.communicate(timeout=600)
    assert proc.returncode == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith("pipeline submitted started; checkpoint ")
    assert lines[1].startswith("batch 0: in 40 rows (")
    assert lines[-1].startswith("summary: pipeline submitted: 1 batches, 40 input rows")
    assert len(lines) == 3, out
    # Spark at WARN: no INFO lines, no progress JSON; only what spark-submit prints before Python starts.
    assert " INFO " not in err.replace(" INFO SparkContext: ", ""), err
    assert '"batchId"' not in err
    assert len(err.splitlines()) < 15, err  # was 190 at spark-submit's default INFO


# -- 7. the Schema Registry example, as docs/schema-registry.md says to try it ------------------------------


def _readme_walkthrough() -> str:
    blocks: list[str] = re.findall(r"```bash\n(.*?)```", REGISTRY_PAGE, re.S)
    (block,) = [b for b in blocks if "sparkafka run examples/orders_avro.toml" in b]
    return block


def test_the_readmes_schema_registry_walkthrough_runs(kafka: Kafka, bootstrap: str, tmp_path: Path) -> None:
    assert ".venv/bin/python -m tests.support.schema_registry --port 8081" in REGISTRY_PAGE
    run = uuid.uuid4().hex[:6]
    # The stand-in registry as the page starts it (a free port here), from the repo root.
    with GroupProcess(
        [sys.executable, "-m", "tests.support.schema_registry", "--port", "0"],
        stdout=subprocess.PIPE,
        cwd=ROOT,
    ) as registry:
        first = registry.readline()
        found = re.search(r"on (http://127\.0\.0\.1:(\d+));", first)
        assert found is not None, first
        url = found.group(1)

        walkthrough = _readme_walkthrough()
        named = re.findall(
            r"sparkafka topics create (\S+)(.*?) --bootstrap-servers 127\.0\.0\.1:9092", walkthrough
        )
        assert [n for n, _ in named] == ["orders-avro", "orders-avro-eur", "orders-avro-dlq"]
        for name, options in named:
            made = cli(
                "topics", "create", f"{name}-{run}", *options.split(), "--bootstrap-servers", bootstrap
            )
            assert made.returncode == 0, made.stderr
        producer = re.search(r"<<'EOF'\n(.*?)\nEOF\n", walkthrough, re.S)
        assert producer is not None
        code = (
            producer.group(1)
            .replace("127.0.0.1:9092", bootstrap)
            .replace("http://127.0.0.1:8081", url)
            .replace('"orders-avro"', f'"orders-avro-{run}"')
        )
        produced = subprocess.run(
            [sys.executable, "-"], input=code, capture_output=True, text=True, timeout=120, check=False
        )
        assert produced.returncode == 0, produced.stderr

        example = example_for_run(ROOT / "examples" / "orders_avro.toml", tmp_path / "examples", run)
        env = {
            **os.environ,
            "BOOTSTRAP": bootstrap,
            "SPARKAFKA_STATE": str(tmp_path / "state"),
            "SCHEMA_REGISTRY_URL": url,
        }
        assert "--available-now" in walkthrough
        result = cli("run", str(example), "--available-now", env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        summary = result.stdout.splitlines()[-1]
        assert summary.startswith("summary: pipeline orders-avro: 1 batches"), result.stdout
        assert "records out 100, malformed 0" in summary, result.stdout

        registry.signal_group(signal.SIGTERM)
        assert registry.communicate(30).strip() == "schema registry stopped"
        assert registry.returncode == 0
