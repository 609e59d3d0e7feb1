"""``sparkafka offsets replan``: plan a query's unfinished last batch again, under its current options.

Runs in the CLI's process, on a checkpoint directory on a local or mounted file system, and reads the
exactly-once sink's intent log. Spark replays a batch that did not finish with the offsets it planned the
first time (its offset log's last entry has no commit), so a changed ``maxOffsetsPerTrigger`` cannot shrink
it. For the exactly-once sink that can mean no progress ever: a batch whose transactions cannot be written
within the broker's ``transaction.max.timeout.ms`` is refused on every replay. Moving that entry aside (it
is kept under ``replanned/``) makes Spark plan the batch again, from the end of the batch before it, with
the source's current options.

Safe only when nothing of the batch reached the output and the query is stopped: the sink's intent log must
know the query (so the prefix is the right one) and show the batch not committed (no record of it, or
``abandoned``); a batch with anything visible or pending is refused, and so is a stateful query (its state
store may hold the batch's updates). The commit log is checked again just before the entry is moved.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from sparkafka.errors import ConfigError
from sparkafka.sink.intents import LogState
from sparkafka.sink.writer import query_id_from_checkpoint

__all__ = ["ReplanPlan", "plan_replan", "replan"]


@dataclass(frozen=True)
class ReplanPlan:
    """What ``replan`` does with ``execute``: which offset-log entry it moves aside, or why it refuses."""

    checkpoint: Path
    batch: int | None
    effect: str
    refusal: str | None = None


def _batches(directory: Path) -> list[int]:
    return sorted(int(p.name) for p in directory.glob("[0-9]*") if p.name.isdigit())


def plan_replan(checkpoint: str | Path, state: LogState, prefix: str) -> ReplanPlan:
    """Decide from the checkpoint's logs and the prefix's intent log (``state``); reads files only.

    Raises:
        ConfigError: ``checkpoint`` is not a Spark checkpoint.
    """
    root = Path(checkpoint)
    if not (root / "offsets").is_dir():
        raise ConfigError(f"--checkpoint {root}: not a Spark checkpoint (it has no offsets directory)")
    planned, committed = _batches(root / "offsets"), _batches(root / "commits")
    if not planned or (committed and committed[-1] >= planned[-1]):
        return ReplanPlan(root, None, "", f"--checkpoint {root}: every planned batch is committed")
    batch = planned[-1]

    def refuse(why: str) -> ReplanPlan:
        return ReplanPlan(root, batch, "", f"batch {batch} cannot be planned again: {why}")

    if (root / "state").is_dir() and any((root / "state").iterdir()):
        return refuse(
            "the query keeps state (aggregations, joins, dropDuplicates), which may hold its updates"
        )
    query_id = query_id_from_checkpoint(str(root))
    if query_id is None:
        return refuse(f"{root}/metadata does not name the query")
    record = state.latest.get(query_id)
    if record is None:
        return refuse(
            f"prefix {prefix!r} has no record of query {query_id}, so it cannot show that nothing of the "
            "batch was written (check --prefix: the query's sink's transactionalIdPrefix)"
        )
    if record.batch_id >= batch and record.state != "abandoned":
        shown = {"intent": "pending", "done": "committed", "partial": "partly committed"}[record.state]
        return refuse(
            f"prefix {prefix!r} shows batch {record.batch_id} of query {query_id} {shown}: its rows are (or "
            "may be) in the output, and a new plan would write other rows"
        )
    why = (
        "nothing of it is visible (refused as too old to commit)"
        if record.batch_id == batch and record.too_old
        else f"prefix {prefix!r} shows nothing of it committed"
    )
    return ReplanPlan(
        root,
        batch,
        f"move offsets/{batch} to replanned/, so that the restarted query plans batch {batch} again from "
        f"the end of batch {batch - 1} with its current options ({why})",
    )


def replan(
    checkpoint: str | Path, state: LogState, prefix: str, *, execute: bool, now_s: float | None = None
) -> ReplanPlan:
    """Plan (and with ``execute``, do) moving the unfinished batch's offset-log entry aside.

    The entry is moved to ``replanned/<batch>-<unix time>`` in the checkpoint, with its ``.crc`` checksum
    file if there is one: out of ``offsets/``, since Spark refuses to start a query at batch 0 whose
    ``offsets`` or ``commits`` directory holds any file (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``,
    ``MicroBatchExecution.verifyNewCheckpointDirectory``).
    """
    plan = plan_replan(checkpoint, state, prefix)
    if plan.refusal is not None or not execute:
        return plan
    assert plan.batch is not None
    if (plan.checkpoint / "commits" / str(plan.batch)).exists():  # the query committed it meanwhile
        return ReplanPlan(
            plan.checkpoint, plan.batch, "", f"batch {plan.batch} was committed meanwhile: nothing to do"
        )
    offsets = plan.checkpoint / "offsets"
    kept = plan.checkpoint / "replanned"
    kept.mkdir(exist_ok=True)
    stamp = int(now_s if now_s is not None else time.time())
    (offsets / str(plan.batch)).rename(kept / f"{plan.batch}-{stamp}")
    crc = offsets / f".{plan.batch}.crc"
    if crc.exists():
        crc.rename(kept / f".{plan.batch}-{stamp}.crc")
    return plan
