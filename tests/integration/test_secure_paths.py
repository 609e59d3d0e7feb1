"""Every path on the secured broker, as the application user, over SASL_SSL/SCRAM-SHA-512 and over mutual TLS.

The broker (``secure_kafka``, tests/support/secure.py) has TLS on every listener and ACLs on; ``app`` holds
exactly docs/security.md's least privilege, on the ``s-`` prefix. Two tests per login: Spark in this
process (batch and streaming reads with both fetchers, group commits, the at-least-once and exactly-once
sinks, the driver's raw read of the intent log), and ``sparkafka run`` in a subprocess (a pipeline whose
password comes from the environment, killed mid-commit and run again), followed by the CLI tools on what it
left (offsets show, replan and reset --force, lag, txn list and resolve, topics, doctor).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sparkafka.client.raw_log import CONTROL_COMMIT, read_raw_batches
from sparkafka.local.procs import GroupProcess
from sparkafka.local.secure_kafka import SecureKafka
from sparkafka.sink.intents import intent_topic
from sparkafka.sink.writer import query_id_from_checkpoint
from sparkafka.structs import TopicPartition
from tests.support.kafka import Kafka
from tests.support.secure import PREFIX
from tests.support.wait import wait_until

pytestmark = pytest.mark.xdist_group("secure-kafka")  # one secured broker for every secured test

LOGINS = ["sasl", "mtls"]
SPARKAFKA = [sys.executable, "-m", "sparkafka.cli"]


def options(conf: dict[str, str]) -> dict[str, str]:
    return {f"kafka.{k}": v for k, v in conf.items()}


def unique(what: str) -> str:
    return f"{PREFIX}{what}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("login", LOGINS)
def test_reads_group_commits_and_both_sinks(
    spark: Any, secured: Kafka, secure_conf: Callable[[str], dict[str, str]], login: str, tmp_path: Path
) -> None:
    conf = options(secure_conf(login))
    src = secured.topic(partitions=2, prefix=unique("in"))
    values = secured.produce(src, [f"v{i}" for i in range(40)], partitions=2)

    for fetcher in ("native", "python"):  # native: built with TLS and SASL (OpenSSL)
        df = spark.read.format("sparkafka").options(**conf).option("subscribe", src)
        rows = df.option("fetcher", fetcher).load().selectExpr("cast(value as string) as v").collect()
        assert sorted(r.v for r in rows) == sorted(values), fetcher

    # Streaming, committing to its group, into the exactly-once sink (its tasks' transactions, the intent
    # log, and the driver's EndTxn through kafka-python); the streaming fetcher differs by login.
    group, prefix = unique("g"), unique("eos")
    out = secured.topic(partitions=2, prefix=unique("out"))
    query = (
        spark.readStream.format("sparkafka")
        .options(**conf)
        .option("subscribe", src)
        .option("kafka.group.id", group)
        .option("startingOffsets", "earliest")
        .option("fetcher", "native" if login == "sasl" else "python")
        .load()
        .select("key", "value")
        .writeStream.format("sparkafka")
        .options(**conf)
        .option("topic", out)
        .option("deliveryGuarantee", "exactly_once")
        .option("transactionalIdPrefix", prefix)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the streaming query did not finish"
    assert query.exception() is None, query.exception()
    assert secured.committed_values(out) == Counter(v.encode() for v in values)
    assert secured.group_offsets(group, src, 2) == {TopicPartition(src, 0): 20, TopicPartition(src, 1): 20}
    # The driver's marker search (kafka-python's raw Fetch, used when an EndTxn answer cannot tell a
    # transaction's outcome) reads the intent log as app with the same settings: each task's witness
    # record's transaction left a COMMIT marker there.
    raw = read_raw_batches(secure_conf(login), intent_topic(prefix))[0]
    assert any(b.is_control and b.control_type == CONTROL_COMMIT for b in raw), raw

    again = secured.topic(partitions=1, prefix=unique("alo"))
    rows = spark.createDataFrame([(f"k{i}", f"a{i}") for i in range(25)], "key string, value string")
    write = rows.write.format("sparkafka").options(**conf).option("topic", again)
    write.option("deliveryGuarantee", "at_least_once").mode("append").save()
    assert set(secured.committed_values(again)) == {f"a{i}".encode() for i in range(25)}


PIPELINE = """
name = "secure-{login}"
checkpoint = "{checkpoint}"

[source]
[source.options]
subscribe = "{src}"
startingOffsets = "earliest"
"kafka.group.id" = "{group}"
{kafka}

[sink]
key = "key"
value = "value"
[sink.options]
topic = "{dst}"
deliveryGuarantee = "exactly_once"
transactionalIdPrefix = "{prefix}"
{kafka}
"""


def _secret_key(login: str) -> str:
    return "sasl.password" if login == "sasl" else "ssl.key.password"


def _pipeline_options(conf: dict[str, str], login: str) -> str:
    """The kafka.* lines of a pipeline file, the password as ${KAFKA_PASSWORD}."""
    secret = _secret_key(login)
    shown = {k: ("${KAFKA_PASSWORD}" if k == secret else v) for k, v in conf.items()}
    return "\n".join(f'"kafka.{k}" = "{v}"' for k, v in shown.items())


def _tool(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [*SPARKAFKA, *args]
    env = {**os.environ, **env}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("login", LOGINS)
def test_pipeline_recovers_after_a_driver_kill_and_the_tools_work(
    secure_kafka: SecureKafka,
    secured: Kafka,
    secure_conf: Callable[[str], dict[str, str]],
    login: str,
    tmp_path: Path,
) -> None:
    conf = secure_conf(login)
    password = conf[_secret_key(login)]
    src = secured.topic(partitions=2, prefix=unique("pin"))
    dst = secured.topic(partitions=2, prefix=unique("pout"))
    group, prefix = unique("pg"), unique("peos")
    values = secured.produce(src, [f"p{i}" for i in range(60)], partitions=2)
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(
        PIPELINE.format(
            login=login,
            checkpoint=tmp_path / "ck",
            src=src,
            dst=dst,
            group=group,
            prefix=prefix,
            kafka=_pipeline_options(conf, login),
        )
    )
    assert password not in pipeline.read_text()
    env = {"KAFKA_PASSWORD": password}
    marker = tmp_path / "fault.marker"
    fault = {"SPARKAFKA_TEST_FAULT": "after_first_txn:pause", "SPARKAFKA_TEST_FAULT_MARKER": str(marker)}
    command = [*SPARKAFKA, "run", str(pipeline), "--available-now"]
    with GroupProcess(command, env={**os.environ, **env, **fault}, stdout=subprocess.PIPE) as proc:
        wait_until(marker.exists, 240, "the pipeline to pause after its first EndTxn", process=proc)
        proc.kill()  # the driver dies between committing one transaction and the next
    rerun = subprocess.run(
        command, env={**os.environ, **env}, capture_output=True, text=True, timeout=300, check=False
    )
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert password not in rerun.stdout + rerun.stderr
    assert secured.committed_values(dst) == Counter(v.encode() for v in values)
    assert secured.group_offsets(group, src, 2) == {TopicPartition(src, 0): 30, TopicPartition(src, 1): 30}

    # The CLI tools, as app, their settings in a file whose password comes from the environment.
    settings = tmp_path / "client.properties"
    secret = _secret_key(login)
    settings.write_text(
        "".join(f"{k}={'${KAFKA_PASSWORD}' if k == secret else v}\n" for k, v in conf.items())
    )
    cfg = ["--command-config", str(settings)]
    shown = _tool("offsets", "show", *cfg, "--checkpoint", str(tmp_path / "ck"), "--group", group, env=env)
    assert shown.returncode == 0, shown.stderr
    assert src in shown.stdout
    lag = _tool("lag", *cfg, "--group", group, env=env)
    assert lag.returncode == 0, lag.stderr
    assert src in lag.stdout
    txn = _tool("txn", "list", *cfg, "--prefix", prefix, env=env)
    assert txn.returncode == 0, txn.stderr
    assert "done" in txn.stdout
    listed = _tool("topics", "list", *cfg, env=env)
    assert listed.returncode == 0, listed.stderr
    assert dst in listed.stdout
    described = _tool("topics", "describe", dst, *cfg, env=env)
    assert described.returncode == 0, described.stderr
    # The tools that decide by hand: each reads the intent log or the group as app, and refuses or acts.
    replan = _tool(
        "offsets", "replan", *cfg, "--checkpoint", str(tmp_path / "ck"), "--prefix", prefix, env=env
    )
    assert replan.returncode == 1, replan.stdout + replan.stderr
    assert replan.stderr.endswith("every planned batch is committed\n"), replan.stderr
    query_id = query_id_from_checkpoint(str(tmp_path / "ck"))
    assert query_id is not None
    resolve = _tool("txn", "resolve", *cfg, "--prefix", prefix, "--query", query_id, "mark-done", env=env)
    assert resolve.returncode == 1, resolve.stdout + resolve.stderr
    assert resolve.stderr.endswith("is done: nothing to resolve\n"), resolve.stderr
    reset = _tool(
        "offsets", "reset", *cfg, "--group", group, "--to", "earliest", "--execute", "--force", env=env
    )
    assert reset.returncode == 0, reset.stdout + reset.stderr
    assert secured.group_offsets(group, src, 2) == {TopicPartition(src, 0): 0, TopicPartition(src, 1): 0}
    # doctor as the super user, from the JSON sparkafka broker --secure --client-config writes
    client_json = secure_kafka.write_client_config(tmp_path / "client.json")
    doctor = _tool("doctor", "--command-config", f"{client_json}#admin", env={})
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    for output in (shown, lag, txn, listed, described, replan, resolve, reset, doctor):
        assert password not in output.stdout + output.stderr
    assert json.loads(client_json.read_text())["app"]["kafka.sasl.username"] == "app"


def test_broker_command_secure_prints_the_settings_and_writes_the_client_config(tmp_path: Path) -> None:
    from sparkafka.client.contact import first_answer

    config = tmp_path / "client.json"
    command = [*SPARKAFKA, "broker", "--secure", "--client-config", str(config)]
    with GroupProcess(command, stdout=subprocess.PIPE) as proc:
        banner = proc.readline()
        assert banner.startswith("Apache Kafka "), banner
        said: list[str] = []
        while not (said and said[-1].startswith("bootstrap servers: ")):
            said.append(proc.readline())
            assert said[-1], f"the command ended before naming its bootstrap servers: {said}"
        assert config.stat().st_mode & 0o777 == 0o600
        logins = json.loads(config.read_text())
        assert set(logins) == {"admin", "app", "app_tls"}
        passwords = {logins["admin"]["kafka.sasl.password"], logins["app"]["kafka.sasl.password"]}
        text = "".join(said)
        assert not [p for p in passwords if p in text]
        assert f"  kafka.sasl.password=<in {config}>\n" in said
        assert "  kafka.sasl.username=app\n" in said
        assert "  kafka.security.protocol=SSL\n" in said
        for login in logins.values():  # each login answers, as the settings say
            first_answer({k.removeprefix("kafka."): v for k, v in login.items()}, 10)
        proc.interrupt(signal.SIGINT, timeout_s=60)
        assert proc.returncode == 0
