"""Offset planning for the source, pure and testable without Kafka or Spark.

All offsets here are "the next record to read": a batch covers ``[start, end)`` per partition.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from sparkafka.errors import ConfigError
from sparkafka.source.commits import offset_of_topic
from sparkafka.source.options import (
    EARLIEST,
    LATEST,
    STRATEGIES,
    AssignmentStrategy,
    SourceOptions,
    Subscription,
)
from sparkafka.structs import GroupOffset, TopicPartition

__all__ = [
    "PLAN_KEY",
    "TOPIC_IDS_KEY",
    "Discovery",
    "KafkaMetadata",
    "Offsets",
    "TaskPlan",
    "apply_read_limit",
    "bound_when_read",
    "check_ending_map",
    "check_found",
    "check_listed",
    "check_starting_map",
    "delay_batch",
    "ending_offsets",
    "offsets_from_json",
    "offsets_to_json",
    "plan_from_json",
    "resolve_startup",
    "split_ranges",
    "subscribed",
    "topic_ids_from_json",
]

log = logging.getLogger(__name__)

Offsets = dict[TopicPartition, int]


class Discovery(NamedTuple):
    """What a discovery found: the subscription's partitions and their topics' ids (where known)."""

    partitions: set[TopicPartition]
    topic_ids: dict[str, str]
    """Kafka's id of each topic (2.8 and later), in its text form; a topic without one is left out."""
    cluster_id: str | None = None
    """The cluster's id, where asked (the group-offset checks need it: topic ids are per cluster)."""


class KafkaMetadata(Protocol):
    """What planning needs to ask the cluster. Implemented over AdminClient, and by fakes in tests."""

    def discover(self, subscription: Subscription, *, topic_ids: bool = True) -> Discovery:
        """The partitions that exist now and belong to the subscription, and their topics' ids (unless
        ``topic_ids`` is False)."""
        ...

    def earliest(self, tps: Iterable[TopicPartition]) -> Offsets:
        """The log start offset of each partition."""
        ...

    def latest(self, tps: Iterable[TopicPartition]) -> Offsets:
        """The end of each partition as the source may read it (the last stable offset for read_committed)."""
        ...

    def for_timestamp(self, tps: Iterable[TopicPartition], timestamp_ms: int) -> Offsets:
        """Per partition the first offset whose record timestamp is >= ``timestamp_ms``; -1 when none."""
        ...

    def group_commits(
        self, group_id: str, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, GroupOffset | None]:
        """The group's commits, each with its metadata (None where it has none)."""
        ...


TOPIC_IDS_KEY = "@topicIds"
"""Where a source offset keeps its topics' ids: ``{"orders": {"0": 23}, "@topicIds": {"orders": "vQo3..."}}``.

Why this shape:

- Spark keeps the JSON in the checkpoint's offset log and compares a batch's start with the end
  ``latestOffset`` returns to decide whether a batch runs. With the ids in the same JSON, a new id alone (a
  topic recreated, no offset moved) is a new end: the move is recorded once, by one batch, and not
  reported again every trigger; ids that do not change never make a batch.
- Beside the offsets, not inside each topic's map: without this one key the JSON is exactly Spark's
  connector's ``{"topic": {"partition": offset}}``, which everything reading offsets keeps reading
  (``offsets_from_json``, ``sparkafka offsets``, the progress readers in ``ops``) by dropping the key.
- Kafka's topic names are ``[a-zA-Z0-9._-]``: a key with ``@`` can never be a topic.
- The ids are Kafka's own text form (22 characters of URL-safe base64, as ``kafka-topics --describe``
  prints them). A topic whose id is not known (a broker before Kafka 2.8) has none, and an offset without
  any has no key at all: a checkpoint written before ids were kept reads as it is, and gains them with its
  next batch.
"""


PLAN_KEY = "@plan"
"""Where a source offset keeps how its batch's ranges become reader tasks (``TaskPlan``):
``{"orders": {"0": 23}, "@plan": {"tasks": 2, "strategy": "flink"}}``.

Kept with the batch's end, in the checkpoint's offset log, so that a batch Spark replays after a restart
gets the same tasks with the same partitions whatever the restarted application has: other cores, or
other ``parallelism``, ``assignmentStrategy``, ``minPartitions``, ``maxRecordsPerPartition`` options
(they take effect from the next batch). The exactly-once sink's replay of a partly committed batch needs
the same rows per task index. Beside the offsets for the reasons ``TOPIC_IDS_KEY`` gives; a batch planned
without it (a checkpoint written before it was kept) is planned from the options, one task per partition
without ``parallelism``, as it was then.
"""


@dataclass(frozen=True)
class TaskPlan:
    """How a batch's ranges become reader tasks: Flink's assigner (``strategy``) over ``tasks`` tasks, or
    Spark's split of the ranges (``min_partitions``, ``max_records_per_partition``), every piece a task.

    Decided on the driver when ``latestOffset`` ends a batch, and recorded with its end (``PLAN_KEY``).
    """

    tasks: int | None = None
    strategy: AssignmentStrategy = "flink"
    min_partitions: int | None = None
    max_records_per_partition: int | None = None

    @property
    def splits(self) -> bool:
        """Spark's split decides the tasks (``minPartitions`` or ``maxRecordsPerPartition`` was set)."""
        return self.min_partitions is not None or self.max_records_per_partition is not None

    def to_json(self) -> dict[str, Any]:
        """The JSON kept under ``PLAN_KEY``: the fields that decide, in Spark's option names."""
        if self.splits:
            return {
                "minPartitions": self.min_partitions,
                "maxRecordsPerPartition": self.max_records_per_partition,
            }
        return {"tasks": self.tasks, "strategy": self.strategy}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> TaskPlan:
        """The inverse of ``to_json``."""
        if "tasks" in data:
            strategy = next((s for s in STRATEGIES if s == data.get("strategy")), None)
            if strategy is None:
                raise ConfigError(f"the checkpoint's task plan {dict(data)} names no assignment strategy")
            return TaskPlan(tasks=int(data["tasks"]), strategy=strategy)
        return TaskPlan(
            min_partitions=data.get("minPartitions"),
            max_records_per_partition=data.get("maxRecordsPerPartition"),
        )


def offsets_to_json(
    offsets: Mapping[TopicPartition, int],
    topic_ids: Mapping[str, str] | None = None,
    plan: TaskPlan | None = None,
) -> dict[str, Any]:
    """``{"topic": {"0": 23}}``, topics and partitions sorted (Spark compares offsets by their JSON), with
    the ids of the offsets' topics under ``TOPIC_IDS_KEY`` (only those known; no key when none is) and the
    batch's task plan under ``PLAN_KEY`` (no key when None)."""
    out: dict[str, Any] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    ids = {t: topic_ids[t] for t in sorted(out) if topic_ids and topic_ids.get(t)}
    if ids:
        out[TOPIC_IDS_KEY] = ids
    if plan is not None:
        out[PLAN_KEY] = plan.to_json()
    return out


def offsets_from_json(data: Mapping[str, Any]) -> Offsets:
    """The inverse of ``offsets_to_json``: ``{"topic": {"0": 23}}`` to an offset per partition (the keys
    beside the offsets, which start with ``@``, left out: ``topic_ids_from_json``, ``plan_from_json``)."""
    return {
        TopicPartition(t, int(p)): int(o)
        for t, parts in data.items()
        if not t.startswith("@")
        for p, o in parts.items()
    }


def topic_ids_from_json(data: Mapping[str, Any]) -> dict[str, str]:
    """The topic ids an ``offsets_to_json`` offset keeps ({} for one written without them)."""
    return {str(t): str(i) for t, i in data.get(TOPIC_IDS_KEY, {}).items()}


def plan_from_json(data: Mapping[str, Any]) -> TaskPlan | None:
    """The task plan an ``offsets_to_json`` offset keeps (None for one written without it)."""
    plan = data.get(PLAN_KEY)
    return TaskPlan.from_json(plan) if isinstance(plan, Mapping) else None


def _resolve_sentinels(offsets: Offsets, metadata: KafkaMetadata) -> Offsets:
    earliest = [tp for tp, o in offsets.items() if o == EARLIEST]
    latest = [tp for tp, o in offsets.items() if o == LATEST]
    out = dict(offsets)
    if earliest:
        out.update(metadata.earliest(earliest))
    if latest:
        out.update(metadata.latest(latest))
    return out


def _group_offsets(
    options: SourceOptions,
    tps: set[TopicPartition],
    metadata: KafkaMetadata,
    topic_ids: Mapping[str, str] | None = None,
    cluster_id: str | None = None,
) -> Offsets:
    """Flink's GROUP_OFFSETS: committed offsets, else ``kafka.auto.offset.reset``.

    A commit a sparkafka source made on this cluster from an earlier topic of the same name (its mark names
    this cluster and another topic id than ``topic_ids`` gives) is no commit of this topic: its offsets
    mean nothing in the new log. A commit copied from another cluster is taken as it is.
    """
    if not tps:
        return {}
    assert options.group_id is not None
    ids = topic_ids or {}
    commits = metadata.group_commits(options.group_id, tps)
    committed = {tp: offset_of_topic(commits.get(tp), ids.get(tp.topic), cluster_id) for tp in tps}
    earlier = sorted(tp for tp in tps if commits.get(tp) is not None and committed[tp] is None)
    if earlier:
        log.warning(
            "group %r's offsets for %s were committed from an earlier topic of the same name (deleted and "
            "created again since): they are not used, kafka.auto.offset.reset=%s decides",
            options.group_id,
            ", ".join(map(str, earlier)),
            options.offset_reset,
        )
    missing = sorted(tp for tp in tps if committed.get(tp) is None)
    out: Offsets = {tp: o for tp, o in committed.items() if o is not None and tp in tps}
    if missing:
        if options.offset_reset == "error":
            raise ConfigError(
                f"group {options.group_id!r} has no committed offset for {', '.join(map(str, missing))} "
                "and kafka.auto.offset.reset=error; commit offsets for the group, or set "
                "kafka.auto.offset.reset to earliest or latest"
            )
        reset = metadata.earliest(missing) if options.offset_reset == "earliest" else metadata.latest(missing)
        out.update(reset)
    return out


def resolve_startup(
    options: SourceOptions,
    metadata: KafkaMetadata,
    tps: set[TopicPartition],
    topic_ids: Mapping[str, str] | None = None,
    cluster_id: str | None = None,
) -> Offsets:
    """The first batch's start offsets for a query without a checkpoint, with Flink's fallbacks; the
    topics' ids (``topic_ids``) and the cluster's tell a group's commits of an earlier topic of the same
    name apart."""
    if options.startup == "earliest":
        return metadata.earliest(tps)
    if options.startup == "latest":
        return metadata.latest(tps)
    if options.startup == "group":
        return _group_offsets(options, tps, metadata, topic_ids, cluster_id)
    if options.startup == "timestamp":
        assert options.starting_timestamp is not None
        return _starting_by_timestamp(options, metadata, dict.fromkeys(tps, options.starting_timestamp))
    by_time = options.startup == "timestamps"
    listed = options.starting_timestamps if by_time else options.specific_offsets
    check_starting_map(options, tps)
    out = (
        _starting_by_timestamp(options, metadata, listed)
        if by_time
        else _resolve_sentinels(dict(listed), metadata)
    )
    rest = tps - set(listed)
    if rest:
        out.update(_group_offsets(options, rest, metadata, topic_ids, cluster_id))
    return out


def subscribed(subscription: Subscription, counts: Mapping[str, int]) -> set[TopicPartition]:
    """The partitions ``subscription`` reads, given the partition count of each topic that exists
    (``counts``: at least the subscription's): every partition of each topic it subscribes to or its
    pattern matches, or, for ``assign``, the assigned partitions that exist (Spark's AssignStrategy leaves
    out the others, and so does this)."""
    if subscription.partitions:
        return {tp for tp in subscription.partitions if tp.partition < counts.get(tp.topic, 0)}
    return {TopicPartition(t, p) for t, n in counts.items() if subscription.matches(t) for p in range(n)}


def check_found(subscription: Subscription, partitions: Iterable[TopicPartition]) -> None:
    """Raise ConfigError, naming the subscription, unless the discovery that found ``partitions`` found
    some for every topic ``subscribe`` or ``assign`` names, and some at all (a pattern that matches no
    topic finds none): a read starts only from topics that exist (Flink's rule; Spark's too: the source
    does not create topics). A topic ``assign`` names counts as found when one of its assigned partitions
    exists; an assigned partition that does not exist is left out of the read (``subscribed``), as Spark's
    AssignStrategy leaves it out.

    Example: ``subscribe=orders,ordres`` where only ``orders`` exists raises "Unable to retrieve any
    partitions for topic(s) ordres (subscribe=orders,ordres): they do not exist. ..."
    """
    found = {tp.topic for tp in partitions}
    named = dict.fromkeys([*subscription.topics, *(tp.topic for tp in subscription.partitions)])
    missing = [t for t in named if t not in found]
    if missing:
        raise ConfigError(
            f"Unable to retrieve any partitions for topic(s) {', '.join(missing)} "
            f"({subscription.describe()}): they do not exist. Create them first, or check the names"
        )
    if not found:
        raise ConfigError(
            f"Unable to retrieve any partitions with {subscription.describe()}: nothing matches. "
            "Create the topics first, or check the subscription"
        )


def check_starting_map(options: SourceOptions, tps: set[TopicPartition]) -> None:
    """For a start from a JSON map (``startingOffsets``, ``startingOffsetsByTimestamp``), ``check_listed``
    against ``tps``, the partitions the query reads. Spark's rule: the map names exactly the partitions read;
    sparkafka's one addition: with a group, partitions left out start from its committed offsets (Flink's
    SPECIFIC_OFFSETS fallback). Another start checks nothing.

    Checked when a query without a checkpoint resolves its start (``resolve_startup``), never at ``load()``:
    a query that resumes from its checkpoint ignores the startup options, as in Spark, so a map written
    before partitions or topics were added must not stop it.
    """
    if options.startup not in ("specific", "timestamps"):
        return
    by_time = options.startup == "timestamps"
    check_listed(
        "startingOffsetsByTimestamp" if by_time else "startingOffsets",
        options.starting_timestamps if by_time else options.specific_offsets,
        tps,
        options.subscription,
        group_fallback=options.group_id is not None,
    )


def check_ending_map(options: SourceOptions, tps: set[TopicPartition]) -> None:
    """For a batch read's end from a JSON map (``endingOffsets``, ``endingOffsetsByTimestamp``, whichever is
    in effect: ``endingTimestamp`` takes precedence over both), ``check_listed`` against ``tps``, the
    partitions the read reads. Another end checks nothing.

    Checked at ``load()`` (``admin.check_source``) and again when the batch reader resolves its end
    (``ending_offsets``): the options are a batch read's alone (a streaming read refuses both outright),
    so nothing a checkpoint holds can make a map that fails here right.
    """
    if options.ending_timestamp is not None:
        return
    if options.ending_timestamps is not None:
        check_listed("endingOffsetsByTimestamp", options.ending_timestamps, tps, options.subscription)
    elif options.ending_offsets is not None:
        check_listed("endingOffsets", options.ending_offsets, tps, options.subscription)


def check_listed(
    option: str,
    listed: Mapping[TopicPartition, int],
    tps: set[TopicPartition],
    subscription: Subscription,
    group_fallback: bool = False,
) -> None:
    """Raise ConfigError unless the JSON map of ``option`` names exactly the partitions ``tps`` the query
    reads, as Spark's connector requires (its KafkaOffsetReader asserts it on the driver when the start
    or end is resolved). ``group_fallback``: partitions left out are allowed (they start from the group)."""
    missing = [] if group_fallback else sorted(tps - set(listed))
    extra = sorted(set(listed) - tps)
    if not missing and not extra:
        return
    problems = []
    if missing:
        problems.append(f"it leaves out {', '.join(map(str, missing))}")
    if extra:
        problems.append(f"{subscription.describe()} does not read {', '.join(map(str, extra))}")
    group = "set kafka.group.id so that partitions left out start from the group's committed offsets"
    hint = {
        "startingOffsets": f"; give -2 (earliest) for a partition to read from its start, or {group}",
        "startingOffsetsByTimestamp": f"; give each a timestamp, or {group}",
        "endingOffsets": "; give -1 (latest) for a partition to read to its end",
        "endingOffsetsByTimestamp": "; give each a timestamp",
    }[option]
    raise ConfigError(
        f"option {option} must name exactly the partitions the query reads, as in Spark: "
        f"{' and '.join(problems)}{hint if missing else ''}"
    )


def offsets_for_timestamps(metadata: KafkaMetadata, wanted: Mapping[TopicPartition, int]) -> Offsets:
    """Per partition the first offset whose timestamp is >= its own timestamp; -1 where there is none.

    Kafka's sentinels, which Spark's connector passes to ListOffsets as timestamps: -2 is the partition's
    earliest offset, -1 its latest.
    """
    by_ts: dict[int, list[TopicPartition]] = {}
    for tp, ts in wanted.items():
        by_ts.setdefault(ts, []).append(tp)
    out: Offsets = {}
    for ts, tps in sorted(by_ts.items()):
        if ts in (EARLIEST, LATEST):
            found = metadata.earliest(tps) if ts == EARLIEST else metadata.latest(tps)
        else:
            found = metadata.for_timestamp(tps, ts)
        out.update({tp: found.get(tp, -1) for tp in tps})
    return out


def _starting_by_timestamp(
    options: SourceOptions, metadata: KafkaMetadata, wanted: Mapping[TopicPartition, int]
) -> Offsets:
    """Start offsets from timestamps; a partition with no record at or after its timestamp fails the
    query (``startingOffsetsByTimestampStrategy=error``, Spark's default) or starts at latest (``latest``,
    Flink's TIMESTAMP mode)."""
    found = offsets_for_timestamps(metadata, wanted)
    none = sorted(tp for tp, o in found.items() if o < 0)
    if none and options.timestamp_strategy == "error":
        raise ConfigError(
            "no offset matched the starting timestamp for "
            + ", ".join(f"{tp} (timestamp {wanted[tp]})" for tp in none)
            + ": no record there is at or after it; set startingOffsetsByTimestampStrategy=latest to start "
            "such partitions at their latest offset"
        )
    out = {tp: o for tp, o in found.items() if o >= 0}
    out.update(metadata.latest(none) if none else {})
    return out


def ending_offsets(
    options: SourceOptions, metadata: KafkaMetadata, tps: set[TopicPartition], latest: Offsets
) -> Offsets:
    """A batch read's exclusive end per partition, from endingOffsets or by timestamp (Spark's meaning).

    By timestamp, a partition ends at its first record at or after the timestamp, or at latest when it
    has none. A partition not named ends at latest.
    """
    check_ending_map(options, tps)
    if options.ending_timestamp is not None or options.ending_timestamps is not None:
        if options.ending_timestamp is not None:
            wanted = dict.fromkeys(tps, options.ending_timestamp)
        else:
            assert options.ending_timestamps is not None
            wanted = dict(options.ending_timestamps)
        found = offsets_for_timestamps(metadata, wanted)
        return {tp: found[tp] if found.get(tp, -1) >= 0 else latest[tp] for tp in tps}
    if options.ending_offsets is None:
        return dict(latest)
    return {tp: (latest[tp] if o == LATEST else o) for tp, o in options.ending_offsets.items()}


def bound_when_read(
    options: SourceOptions,
    tps: set[TopicPartition],
    end: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
) -> tuple[set[TopicPartition], set[TopicPartition]]:
    """The partitions of a batch read that start at ``earliest``, and those that end at ``latest``: Spark
    binds both when the task starts, on the executor (``fetch.OffsetRange``), not at planning.

    ``earliest``: ``startingOffsets=earliest`` (the batch default), or -2 in its JSON. ``latest``: no
    ending option (the default), -1 in ``endingOffsets`` or a partition it leaves out, or an ending
    timestamp no record reaches (a record's offset is always below ``latest``, so an end equal to it is
    that fallback).
    """
    if options.startup == "earliest":
        first = set(tps)
    elif options.startup == "specific":
        first = {tp for tp in tps if options.specific_offsets.get(tp) == EARLIEST}
    else:
        first = set()
    if options.ending_offsets is not None:
        last = {tp for tp in tps if options.ending_offsets.get(tp, LATEST) == LATEST}
    else:
        last = {tp for tp in tps if end[tp] == latest[tp]}
    return first, last


def split_ranges(
    ranges: Sequence[tuple[TopicPartition, int, int]],
    min_partitions: int | None,
    max_records_per_partition: int | None,
) -> list[tuple[TopicPartition, int, int]]:
    """Spark's ``KafkaOffsetRangeCalculator.getRanges``: offset ranges ``(tp, from, until)`` to read tasks.

    Empty ranges are dropped. With neither option, or with ``min_partitions`` at most the number of
    ranges and no ``max_records_per_partition``, every range is one task. Otherwise a range above
    ``max_records_per_partition`` is cut into ``ceil(size / max)`` pieces first; then, while
    ``min_partitions`` is above the number of ranges, ranges whose share of ``min_partitions`` rounds to
    more than one are cut into that many pieces (in proportion to their size among the ranges that are
    cut), by integer division with the last piece taking the remainder.
    """
    out = [r for r in ranges if r[2] > r[1]]
    if (min_partitions is None or len(out) >= min_partitions) and max_records_per_partition is None:
        return out
    if max_records_per_partition is not None:
        out = [piece for r in out for piece in _divide(r, -(-(r[2] - r[1]) // max_records_per_partition))]
    if min_partitions is not None and min_partitions > len(out):
        total = sum(r[2] - r[1] for r in out)
        unsplit = [r for r in out if _part_count(r[2] - r[1], total, min_partitions) == 1]
        split_total = total - sum(r[2] - r[1] for r in unsplit)
        split_min = max(min_partitions - len(unsplit), 1)
        unsplit_tps = {(r[0], r[1]) for r in unsplit}
        out = [
            piece
            for r in out
            for piece in _divide(
                r, 1 if (r[0], r[1]) in unsplit_tps else _part_count(r[2] - r[1], split_total, split_min)
            )
        ]
    return [r for r in out if r[2] > r[1]]


def _part_count(size: int, total: int, parts: int) -> int:
    """``max(Math.round(size / total * parts), 1)``, rounding half up as Java's Math.round does."""
    return max(math.floor(size / total * parts + 0.5), 1)


def _divide(r: tuple[TopicPartition, int, int], parts: int) -> list[tuple[TopicPartition, int, int]]:
    """``getDividedPartition``: ``parts`` consecutive pieces; integer division, the last takes the rest."""
    tp, start, until = r
    remaining = until - start
    out = []
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        end = min(start + size, until)
        out.append((tp, start, end))
        start = end
    return out


def delay_batch(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    min_offsets: int,
    max_delay_ms: int,
    now_ms: float,
    last_trigger_ms: float,
) -> tuple[bool, float]:
    """Spark's ``delayBatch`` for ``minOffsetsPerTrigger``: (skip this trigger?, new last-trigger time).

    A batch runs when ``max_delay_ms`` has passed since the last one that ran, or when at least
    ``min_offsets`` new offsets (summed over partitions) are there; otherwise the trigger is skipped.
    ``last_trigger_ms`` starts at 0, so the first trigger always runs.
    """
    if now_ms - last_trigger_ms >= max_delay_ms:
        return False, now_ms
    new = sum(o - start.get(tp, 0) for tp, o in latest.items())
    if new < min_offsets:
        return True, last_trigger_ms
    return False, now_ms


def apply_read_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_records: int | None
) -> Offsets:
    """End offsets for one batch: ``latest``, or ``start`` plus at most ``max_records`` records in all.

    The records are split in proportion to what each partition has available, every partition with data
    getting at least one record when the limit allows.

    Partitions whose latest is below their start stay where they are: an end never moves backwards here
    (``data_loss.next_positions`` decides such partitions before).
    """
    avail = {tp: max(0, latest.get(tp, start[tp]) - start[tp]) for tp in start}
    total = sum(avail.values())
    if max_records is None or total <= max_records:
        return {tp: start[tp] + avail[tp] for tp in start}
    with_data = sorted((tp for tp in avail if avail[tp] > 0), key=lambda tp: (-avail[tp], tp))
    take = dict.fromkeys(start, 0)
    if max_records < len(with_data):
        # Too few to give one to each: the partitions furthest behind go first; the rest next batch.
        for tp in with_data[:max_records]:
            take[tp] = 1
    else:
        budget = max_records
        for tp in with_data:
            take[tp] = 1
            budget -= 1
        # Largest-remainder apportionment of what is left, capped by availability.
        remaining = {tp: avail[tp] - 1 for tp in with_data}
        rest_total = sum(remaining.values())
        if rest_total and budget:
            exact = {tp: budget * remaining[tp] / rest_total for tp in with_data}
            floor = {tp: min(remaining[tp], int(exact[tp])) for tp in with_data}
            for tp in with_data:
                take[tp] += floor[tp]
            left = budget - sum(floor.values())
            by_fraction = sorted(with_data, key=lambda tp: (-(exact[tp] - int(exact[tp])), tp))
            for tp in by_fraction:
                if left <= 0:
                    break
                if take[tp] < avail[tp]:
                    take[tp] += 1
                    left -= 1
    return {tp: start[tp] + take[tp] for tp in start}
