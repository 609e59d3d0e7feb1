"""Spark's failOnDataLoss rules on the driver, through the streaming reader's ``latestOffset``.

A fake cluster stands in for Kafka: per partition its log ``[earliest, latest)``, per topic its id. Each
test gives the reader a checkpointed start (Spark's offset JSON) and reads the end it plans, or the
``DataLossError`` it raises, for both values of ``failOnDataLoss``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from sparkafka.errors import DataLossError
from sparkafka.source.options import Subscription, parse_source_options
from sparkafka.source.reader import KafkaStreamReader
from sparkafka.structs import TopicPartition

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

    def discover(self, subscription: Subscription) -> tuple[set[TopicPartition], dict[str, str]]:
        found = self.partitions(subscription)
        return found, {t: i for t, i in self.ids.items() if any(tp.topic == t for tp in found)}

    def earliest(self, tps: Iterable[TopicPartition]) -> Offsets:
        return {tp: self.logs[tp][0] for tp in tps}

    def latest(self, tps: Iterable[TopicPartition]) -> Offsets:
        return {tp: self.logs[tp][1] for tp in tps}

    def for_timestamp(self, tps: Iterable[TopicPartition], timestamp_ms: int) -> Offsets:
        return dict.fromkeys(tps, -1)

    def committed(self, group_id: str, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
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
    return reader.latestOffset(start, ReadAllAvailable())


def test_initial_offsets_keep_the_topic_ids() -> None:
    cluster = Cluster({T0: (0, 10)}, {"t": OLD_ID})
    assert stream(cluster, startingOffsets="earliest").initialOffset() == {"t": {"0": 0}, IDS: {"t": OLD_ID}}


def test_a_checkpoint_without_ids_is_read_and_gains_them() -> None:
    cluster = Cluster({T0: (0, 10)}, {"t": OLD_ID})
    assert latest(stream(cluster), {"t": {"0": 5}}) == {"t": {"0": 10}, IDS: {"t": OLD_ID}}


def test_ids_are_asked_once_per_discovery_not_per_batch() -> None:
    cluster = Cluster({T0: (0, 10)}, {"t": OLD_ID})
    reader = stream(cluster)
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
