"""Spark's failOnDataLoss rules for a streaming query's next batch, decided on the driver.

Runs in Spark's Python source runner (the driver side), in ``KafkaStreamReader.latestOffset``, before the
batch's end goes to the checkpoint's offset log. A query that fails has written nothing, so its restart
meets the same check; with ``failOnDataLoss=false`` the end records where each partition goes on from, so
each loss is reported once.

The rules, from Spark's connector (``KafkaOffsetReaderBase.getOffsetRangesFromResolvedOffsets``, which
``KafkaMicroBatchStream.planInputPartitions`` runs), in the order Spark checks them, with where a partition
goes on from when they are allowed to pass (``Loss.kind``):

=============  ===========================================================  ==========================
kind           the case (Spark's words)                                      failOnDataLoss=false
=============  ===========================================================  ==========================
vanished       a partition new to the query (or of a recreated topic) whose  dropped
               topic is deleted before its log start is found ("Cannot
               find initial offsets for partitions X")
added          a partition new to the query whose log does not start at 0    its log start
               ("Added partition X starts from O instead of 0")
deleted        a checkpointed partition whose topic no longer exists but is  dropped
               still subscribed ("Partitions X have been deleted")
unsubscribed   a checkpointed partition the subscription no longer names     dropped
               ("Partitions X have been deleted")
changed        the log ends below the query's position: truncated by an      the log's end
               unclean leader election, a start past the end, a topic
               recreated ("Partition X offset was changed from A to B")
recreated      beyond Spark: the topic's id is not the one checkpointed with  the new topic's log start
               the offsets (deleted and created again), wherever the new log
               ends
=============  ===========================================================  ==========================

Spark's connector fails with an exception whose condition (its error class) names the case:
``KAFKA_DATA_LOSS.<SPARK_CONDITION[kind]>``, and ``PARTITIONS_DELETED_AND_GROUP_ID_CONFIG_PRESENT`` for a gone
partition when ``kafka.group.id`` is set. A Python data source cannot give Spark an error class: its failure
crosses to the JVM as text and Spark wraps it as ``PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR``. So the class
is the first words of the sentence, ``[KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED] Some data may have been lost:
...``, that of the first loss in Spark's order (the one Spark would have raised; the sentence names them all).

Offsets alone cannot tell a recreated topic whose new log has passed the query's position: Spark reads on
from there and silently skips the new log's first records. Kafka (2.8 and later) gives every topic an id;
the source keeps it beside the offsets (``planning.TOPIC_IDS_KEY``), and a different id is a new topic,
which is read from its first record (nothing of it skipped, where Spark would go on from the old position's
end). A ``changed`` partition whose id is unchanged was truncated, so going on from the log's end skips
nothing of the log as it is now.

What still cannot be told: a log truncated below the query's position (same topic, same id) that has
grown past it again before the query looks (records the query never read sit at offsets it has passed;
Kafka's leader epochs could tell, they are not kept); a topic recreated between two discoveries of a
running query whose new log passes the position before the next discovery (batches read on from the old
position until the new id is seen: then it is data loss, and with ``failOnDataLoss=false`` the new topic
is read from its first record, so what was read of it in between is read again); and a topic recreated
between a batch's planning and its tasks (a task does not check ids).

Costs: the ids come with discovery (one metadata request per ``partitionDiscoveryIntervalMs``, by default
every trigger as in Spark; two for a pattern: list, then describe). A batch asks ListOffsets(latest) for the
partitions it reads on, and ListOffsets(earliest) only for partitions that enter. A partition reported
gone, or an end below the query's position, makes the metadata be asked again before anything is decided,
so a stale discovery never decides a loss.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple

from sparkafka.errors import DataLossError, PartitionsGoneError
from sparkafka.source.options import Subscription
from sparkafka.source.planning import Discovery, KafkaMetadata, Offsets
from sparkafka.structs import TopicPartition

__all__ = ["Loss", "Membership", "Positions", "find_losses", "next_positions", "report", "sort"]

log = logging.getLogger(__name__)

LossKind = Literal["vanished", "added", "deleted", "unsubscribed", "changed", "recreated"]

SPARK_CONDITION: dict[LossKind, str] = {
    "vanished": "KAFKA_DATA_LOSS.INITIAL_OFFSET_NOT_FOUND_FOR_PARTITIONS",
    "added": "KAFKA_DATA_LOSS.ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO",
    "deleted": "KAFKA_DATA_LOSS.PARTITIONS_DELETED",
    "unsubscribed": "KAFKA_DATA_LOSS.PARTITIONS_DELETED",
    "changed": "KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED",
    "recreated": "KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED",
}
"""Spark's error class for each kind (``KafkaExceptions`` in Spark's connector; Spark has no ``recreated``: it
sees a recreated topic, when it sees one, as an offset changed, whose text names that cause)."""

GROUP_ID_CONDITION = "KAFKA_DATA_LOSS.PARTITIONS_DELETED_AND_GROUP_ID_CONFIG_PRESENT"
"""Spark's class for a gone partition (``deleted``, ``unsubscribed``) when ``kafka.group.id`` is set."""


class Membership(NamedTuple):
    """A batch's start set against what exists now (``sort``); offsets are where the query is."""

    kept: Offsets
    """The same partition of the same topic: read on from the checkpoint (if its log still reaches it)."""
    recreated: Offsets
    """The topic's id is not the checkpointed one."""
    gone: Offsets
    """No longer found: the topic deleted, or no longer subscribed."""
    new: set[TopicPartition]
    """Found now, not in the checkpoint."""


@dataclass(frozen=True)
class Loss:
    """One partition whose records the query may have missed, and where it goes on from if allowed."""

    tp: TopicPartition
    kind: LossKind
    at: int | None
    """The query's position there (None: a partition new to the query)."""
    to: int | None
    """Where it goes on from with failOnDataLoss=false (None: dropped)."""
    ids: tuple[str, str] | None = None
    """The checkpointed and the current topic id, where both are known (``recreated``: they differ)."""

    def condition(self, group_id_set: bool = False) -> str:
        """Spark's error class for this loss (``SPARK_CONDITION``; ``GROUP_ID_CONDITION`` for a gone
        partition of a query that sets ``kafka.group.id``)."""
        if group_id_set and self.kind in ("deleted", "unsubscribed"):
            return GROUP_ID_CONDITION
        return SPARK_CONDITION[self.kind]

    def describe(self, subscription: Subscription) -> str:
        """What happened, as a clause for the error or the warning."""
        if self.kind == "vanished":
            return f"partition {self.tp} was deleted before its first offset could be found"
        if self.kind == "deleted":
            return (
                f"partition {self.tp} (next offset {self.at}) no longer exists but is still subscribed "
                f"({subscription.describe()}): its topic was deleted"
            )
        if self.kind == "unsubscribed":
            return (
                f"partition {self.tp} (next offset {self.at}) is in the checkpoint but no longer subscribed "
                f"({subscription.describe()})"
            )
        if self.kind == "changed":
            return (
                f"partition {self.tp}'s offset was changed from {self.at} to {self.to}: its log now ends "
                "below the query's position (truncated by an unclean leader election, a start past the end, "
                "or the topic recreated)"
            )
        if self.kind == "added":
            return f"added partition {self.tp} starts at offset {self.to} instead of 0"
        assert self.ids is not None
        return (
            f"partition {self.tp} was read up to offset {self.at} from topic id {self.ids[0]}, but the topic "
            f"was recreated (its id is now {self.ids[1]})"
        )

    def skipped(self) -> str:
        """For the warning: where the query goes on from and how many offsets that skips."""
        dropped = {
            "vanished": "dropping it: it is read if it appears again",
            "deleted": f"dropping it: how many of its records from offset {self.at} on were not read "
            "cannot be known",
            "unsubscribed": f"dropping it: its records from offset {self.at} on are not read",
        }
        if self.kind in dropped:
            return dropped[self.kind]
        if self.kind == "changed" and self.ids is not None:
            return (
                f"going on from offset {self.to}: the topic's id is unchanged (its log was truncated), so no "
                "offset of the log as it is now is skipped"
            )
        if self.kind == "changed":
            return (
                f"going on from offset {self.to}: none of the log's offsets are skipped if it was truncated, "
                f"its first {self.to} if the topic was recreated (no topic id to tell)"
            )
        if self.kind == "added":
            return f"starting there: {self.to} offsets skipped"
        return (
            f"reading the new topic from its earliest offset {self.to}: {self.to} of its offsets skipped; "
            f"records of the old topic at or after {self.at} that were not read are lost"
        )


def sort(
    start: Mapping[TopicPartition, int],
    start_ids: Mapping[str, str],
    found: Discovery,
) -> Membership:
    """Set a batch's start against ``found``. A partition stays ``kept`` unless both sides know its
    topic's id and they differ."""
    kept: Offsets = {}
    recreated: Offsets = {}
    gone: Offsets = {}
    for tp, offset in start.items():
        before, now = start_ids.get(tp.topic), found.topic_ids.get(tp.topic)
        if tp not in found.partitions:
            gone[tp] = offset
        elif before and now and before != now:
            recreated[tp] = offset
        else:
            kept[tp] = offset
    return Membership(kept, recreated, gone, found.partitions - set(start))


def _subscribed(subscription: Subscription, tp: TopicPartition) -> bool:
    if subscription.partitions:
        return tp in subscription.partitions
    return subscription.matches(tp.topic)


def find_losses(
    members: Membership,
    latest: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    ids: tuple[Mapping[str, str], Mapping[str, str]],
    subscription: Subscription,
) -> list[Loss]:
    """Spark's data-loss cases and sparkafka's ``recreated`` (the table in the module docstring), in Spark's
    order, each kind sorted by partition.

    Args:
        members: the batch's start against what exists now (``sort``).
        latest: the end of every ``kept`` partition.
        earliest: the log start of every entering partition (``recreated`` and ``new``) that still exists;
            one missing from it was deleted before its log start was found (``vanished``).
        ids: the checkpointed topic ids and the current ones.
        subscription: to tell a deleted topic from one no longer subscribed.
    """
    entering = dict.fromkeys(members.new) | dict(members.recreated)
    out = [Loss(tp, "vanished", at, None) for tp, at in sorted(entering.items()) if tp not in earliest]
    out += [
        Loss(tp, "added", None, earliest[tp])
        for tp in sorted(members.new)
        if tp in earliest and earliest[tp] != 0
    ]
    out += [
        Loss(tp, "deleted" if _subscribed(subscription, tp) else "unsubscribed", at, None)
        for tp, at in sorted(members.gone.items())
    ]
    out += [
        Loss(tp, "changed", at, latest[tp], _both(ids, tp.topic))
        for tp, at in sorted(members.kept.items())
        if latest[tp] < at
    ]
    out += [
        Loss(tp, "recreated", at, earliest[tp], _both(ids, tp.topic))
        for tp, at in sorted(members.recreated.items())
        if tp in earliest
    ]
    return out


def _both(ids: tuple[Mapping[str, str], Mapping[str, str]], topic: str) -> tuple[str, str] | None:
    before, now = ids[0].get(topic), ids[1].get(topic)
    return (before, now) if before and now else None


def report(
    losses: list[Loss], subscription: Subscription, fail_on_data_loss: bool, group_id_set: bool = False
) -> None:
    """Raise for ``losses`` in one sentence naming each, or (failOnDataLoss=false) warn about each.

    The sentence starts with Spark's error class of the first loss (``losses`` are in Spark's order), in
    brackets as Spark prints a class, and goes on with the words Spark's message starts with.

    Raises:
        DataLossError: there are losses and ``fail_on_data_loss``.
    """
    if losses and fail_on_data_loss:
        condition = losses[0].condition(group_id_set)
        clauses = "; ".join(loss.describe(subscription) for loss in losses)
        raise DataLossError(
            f"[{condition}] Some data may have been lost: {clauses}; "
            "set failOnDataLoss=false to go on with a warning"
        )
    for loss in losses:
        log.warning("%s; %s (failOnDataLoss=false)", loss.describe(subscription), loss.skipped())


class Positions(NamedTuple):
    """Where a batch stands per partition, after the data-loss rules (``next_positions``)."""

    kept: Offsets
    """The batch's start where the query reads on."""
    latest: Offsets
    """The latest offset of each ``kept`` partition."""
    moved: Offsets
    """Partitions that enter, or go on from elsewhere, with no records this batch: their new position."""
    topic_ids: dict[str, str]
    """The topic ids to keep with the batch's end."""


def next_positions(
    start: Mapping[TopicPartition, int],
    start_ids: Mapping[str, str],
    found: Discovery,
    metadata: KafkaMetadata,
    rediscover: Callable[[], Discovery],
    *,
    subscription: Subscription,
    fail_on_data_loss: bool,
    group_id_set: bool = False,
    confirm_gone: Callable[[set[str]], None] = lambda topics: None,
) -> Positions:
    """Apply the data-loss rules to a batch that starts at ``start`` (its topics' ids: ``start_ids``).

    ``found`` is the last discovery. When ListOffsets reports a ``kept`` partition gone (Apache Kafka:
    UNKNOWN_TOPIC_OR_PARTITION for a deleted topic) or its end below the query's position, ``rediscover``
    (fresh metadata) decides instead, so a healthy partition costs nothing more.

    ``confirm_gone`` is asked about subscribed topics that discovery no longer finds, before they count as
    deleted: a topic the user may no longer DESCRIBE (an ACL revoked, even for a moment) is missing from
    every listing too, and taking it for deleted would drop its position and, once the ACL is back, read it
    again from earliest. It raises ``AuthorizationError`` for such a topic (``SourceMetadata.require``).
    It is asked too about the topics of entering partitions that vanished before their log start was found.
    ``group_id_set``: the query sets ``kafka.group.id`` (Spark's class of a gone partition differs then).

    Raises:
        DataLossError: any loss (module docstring) and ``fail_on_data_loss``.
        AuthorizationError: from ``confirm_gone``.
    """
    members = sort(start, start_ids, found)
    try:
        latest: Offsets | None = metadata.latest(members.kept)
    except PartitionsGoneError as e:
        log.warning("%s: checking the metadata", e)
        latest = None
    if latest is None or any(latest[tp] < o for tp, o in members.kept.items()):
        found = rediscover()
        members = sort(start, start_ids, found)
        latest = metadata.latest(members.kept)
    vanished = {tp.topic for tp in members.gone if _subscribed(subscription, tp)}
    if vanished:
        confirm_gone(vanished)
    entering = members.new | set(members.recreated)
    earliest = _earliest_present(metadata, entering)
    if entering - set(earliest):
        confirm_gone({tp.topic for tp in entering - set(earliest)})
    losses = find_losses(members, latest, earliest, (start_ids, found.topic_ids), subscription)
    report(losses, subscription, fail_on_data_loss, group_id_set)
    moved = dict(earliest)
    moved.update({loss.tp: loss.to for loss in losses if loss.kind == "changed" and loss.to is not None})
    kept = {tp: o for tp, o in members.kept.items() if tp not in moved}
    return Positions(kept, {tp: latest[tp] for tp in kept}, moved, {**start_ids, **found.topic_ids})


def _earliest_present(metadata: KafkaMetadata, tps: set[TopicPartition]) -> Offsets:
    """The log start of each of ``tps`` whose topic still exists: one deleted since discovery found it is
    left out (Spark's "Cannot find initial offsets"), so it is reported, not a failure of the lookup."""
    todo = set(tps)
    while todo:
        try:
            return metadata.earliest(todo)
        except PartitionsGoneError as e:
            if not todo & e.partitions:
                raise
            log.warning("%s: left out of the batch", e)
            todo -= e.partitions
    return {}
