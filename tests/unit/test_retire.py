"""Retiring a prefix's intent log and old metrics files: the plans, decided without a broker."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparkafka.errors import ConfigError
from sparkafka.ops import retire as retire_module
from sparkafka.ops.retire import QUIET_MS, plan_metrics, plan_prefix, retire
from sparkafka.sink.intents import IntentRecord, LogState
from sparkafka.sink.txn_control import TxnHandle

NOW_MS = 1_764_000_000_000
CONF = {"bootstrap.servers": "b:1"}


def state(*records: IntentRecord) -> LogState:
    return LogState({r.query_id: r for r in records}, tids_in_use=2)


def plan(monkeypatch: pytest.MonkeyPatch, log: LogState, force: bool = False) -> retire_module.RetirePlan:
    monkeypatch.setattr(retire_module, "read_prefix", lambda conf, prefix, timeout_s: log)
    return plan_prefix(CONF, "orders-eos", force=force, wall_ms=lambda: NOW_MS)


def test_a_pending_batch_is_never_retired(monkeypatch: pytest.MonkeyPatch) -> None:
    pending = IntentRecord(
        "q-1", 4, "intent", handles=(TxnHandle("orders-eos-0", 1, 0),), at_ms=NOW_MS - 10**9
    )
    refused = plan(monkeypatch, state(pending), force=True)
    assert refused.refusal is not None
    assert refused.refusal.startswith("query q-1's batch 4 is pending in _sparkafka-intents-orders-eos")
    with pytest.raises(ConfigError, match="resolve it first"):
        retire(refused, CONF)


def test_a_query_that_wrote_lately_needs_force(monkeypatch: pytest.MonkeyPatch) -> None:
    recent = IntentRecord("q-1", 4, "done", at_ms=NOW_MS - 60_000)
    assert plan(monkeypatch, state(recent)).refusal == (
        "query q-1 wrote to _sparkafka-intents-orders-eos 60 s ago: stop it first (retire a prefix no query "
        "runs with), or add --force"
    )
    assert plan(monkeypatch, state(recent), force=True).refusal is None


def test_an_idle_prefix_plans_its_topic_and_counters_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    from sparkafka.metrics_files import add_counts, default_metrics_path, query_sink_path

    add_counts(default_metrics_path("sink", "orders-eos"), {"batches": 1}, "q-1")
    add_counts(query_sink_path("q-1"), {"batches": 1})
    done = plan(monkeypatch, state(IntentRecord("q-1", 4, "done", at_ms=NOW_MS - QUIET_MS - 1)))
    assert done.refusal is None
    assert done.topic == "_sparkafka-intents-orders-eos"
    assert {p.name for p in done.files} == {"sink-orders-eos.json", "sink-query-q-1.json"}
    assert done.effect.startswith("delete topic _sparkafka-intents-orders-eos (1 queries' records) and 2 ")


def test_metrics_files_not_written_for_a_while_are_retired(tmp_path: Path) -> None:
    now = 1_000_000_000.0
    for name, age_days in (("source-g.json", 30), ("sink-query-q.json", 8), ("sink-p.json", 1)):
        path = tmp_path / name
        path.write_text("{}")
        os.utime(path, (now - age_days * 86400, now - age_days * 86400))
    planned = plan_metrics(7 * 86400, where=tmp_path, now=lambda: now)
    assert [p.name for p in planned.files] == ["sink-query-q.json", "source-g.json"]
    retire(planned)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sink-p.json"]
    assert plan_metrics(1, where=tmp_path / "none", now=lambda: now).files == ()
    with pytest.raises(ConfigError, match="must not be negative"):
        plan_metrics(-1)
