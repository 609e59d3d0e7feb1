"""Which consumer groups a query's sparkafka sources commit to (``serve`` without ``groups=``), and the
exporter's group metrics from them: fake plans and metrics files, no Spark."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from sparkafka.ops.prometheus import Exporter
from sparkafka.ops.query_groups import PlanSource, SourceGroup, plan_sources, session_groups, source_groups
from sparkafka.source.commits import MovedByHand, SourceMetrics, write_source_metrics
from sparkafka.structs import TopicPartition
from tests.unit.test_prometheus import progress, scrape

T0 = TopicPartition("t", 0)


def test_the_groups_are_those_of_the_sparkafka_sources_with_a_group_in_plan_order_each_once() -> None:
    sources = [
        PlanSource("rate", {}),
        PlanSource("kafka", {"kafka.group.id": "spark-kafka"}),  # Spark's connector commits nothing
        PlanSource("SparKafka", {"kafka.group.id": "orders"}),  # the format as written: any case
        PlanSource("sparkafka", {}),  # no group: commits nowhere
        PlanSource("sparkafka", {"kafka.group.id": "audit", "metricsFile": "/m/audit.json"}),
        PlanSource("sparkafka", {"kafka.group.id": "orders"}),
    ]
    assert source_groups(sources) == (SourceGroup("orders"), SourceGroup("audit", "/m/audit.json"))
    assert source_groups([]) == ()


class _Class:
    def __init__(self, name: str) -> None:
        self.name = name

    def getSimpleName(self) -> str:  # py4j: Java names
        return self.name


class _Options:
    """A CaseInsensitiveStringMap: get() takes any case, None when absent."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = {k.lower(): v for k, v in options.items()}

    def get(self, key: str) -> str | None:
        return self.options.get(key.lower())


class _Leaf:
    def __init__(self, kind: str, fmt: str = "", options: Mapping[str, str] | None = None) -> None:
        self.kind, self.fmt, self.options = kind, fmt, _Options(options or {})

    def getClass(self) -> _Class:
        return _Class(self.kind)

    def sourceName(self) -> str:
        return self.fmt

    def extraOptions(self) -> _Options:
        return self.options


class _Iterator:
    def __init__(self, items: list[_Leaf]) -> None:
        self.items: Iterator[_Leaf] = iter(items)
        self.left = len(items)

    def hasNext(self) -> bool:
        return self.left > 0

    def next(self) -> _Leaf:
        self.left -= 1
        return next(self.items)


class _Jvm:
    """The chain ``plan_sources`` walks: StreamingQueryWrapper -> StreamExecution -> analyzedPlan."""

    def __init__(self, leaves: list[_Leaf]) -> None:
        self.leaves = leaves

    def streamingQuery(self) -> _Jvm:
        return self

    def analyzedPlan(self) -> _Jvm:
        return self

    def collectLeaves(self) -> _Jvm:
        return self

    def iterator(self) -> _Iterator:
        return _Iterator(self.leaves)


class _Query:
    def __init__(self, leaves: list[_Leaf]) -> None:
        self._jsq = _Jvm(leaves)


def test_a_plans_sources_are_read_with_only_the_options_that_name_the_group() -> None:
    query = _Query(
        [
            _Leaf("LocalRelation"),
            _Leaf(
                "StreamingRelationV2",
                "sparkafka",
                {"KAFKA.GROUP.ID": "orders", "kafka.sasl.password": "secret", "metricsfile": "/m.json"},
            ),
            _Leaf("StreamingRelationV2", "rate"),
        ]
    )
    assert plan_sources(query) == [
        PlanSource("sparkafka", {"kafka.group.id": "orders", "metricsFile": "/m.json"}),
        PlanSource("rate", {}),
    ]


def test_a_spark_connect_query_has_no_plan_here() -> None:
    with pytest.raises(ValueError, match="Spark Connect"):
        plan_sources(object())


class _Streams:
    def __init__(self, queries: Mapping[str, Any]) -> None:
        self.queries = queries

    def get(self, query_id: str) -> Any:
        query = self.queries.get(query_id)
        if isinstance(query, Exception):
            raise query
        return query


class _Spark:
    def __init__(self, queries: Mapping[str, Any]) -> None:
        self.streams = _Streams(queries)


def test_a_sessions_queries_are_asked_by_id_and_what_cannot_be_read_is_no_group(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spark = _Spark(
        {
            "q-1": _Query([_Leaf("StreamingRelationV2", "sparkafka", {"kafka.group.id": "orders"})]),
            "q-2": object(),  # Spark Connect
            "q-3": RuntimeError("py4j: no such method"),
        }
    )
    discover = session_groups(spark)
    assert discover("q-1") == (SourceGroup("orders"),)
    assert discover("gone") == ()
    with caplog.at_level(logging.INFO, logger="sparkafka.ops.query_groups"):
        assert discover("q-2") == ()
        assert discover("q-3") == ()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1  # once, naming the way out
    assert "groups={query name: group}" in said[0]


def test_serve_without_groups_exports_the_group_series_of_the_groups_the_plan_names(tmp_path: Path) -> None:
    """The documented ``serve(spark, port)``: the exporter finds the group itself, and reads the metrics
    file the source was told to write (``metricsFile``), once per run of the query."""
    metrics_file = tmp_path / "orders.json"
    write_source_metrics(metrics_file, SourceMetrics("orders", "on_checkpoint", 3, 0, {T0: 42}))
    asked: list[str] = []

    def discover(query_id: str) -> tuple[SourceGroup, ...]:
        asked.append(query_id)
        return (SourceGroup("orders", str(metrics_file)),)

    exporter = Exporter(sink_counters=lambda _: {}, discover=discover)
    exporter.observe(progress(0, 1, {}, {}))  # the exporter started after the query: no begin
    write_source_metrics(metrics_file, SourceMetrics("orders", "on_checkpoint", 4, 0, {T0: 50}))
    exporter.observe(progress(1, 1, {}, {}))
    m = scrape(exporter)
    key = (("group", "orders"), ("partition", "0"), ("query", "orders"), ("topic", "t"))
    ok = ("sparkafka_group_commits_total", (("group", "orders"), ("query", "orders"), ("result", "ok")))
    assert m["sparkafka_group_committed_offset", key] == 50
    assert m[ok] == 4
    assert asked == ["q-1"]
    exporter.begin("q-1", "orders")  # the query restarts: asked again, its totals so far the baseline
    exporter.observe(progress(0, 1, {}, {}))
    assert asked == ["q-1", "q-1"]
    assert scrape(exporter)[ok] == 4


def test_groups_named_by_hand_win_over_the_plan() -> None:
    seen: list[str] = []

    def metrics(group: str) -> SourceMetrics:
        seen.append(group)
        return SourceMetrics(group, "on_checkpoint", 1, 0, {T0: 7})

    exporter = Exporter(
        sink_counters=lambda _: {},
        source_metrics=metrics,
        groups={"orders": "by-hand"},
        discover=lambda _: (SourceGroup("from-plan"),),
    )
    exporter.observe(progress(0, 1, {}, {}))
    assert set(seen) == {"by-hand"}


def test_a_query_reading_with_two_groups_exports_both() -> None:
    def metrics(group: str) -> SourceMetrics:
        return SourceMetrics(group, "on_checkpoint", 2 if group == "a" else 5, 0)

    exporter = Exporter(
        sink_counters=lambda _: {},
        source_metrics=metrics,
        discover=lambda _: (SourceGroup("a"), SourceGroup("b")),
    )
    exporter.observe(progress(0, 1, {}, {}))
    m = scrape(exporter)
    assert m["sparkafka_group_commits_total", (("group", "a"), ("query", "orders"), ("result", "ok"))] == 2
    assert m["sparkafka_group_commits_total", (("group", "b"), ("query", "orders"), ("result", "ok"))] == 5


def test_a_partition_moved_by_hand_is_flagged_with_the_offset_it_was_moved_to() -> None:
    t1 = TopicPartition("t", 1)
    now: dict[str, Any] = {
        "moved": {T0: MovedByHand(0, 11, 15, 1), t1: MovedByHand(None, 9, 9, 1)},
    }

    def metrics(group: str) -> SourceMetrics:
        return SourceMetrics(group, "on_checkpoint", 2, 0, {T0: 11, t1: 9}, moved_by_hand=now["moved"])

    exporter = Exporter(sink_counters=lambda _: {}, source_metrics=metrics, groups={"orders": "g"})
    exporter.observe(progress(0, 1, {}, {}))
    m = scrape(exporter)
    k0 = (("group", "g"), ("partition", "0"), ("query", "orders"), ("topic", "t"))
    k1 = (("group", "g"), ("partition", "1"), ("query", "orders"), ("topic", "t"))
    assert m["sparkafka_group_partition_moved_by_hand", k0] == 1
    assert m["sparkafka_group_partition_moved_by_hand", k1] == 1
    assert m["sparkafka_group_committed_offset", k0] == 0  # what the group holds, not what the query left
    assert ("sparkafka_group_committed_offset", k1) not in m  # deleted: the group has none
    now["moved"] = {}  # a new run of the query wrote its metrics
    exporter.observe(progress(1, 1, {}, {}))
    m = scrape(exporter)
    assert m["sparkafka_group_partition_moved_by_hand", k0] == 0
    assert m["sparkafka_group_committed_offset", k0] == 11


def test_an_idle_query_has_its_last_group_commit_read_again() -> None:
    """The source commits a batch's offsets after that batch's progress event; a query at rest sends only
    idle events, on which the exporter reads the metrics files again."""
    state = {"offset": 10, "ok": 1}

    def metrics(group: str) -> SourceMetrics:
        return SourceMetrics(group, "on_checkpoint", state["ok"], 0, {T0: state["offset"]})

    exporter = Exporter(
        sink_counters=lambda _: {}, source_metrics=metrics, discover=lambda _: (SourceGroup("g"),)
    )
    exporter.idle("q-1")  # never observed: not known to read with sparkafka
    assert not [k for k in scrape(exporter) if k[0] == "sparkafka_group_committed_offset"]
    exporter.observe(progress(0, 1, {}, {}))
    state.update(offset=25, ok=2)
    exporter.idle("q-1")
    m = scrape(exporter)
    assert (
        m[
            "sparkafka_group_committed_offset",
            (("group", "g"), ("partition", "0"), ("query", "orders"), ("topic", "t")),
        ]
        == 25
    )
    assert m["sparkafka_group_commits_total", (("group", "g"), ("query", "orders"), ("result", "ok"))] == 2
