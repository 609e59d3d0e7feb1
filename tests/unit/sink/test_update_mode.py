"""Update mode's pure parts (``sink.modes``) and its batch writes over the coordinator model.

A micro-batch of an update-mode query is a batch write naming its query and batch id: it must be
committed, replayed, recovered and owner-checked exactly as the streaming writer's batch of that id.
"""

from __future__ import annotations

import pickle
from collections import Counter
from collections.abc import Callable

import pytest

from sparkafka.errors import ConfigError
from sparkafka.sink import writer as writer_module
from sparkafka.sink.modes import (
    STREAM_BATCH_OPTION,
    STREAM_QUERY_OPTION,
    StreamBatch,
    StreamWriterSettings,
    batch_write_options,
    runs_as_foreach_batch,
    split_stream_batch,
)
from sparkafka.sink.options import InputColumns, parse_sink_options
from sparkafka.sink.twophase import TwoPhaseCommitter
from sparkafka.sink.writer import KafkaBatchWriter, KafkaCommitMessage, KafkaStreamWriter

from .coordinator_model import Crash, World, crash_at, no_fault

OPTIONS = parse_sink_options(
    {
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "topic": "out",
        "deliveryGuarantee": "exactly_once",
        "transactionalIdPrefix": "p",
    }
)
Q = "query-1"


@pytest.mark.parametrize(
    ("fmt", "mode", "intercepted"),
    [
        ("sparkafka", "update", True),
        ("SparKafka", "Update", True),  # Spark matches both without regard to case
        ("sparkafka", "append", False),
        ("sparkafka", "complete", False),
        ("sparkafka", None, False),  # Spark's default mode: append
        ("kafka", "update", False),
        ("console", "update", False),
        (None, "update", False),  # foreach/foreachBatch: the user's own sink
    ],
)
def test_only_sparkafka_in_update_mode_runs_as_foreach_batch(
    fmt: str | None, mode: str | None, intercepted: bool
) -> None:
    assert runs_as_foreach_batch(StreamWriterSettings(fmt, mode)) is intercepted


def test_recorded_options_are_case_insensitive_and_the_last_one_wins() -> None:
    settings = StreamWriterSettings()
    settings.set_option("kafka.bootstrap.servers", "a:1")
    settings.set_option("Topic", "one")
    settings.set_option("topic", "two")
    assert settings.option_map() == {"kafka.bootstrap.servers": "a:1", "topic": "two"}


def test_a_micro_batch_travels_in_two_internal_options_and_back() -> None:
    user = {"topic": "out", "kafka.bootstrap.servers": "a:1"}
    options = batch_write_options(user, StreamBatch(Q, 7))
    assert options == {**user, STREAM_QUERY_OPTION: Q, STREAM_BATCH_OPTION: "7"}
    lowered = {k.lower(): v for k, v in options.items()}  # as Spark hands options to the data source
    rest, batch = split_stream_batch(lowered)
    assert batch == StreamBatch(Q, 7)
    assert rest == {"topic": "out", "kafka.bootstrap.servers": "a:1"}
    assert split_stream_batch(user) == (user, None)  # a plain batch write


@pytest.mark.parametrize(
    "internal",
    [
        {STREAM_QUERY_OPTION: Q},
        {STREAM_BATCH_OPTION: "1"},
        {STREAM_QUERY_OPTION: Q, STREAM_BATCH_OPTION: "x"},
    ],
)
def test_internal_options_set_by_hand_are_refused_naming_them(internal: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="internal to sparkafka's update mode"):
        split_stream_batch({"topic": "out", **internal})


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    world = World()
    monkeypatch.setattr(TwoPhaseCommitter, "for_options", classmethod(lambda cls, options: world.committer()))
    monkeypatch.delenv(writer_module.SPECULATION_ENV, raising=False)
    return world


def update_batch(
    world: World, batch: int, monkeypatch: pytest.MonkeyPatch, faults: Callable[[str], None] = no_fault
) -> None:
    """One micro-batch as Spark runs an update-mode batch write: the planner's writer (recovery, owner
    check), the tasks (their messages name the streaming query), the commit on an unpickled copy."""
    writer = KafkaBatchWriter(OPTIONS, InputColumns(), StreamBatch(Q, batch))
    rows = [[f"b{batch}-t{t}".encode()] for t in range(2)]
    msgs: list[KafkaCommitMessage | None] = [KafkaCommitMessage(r, Q) for r in world.run_tasks(rows)]
    monkeypatch.setattr(
        TwoPhaseCommitter, "for_options", classmethod(lambda cls, options: world.committer(faults))
    )
    try:
        pickle.loads(pickle.dumps(writer)).commit(msgs)
    finally:
        monkeypatch.setattr(
            TwoPhaseCommitter, "for_options", classmethod(lambda cls, options: world.committer())
        )


def written(batches: range) -> Counter[bytes]:
    return Counter(f"b{b}-t{t}".encode() for b in batches for t in range(2))


def test_update_mode_batches_commit_as_the_streaming_query_s_batches(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    for batch in range(3):
        update_batch(world, batch, monkeypatch)
    assert Counter(world.coordinator.visible) == written(range(3))
    record = world.log.read().latest[Q]
    assert (record.batch_id, record.state, record.streaming) == (2, "done", True)  # kept, not deleted
    assert world.coordinator.open_transactions() == []


def test_a_replayed_update_mode_batch_is_not_written_twice(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    update_batch(world, 0, monkeypatch)
    update_batch(world, 0, monkeypatch)  # Spark replays batch 0: its foreachBatch write runs again
    assert Counter(world.coordinator.visible) == written(range(1))
    assert world.counters["replays"] == 1
    assert world.coordinator.open_transactions() == []


@pytest.mark.parametrize("point", ["commit_start", "after_intent", "after_first_txn", "commit_end"])
def test_a_driver_crash_in_an_update_mode_commit_then_the_replay_is_exact(
    world: World, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    update_batch(world, 0, monkeypatch)
    with pytest.raises(Crash):
        update_batch(world, 1, monkeypatch, crash_at(point))
    update_batch(world, 1, monkeypatch)  # the restart: Spark replays batch 1 (same id, same rows)
    update_batch(world, 2, monkeypatch)
    assert Counter(world.coordinator.visible) == written(range(3))
    assert world.coordinator.open_transactions() == []


def test_an_update_mode_query_owns_its_prefix_as_a_streaming_query(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    update_batch(world, 0, monkeypatch)
    with pytest.raises(ConfigError, match=f"belongs to streaming query {Q}"):
        KafkaBatchWriter(OPTIONS, InputColumns())  # a plain batch write on the live query's prefix
    with pytest.raises(ConfigError, match=f"belongs to streaming query {Q}"):
        KafkaBatchWriter(OPTIONS, InputColumns(), StreamBatch("query-2", 0))  # another query's batch
    # The same query, as the streaming sink (say, restarted in append mode on its checkpoint): its own.
    stream = KafkaStreamWriter(OPTIONS, InputColumns())
    rows = [[b"b1-t0"], [b"b1-t1"]]
    stream.commit([KafkaCommitMessage(r, Q) for r in world.run_tasks(rows)], 1)
    update_batch(world, 2, monkeypatch)  # and back to update mode
    assert Counter(world.coordinator.visible) == written(range(3))
