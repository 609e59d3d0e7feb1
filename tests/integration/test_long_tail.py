"""The exactly-once sink's long tail on Apache Kafka: volume written after a batch, ids the broker forgot,
epochs bumped by a stray producer, a group reset under a running query (issue 37's findings, each once).

The scenarios need only the broker and the committer's real parts (intent log, EndTxn client, producers),
not a SparkSession: each step a running query takes is called here directly, in the order Spark calls it.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from sparkafka.errors import ConfigError, TransactionError
from sparkafka.sink.intents import IntentLog, IntentRecord, intent_topic
from sparkafka.sink.options import InputColumns, parse_sink_options
from sparkafka.sink.task import write_task
from sparkafka.sink.twophase import TwoPhaseCommitter
from tests.support.kafka import Kafka
from tests.support.wait import wait_until


def sink_options(conf: dict[str, str], topic: str, prefix: str, **extra: str) -> Any:
    kafka = {f"kafka.{k}": v for k, v in conf.items()}
    return parse_sink_options(
        {
            **kafka,
            "topic": topic,
            "deliveryGuarantee": "exactly_once",
            "transactionalIdPrefix": prefix,
            **extra,
        }
    )


def task_rows(values: list[str]) -> Any:
    import pyarrow as pa

    return iter([pa.RecordBatch.from_pydict({"value": pa.array(values, pa.string())})])


def append_raw(conf: dict[str, str], prefix: str, records: list[IntentRecord]) -> None:
    """Append intent records with one producer (as hundreds of batches of a query would have)."""
    from confluent_kafka import Producer

    producer = Producer({**conf, "acks": "all", "linger.ms": "5"})
    for record in records:
        producer.produce(intent_topic(prefix), record.to_json(), key=record.key())
    assert producer.flush(30) == 0


def test_a_batch_done_before_300_records_of_a_new_owner_is_still_done_and_its_owner_refused(
    kafka: Kafka, kafka_conf: dict[str, str]
) -> None:
    """Finding 3: query A commits batch 5 and dies before Spark's commit log records it; B takes the
    prefix over and writes 300 batches; A restarts and replays batch 5. The replay must be aborted (not
    written twice) and A's next batch refused while B is live."""
    topic = kafka.topic(partitions=2)
    prefix = f"lt3-{uuid.uuid4().hex[:8]}"
    options = sink_options(kafka_conf, topic, prefix)
    IntentLog(kafka_conf, prefix).create()  # the topic, as A's first write made it
    now = int(time.time() * 1000)
    a, b = f"query-a-{uuid.uuid4().hex[:6]}", f"query-b-{uuid.uuid4().hex[:6]}"
    append_raw(kafka_conf, prefix, [IntentRecord(a, 5, "done", (), 2, at_ms=now - 3_600_000)])
    append_raw(
        kafka_conf,
        prefix,
        [
            r
            for n in range(150)
            for r in (
                IntentRecord(b, n, "intent", (), 2, at_ms=now),
                IntentRecord(b, n, "done", (), 2, at_ms=now),
            )
        ],
    )

    committer = TwoPhaseCommitter.for_options(options)
    state = committer.recover()
    assert state.is_done(a, 5), "batch 5 of A, done 300 records ago, must read as done"
    replay = [write_task(options, _columns(), task_rows(["a5-0", "a5-1"]), 0, a)]
    TwoPhaseCommitter.for_options(options).commit(a, 5, replay)  # a done batch's replay: aborted
    assert kafka.committed(topic) == []
    with pytest.raises(ConfigError, match=f"belongs to streaming query {b}"):
        TwoPhaseCommitter.for_options(options).check_owner(state, a)


def _columns() -> InputColumns:
    return InputColumns()


# -- transactions the coordinator cannot speak for any more ------------------------------------------------

TXN_TIMEOUT_MS = 8_000
"""The batch's transactions' timeout on the forgetting broker: the open one is aborted 8 s in. The commit
refuses a batch older than this less its margin, 4 s here: room for two tasks on a loaded machine (at 4_000
the margin was 2 s, and a run beside other work took 2.1 s and was refused)."""


@pytest.fixture(scope="module")
def forgetting_kafka(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Apache Kafka that forgets transactional ids two seconds after their last transaction ended.

    ``transactional.id.expiration.ms`` is 7 days by default; checked every
    ``transaction.remove.expired.transaction.cleanup.interval.ms`` (1 hour by default): both short, so
    that "a week later" takes seconds. Timed-out transactions are aborted within half a second.
    """
    from sparkafka.local.kafka_broker import ApacheKafka

    config = {
        "transactional.id.expiration.ms": "2000",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "500",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
        "log.retention.ms": "-1",
    }
    with ApacheKafka(data_dir=tmp_path_factory.mktemp("forgetting-kafka"), config=config) as broker:
        yield {"bootstrap.servers": broker.bootstrap_servers}


def forgotten(conf: dict[str, str], *tids: str) -> bool:
    """Whether the transaction coordinator no longer knows any of ``tids`` (DescribeTransactions)."""
    from kafka.errors import TransactionalIdNotFoundError

    from sparkafka.client.core import new_kafka_python_admin

    admin = new_kafka_python_admin(conf, 10)
    try:
        for tid in tids:
            try:
                admin.describe_transactions([tid])
            except TransactionalIdNotFoundError:
                continue
            return False
        return True
    finally:
        admin.close()


def commit_then_crash(
    options: Any,
    query: str,
    rows: list[list[str]],
    tmp: Any,
    monkeypatch: pytest.MonkeyPatch,
    *,
    point: str = "after_first_txn",
    old_intent: bool = False,
) -> list[Any]:
    """Run batch 0's tasks, then its commit until the driver dies at ``point``. ``old_intent``: the
    handles carry no probe, as intents written by versions before 0.2 did."""
    from sparkafka.sink.faults import InjectedFaultError

    TwoPhaseCommitter.for_options(options).recover()  # what making the writer does
    results = [write_task(options, _columns(), task_rows(r), t, query) for t, r in enumerate(rows)]
    if old_intent:
        results = [replace(r, handle=replace(r.handle, probe=None)) for r in results]
    monkeypatch.setenv("SPARKAFKA_TEST_FAULT", f"{point}:raise")
    monkeypatch.setenv("SPARKAFKA_TEST_FAULT_MARKER", str(tmp / f"fault-{uuid.uuid4().hex}"))
    with pytest.raises(InjectedFaultError):
        TwoPhaseCommitter.for_options(options).commit(query, 0, results)
    monkeypatch.delenv("SPARKAFKA_TEST_FAULT")
    return results


def forgotten_pending_batch(
    conf: dict[str, str], tmp: Any, monkeypatch: pytest.MonkeyPatch, **crash: Any
) -> tuple[Kafka, str, Any, str, list[list[str]]]:
    """Batch 0 of a new query, its driver dead at a fault point (``commit_then_crash``); both ids then
    forgotten by the broker (task 1's transaction timed out first). (kafka, topic, sink options, query id,
    rows per task)."""
    kafka = Kafka(conf)
    topic = kafka.topic(partitions=2)
    prefix = f"lt1-{uuid.uuid4().hex[:8]}"
    options = sink_options(conf, topic, prefix, **{"kafka.transaction.timeout.ms": str(TXN_TIMEOUT_MS)})
    query = f"query-{uuid.uuid4().hex[:6]}"
    rows = [[f"t0-{i}" for i in range(5)], [f"t1-{i}" for i in range(7)]]
    commit_then_crash(options, query, rows, tmp, monkeypatch, **crash)
    wait_until(lambda: forgotten(conf, f"{prefix}-0", f"{prefix}-1"), 60, "both ids to be forgotten")
    return kafka, topic, options, query, rows


def values_of(kafka: Kafka, topic: str) -> Counter[bytes | None]:
    return kafka.committed_values(topic)


def expected(rows: list[list[str]]) -> Counter[bytes | None]:
    return Counter(v.encode() for task in rows for v in task)


def test_a_committed_transaction_whose_epoch_was_bumped_afterwards_is_still_committed(
    kafka: Kafka, kafka_conf: dict[str, str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 5: the driver dies after committing task 0's transaction; a stray InitProducerId (a zombie
    attempt, a second writer) then bumps that id's epoch. Recovery's EndTxn answers PRODUCER_FENCED, which
    must not be read as "aborted": the batch is done, and its replay writes nothing twice."""
    from sparkafka.sink.identity import open_transactional_producer

    topic = kafka.topic(partitions=2)
    prefix = f"lt5-{uuid.uuid4().hex[:8]}"
    options = sink_options(kafka_conf, topic, prefix)
    query = f"query-{uuid.uuid4().hex[:6]}"
    rows = [[f"t0-{i}" for i in range(5)], [f"t1-{i}" for i in range(7)]]
    commit_then_crash(options, query, rows, tmp_path, monkeypatch)
    # Task 0's rows visible once its markers are in, task 1's still open (committed_values would re-read
    # for its full 10 s): wait for exactly task 0's rows.
    wait_until(
        lambda: kafka.visible_now(topic) == expected(rows[:1]),
        30,
        "task 0's rows, and only them, to be visible",
        detail=lambda: f"visible: {kafka.visible_now(topic)}",
    )
    assert kafka.pending_transactions(prefix)[f"{prefix}-1"] == "Ongoing"  # task 1's stays hidden

    stray, _pid, _epoch = open_transactional_producer(kafka_conf, f"{prefix}-0")  # InitProducerId on p-0
    stray.close()

    state = TwoPhaseCommitter.for_options(options).recover()  # the restarted query's first writer
    assert state.latest[query].state == "done"
    assert values_of(kafka, topic) == expected(rows)
    replay = [write_task(options, _columns(), task_rows(r), t, query) for t, r in enumerate(rows)]
    TwoPhaseCommitter.for_options(options).commit(query, 0, replay)  # Spark's replay of batch 0
    assert values_of(kafka, topic) == expected(rows)


@pytest.mark.xdist_group("forgetting-kafka")  # one module broker, not one per test process
def test_a_pending_batch_whose_ids_expired_is_decided_from_the_transaction_markers(
    forgetting_kafka: dict[str, str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 1: the driver dies after the intent and the first commit; the broker times out the other
    transaction, then forgets both ids (transactional.id.expiration.ms), and retention has deleted the
    output's records meanwhile. EndTxn now answers INVALID_PRODUCER_ID_MAPPING; each task's witness record
    in the intent log keeps its marker: task 0 committed, task 1 not, and the replay writes task 1 only."""
    conf = forgetting_kafka
    kafka, topic, options, query, rows = forgotten_pending_batch(conf, tmp_path, monkeypatch)
    delete_records(conf, topic)  # as retention would, a week later
    state = TwoPhaseCommitter.for_options(options).recover()
    record = state.latest[query]
    assert (record.state, [h.task for h in record.committed]) == ("partial", [0])
    replay = [write_task(options, _columns(), task_rows(r), t, query) for t, r in enumerate(rows)]
    TwoPhaseCommitter.for_options(options).commit(query, 0, replay)
    assert values_of(kafka, topic) == expected(rows[1:])  # task 0's rows went with retention, once


@pytest.mark.xdist_group("forgetting-kafka")
def test_a_pending_batch_nothing_can_decide_stops_the_query_naming_a_command_that_works(
    forgetting_kafka: dict[str, str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 1, without evidence: an intent written by a version that recorded no marker positions, its
    ids forgotten. Every writer stops with one sentence naming `sparkafka txn resolve ... --yes`; running
    it resolves the batch."""
    conf = forgetting_kafka
    kafka, topic, options, query, rows = forgotten_pending_batch(
        conf, tmp_path, monkeypatch, point="after_intent", old_intent=True
    )
    prefix = options.transactional_id_prefix
    with pytest.raises(TransactionError) as failure:
        TwoPhaseCommitter.for_options(options).recover()
    message = str(failure.value)
    command = f"sparkafka txn resolve --bootstrap-servers {conf['bootstrap.servers']} --prefix {prefix}"
    assert f"{command} --query {query} rewrite --yes" in message, message
    assert "\n" not in message
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sparkafka.cli",
            *shlex.split(command[len("sparkafka ") :]),
            "--query",
            query,
            "rewrite",
            "--yes",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    state = TwoPhaseCommitter.for_options(options).recover()
    assert state.latest[query].state == "abandoned"  # nothing of it counted visible: the replay writes it
    replay = [write_task(options, _columns(), task_rows(r), t, query) for t, r in enumerate(rows)]
    TwoPhaseCommitter.for_options(options).commit(query, 0, replay)
    assert values_of(kafka, topic) == expected(rows)


def delete_records(conf: dict[str, str], topic: str) -> None:
    """DeleteRecords up to each partition's high watermark (as retention would)."""
    from confluent_kafka import TopicPartition as CTopicPartition

    from sparkafka.client.core import admin_client

    ends = read_committed_ends(conf, topic)
    admin = admin_client(conf)
    for future in admin.delete_records([CTopicPartition(topic, p, o) for p, o in ends.items()]).values():
        future.result(30)


def read_committed_ends(conf: dict[str, str], topic: str) -> dict[int, int]:
    """Each partition's high watermark."""
    from sparkafka.client.metadata import AdminMetadata
    from sparkafka.structs import TopicPartition

    meta = AdminMetadata({**conf, "isolation.level": "read_uncommitted"})
    ends = meta.latest([TopicPartition(topic, p) for p in range(2)])
    return {tp.partition: o for tp, o in ends.items()}


# -- a group reset under a running query (finding 4) -------------------------------------------------------


def test_a_reset_is_refused_while_a_sparkafka_query_commits_and_a_forced_one_is_never_overwritten(
    kafka: Kafka, kafka_conf: dict[str, str]
) -> None:
    """sparkafka commits without joining the group, so the group reads Empty while a query runs: the tool
    must see the query's liveness in its commits' metadata, and the query must not write over a reset."""
    from sparkafka.ops.group_offsets import parse_target, reset_group
    from sparkafka.source.commits import RECHECK_AFTER_S, KafkaCommitClient, OffsetCommitter
    from sparkafka.structs import TopicPartition

    topic = kafka.topic(partitions=2)
    kafka.produce(topic, [f"v{i}" for i in range(20)], partitions=2)
    group = f"lt4-{uuid.uuid4().hex[:8]}"
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    now = [1000.0]
    committer = OffsetCommitter(
        lambda: KafkaCommitClient(kafka_conf, group), group, mode="on_checkpoint", clock=lambda: now[0]
    )
    try:
        committer.completed({tps[0]: 5, tps[1]: 7})
        wait_until(lambda: kafka.group_offsets(group, topic, 2) == {tps[0]: 5, tps[1]: 7}, 30, "commit")

        with pytest.raises(
            ConfigError, match=f"group '{group}' is committed to by a running sparkafka query"
        ):
            reset_group(kafka_conf, group, parse_target("earliest"), execute=True)
        assert kafka.group_offsets(group, topic, 2) == {tps[0]: 5, tps[1]: 7}

        reset_group(kafka_conf, group, parse_target("earliest"), execute=True, force=True)
        assert kafka.group_offsets(group, topic, 2) == {tps[0]: 0, tps[1]: 0}
        now[0] += RECHECK_AFTER_S + 1  # the query idles, then completes another batch
        committer.completed({tps[0]: 9, tps[1]: 9})  # reads the group first: someone moved it
        assert committer.stopped_by is not None
        committer.close()  # would send what is due: nothing may be
        assert kafka.group_offsets(group, topic, 2) == {tps[0]: 0, tps[1]: 0}
        assert "changed by another client" in (committer.metrics.last_error or "")
    finally:
        committer.close()


# -- a batch too big to commit within the transaction timeout (finding 6) ----------------------------------


def test_a_batch_too_old_to_commit_makes_progress_once_replanned_under_a_read_limit(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Any
) -> None:
    """Batch 0 (read from earliest with no limit) takes longer than the transaction timeout allows: it is
    refused, nothing visible, and its replay would be the same batch. The advice's way out works: set
    maxOffsetsPerTrigger, `sparkafka offsets replan`, restart: every row exactly once."""
    from pyspark.errors import StreamingQueryException
    from pyspark.sql.functions import col, udf

    source_topic, out = kafka.topic(partitions=2), kafka.topic(partitions=2)
    values = [f"v{i:03d}" for i in range(80)]
    kafka.produce(source_topic, values, partitions=2)
    prefix = f"lt6-{uuid.uuid4().hex[:8]}"
    checkpoint = str(tmp_path / "ck")

    def work(value):  # type: ignore[no-untyped-def]  # untyped: Spark reads hints as a pandas UDF's
        time.sleep(0.15)  # the query's own work, 0.15 s a row: 40 rows take 6 s in one task
        return value

    slow = udf(work, "string")

    def run(**source_options: str) -> Any:
        df = (
            spark.readStream.format("sparkafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source_topic)
            .option("startingOffsets", "earliest")
            .options(**source_options)
            .load()
            .select(slow(col("value").cast("string")).alias("value"))
        )
        query = (
            df.writeStream.format("sparkafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", out)
            .option("deliveryGuarantee", "exactly_once")
            .option("transactionalIdPrefix", prefix)
            .option("kafka.transaction.timeout.ms", "10000")  # a batch may take 5 s, less a 5 s margin
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        with contextlib.suppress(StreamingQueryException):  # a failed query: its exception is returned
            assert query.awaitTermination(180), "query did not finish"
        return query.exception()

    failure = run()
    assert failure is not None
    assert "was not committed: its oldest transaction is" in str(failure)
    assert f"sparkafka offsets replan --checkpoint {checkpoint}" in str(failure)
    assert kafka.committed_values(out) == Counter()

    replan = subprocess.run(
        [
            sys.executable,
            "-m",
            "sparkafka.cli",
            "offsets",
            "replan",
            "--checkpoint",
            checkpoint,
            "--bootstrap-servers",
            bootstrap,
            "--prefix",
            prefix,
            "--execute",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert replan.returncode == 0, replan.stderr
    assert run(maxOffsetsPerTrigger="20") is None  # 10 rows a task: 1.5 s of work, well inside 5 s
    assert kafka.committed_values(out) == Counter(v.encode() for v in values)
