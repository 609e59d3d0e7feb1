"""Spark's failOnDataLoss rules on the driver (``source.data_loss``): through the streaming reader's
``latestOffset``, then its pure parts as a decision table.

A fake cluster stands in for Kafka: per partition its log ``[earliest, latest)``, per topic its id. The
reader tests give it a checkpointed start (Spark's offset JSON) and read the end it plans, or the
``DataLossError`` it raises, for both values of ``failOnDataLoss``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import pytest

from sparkafka.errors import DataLossError, PartitionsGoneError
from sparkafka.source.data_loss import Loss, find_losses, next_positions, report, sort
from sparkafka.source.options import Subscription, parse_source_options
from sparkafka.source.planning import PLAN_KEY, Discovery, offsets_from_json, offsets_to_json
from sparkafka.source.reader import KafkaStreamReader
from sparkafka.spark_lines import ReadAllAvailable
from sparkafka.structs import GroupOffset, TopicPartition

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
OLD_ID, NEW_ID = "kWX4Zf0pTqKxq7VYZ8nZ6A", "Qm1lL0hCR3aJr2tN5wA1xg"
IDS = "@topicIds"

Offsets = dict[TopicPartition, int]


class Cluster:
    """An in-memory cluster: per partition a log [earliest, latest), per topic its id; counts discoveries."""

    def __init__(self, logs: dict[TopicPartition, tuple[int, int]], ids: dict[str, str]) -> None:
        self.logs = logs
        self.ids = ids
        self.discoveries = 0

    def partitions(self, subscription: Subscription) -> set[TopicPartition]:
        self.discoveries += 1
        return {tp for tp in self.logs if subscription.matches(tp.topic)}

    def discover(self, subscription: Subscription, *, topic_ids: bool = True) -> Discovery:
        found = self.partitions(subscription)
        return Discovery(found, {t: i for t, i in self.ids.items() if any(tp.topic == t for tp in found)})

    def require_source_access(self, options: object, found: object) -> None:
        pass  # an in-memory cluster refuses nothing

    refused: frozenset[str] = frozenset()
    """Topics the user may not DESCRIBE (missing from discovery as a deleted topic is)."""

    def confirm_gone(self, topics: set[str]) -> None:
        from sparkafka.client.security import Access, denied

        for t in sorted(topics & self.refused):
            raise denied(
                {"sasl.username": "etl", "security.protocol": "SASL_SSL"}, Access("DESCRIBE", "topic", t)
            )

    def earliest(self, tps: Iterable[TopicPartition]) -> Offsets:
        return {tp: self.logs[tp][0] for tp in tps}

    def latest(self, tps: Iterable[TopicPartition]) -> Offsets:
        return {tp: self.logs[tp][1] for tp in tps}

    def for_timestamp(self, tps: Iterable[TopicPartition], timestamp_ms: int) -> Offsets:
        return dict.fromkeys(tps, -1)

    def group_commits(
        self, group_id: str, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, GroupOffset | None]:
        return dict.fromkeys(tps)


def stream(cluster: Cluster, fail: bool = True, **options: str) -> KafkaStreamReader:
    opts = parse_source_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "subscribe": "t",
            "failOnDataLoss": str(fail).lower(),
            **options,
        }
    )
    reader = KafkaStreamReader(opts)
    reader._planner._metadata = cluster  # type: ignore[assignment]
    return reader


def latest(reader: KafkaStreamReader, start: dict[str, Any]) -> dict[str, Any]:
    """The batch's end offsets and topic ids (its task plan, ``PLAN_KEY``, is test_task_count's)."""
    return {k: v for k, v in reader.latestOffset(start, ReadAllAvailable()).items() if k != PLAN_KEY}


def test_initial_offsets_keep_the_topic_ids() -> None:
    cluster = Cluster({T0: (0, 10)}, {"t": OLD_ID})
    assert stream(cluster, startingOffsets="earliest").initialOffset() == {"t": {"0": 0}, IDS: {"t": OLD_ID}}


def test_a_checkpoint_without_ids_is_read_and_gains_them() -> None:
    cluster = Cluster({T0: (0, 10)}, {"t": OLD_ID})
    assert latest(stream(cluster), {"t": {"0": 5}}) == {"t": {"0": 10}, IDS: {"t": OLD_ID}}


def test_ids_are_asked_once_per_discovery_not_per_batch() -> None:
    cluster = Cluster({T0: (0, 10)}, {"t": OLD_ID})
    reader = stream(cluster, partitionDiscoveryIntervalMs="30000")  # the default (0) discovers every trigger
    for start in (3, 5, 10):
        latest(reader, {"t": {"0": start}, IDS: {"t": OLD_ID}})
    assert cluster.discoveries == 1


@pytest.mark.parametrize("ids", [{IDS: {"t": OLD_ID}}, {}], ids=["same id", "checkpoint without ids"])
def test_a_log_that_ends_below_the_checkpoint_is_data_loss(ids: dict[str, Any]) -> None:
    """Spark's "offset was changed": a truncated log (unclean leader election), or a JSON start past the
    end; with failOnDataLoss=false the query carries on from the log's end."""
    cluster = Cluster({T0: (0, 300)}, {"t": OLD_ID})
    start = {"t": {"0": 1000}, **ids}
    with pytest.raises(DataLossError, match=r"t-0.*from 1000 to 300.*failOnDataLoss=false"):
        latest(stream(cluster), start)
    assert latest(stream(cluster, fail=False), start) == {"t": {"0": 300}, IDS: {"t": OLD_ID}}


@pytest.mark.parametrize("end", [300, 1300], ids=["below the checkpoint", "past the checkpoint"])
def test_a_recreated_topic_is_found_by_its_id_wherever_its_new_log_ends(end: int) -> None:
    cluster = Cluster({T0: (0, end)}, {"t": NEW_ID})
    start = {"t": {"0": 1000}, IDS: {"t": OLD_ID}}
    with pytest.raises(DataLossError, match=rf"t-0.*{OLD_ID}.*{NEW_ID}.*failOnDataLoss=false"):
        latest(stream(cluster), start)
    # failOnDataLoss=false: the new topic is read from its first record, none of it skipped.
    assert latest(stream(cluster, fail=False), start) == {"t": {"0": 0}, IDS: {"t": NEW_ID}}


def test_a_new_partition_that_does_not_start_at_zero_is_data_loss(caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster({T0: (0, 10), T1: (7, 20)}, {"t": OLD_ID})
    start = {"t": {"0": 10}, IDS: {"t": OLD_ID}}
    with pytest.raises(DataLossError, match=r"t-1.*starts at offset 7.*failOnDataLoss=false"):
        latest(stream(cluster), start)
    with caplog.at_level(logging.WARNING):
        end = latest(stream(cluster, fail=False), start)
    assert end == {"t": {"0": 10, "1": 7}, IDS: {"t": OLD_ID}}
    assert "7 offsets" in caplog.text


def test_a_new_partition_from_zero_is_not_data_loss() -> None:
    cluster = Cluster({T0: (0, 10), T1: (0, 20)}, {"t": OLD_ID})
    assert latest(stream(cluster), {"t": {"0": 10}, IDS: {"t": OLD_ID}}) == {
        "t": {"0": 10, "1": 0},
        IDS: {"t": OLD_ID},
    }


def test_a_checkpointed_partition_no_longer_subscribed_is_data_loss() -> None:
    cluster = Cluster({T0: (0, 10), U0: (0, 4)}, {"t": OLD_ID, "u": NEW_ID})
    start = {"t": {"0": 10}, "u": {"0": 3}, IDS: {"t": OLD_ID, "u": NEW_ID}}
    with pytest.raises(DataLossError, match=r"u-0.*subscribe=t.*failOnDataLoss=false"):
        latest(stream(cluster), start)
    assert latest(stream(cluster, fail=False), start) == {"t": {"0": 10}, IDS: {"t": OLD_ID}}


class VanishingCluster(Cluster):
    """Partition t-1 was found by discovery, then its topic deleted before its log start was asked."""

    def earliest(self, tps: Iterable[TopicPartition]) -> Offsets:
        tps = set(tps)
        if T1 in tps:
            raise PartitionsGoneError({T1}, "t-1 no longer exist (topic deleted)")
        return super().earliest(tps)


DATA_LOSS = "KAFKA_DATA_LOSS."
CHANGED = {"t": {"0": 1000}, IDS: {"t": OLD_ID}}


@pytest.mark.parametrize(
    ("cluster", "start", "options", "condition"),
    [
        (Cluster({T0: (0, 300)}, {"t": OLD_ID}), CHANGED, {}, "PARTITION_OFFSET_CHANGED"),
        (Cluster({T0: (0, 1300)}, {"t": NEW_ID}), CHANGED, {}, "PARTITION_OFFSET_CHANGED"),  # recreated
        (
            Cluster({T0: (0, 10), T1: (7, 20)}, {"t": OLD_ID}),
            {"t": {"0": 10}},
            {},
            "ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO",
        ),
        (
            VanishingCluster({T0: (0, 10), T1: (0, 20)}, {"t": OLD_ID}),
            {"t": {"0": 10}},
            {},
            "INITIAL_OFFSET_NOT_FOUND_FOR_PARTITIONS",
        ),
        (Cluster({T0: (0, 10)}, {"t": OLD_ID}), {"t": {"0": 10, "1": 4}}, {}, "PARTITIONS_DELETED"),
        (
            Cluster({T0: (0, 10), U0: (0, 4)}, {"t": OLD_ID}),
            {"t": {"0": 10}, "u": {"0": 3}},
            {},
            "PARTITIONS_DELETED",
        ),
        (
            Cluster({T0: (0, 10), U0: (0, 4)}, {"t": OLD_ID}),
            {"t": {"0": 10}, "u": {"0": 3}},
            {"kafka.group.id": "etl", "offsetCommitMode": "disabled"},
            "PARTITIONS_DELETED_AND_GROUP_ID_CONFIG_PRESENT",
        ),
        # several at once: the one Spark checks first (added, then gone, then changed)
        (
            Cluster({T0: (0, 300), T1: (7, 20)}, {"t": OLD_ID}),
            {"t": {"0": 1000, "2": 5}},
            {},
            "ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO",
        ),
        (Cluster({T0: (0, 300)}, {"t": OLD_ID}), {"t": {"0": 1000, "2": 5}}, {}, "PARTITIONS_DELETED"),
    ],
    ids=[
        "changed",
        "recreated",
        "added",
        "vanished",
        "deleted",
        "unsubscribed",
        "unsubscribed with group id",
        "added first",
        "deleted before changed",
    ],
)
def test_each_data_loss_names_sparks_error_class_first(
    cluster: Cluster, start: dict[str, Any], options: dict[str, str], condition: str
) -> None:
    """The class Spark's connector gives each case (``KafkaExceptions``), in brackets where the sentence
    starts, as Spark prints a class: the one part of the class a Python data source can pass to Spark."""
    with pytest.raises(DataLossError) as lost:
        latest(stream(cluster, **options), start)
    assert lost.value.condition == DATA_LOSS + condition
    assert str(lost.value).startswith(f"[{DATA_LOSS}{condition}] Some data may have been lost: ")
    assert str(lost.value).endswith("; set failOnDataLoss=false to go on with a warning")
    assert "\n" not in str(lost.value)


def test_a_new_partition_deleted_before_its_start_is_found_is_dropped_when_allowed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Spark's "Cannot find initial offsets": the lookup of its log start does not fail the batch; with
    failOnDataLoss=false the partition is left out, and read once it appears again."""
    cluster = VanishingCluster({T0: (0, 10), T1: (0, 20)}, {"t": OLD_ID})
    with caplog.at_level(logging.WARNING):
        end = latest(stream(cluster, fail=False), {"t": {"0": 4}, IDS: {"t": OLD_ID}})
    assert end == {"t": {"0": 10}, IDS: {"t": OLD_ID}}
    assert "t-1 was deleted before its first offset could be found; dropping it" in caplog.text


# The pure parts: sort and find_losses as a decision table, next_positions with a cluster that changes.

SUB = Subscription(topics=("t",))


@pytest.mark.parametrize(
    ("start", "start_ids", "now", "kind", "to"),
    [
        # kept: same topic (same id, or an id unknown on either side), the log still reaching the start
        ({T0: 5}, {"t": OLD_ID}, {T0: (0, 10)}, None, None),
        ({T0: 10}, {}, {T0: (0, 10)}, None, None),
        # changed: the log ends below the start; id unchanged or unknown
        ({T0: 12}, {"t": OLD_ID}, {T0: (0, 10)}, "changed", 10),
        ({T0: 12}, {}, {T0: (0, 10)}, "changed", 10),
        # recreated: another id, below or past the start
        ({T0: 12}, {"t": NEW_ID}, {T0: (0, 10)}, "recreated", 0),
        ({T0: 5}, {"t": NEW_ID}, {T0: (2, 10)}, "recreated", 2),
        # gone: subscribed (deleted) or not (unsubscribed)
        ({T0: 5, U0: 1}, {}, {T0: (0, 10)}, "unsubscribed", None),
        ({T0: 5, T1: 1}, {}, {T0: (0, 10)}, "deleted", None),
        # added: new to the query, not starting at 0
        ({T0: 5}, {}, {T0: (0, 10), T1: (3, 10)}, "added", 3),
        ({T0: 5}, {}, {T0: (0, 10), T1: (0, 10)}, None, None),
    ],
)
def test_what_is_data_loss_and_where_the_query_goes_on_from(
    start: Offsets,
    start_ids: dict[str, str],
    now: dict[TopicPartition, tuple[int, int]],
    kind: str | None,
    to: int | None,
) -> None:
    members = sort(start, start_ids, Discovery(set(now), {"t": OLD_ID}))
    latest = {tp: now[tp][1] for tp in members.kept}
    earliest = {tp: now[tp][0] for tp in members.new | set(members.recreated)}
    losses = find_losses(members, latest, earliest, (start_ids, {"t": OLD_ID}), SUB)
    assert [(loss.kind, loss.to) for loss in losses] == ([] if kind is None else [(kind, to)])


def test_losses_fail_in_one_sentence_naming_each_and_warn_with_what_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    losses = [
        Loss(T0, "changed", 12, 10),
        Loss(T1, "added", None, 3),
        Loss(U0, "recreated", 5, 0, (OLD_ID, NEW_ID)),
    ]
    with pytest.raises(DataLossError) as e:
        report(losses, SUB, fail_on_data_loss=True)
    text = str(e.value)
    assert ". " not in text  # one sentence
    assert text.endswith("; set failOnDataLoss=false to go on with a warning")
    assert "t-0's offset was changed from 12 to 10" in text
    assert "t-1 starts at offset 3 instead of 0" in text
    assert f"from topic id {OLD_ID}, but the topic was recreated (its id is now {NEW_ID})" in text
    with caplog.at_level(logging.WARNING):
        report(losses, SUB, fail_on_data_loss=False)
    assert "going on from offset 10: none of the log's offsets are skipped if it was truncated" in caplog.text
    assert "3 offsets skipped" in caplog.text
    truncated = Loss(T0, "changed", 12, 10, (OLD_ID, OLD_ID))
    assert "the topic's id is unchanged (its log was truncated), so no offset" in truncated.skipped()
    assert "earliest offset 0: 0 of its offsets skipped" in caplog.text


class DeletingCluster(Cluster):
    """Topic u was deleted: Apache Kafka answers UNKNOWN_TOPIC_OR_PARTITION, tansu answers offset 0."""

    def __init__(self, style: str) -> None:
        super().__init__({T0: (0, 50), T1: (0, 10), U0: (0, 7)}, {"t": OLD_ID, "u": NEW_ID})
        self.style = style

    def latest(self, tps: Iterable[TopicPartition]) -> Offsets:
        tps = set(tps)
        if U0 in tps:
            if self.style == "kafka":
                raise PartitionsGoneError({U0}, "u-0 no longer exist")
            return {**super().latest(tps - {U0}), U0: 0}
        return super().latest(tps)


@pytest.mark.parametrize("style", ["kafka", "tansu"])
@pytest.mark.parametrize("fail", [True, False])
def test_a_topic_deleted_under_a_running_query_is_decided_from_fresh_metadata(style: str, fail: bool) -> None:
    cluster = DeletingCluster(style)
    stale = Discovery({T0, U0}, {"t": OLD_ID, "u": NEW_ID})  # discovery not due: the last one still saw u
    rediscovered: list[int] = []

    def rediscover() -> Discovery:
        rediscovered.append(1)
        return Discovery({T0, T1}, {"t": OLD_ID})

    def run() -> Any:
        return next_positions(
            {T0: 40, U0: 7},
            {"t": OLD_ID, "u": NEW_ID},
            stale,
            cluster,
            rediscover,
            subscription=Subscription(topics=("t", "u")),
            fail_on_data_loss=fail,
        )

    if fail:
        with pytest.raises(DataLossError, match=r"u-0 .* no longer exists but is still subscribed"):
            run()
        return
    kept, latest, moved, _ids = run()
    assert (kept, latest, moved) == ({T0: 40}, {T0: 50}, {T1: 0})
    assert rediscovered == [1]


def test_healthy_partitions_never_rediscover() -> None:
    def rediscover() -> Discovery:
        raise AssertionError("rediscovered")

    positions = next_positions(
        {T0: 40},
        {"t": OLD_ID},
        Discovery({T0}, {"t": OLD_ID}),
        Cluster({T0: (0, 50)}, {"t": OLD_ID}),
        rediscover,
        subscription=SUB,
        fail_on_data_loss=True,
    )
    assert positions == ({T0: 40}, {T0: 50}, {}, {"t": OLD_ID})


@pytest.mark.parametrize("fail", [True, False])
def test_a_topic_the_user_may_no_longer_describe_is_not_taken_for_deleted(fail: bool) -> None:
    """An ACL revoked mid-run hides the topic from discovery as a deletion does: the query stops naming the
    ACL, keeping its position (with failOnDataLoss=false, taking it for deleted would read the topic again
    from earliest once the ACL is back)."""
    from sparkafka.errors import AuthorizationError

    tp = TopicPartition("t", 0)
    cluster = Cluster({tp: (0, 10)}, {"t": "id-t"})
    reader = stream(cluster, fail=fail, partitionDiscoveryIntervalMs="0")
    start = offsets_to_json({tp: 4}, {"t": "id-t"})
    assert offsets_from_json(latest(reader, start)) == {tp: 10}
    del cluster.logs[tp]  # DESCRIBE revoked: the topic is missing from every listing
    cluster.refused = frozenset({"t"})
    with pytest.raises(AuthorizationError, match="may not DESCRIBE topic t"):
        latest(reader, start)
    cluster.logs[tp], cluster.refused = (0, 10), frozenset()  # granted again: the query goes on from 4
    assert offsets_from_json(latest(reader, start)) == {tp: 10}


def test_without_admission_control_the_reader_plans_from_its_last_batch_and_caps_it_itself() -> None:
    """PySpark 4.0 and 4.1 call ``latestOffset()`` with no start and no limit (``spark_lines``): the reader
    starts from the end of the batch it planned last (after a restart: what ``partitions`` last said) and
    keeps ``maxOffsetsPerTrigger`` itself."""
    cluster = Cluster({T0: (0, 100)}, {"t": OLD_ID})
    reader = stream(cluster, startingOffsets="earliest", maxOffsetsPerTrigger="30")
    reader.initialOffset()
    first = reader.latestOffset()
    assert offsets_from_json(first) == {T0: 30}
    reader.partitions({"t": {"0": 0}}, first)
    assert offsets_from_json(reader.latestOffset()) == {T0: 60}
    restarted = stream(cluster, startingOffsets="earliest", maxOffsetsPerTrigger="30")
    restarted.partitions({"t": {"0": 90}}, {"t": {"0": 90}})  # Spark's setLatestSeenOffset on a restart
    assert offsets_from_json(restarted.latestOffset()) == {T0: 100}
