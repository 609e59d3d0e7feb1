"""``sparkafka txn resolve``: one decision (``plan_resolve``) for the dry run and the real run.

The issue: without ``--yes`` a finished batch got "would commit the unfinished batch" and a made-up query
id "would abort", while ``--yes`` said there was nothing to resolve. The real run's refusals are the dry
run's, word for word (``resolve`` raises ``plan.refusal``).
"""

from __future__ import annotations

from typing import Any

import pytest

from sparkafka.errors import ConfigError
from sparkafka.sink import txn_tool
from sparkafka.sink.intents import IntentRecord, LogState
from sparkafka.sink.twophase import ResolveAction, TwoPhaseCommitter
from sparkafka.sink.txn_control import TxnHandle
from sparkafka.sink.txn_tool import plan_resolve


def handle(task: int, records: int = 100) -> TxnHandle:
    return TxnHandle(f"p-{task}", 1000 + task, 0, records, task)


def state(*records: IntentRecord) -> LogState:
    return LogState(latest={r.query_id: r for r in records})


PENDING = IntentRecord("q1", 4, "intent", handles=(handle(0), handle(1)))
DONE = IntentRecord("q1", 4, "done")
PARTIAL = IntentRecord("q1", 4, "partial", handles=(handle(1),), committed=(handle(0),))
ABANDONED = IntentRecord("q1", 4, "abandoned", handles=(handle(0), handle(1)))


def test_a_pending_batch_would_be_committed_naming_its_transactions() -> None:
    plan = plan_resolve(state(PENDING), "p", "q1", "commit")
    assert plan.refusal is None
    assert plan.effect.startswith("commit batch 4 of query q1: EndTxn(commit) for its 2 transactions")
    assert "(p-0, p-1; 200 records)" in plan.effect


def test_a_done_batch_has_nothing_to_resolve_whatever_the_action() -> None:
    actions: tuple[ResolveAction, ...] = ("commit", "abort", "mark-done", "rewrite")
    for action in actions:
        plan = plan_resolve(state(DONE), "p", "q1", action)
        assert plan.refusal == "batch 4 of query q1 is done: nothing to resolve"
        assert plan.effect == ""


def test_a_made_up_query_is_no_such_query_not_would_abort() -> None:
    plan = plan_resolve(state(PENDING), "p", "made-up", "abort")
    assert plan.refusal is not None
    assert plan.refusal.startswith("no such query: prefix 'p' has no record of query made-up")
    assert "its queries: q1" in plan.refusal


def test_an_action_the_state_does_not_take_names_the_ones_it_does() -> None:
    plan = plan_resolve(state(ABANDONED), "p", "q1", "rewrite")
    assert plan.refusal == "cannot rewrite batch 4 of query q1: it is abandoned (allowed: mark-done)"


def test_a_pending_batch_takes_mark_done_or_rewrite_for_outcomes_nothing_can_give() -> None:
    """Its transactions' ids expired and their markers are gone: the operator says what the output holds."""
    done = plan_resolve(state(PENDING), "p", "q1", "mark-done")
    assert done.refusal is None
    assert done.effect.startswith("mark pending batch 4 of query q1: EndTxn(commit) for its 2 transactions")
    assert done.effect.endswith("counted committed (its rows are taken to be in the output)")
    rewrite = plan_resolve(state(PENDING), "p", "q1", "rewrite").effect
    assert rewrite.endswith("counted not committed (Spark's replay writes its rows)")


def test_partial_and_abandoned_effects_say_what_becomes_of_the_rows() -> None:
    done = plan_resolve(state(PARTIAL), "p", "q1", "mark-done").effect
    assert "rows of tasks 0 stay visible and those of tasks 1 are never written" in done
    rewrite = plan_resolve(state(PARTIAL), "p", "q1", "rewrite").effect
    assert "visible rows of tasks 0 appear twice" in rewrite
    assert "nothing of it is visible" in plan_resolve(state(ABANDONED), "p", "q1", "mark-done").effect


class FakeLog:
    """The prefix's intent log, holding one record."""

    def __init__(self, record: IntentRecord) -> None:
        self.record = record

    def read(self) -> LogState:
        return state(self.record)


def test_the_real_run_refuses_with_the_dry_runs_words_and_acts_only_on_a_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    acted: list[Any] = []
    log = FakeLog(DONE)

    class Committer:
        def resolve(self, query_id: str, action: str) -> IntentRecord:
            acted.append((query_id, action))
            return DONE

    monkeypatch.setattr(txn_tool, "_existing_log", lambda *_: log)
    monkeypatch.setattr(TwoPhaseCommitter, "for_options", classmethod(lambda cls, _o: Committer()))
    dry = txn_tool.resolve_plan({"bootstrap.servers": "b:9092"}, "p", "q1", "commit")
    with pytest.raises(ConfigError) as refused:
        txn_tool.resolve({"bootstrap.servers": "b:9092"}, "p", "q1", "commit")
    assert str(refused.value) == dry.refusal
    assert acted == []

    log.record = PENDING
    assert txn_tool.resolve({"bootstrap.servers": "b:9092"}, "p", "q1", "commit") == DONE
    assert acted == [("q1", "commit")]
