"""``sparkafka offsets``: a query's positions side by side, and resetting a consumer group's offsets.

Runs in the CLI's process, against the brokers (through ``AdminMetadata``) and a checkpoint directory on a
local or mounted file system. Three positions exist for a sparkafka source: the checkpoint's (where the
query resumes: the end of the last batch in Spark's commit log), the consumer group's committed offsets
(where monitoring and ``startingOffsets=group`` look; sparkafka commits them after each batch completes),
and the log's ends. ``show`` puts them side by side. ``reset`` moves the group, as Kafka's
``kafka-consumer-groups --reset-offsets`` does: a dry run unless executed, refused while the group has
members, offsets outside the log clamped to its ends. A running query keeps reading from its checkpoint;
to restart from the group's new position, start the query with a new checkpoint and
``startingOffsets=group``.

``--to timestamp:MS`` trusts the broker's ListOffsets(timestamp) answers only where they are known right
(``check_timestamp_lookups``): tansu answers 0 for every timestamp, so a reset planned on it proposed the
log start for every partition, with no warning (measured). Such a broker is refused, saying why.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sparkafka.client.broker_gaps import looks_like_kafka_cluster_id
from sparkafka.client.core import admin_client, with_retries
from sparkafka.client.metadata import AdminMetadata
from sparkafka.errors import ConfigError
from sparkafka.ops.probes import Capability, probe_offsets_for_times
from sparkafka.source.commits import LIVE_WINDOW_S, CommitMark
from sparkafka.source.planning import offsets_from_json
from sparkafka.structs import TopicPartition

__all__ = [
    "CheckpointPosition",
    "PartitionPositions",
    "ResetPlan",
    "ResetTarget",
    "check_timestamp_lookups",
    "parse_target",
    "plan_reset",
    "read_checkpoint",
    "render_reset",
    "render_show",
    "reset_group",
    "running_query_refusal",
    "show_positions",
]

Offsets = dict[TopicPartition, int]
TargetKind = Literal["earliest", "latest", "timestamp", "checkpoint", "json"]
INACTIVE_STATES = ("Empty", "Dead")
"""Group states in which Kafka's own tool resets offsets (any other: members are, or are joining)."""
TARGET_FORMS = "earliest, latest, timestamp:MS (epoch milliseconds), checkpoint:DIR or json:{...}"


@dataclass(frozen=True)
class CheckpointPosition:
    """Where a query resumes: the end offsets of the last batch in Spark's commit log (None: no batch)."""

    batch: int | None
    offsets: Offsets = field(default_factory=dict)


def read_checkpoint(directory: str | Path) -> CheckpointPosition:
    """The last committed batch of a Spark checkpoint and its end offsets (its offset log's source line).

    Raises:
        ConfigError: no checkpoint there, or one with more than one source (naming ``--checkpoint``).
    """
    root = Path(directory)
    if not (root / "offsets").is_dir():
        raise ConfigError(f"--checkpoint {root}: not a Spark checkpoint (it has no offsets directory)")
    committed = sorted(int(p.name) for p in (root / "commits").glob("[0-9]*") if p.name.isdigit())
    if not committed:
        return CheckpointPosition(None)
    batch = committed[-1]
    lines = (root / "offsets" / str(batch)).read_text().splitlines()
    sources = [line for line in lines[2:] if line.strip()]  # "v1", the batch's metadata, then one per source
    if len(sources) != 1:
        raise ConfigError(
            f"--checkpoint {root}: batch {batch} has {len(sources)} sources; sparkafka offsets reads "
            "checkpoints of queries with one sparkafka source"
        )
    try:
        offsets = offsets_from_json(json.loads(sources[0]))
    except (ValueError, AttributeError, TypeError) as e:
        raise ConfigError(
            f"--checkpoint {root}: batch {batch}'s source offsets are not sparkafka's: {e}"
        ) from e
    return CheckpointPosition(batch, offsets)


@dataclass(frozen=True)
class ResetTarget:
    """Where ``--to`` moves a group's committed offsets, as ``parse_target`` read it."""

    kind: TargetKind
    timestamp_ms: int | None = None
    offsets: Offsets = field(default_factory=dict)
    """For ``checkpoint`` and ``json``: the offsets to set (only these partitions change)."""
    source: str = ""
    """What the user wrote, for messages."""


def parse_target(text: str) -> ResetTarget:
    """``--to``: ``earliest``, ``latest``, ``timestamp:MS``, ``checkpoint:DIR``, ``json:{"t": {"0": 5}}``.

    Raises:
        ConfigError: anything else, naming ``--to`` and what is allowed.
    """
    kind, _, rest = text.partition(":")
    if text in ("earliest", "latest"):
        return ResetTarget(text, source=text)  # type: ignore[arg-type]
    if kind == "timestamp" and rest.strip().isdigit():
        return ResetTarget("timestamp", timestamp_ms=int(rest), source=text)
    if kind == "checkpoint" and rest:
        position = read_checkpoint(rest)
        if position.batch is None:
            raise ConfigError(f"--to {text}: the checkpoint has no committed batch yet")
        return ResetTarget("checkpoint", offsets=position.offsets, source=text)
    if kind == "json" and rest:
        try:
            data = json.loads(rest)
            offsets = offsets_from_json(data)
        except (ValueError, AttributeError, TypeError) as e:
            raise ConfigError(
                f'--to {text}: not offsets as JSON ({e}); write json:{{"topic": {{"0": 42}}}}'
            ) from e
        if not offsets or any(o < 0 for o in offsets.values()):
            raise ConfigError(f"--to {text}: name at least one partition, with offsets of 0 or more")
        return ResetTarget("json", offsets=offsets, source=text)
    raise ConfigError(f"--to {text!r}: use {TARGET_FORMS}")


def plan_reset(
    target: ResetTarget,
    partitions: Iterable[TopicPartition],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    by_time: Mapping[TopicPartition, int] | None = None,
) -> Offsets:
    """The new committed offset of each partition (pure; the lookups are the caller's).

    ``by_time``: ListOffsets(timestamp) answers, -1 where no record is that new (then the log end, as
    Kafka's tool does). Offsets outside ``[earliest, latest]`` are clamped to the nearer end.
    """
    out: Offsets = {}
    for tp in sorted(set(partitions)):
        low, high = earliest[tp], latest[tp]
        if target.kind == "earliest":
            wanted = low
        elif target.kind == "latest":
            wanted = high
        elif target.kind == "timestamp":
            found = (by_time or {}).get(tp, -1)
            wanted = high if found < 0 else found
        else:
            wanted = target.offsets[tp]
        out[tp] = min(max(wanted, low), high)
    return out


@dataclass(frozen=True)
class PartitionPositions:
    """One partition's offsets (next record to read) in the checkpoint and the group, and its log bounds."""

    tp: TopicPartition
    checkpoint: int | None
    group: int | None
    earliest: int
    latest: int


def _partitions_of(meta: AdminMetadata, topics: Iterable[str]) -> list[TopicPartition]:
    existing = meta.topics()
    missing = sorted(t for t in set(topics) if t not in existing)
    if missing:
        raise ConfigError(f"topic(s) {', '.join(missing)} do not exist")
    return [TopicPartition(t, p) for t in sorted(set(topics)) for p in range(existing[t])]


def _plain(conf: Mapping[str, str], timeout_s: float) -> AdminMetadata:
    # The log end as Kafka's own tools show it (read uncommitted).
    return AdminMetadata({**conf, "isolation.level": "read_uncommitted"}, timeout_s)


def show_positions(
    conf: Mapping[str, str], checkpoint: str | Path, group: str | None, timeout_s: float = 30.0
) -> tuple[CheckpointPosition, list[PartitionPositions]]:
    """The checkpoint's, the group's and the log's positions of every partition either of them has."""
    position = read_checkpoint(checkpoint)
    meta = _plain(conf, timeout_s)
    committed = meta.committed(group) if group else {}
    existing = meta.topics()
    tps = sorted(tp for tp in {*position.offsets, *committed} if tp.topic in existing)
    earliest, latest = meta.earliest(tps), meta.latest(tps)
    rows = [
        PartitionPositions(tp, position.offsets.get(tp), committed.get(tp), earliest[tp], latest[tp])
        for tp in tps
    ]
    return position, rows


def check_timestamp_lookups(
    conf: Mapping[str, str],
    cluster_id: str | None,
    target: str = "timestamp:MS",
    probe: Callable[[Mapping[str, str]], Capability] = probe_offsets_for_times,
) -> str:
    """Whether ``--to timestamp:`` can trust the broker's timestamp lookups: "" when it can, else a warning.

    Apache Kafka (a cluster id of the form it generates, as ``broker_gaps`` trusts it) is trusted without a
    probe. Any other broker gets ``probe``: ``sparkafka doctor``'s offsets_for_times check, which writes
    three records with known timestamps to a topic of its own (deleted again) and asks for one of them.

    Args:
        conf: librdkafka settings of the cluster.
        cluster_id: the cluster id its metadata gives (None when it gives none).
        target: the ``--to`` argument, for the message.
        probe: the capability probe (a fake in unit tests).

    Returns:
        A warning for the plan when the probe could not run (say, no right to create its topic): the
        lookups are then unchecked.

    Raises:
        ConfigError: the probe ran and the broker answered wrong (tansu answers 0 for every timestamp).
    """
    if looks_like_kafka_cluster_id(cluster_id):
        return ""
    try:
        found = probe(conf)
    except Exception as e:  # noqa: BLE001 - the probe could not run: the answers are unchecked, say so
        return (
            f"could not check that the broker answers timestamp lookups correctly ({type(e).__name__}: {e}); "
            "check the new offsets before --execute"
        )
    if found.ok:
        return ""
    raise ConfigError(
        f"--to {target}: the broker at {conf.get('bootstrap.servers')} answers timestamp lookups wrong "
        f"(`sparkafka doctor`'s offsets_for_times check: {found.detail}), so the offsets it proposes "
        "would be wrong; reset --to json:{...} with offsets you know, or --to checkpoint:DIR, instead"
    )


def _cluster_id(conf: Mapping[str, str], timeout_s: float) -> str | None:
    admin = admin_client(conf)
    metadata = with_retries(
        "looking up the cluster id", conf, lambda left: admin.list_topics(timeout=left), timeout_s
    )
    return metadata.cluster_id  # type: ignore[no-any-return]


@dataclass(frozen=True)
class ResetPlan:
    """What ``reset_group`` planned (and with ``execute`` applied): one row per partition."""

    group: str
    target: ResetTarget
    rows: list[tuple[TopicPartition, int | None, int]]
    """(partition, committed now, new offset)."""
    active_state: str | None
    """The group's state when it has members (then ``execute`` is refused), else None."""
    executed: bool
    warning: str = ""
    """Something to check before trusting the new offsets (``check_timestamp_lookups``); "" for none."""


def reset_group(
    conf: Mapping[str, str],
    group: str,
    target: ResetTarget,
    *,
    topics: Iterable[str] = (),
    execute: bool = False,
    force: bool = False,
    timeout_s: float = 30.0,
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
) -> ResetPlan:
    """Plan (and with ``execute``, apply) moving ``group``'s committed offsets to ``target``.

    Partitions: the target's own (checkpoint, json), else every partition of ``topics``, else those the
    group has committed offsets for.

    Raises:
        ConfigError: nothing to reset, a topic that does not exist, ``execute`` while the group has
            members (they would overwrite the new offsets with their own commits), ``execute`` while a
            sparkafka query commits to it (``running_query_refusal``; ``force`` skips that check, for a
            query known to be stopped), or a timestamp target on a broker whose timestamp lookups are wrong
            (``check_timestamp_lookups``).
    """
    meta = _plain(conf, timeout_s)
    warning = ""
    if target.timestamp_ms is not None:  # before anything is looked up: a wrong answer must not be shown
        warning = check_timestamp_lookups(conf, _cluster_id(conf, timeout_s), target.source)
    topics = list(topics)
    if target.offsets:
        existing = meta.topics()
        unknown = sorted({tp for tp in target.offsets if tp.partition >= existing.get(tp.topic, 0)})
        if unknown:
            raise ConfigError(f"--to {target.source}: {', '.join(map(str, unknown))} do not exist")
        tps = sorted(target.offsets)
        committed = meta.committed(group, tps)
    elif topics:
        tps = _partitions_of(meta, topics)
        committed = meta.committed(group, tps)
    else:
        committed = meta.committed(group)
        tps = sorted(committed)
        if not tps:
            raise ConfigError(f"group {group!r} has no committed offsets; name the partitions with --topic")
    earliest, latest = meta.earliest(tps), meta.latest(tps)
    by_time = meta.for_timestamp(tps, target.timestamp_ms) if target.timestamp_ms is not None else None
    new = plan_reset(target, tps, earliest, latest, by_time)
    state, members = meta.group_state(group)
    active = state not in INACTIVE_STATES
    if execute and active:
        who = f" with active member(s) {', '.join(members)}" if members else ""
        raise ConfigError(
            f"group {group!r} is {state}{who}: offsets can only be reset while the group is inactive. "
            "Stop its consumers (or the query) first"
        )
    if execute and not force:
        refusal = running_query_refusal(group, meta.commit_metadata(group, tps), now_ms())
        if refusal:
            raise ConfigError(refusal)
    if execute:
        meta.alter_committed(group, new)
    rows = [(tp, committed.get(tp), new[tp]) for tp in tps]
    return ResetPlan(group, target, rows, state if active else None, execute, warning)


def running_query_refusal(group: str, metadata: Mapping[TopicPartition, str], now_ms: int) -> str | None:
    """Why a reset must wait: a sparkafka query committed to ``group`` within ``LIVE_WINDOW_S``; pure.

    sparkafka queries commit without joining the group, so the group's state cannot show them: their
    commits' metadata (``CommitMark``) does, and a query that stopped marks its last commit so. A query
    that idles longer than the window reads the group again before its next commit and stops committing
    if the offsets moved (``OffsetCommitter``).
    """
    marks = [m for m in (CommitMark.from_metadata(text) for text in metadata.values()) if m is not None]
    if not marks:
        return None
    newest = max(marks, key=lambda m: m.at_ms)
    age_s = max(0, now_ms - newest.at_ms) / 1000
    if age_s >= LIVE_WINDOW_S or newest.stopped:
        return None
    return (
        f"group {group!r} is committed to by a running sparkafka query ({newest.committer()}, last commit "
        f"{age_s:.0f} s ago), which would overwrite a reset with its next commit: stop the query first (a "
        "query that commits nothing for "
        f"{LIVE_WINDOW_S / 60:.0f} minutes counts as stopped), or pass --force if it is already stopped"
    )


def render_show(position: CheckpointPosition, rows: list[PartitionPositions], group: str | None) -> str:
    """``show_positions``'s answer as a text table, headed by the checkpoint's last committed batch."""
    batch = "no batch committed yet" if position.batch is None else f"last committed batch {position.batch}"
    lines = [f"checkpoint: {batch}" + (f"; group {group}" if group else "")]
    lines.append(
        f"{'topic':<30} {'partition':>9} {'checkpoint':>11} {'group':>11} {'earliest':>11} {'latest':>11}"
    )
    for r in rows:
        ck, grp = ("-" if v is None else str(v) for v in (r.checkpoint, r.group))
        lines.append(
            f"{r.tp.topic:<30} {r.tp.partition:>9} {ck:>11} {grp:>11} {r.earliest:>11} {r.latest:>11}"
        )
    return "\n".join(lines)


def render_reset(plan: ResetPlan) -> str:
    """A reset plan as a text table, with a line saying whether it was applied or only a dry run."""
    lines = [f"warning: {plan.warning}"] if plan.warning else []
    lines.append(f"{'topic':<30} {'partition':>9} {'current':>11} {'new':>11}")
    for tp, now, new in plan.rows:
        lines.append(f"{tp.topic:<30} {tp.partition:>9} {'-' if now is None else now:>11} {new:>11}")
    if plan.executed:
        lines.append(f"group {plan.group}: committed offsets set to {plan.target.source}")
    else:
        lines.append(f"dry run: nothing changed; add --execute to set group {plan.group} to these offsets")
        if plan.active_state:
            lines.append(f"(the group is {plan.active_state}, not inactive: --execute would be refused)")
    return "\n".join(lines)
