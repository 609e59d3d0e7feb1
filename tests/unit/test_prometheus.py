"""The Prometheus exporter: progress events and counters files in, metrics (parsed as a scraper would) out."""

from __future__ import annotations

import json
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sparkafka.ops.prometheus import Exporter, is_sparkafka
from sparkafka.source.alignment_status import AlignmentStatus, PartitionEventTime
from sparkafka.source.commits import SourceMetrics
from sparkafka.structs import TopicPartition

PYTHON_SOURCE = "org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStream@6c84590d"


def progress(
    batch: int, rows: int, latest: dict[str, Any], end: dict[str, Any], ran: bool = True
) -> dict[str, Any]:
    durations = {"triggerExecution": 1500, "latestOffset": 20, "walCommit": 30}
    if ran:
        durations["addBatch"] = 1200
    return {
        "id": "q-1",
        "name": "orders",
        "batchId": batch,
        "numInputRows": rows,
        "processedRowsPerSecond": rows / 1.5,
        "durationMs": durations,
        "sources": [
            {"description": PYTHON_SOURCE, "latestOffset": json.dumps(latest), "endOffset": json.dumps(end)}
        ],
        "sink": {"description": "org.apache.spark.sql.execution.datasources.v2.python.PythonStreamingSink@1"},
        "observedMetrics": {"sparkafka_malformed": {"n": 2}},
    }


def scrape(exporter: Exporter) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(exporter.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_batches_rows_lag_and_sink_counters() -> None:
    sink: dict[str, int] = {"records": 500, "transactions": 4, "aborted": 1}  # an earlier run's
    exporter = Exporter(sink_counters=lambda query_id: dict(sink))
    exporter.begin("q-1")
    sink.update(records=560, transactions=6)
    exporter.observe(progress(0, 60, {"t": {"0": 40, "1": 30}}, {"t": {"0": 35, "1": 30}}))
    sink.update(records=600, transactions=8, aborted=3)
    exporter.observe(progress(1, 40, {"t": {"0": 40, "1": 30}}, {"t": {"0": 40, "1": 30}}))
    exporter.observe(progress(2, 0, {"t": {"0": 40, "1": 30}}, {"t": {"0": 40, "1": 30}}, ran=False))  # idle
    m = scrape(exporter)
    q = (("query", "orders"),)
    assert m["sparkafka_batches_total", q] == 2
    assert m["sparkafka_input_records_total", q] == 100
    assert m["sparkafka_output_records_total", q] == 100  # this run's, not the earlier run's 500
    assert m["sparkafka_transactions_committed_total", q] == 4
    assert m["sparkafka_transactions_aborted_total", q] == 2
    assert m["sparkafka_malformed_records_total", (("action", "skip"), ("query", "orders"))] == 4
    assert m["sparkafka_batch_duration_seconds_count", q] == 2
    assert m["sparkafka_batch_duration_seconds_sum", q] == 3.0
    assert m["sparkafka_batch_phase_seconds", (("phase", "addBatch"), ("query", "orders"))] == 1.2
    assert (
        m["sparkafka_records_behind_latest", (("partition", "0"), ("query", "orders"), ("topic", "t"))] == 0
    )
    m_first = Exporter(sink_counters=lambda _: {})
    m_first.observe(progress(0, 60, {"t": {"0": 40}}, {"t": {"0": 35}}))
    behind = scrape(m_first)[
        "sparkafka_records_behind_latest", (("partition", "0"), ("query", "orders"), ("topic", "t"))
    ]
    assert behind == 5


def test_group_commits_are_the_source_metrics_totals_and_offsets_per_partition() -> None:
    tp = TopicPartition("t", 0)
    state = {"ok": 7, "failed": 1}

    def metrics(group: str) -> SourceMetrics:
        return SourceMetrics(group, "on_checkpoint", state["ok"], state["failed"], {tp: 42})

    exporter = Exporter(sink_counters=lambda _: {}, source_metrics=metrics, groups={"orders": "g"})
    exporter.observe(progress(0, 1, {}, {}))
    state.update(ok=9, failed=2)
    exporter.observe(progress(1, 1, {}, {}))
    m = scrape(exporter)
    assert m["sparkafka_group_commits_total", (("group", "g"), ("query", "orders"), ("result", "ok"))] == 9
    assert (
        m["sparkafka_group_commits_total", (("group", "g"), ("query", "orders"), ("result", "failed"))] == 2
    )
    key = (("group", "g"), ("partition", "0"), ("query", "orders"), ("topic", "t"))
    assert m["sparkafka_group_committed_offset", key] == 42


def test_group_commits_of_earlier_runs_are_not_this_runs_as_the_sinks_are_not() -> None:
    state = {"ok": 7, "failed": 1}  # totals over every run of the group's source (sparkafka.source_metrics)

    def metrics(group: str) -> SourceMetrics:
        return SourceMetrics(group, "on_checkpoint", state["ok"], state["failed"])

    exporter = Exporter(
        sink_counters=lambda _: {"batches": 5}, source_metrics=metrics, groups={"orders": "g"}
    )
    exporter.begin("q-1", "orders")
    state.update(ok=9)
    exporter.observe(progress(0, 1, {}, {}))
    m = scrape(exporter)
    assert m["sparkafka_group_commits_total", (("group", "g"), ("query", "orders"), ("result", "ok"))] == 2
    assert (
        m["sparkafka_group_commits_total", (("group", "g"), ("query", "orders"), ("result", "failed"))] == 0
    )


def test_a_pipelines_metrics_carry_its_name_as_written() -> None:
    exporter = Exporter(sink_counters=lambda _: {}, labels={"orders_enrich": "orders-enrich"})
    exporter.observe({**progress(0, 3, {}, {}), "name": "orders_enrich"})
    assert scrape(exporter)["sparkafka_input_records_total", (("query", "orders-enrich"),)] == 3


def test_event_time_alignment_per_partition() -> None:
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    status = AlignmentStatus(
        bound_ms=1_700_000_600_000,
        slowest=t0,
        partitions={
            t0: PartitionEventTime(1_700_000_000_000, "active"),
            t1: PartitionEventTime(None, "empty"),
        },
        drift_ms=600_000,
    )
    held = AlignmentStatus(
        bound_ms=1_700_000_600_000,
        slowest=t0,
        partitions={
            t0: PartitionEventTime(1_700_000_000_000, "active"),
            t1: PartitionEventTime(1_700_000_900_000, "held"),
        },
        drift_ms=600_000,
    )
    now = {"status": status}

    def metrics(group: str) -> SourceMetrics:
        return SourceMetrics(group, "disabled", event_time=now["status"])

    exporter = Exporter(sink_counters=lambda _: {}, source_metrics=metrics, groups={"orders": "g"})
    exporter.observe(progress(0, 1, {}, {}))
    m = scrape(exporter)
    key = (("group", "g"), ("partition", "0"), ("query", "orders"), ("topic", "t"))
    assert m["sparkafka_partition_event_time_seconds", key] == 1_700_000_000
    assert m["sparkafka_partition_alignment", (*key[:3], ("state", "active"), key[3])] == 1
    assert m["sparkafka_partition_alignment", (*key[:3], ("state", "held"), key[3])] == 0
    assert m["sparkafka_partitions_held", (("group", "g"), ("query", "orders"))] == 0
    now["status"] = held
    exporter.observe(progress(1, 1, {}, {}))
    m = scrape(exporter)
    one = (("group", "g"), ("partition", "1"), ("query", "orders"), ("state", "held"), ("topic", "t"))
    assert m["sparkafka_partition_alignment", one] == 1
    assert m["sparkafka_partitions_held", (("group", "g"), ("query", "orders"))] == 1


def test_only_sparkafka_queries_are_exported() -> None:
    never = lambda _qid: False  # noqa: E731
    assert is_sparkafka(progress(0, 1, {"t": {"0": 4}}, {"t": {"0": 4}}), never)
    with_ids = {"t": {"0": 4}, "@topicIds": {"t": "8U_j8L8uSD6S7nNFuplY8g"}}  # the source keeps topic ids
    assert is_sparkafka(progress(0, 1, with_ids, with_ids), never)
    # Spark's own Kafka source has the same offsets, but it is not a Python data source.
    spark_kafka = progress(0, 1, {}, {}) | {
        "sources": [{"description": "KafkaV2[Subscribe[t]]", "endOffset": '{"t": {"0": 4}}'}]
    }
    assert not is_sparkafka(spark_kafka, never)
    other_python = progress(0, 1, {}, {}) | {
        "sources": [{"description": PYTHON_SOURCE, "endOffset": '{"pos": 7}'}]
    }
    assert not is_sparkafka(other_python, never)
    # A rate source into the sparkafka sink: known by the sink's counters for the query.
    rate = progress(0, 1, {}, {}) | {
        "sources": [{"description": "RateStreamV2[rowsPerSecond=1]", "endOffset": "5"}]
    }
    assert not is_sparkafka(rate, never)
    assert is_sparkafka(rate, lambda qid: qid == "q-1")
