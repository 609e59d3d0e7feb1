"""The sink against a real broker and a real SparkSession, checked with the committed-view oracle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import sparkafka
from sparkafka.errors import ConfigError
from sparkafka.kafka import partition_for_key
from sparkafka.local.procs import GroupProcess
from sparkafka.ops.committed_view import committed_view, read_raw_batches
from sparkafka.sink.intents import IntentLog
from tests.integration.sink_driver import sink_query
from tests.support.kafka import Kafka
from tests.support.wait import pid_alive, wait_until


@pytest.mark.lines
def test_batch_write_exactly_once_with_keys_on_java_partitions(
    spark: Any, kafka: Kafka, bootstrap: str
) -> None:
    topic = kafka.topic(partitions=3)
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
    view = committed_view(kafka.conf, topic, settle_s=10)
    got = {(r.key, r.value): p for p, records in view.items() for r in records}
    assert len(got) == 300
    assert sum(len(v) for v in view.values()) == 300
    for (key, _value), p in got.items():
        assert key is not None
        assert p == partition_for_key(key, 3)


ROWS = 300
BATCH = 100
"""Rows a micro-batch reads: 2 files of 50 (``sink_driver.FILES_PER_BATCH``), so batches 0, 1, 2."""


def write_input(directory: Path) -> None:
    """6 JSON files of 50 rows, ids 0-299; modified a second apart in name order, so Spark's file source
    (oldest first, by the millisecond) reads ids 0-99 in batch 0, 100-199 in batch 1, 200-299 in batch 2."""
    directory.mkdir()
    for f in range(6):
        lines = [f'{{"id": {i}, "customer": "c{i % 17}"}}' for i in range(f * 50, (f + 1) * 50)]
        path = directory / f"part-{f}.json"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))


class Driver:
    """The sink_driver query: in its own process group to be killed there (a crash), never by name, or
    in the test's SparkSession to restart on the checkpoint (a new driver's recovery, without a JVM)."""

    def __init__(
        self,
        tmp: Path,
        bootstrap: str,
        topic: str,
        delivery: str,
        sink_options: dict[str, str] | None = None,
    ) -> None:
        self.tmp, self.bootstrap, self.topic, self.delivery = tmp, bootstrap, topic, delivery
        self.sink_options = sink_options or {}
        """Writer options added on every run (SPARKAFKA_TEST_SINK_OPTIONS)."""
        self.input = tmp / "in"
        self.checkpoint = tmp / "ck"
        self.prefix = f"eos-{uuid.uuid4().hex[:6]}" if delivery == "exactly_once" else None
        self.marker = tmp / "fault.marker"
        write_input(self.input)

    def start(self, fault: str | None = None, env: dict[str, str] | None = None) -> GroupProcess:
        env = {**os.environ, **(env or {})}
        env.pop("SPARKAFKA_TEST_FAULT", None)
        env["SPARKAFKA_TEST_SINK_OPTIONS"] = json.dumps(self.sink_options)
        if fault:
            env["SPARKAFKA_TEST_FAULT"] = fault
            env["SPARKAFKA_TEST_FAULT_MARKER"] = str(self.marker)
        args = [self.bootstrap, self.topic, str(self.input), str(self.checkpoint), self.delivery]
        args += [self.prefix or "-", "2"]
        return GroupProcess(
            [sys.executable, "-m", "tests.integration.sink_driver", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

    def run(self, env: dict[str, str] | None = None) -> tuple[int, str]:
        """A whole run in a process of its own: (exit code, output)."""
        with self.start(env=env) as proc:
            out = proc.communicate(timeout_s=300)
            return proc.wait(), out

    def run_and_kill_at(self, fault: str) -> None:
        """Run until the driver pauses at ``fault``, then SIGKILL it (a crash there): the process that
        paused (named in the marker) dies with it."""
        with self.start(f"{fault}:pause") as proc:
            wait_until(self.marker.exists, 300, f"the driver to reach {fault}", process=proc)
            paused = int(self.marker.read_text())
            assert pid_alive(paused), f"the process paused at {fault} is gone before the kill"
        wait_until(lambda: not pid_alive(paused), 30, f"the process paused at {fault} to die with its driver")

    def restart(self, spark: Any) -> None:
        """Run the query on the checkpoint in ``spark`` to its end, as a restarted driver does."""
        query = sink_query(
            spark,
            self.bootstrap,
            self.topic,
            str(self.input),
            str(self.checkpoint),
            self.delivery,
            self.prefix,
            options=self.sink_options,
        )
        assert query.awaitTermination(300), "the restarted query did not finish"
        assert query.exception() is None, str(query.exception())


def expected(batches: range = range(3)) -> Counter[bytes]:
    """The values of ``batches``' rows, each once."""
    return Counter(str(i).encode() for b in batches for i in range(b * BATCH, (b + 1) * BATCH))


def by_producer(kafka: Kafka, topic: str) -> dict[int, Counter[bytes]]:
    """Every data record of ``topic`` in the log (committed, aborted or open), by the producer id that
    wrote it: the records of one task's transaction."""
    out: dict[int, Counter[bytes]] = {}
    for batches in read_raw_batches(kafka.conf, topic).values():
        for batch in batches:
            if batch.control_type is None:
                out.setdefault(batch.producer_id, Counter()).update(r.value or b"" for r in batch.records)
    return out


def counters(prefix: str | None, **nonzero: int) -> dict[str, int]:
    """The sink's counters with every one not named zero (``sparkafka.sink_metrics``' shape)."""
    assert prefix is not None
    return dict.fromkeys(sparkafka.sink_metrics(prefix), 0) | nonzero


# Four crash tests in real processes; the full decision table (every fault point x in time, timed out,
# partly committed x streaming, batch write) runs against the coordinator model in
# tests/unit/sink/test_twophase.py.
@pytest.mark.lines
@pytest.mark.parametrize("point", ["after_first_txn", "commit_end"])
def test_exactly_once_survives_a_driver_kill(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path, point: str
) -> None:
    topic = kafka.topic(partitions=3)
    # Writer task i writes partition i: with the default (sticky) partitioner both tasks may pick one
    # partition, and where the open transaction's records come first, read_committed hides the committed
    # ones behind them (the last stable offset), as Kafka does: the view below would depend on the draw.
    driver = Driver(tmp_path, bootstrap, topic, "exactly_once", sink_options={"partitioner": "fixed"})
    assert driver.prefix is not None
    driver.run_and_kill_at(point)
    if point == "commit_end":  # batch 0 committed, Spark's commit log not written yet
        assert kafka.committed_values(topic) == expected(range(1))
        assert sparkafka.sink_metrics(driver.prefix) == counters(
            driver.prefix, batches=1, transactions=2, records=BATCH
        )
    else:  # the intent's first transaction committed, the second still open: one task's rows visible
        (intent,) = IntentLog(kafka.conf, driver.prefix).read().pending
        assert intent.batch_id == 0
        first, second = intent.handles
        written = by_producer(kafka, topic)
        # The first's markers may still be on their way; the second stays open (so committed_values
        # would re-read for its full 10 s): wait for exactly the first's rows, nothing else, to show.
        wait_until(
            lambda: kafka.visible_now(topic) == written[first.producer_id],
            30,
            "the first transaction's rows, and only them, to be visible",
            detail=lambda: f"visible: {kafka.visible_now(topic)}",
        )
        assert kafka.pending_transactions(driver.prefix)[second.transactional_id] == "Ongoing"  # stays hidden
        assert written[first.producer_id] + written[second.producer_id] == expected(range(1))
        assert (first.records, second.records) == (BATCH // 2, BATCH // 2)  # round robin over 2 tasks
        assert sparkafka.sink_metrics(driver.prefix) == counters(driver.prefix)
    driver.restart(spark)
    assert kafka.committed_values(topic) == expected()
    # Spark replays batch 0 (its commit log was not written): already committed, so its two new
    # transactions are aborted, not written twice; batches 1 and 2 are written once.
    if point == "commit_end":
        assert sparkafka.sink_metrics(driver.prefix) == counters(
            driver.prefix, batches=3, transactions=6, records=ROWS, replays=1, aborted=2
        )
    else:  # the killed commit was finished from its intent, batch 0's rows counted then
        assert sparkafka.sink_metrics(driver.prefix) == counters(
            driver.prefix, batches=3, transactions=6, records=ROWS, replays=1, aborted=2, recovered=1
        )


TXN_TIMEOUT_MS = 30_000
"""Short, so the broker times the paused batch out soon; not shorter, since the sink refuses to commit a
batch whose oldest transaction is older than this less a margin (5 s), and a new driver's first commit
starts late: 5.9 s after its tasks ended, measured on this 2-core machine at a load average of 10 (with
10 s the batch was refused before its intent)."""


def held_back(kafka: Kafka, topic: str, partitions: int) -> int:
    """Records of ``topic`` that read_committed consumers cannot read yet, over all partitions: the latest
    offsets less the last stable offsets (an open transaction holds its partition's LSO at its first record).
    """
    from confluent_kafka import IsolationLevel
    from confluent_kafka import TopicPartition as CTopicPartition
    from confluent_kafka.admin import OffsetSpec

    from sparkafka.client.core import admin_client

    admin = admin_client(kafka.conf)  # the process's client: it outlives the futures
    wanted = {CTopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}

    def latest(isolation: IsolationLevel) -> int:
        futures = admin.list_offsets(wanted, isolation_level=isolation, request_timeout=30)
        return sum(future.result(30).offset for future in futures.values())

    return latest(IsolationLevel.READ_UNCOMMITTED) - latest(IsolationLevel.READ_COMMITTED)


def test_exactly_once_survives_the_broker_timing_out_a_decided_batch(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    """The driver dies after batch 0's commit intent and stays down past kafka.transaction.timeout.ms: the
    broker aborts the batch's transactions and bumps their epochs, so the intent cannot be rolled forward
    (EndTxn answers PRODUCER_FENCED). The restart's recovery records the batch as abandoned, nothing of it
    visible, and Spark's replay writes it exactly once. (Measured on Apache Kafka 3.9 before recovery read
    PRODUCER_FENCED as "aborted": every restart failed with it, wedged.)

    The coordinator model's case: test_recovery_never_wedges_after_the_broker_aborted_the_intent (and
    test_streaming_crash_then_replay_is_exactly_once[after_intent-timed_out]) in
    tests/unit/sink/test_twophase.py.
    """
    topic = kafka.topic(partitions=3)
    timeout = {"kafka.transaction.timeout.ms": str(TXN_TIMEOUT_MS)}
    driver = Driver(tmp_path, bootstrap, topic, "exactly_once", sink_options=timeout)
    driver.run_and_kill_at("after_intent")
    assert driver.prefix is not None
    # Decided, not committed: all of batch 0 in open transactions (nothing else in the topic), none visible.
    assert held_back(kafka, topic, 3) == BATCH
    assert sum(by_producer(kafka, topic).values(), Counter()) == expected(range(1))
    assert kafka.visible_now(topic) == Counter()
    seen = {"held back": -1}

    def broker_aborted() -> bool:
        seen["held back"] = held_back(kafka, topic, 3)
        return seen["held back"] == 0

    wait_until(
        broker_aborted,
        TXN_TIMEOUT_MS / 1000 + 60,  # an external broker checks for timed-out transactions every 10 s
        "the broker to abort the timed-out transactions (the last stable offsets to reach the latest)",
        detail=lambda: f"last seen: {seen}",
        interval_s=0.5,
    )
    assert kafka.committed_values(topic) == Counter()  # aborted: nothing of batch 0 visible

    driver.restart(spark)  # same checkpoint: recovery finds the intent, Spark replays batch 0
    assert kafka.committed_values(topic) == expected()
    # The pending intent was resolved as wholly aborted by the broker (not committed, not wedged), and
    # batch 0's replay was written, not skipped as already done: each row counted once, by its batch.
    assert sparkafka.sink_metrics(driver.prefix) == counters(
        driver.prefix, batches=3, transactions=6, records=ROWS, recovered=1, abandoned=1
    )


def test_pending_intent_is_shown_and_resolved_with_sparkafka_txn(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    topic = kafka.topic(partitions=3)
    driver = Driver(tmp_path, bootstrap, topic, "exactly_once")
    driver.run_and_kill_at("after_intent")
    assert driver.prefix is not None
    # Decided, not yet committed: both transactions undecided at the coordinator, nothing visible.
    assert list(kafka.pending_transactions(driver.prefix).values()) == ["Ongoing", "Ongoing"]
    assert kafka.visible_now(topic) == Counter()

    listing = sparkafka_cli("txn", "list", "--bootstrap-servers", bootstrap, "--prefix", driver.prefix)
    assert listing.returncode == 0, listing.stderr
    pending = [line for line in listing.stdout.splitlines() if " pending " in line]
    assert len(pending) == 1, listing.stdout
    query_id = pending[0].split()[0]

    args = ["txn", "resolve", "--bootstrap-servers", bootstrap, "--prefix", driver.prefix]
    dry = sparkafka_cli(*args, "--query", query_id, "commit")
    assert dry.returncode == 2
    assert "add --yes" in dry.stderr
    # The dry run did nothing: the coordinator still holds both transactions undecided (so no markers can
    # be on their way), and nothing is visible.
    assert list(kafka.pending_transactions(driver.prefix).values()) == ["Ongoing", "Ongoing"]
    assert kafka.visible_now(topic) == Counter()
    done = sparkafka_cli(*args, "--query", query_id, "commit", "--yes")
    assert done.returncode == 0, done.stderr
    assert "batch 0: done" in done.stdout
    assert kafka.committed_values(topic) == expected(range(1))  # the killed batch, all of it
    assert sparkafka.sink_metrics(driver.prefix) == counters(
        driver.prefix, batches=1, transactions=2, records=BATCH
    )

    driver.restart(spark)  # Spark replays batch 0: already done, so aborted; then the rest
    assert kafka.committed_values(topic) == expected()
    assert sparkafka.sink_metrics(driver.prefix) == counters(
        driver.prefix, batches=3, transactions=6, records=ROWS, replays=1, aborted=2
    )


def sparkafka_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sparkafka.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_exactly_once_refuses_speculation(kafka: Kafka, bootstrap: str, tmp_path: Path) -> None:
    """spark.speculation is the SparkContext's own setting: the refusal runs in a driver of its own."""
    topic = kafka.topic(partitions=2)
    driver = Driver(tmp_path, bootstrap, topic, "exactly_once")
    code, out = driver.run(env={"SPARKAFKA_TEST_SPECULATION": "true"})
    assert code == 3, out
    assert "deliveryGuarantee=exactly_once cannot run with spark.speculation=true" in out
    assert kafka.committed_values(topic) == Counter()


def test_exactly_once_without_speculation_writes_each_row_once(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    """The speculation test's query, as it runs with spark.speculation off (the test session's setting)."""
    assert spark.sparkContext.getConf().get("spark.speculation", "false") == "false"
    topic = kafka.topic(partitions=2)
    driver = Driver(tmp_path, bootstrap, topic, "exactly_once")
    driver.restart(spark)
    assert kafka.committed_values(topic) == expected()
    assert sparkafka.sink_metrics(driver.prefix) == counters(
        driver.prefix, batches=3, transactions=6, records=ROWS
    )


def test_partition_column_headers_timestamp_and_roundrobin(spark: Any, kafka: Kafka, bootstrap: str) -> None:
    topic = kafka.topic(partitions=3)
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
    view = committed_view(kafka.conf, topic, settle_s=10)
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
    writer = (
        df.writeStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "never-written")
        .option("checkpointLocation", str(tmp_path / "ck"))
    )
    active = {q.id for q in spark.streams.active}
    with pytest.raises(
        ConfigError, match="column value of the sparkafka sink's input must be binary or string"
    ):
        writer.start()  # raised by start() itself
    assert {q.id for q in spark.streams.active} == active  # no query was made


def test_record_larger_than_allowed_fails_the_write_with_no_partial_output(
    spark: Any, kafka: Kafka, bootstrap: str
) -> None:
    topic = kafka.topic(partitions=1)
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
    with pytest.raises(Exception, match=r"the record is larger than kafka\.message\.max\.bytes"):
        writer.save()
    # The 50 small records went into the task's transaction first: it was aborted, nothing is visible.
    assert kafka.committed_values(topic) == Counter()


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
    spark: Any, kafka: Kafka, bootstrap: str, require: Callable[[str], None]
) -> None:
    require("message_size_limit")  # tansu stores records over a topic's max.message.bytes
    topic = kafka.topic(1, prefix="small", config={"max.message.bytes": "2048"})
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
    assert kafka.committed_values(topic) == Counter()


def test_batch_write_says_to_append(spark: Any, bootstrap: str) -> None:
    df = spark.createDataFrame([("a",)], "value string")

    def writer() -> Any:  # a DataFrameWriter is mutable: a fresh one per attempt
        return df.write.format("sparkafka").option("kafka.bootstrap.servers", bootstrap).option("topic", "t")

    with pytest.raises(Exception, match=r'can only be appended to: write with \.mode\("append"\)'):
        writer().mode("overwrite").save()
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):  # Spark's own, before us
        writer().save()
