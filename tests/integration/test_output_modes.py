"""Output modes of the streaming sink on a real broker and SparkSession: update (run as foreachBatch, at
least once and exactly once, across restarts and a driver kill), complete, and pipelines' output_mode.

The query counts records per key (``count_driver.count_query``) and writes ``<key>=<count>`` keyed by the
key, so a key's records share a partition and its newest record is the last one there. Counts only grow,
so under update mode a (key, count) pair written twice is a micro-batch written twice.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import sparkafka
from sparkafka.local.procs import GroupProcess
from sparkafka.sink.intents import IntentLog
from tests.integration.count_driver import count_query
from tests.integration.test_sink import held_back
from tests.support.kafka import Kafka, read_committed
from tests.support.queries import failed_attempts, spark_report
from tests.support.wait import wait_until


def newest_per_key(kafka: Kafka, topic: str) -> tuple[dict[str, int], Counter[str]]:
    """What a read_committed consumer reads: each key's newest count, and how often each ``key=count``."""
    newest: dict[str, int] = {}
    pairs: Counter[str] = Counter()
    for values in read_committed(kafka.conf, topic).values():  # each partition in offset order
        for value in values:
            assert value is not None
            key, _, count = value.decode().partition("=")
            newest[key] = int(count)
            pairs[value.decode()] += 1
    return newest, pairs


def run_counts(
    spark: Any, bootstrap: str, source: str, out: str, checkpoint: str, mode: str, **options: str
) -> Any:
    """Run the count query to the end of ``source`` (availableNow); fail with the query's error."""
    writer = (
        count_query(spark, bootstrap, source)
        .writeStream.format("sparkafka")
        .outputMode(mode)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("checkpointLocation", checkpoint)
        .options(**options)
    )
    query = writer.trigger(availableNow=True).start()
    assert query.awaitTermination(300), "query did not finish"
    if query.exception() is not None:
        raise AssertionError(str(query.exception()))
    return query


def exactly_once(name: str) -> dict[str, str]:
    return exactly_once_with(f"{name}-{uuid.uuid4().hex[:6]}")


def exactly_once_with(prefix: str) -> dict[str, str]:
    return {"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": prefix}


@pytest.mark.parametrize("delivery", ["exactly_once", "at_least_once"])
def test_update_mode_leaves_the_true_count_per_key_as_the_newest_record_across_restarts(
    spark: Any, kafka: Kafka, bootstrap: str, checkpoint: str, delivery: str
) -> None:
    source, out = kafka.topic(partitions=2), kafka.topic(partitions=2)
    options = exactly_once("upd") if delivery == "exactly_once" else {"deliveryGuarantee": delivery}
    first = kafka.produce(source, [f"c{i % 5}" for i in range(13)], partitions=2)
    query = run_counts(spark, bootstrap, source, out, checkpoint, "update", **options)
    assert query.lastProgress["sink"]["description"] == "ForeachBatchSink"  # the README says so
    assert newest_per_key(kafka, out)[0] == Counter(first)

    second = kafka.produce(source, [f"c{i % 7}" for i in range(9)], partitions=2)
    restarted = run_counts(spark, bootstrap, source, out, checkpoint, "update", **options)
    assert restarted.id == query.id  # the same query, resumed from its checkpoint
    newest, pairs = newest_per_key(kafka, out)
    assert newest == Counter(first + second)
    if delivery == "exactly_once":
        assert [p for p, n in pairs.items() if n > 1] == []  # no batch written twice
        counters = sparkafka.sink_metrics(options["transactionalIdPrefix"], query.id)
        assert counters["records"] == sum(pairs.values())
        assert counters["replays"] == 0


def test_complete_mode_writes_the_whole_table_each_batch(
    spark: Any, kafka: Kafka, bootstrap: str, checkpoint: str
) -> None:
    source, out = kafka.topic(partitions=2), kafka.topic(partitions=2)
    options = exactly_once("cmp")
    first = kafka.produce(source, [f"c{i % 3}" for i in range(6)], partitions=2)
    query = run_counts(spark, bootstrap, source, out, checkpoint, "complete", **options)
    assert "ForeachBatchSink" not in query.lastProgress["sink"]["description"]  # the streaming sink itself
    second = kafka.produce(source, ["c0", "c9"], partitions=2)
    run_counts(spark, bootstrap, source, out, checkpoint, "complete", **options)
    newest, pairs = newest_per_key(kafka, out)
    assert newest == Counter(first + second)
    assert pairs["c1=2"] > 1  # unchanged keys are written again: the whole result table each batch


def count_driver(
    bootstrap: str, source: str, out: str, checkpoint: Path, prefix: str, fault: str, marker: Path
) -> GroupProcess:
    """``count_driver`` in update mode, exactly once, in its own process group (killed as a whole)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKAFKA_TEST_FAULT")}
    env |= {"SPARKAFKA_TEST_FAULT": fault, "SPARKAFKA_TEST_FAULT_MARKER": str(marker)}
    args = [bootstrap, source, out, str(checkpoint), "exactly_once", "update", prefix]
    return GroupProcess(
        [sys.executable, "-m", "tests.integration.count_driver", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def test_update_mode_exactly_once_survives_a_driver_kill_between_intent_and_commit(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    source, out = kafka.topic(partitions=2), kafka.topic(partitions=2)
    values = kafka.produce(source, [f"c{i % 5}" for i in range(16)], partitions=2)  # 4 micro-batches
    prefix, checkpoint, marker = f"updkill-{uuid.uuid4().hex[:6]}", tmp_path / "ck", tmp_path / "fault.marker"
    pause = "after_intent_with_records:pause"
    with count_driver(bootstrap, source, out, checkpoint, prefix, pause, marker) as paused:
        wait_until(marker.exists, 300, "the driver to pause after batch 0's commit intent", process=paused)
    # Killed there (leaving the with-block kills its process group): decided, not committed. Batch 0's
    # counts are all in the log, in its open transactions, and none is visible.
    (intent,) = IntentLog(kafka.conf, prefix).read().pending
    assert intent.batch_id == 0
    assert sum(h.records for h in intent.handles) == held_back(kafka, out, 2) > 0
    assert set(kafka.pending_transactions(prefix).values()) == {"Ongoing"}  # undecided: no markers coming
    assert kafka.visible_now(out) == Counter()

    # The restart, as a new driver on the checkpoint: here, in the test's SparkSession.
    restarted = run_counts(
        spark, bootstrap, source, out, str(checkpoint), "update", **exactly_once_with(prefix)
    )
    newest, pairs = newest_per_key(kafka, out)
    assert newest == Counter(values)
    assert [p for p, n in pairs.items() if n > 1] == []
    # The killed commit was finished from its intent, and Spark's replay of that batch was aborted, not
    # written again: every record written counted once.
    counters = sparkafka.sink_metrics(prefix)
    assert (counters["recovered"], counters["replays"]) == (1, 1)
    assert counters["records"] == sum(pairs.values())
    assert counters["partial"] == counters["abandoned"] == 0
    assert restarted.exception() is None


PIPELINE = """
name = "counts"
checkpoint = "ck"
trigger = "availableNow"
{output_mode}
[source]
decode = "string"
[source.options]
"kafka.bootstrap.servers" = "{bootstrap}"
subscribe = "{source}"
startingOffsets = "earliest"
maxOffsetsPerTrigger = "4"
[transform]
sql = "SELECT value AS k, count(*) AS n FROM source GROUP BY value"
[sink]
key = "k"
value = "concat(k, '=', CAST(n AS STRING))"
[sink.options]
"kafka.bootstrap.servers" = "{bootstrap}"
topic = "{out}"
deliveryGuarantee = "exactly_once"
transactionalIdPrefix = "{prefix}"
"""


def run_pipeline_file(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "counts.toml"
    path.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "sparkafka.cli", "run", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_pipeline_output_mode_update_counts_exactly_once_and_append_says_why_not(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path
) -> None:
    from sparkafka.pipeline.config import load_pipeline
    from sparkafka.pipeline.plan import build_query

    source, out = kafka.topic(partitions=2), kafka.topic(partitions=2)
    values = kafka.produce(source, [f"c{i % 3}" for i in range(10)], partitions=2)
    fields = {"bootstrap": bootstrap, "source": source, "out": out, "prefix": f"pl-{uuid.uuid4().hex[:6]}"}

    refused = run_pipeline_file(tmp_path, PIPELINE.format(output_mode="", **fields))  # append, the default
    assert refused.returncode == 2, refused.stdout + refused.stderr
    last = refused.stdout.strip().splitlines()[-1]  # the runner's failure: its last line
    assert last.startswith(f"sparkafka run: {tmp_path / 'counts.toml'}: output_mode: "), last
    assert "Invalid streaming output mode: append" in last
    assert "str() failed" not in refused.stdout + refused.stderr

    # The same file with output_mode update: its query (here in the test's session) runs to the end.
    path = tmp_path / "counts.toml"
    path.write_text(PIPELINE.format(output_mode='output_mode = "update"', **fields))
    done = build_query(spark, load_pipeline(path))
    assert done.awaitTermination(300)
    assert done.exception() is None
    newest, pairs = newest_per_key(kafka, out)
    assert newest == Counter(values)
    assert [p for p, n in pairs.items() if n > 1] == []


def test_update_mode_fails_a_refused_batch_once_from_its_commit_with_nothing_visible(
    spark: Any, kafka: Kafka, bootstrap: str, checkpoint: str
) -> None:
    """A task of an update-mode batch meets a topic that does not exist: the batch writer's commit raises it
    (no task attempt fails), the other task's transaction is aborted, and the foreachBatch query fails."""
    source, out = kafka.topic(partitions=2), kafka.topic(partitions=2)
    missing = f"missing-{uuid.uuid4().hex[:12]}"
    kafka.produce(source, ["c0", "c1", "c2", "c3"], partitions=2)  # one micro-batch (4 records)
    prefix = f"updref-{uuid.uuid4().hex[:6]}"
    counts = count_query(spark, bootstrap, source).selectExpr(
        "key", "value", f"IF(key = 'c1', '{missing}', '{out}') AS topic"
    )
    query = (
        counts.writeStream.format("sparkafka")
        .outputMode("update")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("checkpointLocation", checkpoint)
        .options(**exactly_once_with(prefix))
        .trigger(availableNow=True)
        .start()
    )
    sentence = f"topic {missing!r} does not exist (the sink does not create topics)"
    with pytest.raises(Exception, match=re.escape(sentence)) as caught:
        query.awaitTermination(300)
    report = spark_report(caught.value)
    assert report.count("sparkafka.errors.") == 1, report  # once, raised by the batch writer's commit
    assert "in _commit\n" in report, report
    assert failed_attempts(spark, str(query.runId)) == 0
    assert kafka.committed_values(out) == Counter()
    assert held_back(kafka, out, 2) == 0
    assert kafka.open_transactions(prefix, 2) == []
