"""The sink against a real broker and a real SparkSession, checked with the committed-view oracle."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import sparkafka
from sparkafka.kafka import partition_for_key
from sparkafka.local.committed_view import committed_view


def out_values(conf: dict[str, str], topic: str) -> Counter[bytes]:
    return Counter(r.value for records in committed_view(conf, topic).values() for r in records)


def test_batch_write_exactly_once_with_keys_on_java_partitions(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=3)
    rows = [(f"key-{i}", f"value-{i}") for i in range(300)]
    df = spark.createDataFrame(rows, "key string, value string").repartition(2)
    (
        df.write.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("deliveryGuarantee", "exactly_once")
        .option("transactionalIdPrefix", f"b-{uuid.uuid4().hex[:6]}")
        .mode("append")
        .save()
    )
    view = committed_view(kafka_conf, topic)
    got = {(r.key, r.value): p for p, records in view.items() for r in records}
    assert len(got) == 300
    assert sum(len(v) for v in view.values()) == 300
    for (key, _value), p in got.items():
        assert key is not None
        assert p == partition_for_key(key, 3)


ROWS = 300


def write_input(directory: Path) -> None:
    directory.mkdir()
    for f in range(6):
        lines = [f'{{"id": {i}, "customer": "c{i % 17}"}}' for i in range(f * 50, (f + 1) * 50)]
        (directory / f"part-{f}.json").write_text("\n".join(lines) + "\n")


class Driver:
    """Runs sink_driver.py in its own process group (killed as a whole, never by name)."""

    def __init__(self, tmp: Path, bootstrap: str, topic: str, delivery: str) -> None:
        self.tmp, self.bootstrap, self.topic, self.delivery = tmp, bootstrap, topic, delivery
        self.input = tmp / "in"
        self.checkpoint = tmp / "ck"
        self.prefix = f"eos-{uuid.uuid4().hex[:6]}" if delivery == "exactly_once" else None
        self.marker = tmp / "fault.marker"
        write_input(self.input)

    def start(self, fault: str | None = None, tasks: int = 2) -> subprocess.Popen[str]:
        env = dict(os.environ)
        env.pop("SPARKAFKA_TEST_FAULT", None)
        if fault:
            env["SPARKAFKA_TEST_FAULT"] = fault
            env["SPARKAFKA_TEST_FAULT_MARKER"] = str(self.marker)
        args = [self.bootstrap, self.topic, str(self.input), str(self.checkpoint), self.delivery]
        args += [self.prefix or "-", str(tasks)]
        return subprocess.Popen(
            [sys.executable, "-m", "tests.integration.sink_driver", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )

    def run(self, fault: str | None = None, tasks: int = 2) -> tuple[int, str]:
        proc = self.start(fault, tasks)
        try:
            out, _ = proc.communicate(timeout=300)
        finally:
            _kill_group(proc)
        return proc.returncode, out

    def run_and_kill_at(self, fault: str, tasks: int = 2) -> None:
        proc = self.start(f"{fault}:pause", tasks)
        try:
            deadline = time.monotonic() + 300
            while not self.marker.exists():
                assert proc.poll() is None, f"driver ended before reaching {fault}"
                assert time.monotonic() < deadline, f"driver never reached {fault}"
                time.sleep(0.2)
        finally:
            _kill_group(proc)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    if proc.stdout:
        proc.stdout.close()


def expected() -> Counter[bytes]:
    return Counter(str(i).encode() for i in range(ROWS))


@pytest.mark.parametrize(
    "fault",
    [
        "kill:commit_start",
        "kill:after_first_txn",
        "kill:commit_end",
        "raise:after_first_txn",
        "raise:task_mid_write",
    ],
)
def test_exactly_once_survives_faults(
    kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, fault: str
) -> None:
    kind, point = fault.split(":")
    topic = new_topic(partitions=3)
    driver = Driver(tmp_path, bootstrap, topic, "exactly_once")
    if kind == "kill":
        driver.run_and_kill_at(point)
    else:
        code, out = driver.run(f"{point}:raise")
        # A task failure is retried inside the run; a failed commit fails the query.
        assert code == (0 if point == "task_mid_write" else 3), out
    assert driver.marker.exists()
    code, out = driver.run()
    assert code == 0, out
    assert out_values(kafka_conf, topic) == expected()
    assert driver.prefix is not None
    counters = sparkafka.sink_metrics(driver.prefix)
    assert counters["records"] >= ROWS
    if point == "commit_end":
        assert counters["replays"] == 1  # the batch Spark re-ran was aborted, not written twice


@pytest.mark.parametrize("fault", ["kill:commit_start", "raise:task_mid_write"])
def test_at_least_once_loses_nothing_under_faults(
    kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, fault: str
) -> None:
    kind, point = fault.split(":")
    topic = new_topic(partitions=2)
    driver = Driver(tmp_path, bootstrap, topic, "at_least_once")
    if kind == "kill":
        driver.run_and_kill_at(point)
    else:
        assert driver.run(f"{point}:raise")[0] == 0
    code, out = driver.run()
    assert code == 0, out
    got = out_values(kafka_conf, topic)
    assert set(got) == set(expected())


def test_fewer_tasks_after_a_crash_fence_the_unused_transactional_ids(
    kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=3)
    driver = Driver(tmp_path, bootstrap, topic, "exactly_once")
    # Three tasks flush their transactions, then the driver dies before committing them.
    driver.run_and_kill_at("commit_start", tasks=3)
    # The restart replays the batch with one task: ids <prefix>-1 and -2 would keep open transactions
    # (and hold back every read_committed reader) unless the commit fences them.
    code, out = driver.run(tasks=1)
    assert code == 0, out
    assert out_values(kafka_conf, topic) == expected()
    view = committed_view(kafka_conf, topic)  # nothing open: the oracle's LSO cut hides nothing
    assert sum(len(v) for v in view.values()) == ROWS


def test_partition_column_headers_timestamp_and_roundrobin(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=3)
    df = spark.createDataFrame(
        [(f"v{i}", 2 if i < 5 else None) for i in range(20)], "value string, partition int"
    ).selectExpr(
        "value",
        "partition",
        "array(named_struct('key', 'trace', 'value', cast('abc' as binary))) as headers",
        "timestamp_millis(1700000000000 + 1) as timestamp",
    )
    writer = (
        df.coalesce(1)
        .write.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("partitioner", "roundrobin")
        .mode("append")
    )
    writer.save()
    view = committed_view(kafka_conf, topic)
    placed = {r.value.decode(): p for p, records in view.items() for r in records if r.value}
    assert all(placed[f"v{i}"] == 2 for i in range(5))  # the explicit partition column wins
    rest = Counter(placed[f"v{i}"] for i in range(5, 20))
    assert rest == {0: 5, 1: 5, 2: 5}  # round robin over the others
    records = [r for rs in view.values() for r in rs]
    assert {r.timestamp for r in records} == {1_700_000_000_001}
    assert {r.headers for r in records} == {(("trace", b"abc"),)}


def test_bad_input_schema_fails_at_start_naming_the_column(
    spark: Any, bootstrap: str, tmp_path: Path
) -> None:
    df = spark.readStream.format("rate").load()  # columns timestamp, value (bigint)
    query = (
        df.writeStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "never-written")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    with pytest.raises(
        Exception, match="column value of the sparkafka sink's input must be binary or string"
    ):
        query.awaitTermination(120)


def test_record_larger_than_allowed_fails_the_write_with_no_partial_output(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)
    rows = [(f"small-{i}",) for i in range(50)] + [("x" * 2_000_000,)] + [("after",)]
    df = spark.createDataFrame(rows, "value string").coalesce(1)
    writer = (
        df.write.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("deliveryGuarantee", "exactly_once")
        .option("transactionalIdPrefix", f"big-{uuid.uuid4().hex[:6]}")
        .mode("append")
    )
    with pytest.raises(Exception, match=r"larger than kafka\.message\.max\.bytes allows"):
        writer.save()
    # The 50 small records went into the task's transaction first: it was aborted, nothing is visible.
    assert out_values(kafka_conf, topic) == Counter()


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_unreachable_broker_fails_the_write_naming_the_address(spark: Any, guarantee: str) -> None:
    from sparkafka.local.broker import free_port

    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    writer = (
        spark.range(10)
        .selectExpr("CAST(id AS STRING) AS value")
        .write.mode("append")
        .format("sparkafka")
        .option("kafka.bootstrap.servers", address)
        .option("topic", "anything")
        .option("deliveryGuarantee", guarantee)
        .option("metadataTimeoutMs", "2000")
    )
    if guarantee == "exactly_once":
        writer = writer.option("transactionalIdPrefix", f"unreachable-{uuid.uuid4().hex[:6]}")
    with pytest.raises(Exception, match=f"failed against bootstrap servers {address}"):
        writer.save()


def test_record_the_broker_rejects_as_too_large_fails_the_batch_before_commit(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, require: Callable[[str], None]
) -> None:
    require("message_size_limit")  # tansu stores records over a topic's max.message.bytes
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"small-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(kafka_conf)
    spec = NewTopic(topic, 1, 1, config={"max.message.bytes": "2048"})
    for future in admin.create_topics([spec]).values():
        future.result(30)
    # Under the producer's own limit (1 MB), over the topic's: only the broker can reject it.
    rows = [(f"small-{i}",) for i in range(50)] + [("x" * 16_000,)]
    writer = (
        spark.createDataFrame(rows, "value string")
        .coalesce(1)
        .write.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("deliveryGuarantee", "exactly_once")
        .option("transactionalIdPrefix", f"brokerbig-{uuid.uuid4().hex[:6]}")
        .mode("append")
    )
    with pytest.raises(Exception, match=r"MSG_SIZE_TOO_LARGE.*max\.message\.bytes"):
        writer.save()
    assert out_values(kafka_conf, topic) == Counter()
