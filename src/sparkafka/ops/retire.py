"""Retiring what queries leave behind: a prefix's commit-intent topic, and metrics files.

Runs in the CLI's process: ``sparkafka txn retire --prefix P`` and ``sparkafka metrics retire``, each a
dry run that says exactly what ``--yes`` does (one plan function decides both).

- A ``transactionalIdPrefix`` whose queries are gone keeps its commit-intent topic
  (``_sparkafka-intents-<prefix>``, compacted: about one record per query) and its counters files for
  good. Retiring deletes the topic and the prefix's and its queries' counters files on this host. It is
  refused while a batch of the prefix is pending (its transactions neither committed nor aborted: the
  log is the only record of that decision; ``sparkafka txn resolve`` first), and while a query wrote to
  the log within ``QUIET_MS`` (it may still run, and a replay of a batch it committed would then be
  written again); ``--force`` overrides the latter, for a query known to be gone.
- Metrics files (``$TMPDIR/sparkafka/metrics/``: a source's per group, a sink's per prefix and per
  streaming query) pile up, one per query id and group ever run on the host. Retiring removes those not
  written for ``--older-than`` (7 days by default); their totals start again from zero.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sparkafka.client.core import admin_client, with_retries
from sparkafka.errors import ConfigError
from sparkafka.metrics_files import default_metrics_path, metrics_dir, query_sink_path
from sparkafka.sink.intents import intent_topic
from sparkafka.sink.txn_tool import read_prefix

__all__ = ["QUIET_MS", "RetirePlan", "plan_metrics", "plan_prefix", "retire"]

QUIET_MS = 600_000
"""How long a prefix's log must have gone unwritten before it may be retired without ``--force``."""


@dataclass(frozen=True)
class RetirePlan:
    """What retiring would do (``effect``), or why it may not (``refusal``)."""

    effect: str
    refusal: str | None = None
    topic: str | None = None
    """The intent topic to delete, if any."""
    files: tuple[Path, ...] = ()
    """The metrics files to remove."""


def plan_prefix(
    conf: Mapping[str, str],
    prefix: str,
    *,
    force: bool = False,
    timeout_s: float = 30.0,
    wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
) -> RetirePlan:
    """The plan for retiring ``prefix`` (see the module docstring); nothing is changed.

    Raises:
        ConfigError: the prefix has no intent log.
    """
    state = read_prefix(conf, prefix, timeout_s)
    topic = intent_topic(prefix)
    if state.pending:
        record = state.pending[0]
        return RetirePlan(
            "",
            f"query {record.query_id}'s batch {record.batch_id} is pending in {topic}: its transactions "
            "are neither committed nor aborted and the log is the only record of that decision: resolve "
            f"it first (sparkafka txn resolve ... --prefix {prefix} --query {record.query_id})",
        )
    owner = state.owner()
    if owner is not None and not force:
        quiet_for = wall_ms() - owner.at_ms
        if quiet_for < QUIET_MS:
            return RetirePlan(
                "",
                f"query {owner.query_id} wrote to {topic} {max(quiet_for, 0) // 1000} s ago: stop it first "
                f"(retire a prefix no query runs with), or add --force",
            )
    files = [default_metrics_path("sink", prefix)]
    files += [query_sink_path(query) for query in sorted(state.latest)]
    found = tuple(f for f in files if f.exists())
    return RetirePlan(
        f"delete topic {topic} ({len(state.latest)} queries' records) and {len(found)} metrics file(s) "
        f"under {metrics_dir()}",
        topic=topic,
        files=found,
    )


def plan_metrics(
    older_than_s: float, *, where: Path | None = None, now: Callable[[], float] = time.time
) -> RetirePlan:
    """The plan for removing the metrics files not written for ``older_than_s`` seconds."""
    if older_than_s < 0:
        raise ConfigError(f"--older-than {older_than_s / 86400:g} must not be negative")
    root = where or metrics_dir()
    cutoff = now() - older_than_s
    found = (
        tuple(sorted(p for p in root.glob("*.json") if p.stat().st_mtime < cutoff)) if root.is_dir() else ()
    )
    days = older_than_s / 86400
    return RetirePlan(
        f"remove {len(found)} metrics file(s) under {root} not written for {days:g} days"
        + "".join(f"\n  {p.name}" for p in found),
        files=found,
    )


def retire(plan: RetirePlan, conf: Mapping[str, str] | None = None, timeout_s: float = 30.0) -> None:
    """Carry out ``plan``: delete its topic (through the brokers of ``conf``), then remove its files.

    Raises:
        ConfigError: the plan is a refusal.
    """
    if plan.refusal is not None:
        raise ConfigError(plan.refusal)
    if plan.topic is not None:
        assert conf is not None
        admin = admin_client(conf)
        topic = plan.topic

        def delete(left: float) -> None:
            admin.delete_topics([topic], request_timeout=left)[topic].result(left)

        with_retries(f"deleting topic {topic}", conf, delete, timeout_s)
    for path in plan.files:
        path.unlink(missing_ok=True)
