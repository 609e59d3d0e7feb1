"""The Spark-facing writers over the coordinator model: how often a batch reads the intent log, and what a
task's refusal (an error no retry can heal) does to the commit and the abort."""

from __future__ import annotations

import logging
import pickle
import re
from collections import Counter
from collections.abc import Callable

import pytest
from pyspark import cloudpickle

from sparkafka.errors import (
    AuthorizationError,
    BrokerError,
    ConfigError,
    DeliveryError,
    SparkafkaError,
    TransactionError,
)
from sparkafka.sink import twophase
from sparkafka.sink import writer as writer_module
from sparkafka.sink.modes import StreamBatch
from sparkafka.sink.options import InputColumns, parse_sink_options
from sparkafka.sink.task import TaskAbort, TaskResult
from sparkafka.sink.twophase import TwoPhaseCommitter
from sparkafka.sink.writer import KafkaBatchWriter, KafkaCommitMessage, KafkaStreamWriter

from .coordinator_model import ModelFencer, World

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
    # Handles another test left in doubt (the model's handles repeat across worlds) are not this world's.
    monkeypatch.setattr(twophase, "_IN_DOUBT", set())
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


# -- a task's refusal: an error no retry can heal, raised by the commit --------------------------------------

MISSING = "topic 'gone' does not exist (the sink does not create topics)"


def refused(error: SparkafkaError, query_id: str | None = Q) -> KafkaCommitMessage:
    """A refusing task's message as the driver gets it: pickled in the worker, unpickled in the sink
    runner."""
    return pickle.loads(cloudpickle.dumps(KafkaCommitMessage(None, query_id, error)))


def refused_batch(world: World, batch: int, query_id: str = Q) -> list[KafkaCommitMessage | None]:
    """Task 0 wrote and flushed (its transaction open); task 1 met a topic that does not exist: its own
    transaction was aborted in the task (``write_task``), so the model runs it with no rows."""
    rows: list[list[bytes]] = [[f"b{batch}-t0".encode()], []]
    wrote, _ = world.run_tasks(rows)
    return [KafkaCommitMessage(wrote, query_id), refused(BrokerError(MISSING, permanent=True), query_id)]


def test_a_task_returns_an_error_no_retry_can_heal_instead_of_failing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    denied = AuthorizationError(
        "User:etl may not WRITE topic out: grant it", "User:etl", "WRITE", "topic out"
    )

    def write_task(*args: object, **kwargs: object) -> None:
        raise denied

    monkeypatch.setattr(writer_module, "write_task", write_task)
    monkeypatch.setattr(writer_module, "claim_transactional_ids", lambda options, count: None)
    message = KafkaStreamWriter(OPTIONS, InputColumns()).write(iter([]))
    assert isinstance(message, KafkaCommitMessage)
    assert (message.result, message.refusal) == (None, denied)
    copy = pickle.loads(cloudpickle.dumps(message))  # what Spark carries to the driver
    with pytest.raises(AuthorizationError, match="User:etl may not WRITE topic out") as raised:
        KafkaStreamWriter(OPTIONS, InputColumns()).commit([copy], 0)
    assert (raised.value.principal, raised.value.operation, raised.value.resource) == (
        "User:etl",
        "WRITE",
        "topic out",
    )


def test_a_claim_refused_by_acl_is_returned_too(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    denied = AuthorizationError(
        "User:etl may not WRITE the intent log", "User:etl", "WRITE", "topic _sparkafka-i"
    )

    def claim(options: object, count: int) -> None:
        raise denied

    monkeypatch.setattr(writer_module, "claim_transactional_ids", claim)
    monkeypatch.setattr(
        writer_module, "write_task", lambda *a, **k: pytest.fail("no write after a refused claim")
    )
    message = KafkaStreamWriter(OPTIONS, InputColumns()).write(iter([]))
    assert isinstance(message, KafkaCommitMessage)
    assert message.refusal is denied


@pytest.mark.parametrize(
    "error",
    [
        BrokerError("looking up topic 'out' failed: timed out"),
        DeliveryError("1 record(s) still undelivered"),
        OSError(),
    ],
    ids=["broker", "delivery", "other"],
)
def test_a_task_fails_on_an_error_a_retry_may_heal(
    world: World, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    def write_task(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(writer_module, "write_task", write_task)
    monkeypatch.setattr(writer_module, "claim_transactional_ids", lambda options, count: None)
    with pytest.raises(type(error)):
        KafkaStreamWriter(OPTIONS, InputColumns()).write(iter([]))


def test_a_refused_batch_is_not_committed_and_sparks_abort_aborts_the_other_tasks(world: World) -> None:
    KafkaStreamWriter(OPTIONS, InputColumns())
    msgs = refused_batch(world, 0)
    entries, ends = len(world.log.entries), len(world.ender.sent)
    with pytest.raises(BrokerError, match=re.escape(MISSING)):
        KafkaStreamWriter(OPTIONS, InputColumns()).commit(msgs, 0)
    # Raised first: no intent, no EndTxn; task 0's transaction is still open, nothing visible.
    assert (len(world.log.entries), len(world.ender.sent)) == (entries, ends)
    assert world.coordinator.open_transactions() == ["p-0"]
    KafkaStreamWriter(OPTIONS, InputColumns()).abort(msgs, 0)  # what Spark does after a failed commit
    assert world.coordinator.open_transactions() == []
    assert world.coordinator.visible == []
    assert world.log.read().latest.get(Q) is None
    # Fixed and restarted: Spark replays batch 0, which is written once.
    KafkaStreamWriter(OPTIONS, InputColumns())
    KafkaStreamWriter(OPTIONS, InputColumns()).commit(messages(world, 0), 0)
    assert sorted(world.coordinator.visible) == [b"b0-t0", b"b0-t1"]
    assert world.log.read().latest[Q].state == "done"


def test_a_crash_between_the_refusal_and_the_abort_leaves_nothing_visible(world: World) -> None:
    """The sink runner dies after the commit raised, before Spark's abort: no intent was written, so the
    restart's recovery finds nothing and the replay's tasks fence the open transaction (same ids)."""
    KafkaStreamWriter(OPTIONS, InputColumns())
    with pytest.raises(BrokerError, match=re.escape(MISSING)):
        KafkaStreamWriter(OPTIONS, InputColumns()).commit(refused_batch(world, 0), 0)
    assert world.log.read().pending == []
    KafkaStreamWriter(OPTIONS, InputColumns())  # the restart's planner writer
    KafkaStreamWriter(OPTIONS, InputColumns()).commit(messages(world, 0), 0)  # the replay
    assert sorted(world.coordinator.visible) == [b"b0-t0", b"b0-t1"]
    assert world.coordinator.open_transactions() == []


def test_a_refused_replay_of_a_committed_batch_is_a_replay_and_the_query_goes_on(world: World) -> None:
    """Finding 4 of the refusal review: Spark replays a batch the intent log has as done (the driver died
    after the sink's done, before Spark's commit log), and a task now refuses (its topic was deleted since,
    a timestamp aged out of the topic's range, an ACL revoked). The batch's rows are committed: the commit
    counts a replay, aborts the replay's transactions and returns, so Spark records the batch and the query
    goes on (a later batch meets the refusal for what it then writes). Before, every restart failed on the
    same batch for good."""
    KafkaStreamWriter(OPTIONS, InputColumns()).commit(messages(world, 0), 0)
    for restart in range(3):  # the same replay, had it been refused: the query never got past it
        KafkaStreamWriter(OPTIONS, InputColumns())
        replay = refused_batch(world, 0)
        KafkaStreamWriter(OPTIONS, InputColumns()).commit(replay, 0)
        assert world.counters["replays"] == restart + 1
        assert sorted(world.coordinator.visible) == [b"b0-t0", b"b0-t1"]
        assert world.coordinator.open_transactions() == []
        assert world.log.read().latest[Q].state == "done"


def test_a_refused_replay_of_a_committed_batch_fences_an_unconfirmed_abort(world: World) -> None:
    """Spark calls no abort after a commit that returned: the commit fences the refusing task's id."""
    KafkaStreamWriter(OPTIONS, InputColumns()).commit(messages(world, 0), 0)
    KafkaStreamWriter(OPTIONS, InputColumns())
    KafkaStreamWriter(OPTIONS, InputColumns()).commit(unconfirmed_refusal(world, confirmed=False), 0)
    assert world.coordinator.open_transactions() == []
    assert sorted(world.coordinator.visible) == [b"b0-t0", b"b0-t1"]
    assert world.counters["replays"] == 1


def test_a_refused_replay_of_a_partly_committed_batch_still_raises(world: World) -> None:
    """Only a batch that is done is skipped: a partial one still needs the refusing task's rows (or, were
    the refusing task a visible one, its record count cannot be compared)."""
    KafkaStreamWriter(OPTIONS, InputColumns())
    results = world.run_tasks([[b"b0-t0"], [b"b0-t1"]])
    world.coordinator.init_producer_id("p-1")  # task 1's transaction aborted before the commit reached it
    with pytest.raises(TransactionError, match="is partial"):
        KafkaStreamWriter(OPTIONS, InputColumns()).commit([KafkaCommitMessage(r, Q) for r in results], 0)
    for refusing in (0, 1):
        KafkaStreamWriter(OPTIONS, InputColumns())
        rows: list[list[bytes]] = [[b"b0-t0"], [b"b0-t1"]]
        rows[refusing] = []
        wrote = world.run_tasks(rows)
        replay: list[KafkaCommitMessage | None] = [KafkaCommitMessage(r, Q) for r in wrote]
        replay[refusing] = refused(BrokerError(MISSING, permanent=True))
        with pytest.raises(BrokerError, match=re.escape(MISSING)):
            KafkaStreamWriter(OPTIONS, InputColumns()).commit(replay, 0)
        KafkaStreamWriter(OPTIONS, InputColumns()).abort(replay, 0)
        assert world.coordinator.open_transactions() == []
        assert world.coordinator.visible == [b"b0-t0"]
        assert world.log.read().latest[Q].state == "partial"


@pytest.mark.parametrize("stream", [None, StreamBatch(Q, 3)], ids=["batch-write", "update-mode"])
def test_a_batch_writer_raises_a_refusal_first_and_aborts_the_rest(
    world: World, stream: StreamBatch | None
) -> None:
    writer = pickle.loads(pickle.dumps(KafkaBatchWriter(OPTIONS, InputColumns(), stream)))
    msgs = refused_batch(world, 0, writer._job)
    entries = len(world.log.entries)
    with pytest.raises(BrokerError, match=re.escape(MISSING)):
        writer.commit(msgs)
    assert len(world.log.entries) == entries
    writer.abort(msgs)
    assert world.coordinator.open_transactions() == []
    assert world.coordinator.visible == []


@pytest.mark.parametrize("delivery", ["at_least_once", "none"])
def test_without_transactions_a_refused_batch_is_not_counted_and_its_abort_does_nothing(
    monkeypatch: pytest.MonkeyPatch, delivery: str
) -> None:
    """Spark does not record the batch as committed, so it replays it (at_least_once: the rows task 0
    flushed are written again)."""
    options = parse_sink_options(
        {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out", "deliveryGuarantee": delivery}
    )
    counted: list[object] = []
    monkeypatch.setattr(writer_module, "add_counts", lambda *args: counted.append(args))
    msgs = [KafkaCommitMessage(TaskResult(0, 5), Q), refused(ConfigError("option x is wrong"))]
    with pytest.raises(ConfigError, match="option x is wrong"):
        KafkaStreamWriter(options, InputColumns()).commit(msgs, 0)
    assert counted == []
    KafkaStreamWriter(options, InputColumns()).abort(msgs, 0)
    KafkaStreamWriter(options, InputColumns()).commit(msgs[:1], 0)  # the replay, healed
    assert len(counted) == 1


def test_the_first_tasks_refusal_is_raised_and_the_others_logged(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    msgs: list[KafkaCommitMessage | None] = [
        None,  # a message Spark did not get (it passes None)
        refused(BrokerError(MISSING, permanent=True)),
        refused(BrokerError("a row has a null topic and the sink has no option topic", permanent=True)),
        refused(BrokerError(MISSING, permanent=True)),
    ]
    with (
        pytest.raises(BrokerError, match=re.escape(MISSING)),
        caplog.at_level("ERROR", "sparkafka.sink.writer"),
    ):
        KafkaStreamWriter(OPTIONS, InputColumns()).commit(msgs, 0)
    assert [r.getMessage() for r in caplog.records] == [
        "another task of the batch refused as well: a row has a null topic and the sink has no option topic"
    ]
    assert writer_module._results(msgs) == (Q, [])


# -- a refusing task whose own abort was not confirmed (finding 3 of the refusal review) ---------------------


def unconfirmed_refusal(world: World, confirmed: bool) -> list[KafkaCommitMessage | None]:
    """Task 0 wrote and flushed; task 1 produced, met an error no retry can heal and aborted its
    transaction: with ``confirmed`` False its ``abort_transaction`` failed (the coordinator did not answer
    in time), so its transaction is still open on the broker."""
    wrote = world.run_tasks([[b"t0"], [b"t1-partial"]])
    error = BrokerError("a row has a null topic and the sink has no option topic", permanent=True)
    if confirmed:
        world.ender.end(wrote[1].handle, commit=False)  # type: ignore[arg-type]
    return [
        KafkaCommitMessage(wrote[0], Q),
        pickle.loads(cloudpickle.dumps(KafkaCommitMessage(None, Q, error, TaskAbort("p-1", confirmed)))),
    ]


def test_sparks_abort_fences_a_refusing_tasks_transaction_its_own_abort_left_open(world: World) -> None:
    """Before, the task failed and Spark's retry's InitProducerId on p-1 aborted the transaction within
    seconds; a refusal is not retried, so Spark's abort fences the id (no intent names that transaction:
    the commit raised before writing one). Else read_committed readers of every partition it wrote wait
    for the broker's transaction.timeout.ms."""
    KafkaStreamWriter(OPTIONS, InputColumns())
    msgs = unconfirmed_refusal(world, confirmed=False)
    with pytest.raises(BrokerError, match="a row has a null topic"):
        KafkaStreamWriter(OPTIONS, InputColumns()).commit(msgs, 0)
    assert world.coordinator.open_transactions() == ["p-0", "p-1"]
    KafkaStreamWriter(OPTIONS, InputColumns()).abort(msgs, 0)
    assert world.coordinator.open_transactions() == []
    assert world.coordinator.visible == []


def test_a_confirmed_abort_is_not_fenced_again(world: World) -> None:
    KafkaStreamWriter(OPTIONS, InputColumns())
    msgs = unconfirmed_refusal(world, confirmed=True)
    epoch = world.coordinator.ids["p-1"].epoch
    with pytest.raises(BrokerError):
        KafkaStreamWriter(OPTIONS, InputColumns()).commit(msgs, 0)
    KafkaStreamWriter(OPTIONS, InputColumns()).abort(msgs, 0)
    assert world.coordinator.ids["p-1"].epoch == epoch  # no InitProducerId
    assert world.coordinator.open_transactions() == []


def test_a_fence_that_fails_leaves_the_abort_quiet(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The coordinator that did not answer the task may not answer the driver either: the broker then
    aborts the transaction after transaction.timeout.ms, and Spark's abort does not fail on it."""

    def unreachable(self: object, transactional_id: str) -> None:
        raise TransactionError(f"init_transactions for transactional id {transactional_id} failed")

    KafkaStreamWriter(OPTIONS, InputColumns())
    msgs = unconfirmed_refusal(world, confirmed=False)
    monkeypatch.setattr(ModelFencer, "fence", unreachable)
    KafkaStreamWriter(OPTIONS, InputColumns()).abort(msgs, 0)
    assert world.coordinator.open_transactions() == ["p-1"]  # task 0's aborted; p-1 times out


def test_the_first_fence_that_fails_ends_the_fencing(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review: each unconfirmed refusal's fence waited out an unanswering coordinator in turn (a minute
    each) while Spark's abort held the query's thread; the first failure now ends it."""
    asked: list[str] = []

    def unreachable(self: object, transactional_id: str) -> None:
        asked.append(transactional_id)
        raise TransactionError(f"init_transactions for transactional id {transactional_id} failed")

    KafkaStreamWriter(OPTIONS, InputColumns())
    wrote = world.run_tasks([[b"t0"], [b"t1"], [b"t2"]])
    error = BrokerError("a row has a null topic and the sink has no option topic", permanent=True)
    msgs: list[KafkaCommitMessage | None] = [
        KafkaCommitMessage(wrote[0], Q),
        KafkaCommitMessage(None, Q, error, TaskAbort("p-1", confirmed=False)),
        KafkaCommitMessage(None, Q, error, TaskAbort("p-2", confirmed=False)),
    ]
    monkeypatch.setattr(ModelFencer, "fence", unreachable)
    KafkaStreamWriter(OPTIONS, InputColumns()).abort(msgs, 0)
    assert asked == ["p-1"]


def test_a_refusal_is_logged_when_the_commit_s_recovery_fails(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Review: a commit that recovers first (a batch write's) raised the recovery's error and the task's
    refusal was seen nowhere."""
    KafkaStreamWriter(OPTIONS, InputColumns())
    msgs = unconfirmed_refusal(world, confirmed=True)

    def broken(self: object) -> object:
        raise TransactionError("reading the intent log failed")

    made = KafkaBatchWriter(OPTIONS, InputColumns())
    unpickled = pickle.loads(cloudpickle.dumps(made))  # as the commit's process has it: it recovers first
    monkeypatch.setattr(TwoPhaseCommitter, "recover", broken)
    with caplog.at_level(logging.ERROR), pytest.raises(TransactionError, match="reading the intent log"):
        unpickled.commit(msgs)
    assert any("a row has a null topic" in r.getMessage() for r in caplog.records)


def test_a_refusing_task_reports_its_transaction_and_whether_its_abort_was_confirmed(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusal = BrokerError("topic 'gone' does not exist", permanent=True)

    def write_task(*args: object, aborts: list[TaskAbort], **kwargs: object) -> None:
        aborts.append(TaskAbort("p-0", confirmed=False))
        raise refusal

    monkeypatch.setattr(writer_module, "write_task", write_task)
    monkeypatch.setattr(writer_module, "claim_transactional_ids", lambda options, count: None)
    message = KafkaStreamWriter(OPTIONS, InputColumns()).write(iter([]))
    assert isinstance(message, KafkaCommitMessage)
    assert (message.result, message.refusal, message.abort) == (None, refusal, TaskAbort("p-0", False))
