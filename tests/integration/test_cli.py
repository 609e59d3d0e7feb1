from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from sparkafka.local.procs import GroupProcess
from sparkafka.local.tansu_workarounds import seal_latest_offsets
from tests.support.kafka import Kafka

SPARKAFKA = [sys.executable, "-m", "sparkafka.cli"]


def test_broker_command_runs_apache_kafka_and_stops_on_ctrl_c() -> None:
    from sparkafka.local.kafka_dist import KAFKA_VERSION

    with GroupProcess([*SPARKAFKA, "broker"], stdout=subprocess.PIPE) as proc:
        banner = proc.readline()
        assert banner.startswith(f"Apache Kafka {KAFKA_VERSION} (KRaft, 1 broker"), banner
        pid = int(banner.split("pids ")[1].split(";")[0])
        first = proc.readline()
        assert first.startswith("bootstrap servers: 127.0.0.1:")
        address = first.split()[2]
        port = int(address.rsplit(":", 1)[1])
        assert AdminClient({"bootstrap.servers": address}).list_topics(timeout=10).brokers
        rest = proc.interrupt(signal.SIGINT, timeout_s=60)
        assert proc.returncode == 0
        assert "broker stopped" in rest
    assert not _alive(pid)  # the broker's JVM is gone, and its port is free again
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_broker_command_starts_three_brokers_and_stops_on_sigterm() -> None:
    with GroupProcess([*SPARKAFKA, "broker", "--brokers", "3"], stdout=subprocess.PIPE) as proc:
        banner = proc.readline()
        assert "(KRaft, 3 brokers" in banner, banner
        pids = [int(p) for p in banner.split("pids ")[1].split(";")[0].split(", ")]
        address = proc.readline().split()[2]
        assert len(address.split(",")) == 3
        metadata = AdminClient({"bootstrap.servers": address}).list_topics(timeout=10)
        assert len(metadata.brokers) == 3
        proc.interrupt(signal.SIGTERM, timeout_s=90)
        assert proc.returncode == 0
    assert not any(_alive(pid) for pid in pids)


def test_broker_command_tansu_says_what_it_is() -> None:
    with GroupProcess([*SPARKAFKA, "broker", "--tansu"], stdout=subprocess.PIPE) as proc:
        banner = proc.readline()
        assert "not Apache Kafka. Known gaps:" in banner  # the banner says what this broker is
        rest = proc.interrupt(signal.SIGINT, timeout_s=30)
        assert proc.returncode == 0
        assert "ListOffsets(latest)" in rest
        address = rest.split("bootstrap servers: ")[1].split()[0]
        assert f"sparkafka doctor --bootstrap-servers {address}" in rest
        assert "broker stopped" in rest


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_demo_runs_end_to_end() -> None:
    result = subprocess.run(
        [*SPARKAFKA, "demo", "--orders", "1200", "--minutes", "3"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "killing the Spark driver with SIGKILL at the worst moment" in result.stdout
    assert "1 batch(es) rolled forward" in result.stdout  # the crash left work for recovery, and it was done
    assert "1 replayed batch(es) skipped" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "  every valid order is counted exactly once: OK"
    assert "rdkafka" not in result.stderr  # no client is left to log the broker's going, after the verdict
    assert "starting the pipeline again on the same checkpoint" in result.stdout
    assert "every valid order is counted exactly once: OK" in result.stdout
    assert "the pipeline counted" in result.stdout
    assert "consumer group demo-revenue: lag 0" in result.stdout
    assert "Apache Kafka" in result.stdout.split("\n== ")[1]  # the demo's broker is Apache Kafka
    assert "exactly what the committed view shows" in result.stdout  # a plain read_committed consumer


def test_seal_makes_latest_the_log_end_on_tansu(tansu_conf: dict[str, str]) -> None:
    kafka_conf = tansu_conf  # the workaround is for tansu's ListOffsets gap
    topic = Kafka(kafka_conf).topic(partitions=2)
    producer = Producer({**kafka_conf, "linger.ms": 50})
    for i in range(100):
        producer.produce(topic, str(i).encode(), partition=i % 2)
    producer.flush(30)
    seal_latest_offsets(kafka_conf, topic, [0, 1])
    admin = AdminClient(kafka_conf)
    futures = admin.list_offsets({CTopicPartition(topic, p): OffsetSpec.latest() for p in (0, 1)})
    assert sorted(f.result(30).offset for f in futures.values()) == [51, 51]


@pytest.mark.lines
def test_version_and_run_help_point_at_documentation() -> None:
    import sparkafka

    version = subprocess.run([*SPARKAFKA, "--version"], capture_output=True, text=True, check=True)
    from sparkafka.spark_lines import PYSPARK_VERSION, features

    first, *given = version.stdout.splitlines()
    assert first == f"sparkafka {sparkafka.__version__} on PySpark {PYSPARK_VERSION}"
    assert len(given) == len(features())  # what this PySpark gives, a line each
    run_help = subprocess.run([*SPARKAFKA, "run", "--help"], capture_output=True, text=True, check=True)
    assert "docs/pipelines.md" in run_help.stdout
    assert ".py" not in run_help.stdout  # not a source file
