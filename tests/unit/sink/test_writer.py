"""The Spark-facing writers over the coordinator model: how often a batch reads the intent log."""

from __future__ import annotations

import pickle
from collections import Counter
from collections.abc import Callable

import pytest
from pyspark import cloudpickle

from sparkafka.sink import writer as writer_module
from sparkafka.sink.options import InputColumns, parse_sink_options
from sparkafka.sink.twophase import TwoPhaseCommitter
from sparkafka.sink.writer import KafkaBatchWriter, KafkaCommitMessage, KafkaStreamWriter

from .coordinator_model import World

OPTIONS = parse_sink_options(
    {
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "topic": "out",
        "deliveryGuarantee": "exactly_once",
        "transactionalIdPrefix": "p",
    }
)
Q = "query-1"


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    world = World()
    monkeypatch.setattr(TwoPhaseCommitter, "for_options", classmethod(lambda cls, options: world.committer()))
    monkeypatch.delenv(writer_module.SPECULATION_ENV, raising=False)
    return world


def messages(world: World, batch: int, query_id: str = Q) -> list[KafkaCommitMessage | None]:
    rows = [[f"b{batch}-t{t}".encode()] for t in range(2)]
    return [KafkaCommitMessage(r, query_id) for r in world.run_tasks(rows)]


def test_a_streaming_batch_reads_the_log_once_per_writer(world: World) -> None:
    for batch in range(3):
        KafkaStreamWriter(OPTIONS, InputColumns())  # the planner's writer, before the tasks
        msgs = messages(world, batch)
        reads = world.log.reads
        KafkaStreamWriter(OPTIONS, InputColumns()).commit(msgs, batch)  # the sink runner's
        assert world.log.reads == reads + 1  # its constructor's read, not another in commit
    written = Counter(f"b{b}-t{t}".encode() for b in range(3) for t in range(2))
    assert Counter(world.coordinator.visible) == written
    assert world.coordinator.open_transactions() == []


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "pyspark-cloudpickle"])
def test_a_writer_pickled_elsewhere_reads_the_log_again_before_committing(
    world: World, dumps: Callable[[object], bytes]
) -> None:
    writer = KafkaStreamWriter(OPTIONS, InputColumns())
    copy = pickle.loads(dumps(writer))  # what a task (or another process) would hold
    msgs = messages(world, 0)
    reads = world.log.reads
    copy.commit(msgs, 0)
    assert world.log.reads == reads + 1
    assert sorted(world.coordinator.visible) == [b"b0-t0", b"b0-t1"]


def test_the_recovered_state_serves_one_commit(world: World) -> None:
    writer = KafkaStreamWriter(OPTIONS, InputColumns())
    writer.commit(messages(world, 0), 0)
    replay = messages(world, 0)  # Spark replays batch 0 through the same instance (not what it does)
    reads = world.log.reads
    writer.commit(replay, 0)
    assert world.log.reads == reads + 1  # read afresh: the batch is seen done and skipped
    assert sorted(world.coordinator.visible) == [b"b0-t0", b"b0-t1"]
    assert world.counters["replays"] == 1


def test_a_batch_write_commits_on_its_unpickled_planner_writer_after_a_fresh_read(world: World) -> None:
    writer = pickle.loads(pickle.dumps(KafkaBatchWriter(OPTIONS, InputColumns())))
    msgs = messages(world, 0, writer._job)
    reads = world.log.reads
    writer.commit(msgs)
    assert world.log.reads == reads + 1
    assert sorted(world.coordinator.visible) == [b"b0-t0", b"b0-t1"]
