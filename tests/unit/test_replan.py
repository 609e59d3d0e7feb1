"""``sparkafka offsets replan``: which unfinished batch may be planned again, and what is moved aside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkafka.errors import ConfigError
from sparkafka.ops.replan import plan_replan, replan
from sparkafka.sink.intents import IntentRecord, LogState

QUERY = "1f6e9a52-0000-4000-8000-000000000001"


def checkpoint(tmp: Path, planned: int, committed: int) -> Path:
    """A stateless query's checkpoint: batches 0..planned in its offset log, 0..committed in its commits."""
    root = tmp / "ck"
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text(json.dumps({"id": QUERY}))
    for batch in range(planned + 1):
        (root / "offsets" / str(batch)).write_text("v1\n{}\n" + json.dumps({"t": {"0": batch * 10}}) + "\n")
        (root / "offsets" / f".{batch}.crc").write_text("crc")
    for batch in range(committed + 1):
        (root / "commits" / str(batch)).write_text("v1\n{}\n")
    return root


def log_of(*records: IntentRecord) -> LogState:
    return LogState(latest={r.query_id: r for r in records})


def test_a_batch_refused_as_too_old_is_moved_aside_and_kept(tmp_path: Path) -> None:
    root = checkpoint(tmp_path, planned=3, committed=2)
    refused = IntentRecord(QUERY, 3, "abandoned", too_old=(840_000, 900_000))
    dry = replan(root, log_of(refused), "p", execute=False)
    assert dry.refusal is None
    assert dry.effect.startswith(
        "move offsets/3 to replanned/, so that the restarted query plans batch 3 again"
    )
    assert (root / "offsets" / "3").exists()
    done = replan(root, log_of(refused), "p", execute=True, now_s=1_800_000_000)
    assert done == dry
    assert sorted(p.name for p in (root / "offsets").iterdir()) == [
        ".0.crc",
        ".1.crc",
        ".2.crc",
        "0",
        "1",
        "2",
    ]
    assert sorted(p.name for p in (root / "replanned").iterdir()) == [".3-1800000000.crc", "3-1800000000"]


@pytest.mark.parametrize(
    ("state", "shown"), [("done", "committed"), ("partial", "partly committed"), ("intent", "pending")]
)
def test_a_batch_with_rows_in_the_output_or_pending_is_refused(
    tmp_path: Path, state: str, shown: str
) -> None:
    root = checkpoint(tmp_path, planned=3, committed=2)
    plan = replan(root, log_of(IntentRecord(QUERY, 3, state)), "p", execute=True)  # type: ignore[arg-type]
    assert plan.refusal == (
        f"batch 3 cannot be planned again: prefix 'p' shows batch 3 of query {QUERY} {shown}: its rows are "
        "(or may be) in the output, and a new plan would write other rows"
    )
    assert (root / "offsets" / "3").exists()


def test_nothing_unfinished_a_stateful_query_and_a_non_checkpoint_are_refused(tmp_path: Path) -> None:
    root = checkpoint(tmp_path, planned=2, committed=2)
    assert (
        plan_replan(root, LogState(), "p").refusal == f"--checkpoint {root}: every planned batch is committed"
    )
    (root / "commits" / "2").unlink()
    (root / "state" / "0").mkdir(parents=True)
    refusal = plan_replan(root, LogState(), "p").refusal
    assert refusal is not None
    assert refusal.startswith("batch 2 cannot be planned again: the query keeps state")
    with pytest.raises(ConfigError, match="not a Spark checkpoint"):
        plan_replan(tmp_path / "nothing", LogState(), "p")


def test_a_batch_the_sink_never_recorded_may_be_planned_again(tmp_path: Path) -> None:
    root = checkpoint(tmp_path, planned=1, committed=0)
    plan = plan_replan(root, log_of(IntentRecord(QUERY, 0, "done")), "p")
    assert plan.refusal is None
    assert plan.effect.endswith("(prefix 'p' shows nothing of it committed)")


def test_a_prefix_with_no_record_of_the_query_is_refused(tmp_path: Path) -> None:
    """Review finding F5: a wrong --prefix reads as "nothing committed"; it must be refused instead."""
    root = checkpoint(tmp_path, planned=1, committed=0)
    refusal = plan_replan(root, log_of(IntentRecord("another-query", 1, "done")), "p").refusal
    assert refusal == (
        f"batch 1 cannot be planned again: prefix 'p' has no record of query {QUERY}, so it cannot show "
        "that nothing of the batch was written (check --prefix: the query's sink's transactionalIdPrefix)"
    )


def test_a_partial_batch_refused_as_too_old_is_not_planned_again(tmp_path: Path) -> None:
    root = checkpoint(tmp_path, planned=1, committed=0)
    record = IntentRecord(QUERY, 1, "partial", too_old=(1, 2))
    refusal = plan_replan(root, log_of(record), "p").refusal
    assert refusal is not None
    assert "partly committed" in refusal
