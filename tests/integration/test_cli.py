from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable

from confluent_kafka import Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from sparkafka.local.procs import GroupProcess
from sparkafka.local.tansu_workarounds import seal_latest_offsets

SPARKAFKA = [sys.executable, "-m", "sparkafka.cli"]


def test_broker_command_prints_address_and_stops_on_ctrl_c() -> None:
    with GroupProcess([*SPARKAFKA, "broker"], stdout=subprocess.PIPE) as proc:
        first = proc.readline()
        assert first.startswith("bootstrap servers: 127.0.0.1:")
        address = first.split()[2]
        assert AdminClient({"bootstrap.servers": address}).list_topics(timeout=10).brokers
        rest = proc.interrupt(signal.SIGINT, timeout_s=30)
        assert proc.returncode == 0
        assert "not Apache Kafka. Known gaps:" in rest  # the banner says what this broker is
        assert "ListOffsets(latest)" in rest
        assert f"sparkafka doctor --bootstrap-servers {address}" in rest
        assert "broker stopped" in rest


def test_demo_runs_end_to_end() -> None:
    result = subprocess.run(
        [*SPARKAFKA, "demo", "--orders", "1200", "--minutes", "3"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "killing the Spark driver with SIGKILL" in result.stdout
    assert "starting the pipeline again on the same checkpoint" in result.stdout
    assert "every valid order is counted exactly once: OK" in result.stdout
    assert "the pipeline counted" in result.stdout
    assert "consumer group demo-revenue: lag 0" in result.stdout


def test_seal_makes_latest_the_log_end(kafka_conf: dict[str, str], new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=2)
    producer = Producer({**kafka_conf, "linger.ms": 50})
    for i in range(100):
        producer.produce(topic, str(i).encode(), partition=i % 2)
    producer.flush(30)
    seal_latest_offsets(kafka_conf, topic, [0, 1])
    admin = AdminClient(kafka_conf)
    futures = admin.list_offsets({CTopicPartition(topic, p): OffsetSpec.latest() for p in (0, 1)})
    assert sorted(f.result(30).offset for f in futures.values()) == [51, 51]


def test_version_and_run_help_point_at_documentation() -> None:
    import sparkafka

    version = subprocess.run([*SPARKAFKA, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == f"sparkafka {sparkafka.__version__}"
    run_help = subprocess.run([*SPARKAFKA, "run", "--help"], capture_output=True, text=True, check=True)
    assert "README" in run_help.stdout
    assert ".py" not in run_help.stdout  # not a source file
