"""The exactly-once decision table against the coordinator model: every fault point x timing x mode.

A crash is the driver dying at a fault point; "timed_out" keeps it down past transaction.timeout.ms (the
broker aborts every open transaction and bumps its epoch); "partly" keeps it down long enough for the
batch's oldest transaction (task 2's) only to time out. Streaming queries are then restarted and Spark
replays the batch (same id, same rows per task); a batch write is not replayed, and a later writer's
recovery finds what it left.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkafka.errors import ConfigError, TransactionError
from sparkafka.sink.intents import IntentRecord, IntentWriteError
from sparkafka.sink.twophase import timeout_margin_ms
from sparkafka.sink.txn_control import classify

from .coordinator_model import Crash, World, crash_at

TIMEOUT = 60_000
Q = "query-1"
POINTS = ("commit_start", "after_intent", "after_first_txn", "commit_end")
TIMINGS = ("in_time", "timed_out", "partly")


def rows_of(batch: int, tasks: int = 3, per_task: int = 4) -> list[list[bytes]]:
    return [[f"b{batch}-t{t}-r{r}".encode() for r in range(per_task)] for t in range(tasks)]


def flat(rows: list[list[bytes]]) -> Counter[bytes]:
    return Counter(r for task in rows for r in task)


# Task 2's transaction started half a timeout before the others: "partly" then times out only task 2.
STAGGER = [0, 0, TIMEOUT // 2]
DOWN = {"in_time": 1_000, "timed_out": TIMEOUT + 1_000, "partly": TIMEOUT * 6 // 10}


def crash_batch(world: World, query: str, batch: int, point: str, timing: str, streaming: bool) -> None:
    world.make_writer(query)
    results = world.run_tasks(rows_of(batch), STAGGER)
    with pytest.raises(Crash):
        world.sink_runner_commit(query, batch, results, streaming, crash_at(point))
    world.clock.advance(DOWN[timing])


def run_batch(world: World, query: str, batch: int, streaming: bool = True) -> None:
    world.make_writer(query)
    world.sink_runner_commit(query, batch, world.run_tasks(rows_of(batch)), streaming)


@pytest.mark.parametrize(("point", "timing"), list(itertools.product(POINTS, TIMINGS)))
def test_streaming_crash_then_replay_is_exactly_once(point: str, timing: str) -> None:
    world = World(timeout_ms=TIMEOUT)
    run_batch(world, Q, 0)
    crash_batch(world, Q, 1, point, timing, streaming=True)
    run_batch(world, Q, 1)  # Spark's replay: same batch id, same rows per task
    run_batch(world, Q, 2)
    assert Counter(world.coordinator.visible) == flat(rows_of(0)) + flat(rows_of(1)) + flat(rows_of(2))
    assert world.coordinator.open_transactions() == []
    assert world.log.read().latest[Q].state == "done"
    if point == "commit_end":
        assert world.counters["replays"] == 1
        # The replay's fresh transactions (one per task) were aborted, and counted as such.
        assert world.counters["aborted"] == len(rows_of(1))


# What a crashed batch write leaves visible once a later writer has recovered: rows of tasks.
BATCH_EXPECTED = {
    ("commit_start", "in_time"): (),
    ("commit_start", "timed_out"): (),
    ("commit_start", "partly"): (),
    ("after_intent", "in_time"): (0, 1, 2),
    ("after_intent", "timed_out"): (),
    ("after_intent", "partly"): (0, 1),
    ("after_first_txn", "in_time"): (0, 1, 2),
    ("after_first_txn", "timed_out"): (0,),
    ("after_first_txn", "partly"): (0, 1),
    ("commit_end", "in_time"): (0, 1, 2),
    ("commit_end", "timed_out"): (0, 1, 2),
    ("commit_end", "partly"): (0, 1, 2),
}


@pytest.mark.parametrize(("point", "timing"), list(itertools.product(POINTS, TIMINGS)))
def test_batch_write_crash_is_recovered_to_a_recorded_outcome(point: str, timing: str) -> None:
    world = World(timeout_ms=TIMEOUT)
    job = "batch-1"
    crash_batch(world, job, 0, point, timing, streaming=False)
    world.make_writer("batch-2")  # the next job's writer recovers what the crash left
    tasks = BATCH_EXPECTED[(point, timing)]
    rows = rows_of(0)
    assert Counter(world.coordinator.visible) == Counter(r for t in tasks for r in rows[t])
    # A crash before the intent leaves the tasks' transactions to the broker's timeout (task 2's started
    # half a timeout earlier); an intent lets recovery end every one.
    open_left = {"in_time": ["p-0", "p-1", "p-2"], "timed_out": [], "partly": ["p-0", "p-1"]}[timing]
    assert world.coordinator.open_transactions() == (open_left if point == "commit_start" else [])
    record = world.log.read().latest.get(job)
    if len(tasks) in (0, 3):  # done or abandoned (or never intended): the job's key is deleted
        assert record is None
    else:  # partial: kept for the operator, naming what is visible
        assert record is not None
        assert record.state == "partial"
        assert tuple(sorted(h.task for h in record.committed)) == tasks
    # A rerun of a job that left nothing visible writes it exactly once.
    if not tasks:
        run_batch(world, "batch-2", 0, streaming=False)
        assert Counter(world.coordinator.visible) == flat(rows)
    world.make_writer("batch-3")
    assert world.coordinator.open_transactions() == []


def test_recovery_never_wedges_after_the_broker_aborted_the_intent() -> None:
    """The reported Apache Kafka scenario: down past the timeout after the intent; every restart worked."""
    world = World(timeout_ms=10_000)
    world.make_writer(Q)
    results = world.run_tasks(rows_of(0))
    with pytest.raises(Crash):
        world.committer(crash_at("after_intent")).commit(Q, 0, results)
    world.clock.advance(25_000)
    state = world.make_writer(Q)  # used to fail with PRODUCER_FENCED forever
    assert state.latest[Q].state == "abandoned"
    assert world.make_writer(Q).latest[Q].state == "abandoned"  # idempotent: nothing pending
    run_batch(world, Q, 0)
    assert Counter(world.coordinator.visible) == flat(rows_of(0))


def test_timeout_while_committing_fails_the_batch_and_the_replay_writes_the_rest() -> None:
    world = World(timeout_ms=TIMEOUT)
    world.make_writer(Q)
    results = world.run_tasks(rows_of(0), STAGGER)

    def stall(name: str) -> None:  # the driver is slow after committing the first transaction
        if name == "after_first_txn":
            world.clock.advance(TIMEOUT * 6 // 10)

    with pytest.raises(TransactionError, match="batch 0 of query query-1 is partial") as info:
        world.committer(stall).commit(Q, 0, results)
    assert "rows of tasks 0, 1 (8 records) are visible" in str(info.value)
    world.committer().abort(Q, 0, results)  # Spark aborts after a failed commit: nothing more to undo
    assert Counter(world.coordinator.visible) == Counter(r for t in (0, 1) for r in rows_of(0)[t])
    run_batch(world, Q, 0)
    assert Counter(world.coordinator.visible) == flat(rows_of(0))
    assert world.counters["partial"] == 1


def test_old_batch_is_aborted_before_an_intent_is_written() -> None:
    world = World(timeout_ms=TIMEOUT)
    world.make_writer(Q)
    too_old = TIMEOUT - timeout_margin_ms(TIMEOUT) + 1
    results = world.run_tasks(rows_of(0), [too_old, 0, 0])
    with pytest.raises(TransactionError, match=r"oldest transaction is 54\.0 s old, past 54\.0 s") as info:
        world.committer().commit(Q, 0, results)
    # No intent: the refusal is recorded as an abandoned batch (nothing of it visible), with its age.
    refusal = world.log.read().latest[Q]
    assert (refusal.state, refusal.handles, refusal.too_old) == ("abandoned", (), (too_old, TIMEOUT))
    # Only remedies that work for a replay (which has the same rows): no "maxOffsetsPerTrigger" alone.
    message = str(info.value)
    assert "raise kafka.transaction.timeout.ms (up to the broker's transaction.max.timeout.ms" in message
    assert "as many cores as the batch has tasks" in message
    assert (
        "set maxOffsetsPerTrigger on the source, then run `sparkafka offsets replan --checkpoint" in message
    )
    assert world.coordinator.open_transactions() == []  # aborted, not left to time out
    run_batch(world, Q, 0)
    assert Counter(world.coordinator.visible) == flat(rows_of(0))


def test_margin_is_a_tenth_bounded_by_five_seconds_and_half() -> None:
    assert timeout_margin_ms(900_000) == 90_000
    assert timeout_margin_ms(60_000) == 6_000
    assert timeout_margin_ms(10_000) == 5_000
    assert timeout_margin_ms(4_000) == 2_000


@pytest.mark.parametrize("fate", ["landed", "lost"])
def test_ambiguous_intent_write_is_read_back_before_deciding(fate: str) -> None:
    world = World(timeout_ms=TIMEOUT)
    world.make_writer(Q)
    results = world.run_tasks(rows_of(0))
    world.log.fail_next = fate
    committer = world.committer()
    if fate == "landed":
        committer.commit(Q, 0, results)  # found on read-back: the commit goes on
        assert Counter(world.coordinator.visible) == flat(rows_of(0))
        return
    with pytest.raises(TransactionError, match="commit intent could not be confirmed"):
        committer.commit(Q, 0, results)
    world.committer().abort(Q, 0, results)  # Spark's abort must leave them alone: the intent may land
    aborts = [h for h, commit in world.ender.sent if not commit]
    assert aborts == []
    assert sorted(world.coordinator.open_transactions()) == ["p-0", "p-1", "p-2"]
    run_batch(world, Q, 0)  # the replay's tasks fence them; exactly once
    assert Counter(world.coordinator.visible) == flat(rows_of(0))


def test_late_landing_intent_of_a_fenced_batch_is_recovered_as_abandoned() -> None:
    world = World(timeout_ms=TIMEOUT)
    world.make_writer(Q)
    old = world.run_tasks(rows_of(0))
    run_batch(world, Q, 0)  # the replay fenced the old attempt's ids and committed
    stale = world.log.read().latest[Q]
    late = IntentRecord("query-old", 0, "intent", tuple(r.handle for r in old if r.handle), 3)
    world.log.append(late)  # a record that landed late, from a query no longer running
    world.make_writer(Q)
    assert world.log.read().latest["query-old"].state == "abandoned"
    assert world.log.read().latest[Q] == stale
    assert Counter(world.coordinator.visible) == flat(rows_of(0))


def test_concurrent_attempt_of_a_task_fails_the_commit_never_loses_rows() -> None:
    """Two attempts of task 0 (speculation): the second InitProducerId aborts the first's transaction."""
    world = World(timeout_ms=TIMEOUT)
    world.make_writer(Q)
    results = world.run_tasks(rows_of(0))
    world.coordinator.init_producer_id("p-0")  # the other attempt starts
    with pytest.raises(TransactionError, match="batch 0 of query query-1 is partial"):
        world.committer().commit(Q, 0, results)
    run_batch(world, Q, 0)
    assert Counter(world.coordinator.visible) == flat(rows_of(0))


def test_partial_replay_that_differs_is_refused_and_resolvable() -> None:
    world = World(timeout_ms=TIMEOUT)
    crash_batch(world, Q, 0, "after_intent", "partly", streaming=True)
    world.make_writer(Q)
    different = rows_of(0)
    different[0] = different[0][:-1]  # a nondeterministic transform: task 0 has one row fewer now
    results = world.run_tasks(different)
    with pytest.raises(TransactionError, match="task 0 has 3 records now, 4 then") as info:
        world.committer().commit(Q, 0, results)
    assert "sparkafka txn resolve --prefix p --query query-1 mark-done --yes" in str(info.value)
    assert world.coordinator.open_transactions() == []
    visible_before = Counter(world.coordinator.visible)
    world.committer().resolve(Q, "mark-done")
    run_batch(world, Q, 0)  # now a replay of a done batch: aborted
    assert Counter(world.coordinator.visible) == visible_before
    run_batch(world, Q, 1)
    assert Counter(world.coordinator.visible) == visible_before + flat(rows_of(1))


def test_resolve_rewrite_writes_the_whole_batch_again() -> None:
    world = World(timeout_ms=TIMEOUT)
    crash_batch(world, Q, 0, "after_intent", "partly", streaming=True)
    world.make_writer(Q)
    world.committer().resolve(Q, "rewrite")
    run_batch(world, Q, 0)
    assert Counter(world.coordinator.visible) == flat(rows_of(0)) + Counter(
        r for t in (0, 1) for r in rows_of(0)[t]
    )


@pytest.mark.parametrize(
    ("action", "state", "visible_tasks"), [("commit", "done", (0, 1, 2)), ("abort", "abandoned", ())]
)
def test_resolve_a_pending_intent_deliberately(
    action: str, state: str, visible_tasks: tuple[int, ...]
) -> None:
    world = World(timeout_ms=TIMEOUT)
    world.make_writer(Q)
    results = world.run_tasks(rows_of(0))
    with pytest.raises(Crash):
        world.committer(crash_at("after_intent")).commit(Q, 0, results)
    record = world.committer().resolve(Q, action)  # type: ignore[arg-type]
    assert record.state == state
    assert Counter(world.coordinator.visible) == Counter(r for t in visible_tasks for r in rows_of(0)[t])
    with pytest.raises(ConfigError, match=r"nothing to resolve|allowed"):
        world.committer().resolve(Q, action)  # type: ignore[arg-type]


def test_owner_check_refuses_a_second_live_query_and_allows_take_over() -> None:
    world = World(timeout_ms=TIMEOUT)
    run_batch(world, Q, 0)
    with pytest.raises(
        ConfigError, match=r"belongs to streaming query query-1.*takeOverTransactionalIdPrefix"
    ):
        world.make_writer("query-2")
    with pytest.raises(ConfigError, match="belongs to streaming query"):
        world.make_writer("batch-job")  # a batch write is refused alike
    world.make_writer(Q)  # the owner itself, restarted
    taker = World(timeout_ms=TIMEOUT, take_over=True)
    taker.log, taker.coordinator, taker.clock = world.log, world.coordinator, world.clock
    taker.make_writer("query-2")
    world.clock.advance(TIMEOUT)  # idle past the timeout: no longer live
    world.make_writer("query-3")
    run_batch(world, "query-3", 0)
    with pytest.raises(ConfigError, match="belongs to streaming query query-3"):
        world.make_writer(Q)  # the old owner comes back: refused


def test_fewer_tasks_after_a_crash_fence_unused_ids() -> None:
    world = World(timeout_ms=TIMEOUT)
    world.make_writer(Q)
    results = world.run_tasks(rows_of(0))
    with pytest.raises(Crash):
        world.committer(crash_at("commit_start")).commit(Q, 0, results)
    world.make_writer(Q)
    one_task = [[r for t in rows_of(0) for r in t]]
    world.committer().commit(Q, 0, world.run_tasks(one_task))
    assert world.coordinator.open_transactions() == []  # p-1 and p-2 fenced, not left to time out
    assert Counter(world.coordinator.visible) == flat(rows_of(0))


def test_empty_tasks_have_no_transaction_and_replays_of_empty_batches_are_harmless() -> None:
    world = World(timeout_ms=TIMEOUT)
    world.make_writer(Q)
    world.committer().commit(Q, 0, world.run_tasks([[], [b"x"], []]))
    world.committer().commit(Q, 0, world.run_tasks([[], [b"x"], []]))  # replay: aborted
    assert world.coordinator.visible == [b"x"]
    assert world.counters["replays"] == 1


@pytest.mark.parametrize(
    ("code", "commit", "outcome"),
    [
        (0, True, "committed"),
        (0, False, "aborted"),
        (90, True, "fenced"),
        (47, True, "fenced"),
        (90, False, "fenced"),
        (48, True, "aborted"),
        (48, False, "committed"),
        (49, True, "forgotten"),
        (49, False, "forgotten"),
        (53, True, None),
    ],
)
def test_classify_endtxn_answers(code: int, commit: bool, outcome: str | None) -> None:
    assert classify(code, commit) == outcome


@settings(max_examples=150, deadline=None)
@given(
    point=st.sampled_from((*POINTS, None)),
    down_ms=st.integers(0, 2 * TIMEOUT),
    ago=st.lists(st.integers(0, TIMEOUT // 2), min_size=1, max_size=4),
    replays=st.integers(1, 3),
)
def test_any_crash_and_downtime_ends_exactly_once(
    point: str | None, down_ms: int, ago: list[int], replays: int
) -> None:
    world = World(timeout_ms=TIMEOUT)
    rows = rows_of(0, tasks=len(ago))
    world.make_writer(Q)
    results = world.run_tasks(rows, ago)
    try:
        world.sink_runner_commit(Q, 0, results, faults=crash_at(point))
    except (Crash, TransactionError):
        world.clock.advance(down_ms)
    for _ in range(replays):  # restarts may replay a batch more than once
        world.make_writer(Q)
        try:
            world.committer().commit(Q, 0, world.run_tasks(rows))  # commit recovering by itself
        except TransactionError:
            continue
    assert Counter(world.coordinator.visible) == flat(rows)
    assert world.coordinator.open_transactions() == []


# -- the long tail: epochs bumped after a commit, ids the coordinator forgot (issue 37, findings 1 and 5) --


def crash_after_first_commit(world: World, query: str = Q) -> list[list[bytes]]:
    """Batch 0's commit dies after task 0's EndTxn(commit); tasks 1 and 2 stay open."""
    world.make_writer(query)
    rows = rows_of(0)
    results = world.run_tasks(rows)
    with pytest.raises(Crash):
        world.committer(crash_at("after_first_txn")).commit(query, 0, results)
    assert Counter(world.coordinator.visible) == Counter(rows[0])
    return rows


def test_a_stray_init_producer_id_after_the_commit_leaves_a_committed_transaction_committed() -> None:
    """PRODUCER_FENCED for p-0's EndTxn only says its epoch moved: its COMMIT marker says it was committed.
    (Before: read as aborted, so the batch became partial and the replay wrote task 0's rows twice.)"""
    world = World(timeout_ms=TIMEOUT)
    rows = crash_after_first_commit(world)
    world.coordinator.init_producer_id("p-0")  # a zombie attempt, a second writer, a background abort
    state = world.make_writer(Q)
    assert state.latest[Q].state == "done"
    run_batch(world, Q, 0)  # Spark's replay: aborted
    assert Counter(world.coordinator.visible) == flat(rows)
    assert world.evidence.searches == 1


def test_ids_the_coordinator_forgot_are_decided_from_their_markers() -> None:
    """INVALID_PRODUCER_ID_MAPPING after the ids expired: p-0's COMMIT marker and the timeout's ABORT
    markers decide; the batch is partial and the replay writes tasks 1 and 2 only."""
    world = World(timeout_ms=TIMEOUT)
    rows = crash_after_first_commit(world)
    world.clock.advance(TIMEOUT + 1_000)  # tasks 1 and 2 time out
    world.coordinator.forget_ids()  # a week later
    state = world.make_writer(Q)
    record = state.latest[Q]
    assert (record.state, [h.task for h in record.committed]) == ("partial", [0])
    run_batch(world, Q, 0)
    assert Counter(world.coordinator.visible) == flat(rows)


@pytest.mark.parametrize(
    ("action", "state", "replayed"), [("mark-done", "done", ()), ("rewrite", "abandoned", (0, 1, 2))]
)
def test_without_ids_or_markers_every_writer_stops_naming_the_commands_that_resolve_it(
    action: str, state: str, replayed: tuple[int, ...]
) -> None:
    world = World(timeout_ms=TIMEOUT)
    rows = crash_after_first_commit(world)
    world.clock.advance(TIMEOUT + 1_000)
    world.coordinator.forget_ids()
    world.coordinator.delete_records()  # retention removed the output's records and markers
    for _ in range(2):  # every writer, until an operator decides
        with pytest.raises(TransactionError) as stopped:
            world.make_writer(Q)
        message = str(stopped.value)
        assert "batch 0 of query query-1 stays pending" in message
        assert "its id expired (INVALID_PRODUCER_ID_MAPPING" in message
        assert "out-0 no longer holds offset" in message
        command = "sparkafka txn resolve --bootstrap-servers HOST:PORT --prefix p --query query-1"
        assert f"run `{command} mark-done --yes`" in message
        assert f"run `{command} rewrite --yes`" in message
    record = world.committer().resolve(Q, action)  # type: ignore[arg-type]
    assert record.state == state
    assert world.make_writer(Q).latest[Q].state == state  # resolved: writers start again
    run_batch(world, Q, 0)
    assert Counter(world.coordinator.visible) == Counter(r for t in replayed for r in rows[t])


def test_an_intent_from_before_probes_keeps_the_rule_of_its_version() -> None:
    """Handles without a probe (written by an older sparkafka): fenced is read as aborted, as it was."""
    world = World(timeout_ms=TIMEOUT)
    world.make_writer(Q)
    results = world.run_tasks(rows_of(0))
    old = [replace(r, handle=replace(r.handle, probe=None)) if r.handle else r for r in results]
    with pytest.raises(Crash):
        world.committer(crash_at("after_intent")).commit(Q, 0, old)
    world.clock.advance(TIMEOUT + 1_000)  # the broker aborts them all
    assert world.make_writer(Q).latest[Q].state == "abandoned"
    assert world.evidence.searches == 0
    run_batch(world, Q, 0)
    assert Counter(world.coordinator.visible) == flat(rows_of(0))


@settings(max_examples=150, deadline=None)
@given(
    point=st.sampled_from((*POINTS, None)),
    down_ms=st.integers(0, 2 * TIMEOUT),
    ago=st.lists(st.integers(0, TIMEOUT // 2), min_size=1, max_size=4),
    strays=st.lists(st.integers(0, 3), max_size=3),
    forget=st.booleans(),
)
def test_any_crash_stray_epoch_bump_and_forgotten_id_ends_exactly_once(
    point: str | None, down_ms: int, ago: list[int], strays: list[int], forget: bool
) -> None:
    """While the driver is down, zombies bump epochs of the batch's ids and the broker may forget them."""
    world = World(timeout_ms=TIMEOUT)
    rows = rows_of(0, tasks=len(ago))
    world.make_writer(Q)
    results = world.run_tasks(rows, ago)
    with contextlib.suppress(Crash, TransactionError):
        world.sink_runner_commit(Q, 0, results, faults=crash_at(point))
    world.clock.advance(down_ms)
    for task in strays:
        world.coordinator.init_producer_id(f"p-{task % len(ago)}")
    if forget:
        world.coordinator.forget_ids()
    for _ in range(2):
        world.make_writer(Q)
        try:
            world.committer().commit(Q, 0, world.run_tasks(rows))
        except TransactionError:
            continue
    assert Counter(world.coordinator.visible) == flat(rows)
    assert world.coordinator.open_transactions() == []


def test_a_partial_batch_refused_as_too_old_on_replay_keeps_what_is_visible() -> None:
    """Review finding F1: the refusal of a partial batch's replay must not forget which tasks are
    visible, or the next replay writes them twice (and `offsets replan` would take the batch as empty)."""
    world = World(timeout_ms=TIMEOUT)
    world.make_writer(Q)
    results = world.run_tasks(rows_of(0), STAGGER)

    def stall(name: str) -> None:  # the driver is slow after committing the first transaction
        if name == "after_first_txn":
            world.clock.advance(TIMEOUT * 6 // 10)

    with pytest.raises(TransactionError, match="is partial"):
        world.committer(stall).commit(Q, 0, results)
    world.make_writer(Q)
    too_old = TIMEOUT - timeout_margin_ms(TIMEOUT) + 1
    with pytest.raises(TransactionError, match="was not committed") as refused:
        world.committer().commit(Q, 0, world.run_tasks(rows_of(0), [0, 0, too_old]))
    assert "nothing of the batch is visible" not in str(refused.value)
    assert "the rows of tasks 0, 1 (8 records) stay visible" in str(refused.value)
    record = world.log.read().latest[Q]
    assert (record.state, [h.task for h in record.committed]) == ("partial", [0, 1])
    assert record.tids_in_use == 3
    run_batch(world, Q, 0)
    assert Counter(world.coordinator.visible) == flat(rows_of(0))


def test_a_marker_search_that_cannot_run_now_leaves_the_batch_pending_for_the_next_writer() -> None:
    """A broker down while the markers are searched: no operator decision is asked for, the next writer
    searches again (review finding F6)."""
    from sparkafka.sink.outcomes import Finding

    world = World(timeout_ms=TIMEOUT)
    rows = crash_after_first_commit(world)
    world.coordinator.init_producer_id("p-0")
    real_find = world.evidence.find
    world.evidence.find = lambda *_: Finding(None, "the broker did not answer", retry=True)  # type: ignore[method-assign]
    with pytest.raises(TransactionError) as pending:
        world.make_writer(Q)
    assert "stays pending" in str(pending.value)
    assert "the next writer of the prefix tries again" in str(pending.value)
    assert "txn resolve" not in str(pending.value)
    assert world.log.read().latest[Q].state == "intent"
    world.evidence.find = real_find  # type: ignore[method-assign]
    assert world.make_writer(Q).latest[Q].state == "done"
    run_batch(world, Q, 0)
    assert Counter(world.coordinator.visible) == flat(rows)


def test_the_commands_an_error_names_take_the_secured_settings_from_a_file() -> None:
    from sparkafka.sink.twophase import cli_connection

    assert cli_connection({"bootstrap.servers": "b:9092"}) == "--bootstrap-servers b:9092"
    secured = {"bootstrap.servers": "b:9093", "security.protocol": "SASL_SSL", "sasl.password": "pw"}
    assert cli_connection(secured) == "--bootstrap-servers b:9093 --command-config FILE"


LANDINGS = ("before_the_replay", "after_the_replays_intent", "after_the_replay", "after_the_next_batch")


@pytest.mark.parametrize("lands", LANDINGS)
def test_an_intent_append_held_past_its_time_out_changes_nothing_wherever_it_lands(lands: str) -> None:
    """A batch's intent append times out and is not found (the batch fails), but the network holds it and
    it is carried out later: before the replay's writer reads the log, between the replay's intent and its
    EndTxns, after the replay committed, or after the next batch. Then Spark replays the batch once more
    (a driver that died before its commit log) and runs the next: every row once, the log's state the
    newest batch's, and its last record of the query the state itself (what compaction keeps)."""
    world = World(timeout_ms=TIMEOUT)
    run_batch(world, Q, 0)
    world.make_writer(Q)
    first = world.run_tasks(rows_of(1))
    world.log.fail_next = "held"
    with pytest.raises(TransactionError, match="its commit intent could not be confirmed"):
        world.sink_runner_commit(Q, 1, first)
    if lands == "before_the_replay":
        world.log.land_held()

    def land_after_intent(name: str) -> None:
        if name == "after_intent" and lands == "after_the_replays_intent":
            world.log.land_held()

    world.make_writer(Q)
    world.sink_runner_commit(Q, 1, world.run_tasks(rows_of(1)), faults=land_after_intent)
    if lands == "after_the_replay":
        world.log.land_held()
    run_batch(world, Q, 1)  # Spark's replay of a batch the sink had committed: aborted, not written
    run_batch(world, Q, 2)
    if lands == "after_the_next_batch":
        world.log.land_held()
    state = world.make_writer(Q)
    assert Counter(world.coordinator.visible) == flat(rows_of(0)) + flat(rows_of(1)) + flat(rows_of(2))
    assert state.latest[Q].batch_id == 2
    assert state.latest[Q].state == "done"
    last = [r for k, r in world.log.entries if k == Q.encode()][-1]
    assert last is not None
    assert (last.batch_id, last.state) == (2, "done")


def test_a_driver_that_stalled_after_reading_the_log_cannot_override_the_replays_commit() -> None:
    """Review finding: a zombie driver (a paused or partitioned one) made its writer, read the log (batch 0
    done) and flushed batch 1's tasks, then stalled; the restarted driver replayed batch 1 and committed it.
    The zombie's intent, decided later on its old read, must not become the query's state: it fails before
    any EndTxn, and a further replay of batch 1 is aborted, not written twice."""
    world = World(timeout_ms=TIMEOUT)
    run_batch(world, Q, 0)
    world.clock.advance(1_000)
    zombie_state = world.make_writer(Q)
    zombie_results = world.run_tasks(rows_of(1))
    world.clock.advance(1_000)
    run_batch(world, Q, 1)  # the new driver's replay
    world.clock.advance(1_000)
    with pytest.raises(TransactionError, match="so the intent does not count"):
        world.committer().commit(Q, 1, zombie_results, True, recovered=zombie_state)
    state = world.make_writer(Q)
    assert (state.latest[Q].batch_id, state.latest[Q].state) == (1, "done")
    run_batch(world, Q, 1)  # Spark replays batch 1 once more: its driver died before the commit log
    run_batch(world, Q, 2)
    assert Counter(world.coordinator.visible) == flat(rows_of(0)) + flat(rows_of(1)) + flat(rows_of(2))
    assert world.coordinator.open_transactions() == []


def test_an_operators_decision_stands_against_an_outcome_that_lands_late() -> None:
    """Review finding: a recovery's ``partial`` held by the network; the next recovery writes it again;
    the operator marks the batch done; the held ``partial`` lands: it continues the intent, not the
    operator's record, so it is ignored, and the replay writes nothing of the batch."""
    world = World(timeout_ms=TIMEOUT)
    crash_batch(world, Q, 0, "after_intent", "partly", streaming=True)
    world.log.fail_next = "held"
    with pytest.raises(IntentWriteError):
        world.make_writer(Q)  # its partial timed out: held
    assert world.make_writer(Q).latest[Q].state == "partial"
    visible = Counter(world.coordinator.visible)
    world.committer().resolve(Q, "mark-done")
    world.log.land_held()
    assert world.make_writer(Q).latest[Q].state == "done"
    run_batch(world, Q, 0)
    assert Counter(world.coordinator.visible) == visible


def test_a_failed_rewrite_of_a_shadowed_state_fails_nothing_and_keeps_the_ids_in_use() -> None:
    """Review finding: writing a shadowed query's state again is a guard against compaction; an append
    that fails is left to the next recovery (the writer goes on), and the copy keeps the prefix's ids in
    use, not the ones the query had when its record was first written."""
    world = World(timeout_ms=TIMEOUT)
    run_batch(world, Q, 0)
    stale = replace(world.log.read().latest[Q], state="intent", base=-1)
    world.log.append(stale)  # lands late: ignored, and last in the log
    world.log.append(IntentRecord("", -1, "claim", (), 9))  # another run claimed ids up to 9 since
    world.log.fail_next = "lost"
    state = world.make_writer(Q)  # the rewrite fails: the writer does not
    assert state.latest[Q].state == "done"
    state = world.make_writer(Q)
    last = [r for k, r in world.log.entries if k == Q.encode()][-1]
    assert last is not None
    assert (last.state, last.tids_in_use) == ("done", 9)
    assert world.log.read().tids_in_use == 9


def test_an_intent_of_the_previous_version_is_resolved_whatever_the_clocks_say() -> None:
    """Review finding: an intent without a base (the previous version's), written by a driver whose clock
    was ahead; this version's recovery records its outcome, which continues it by offset, not by time."""
    world = World(timeout_ms=TIMEOUT)
    world.make_writer(Q)
    results = world.run_tasks(rows_of(0))
    handles = tuple(r.handle for r in results if r.handle)
    world.log.append(IntentRecord(Q, 0, "intent", handles, 3, at_ms=world.clock() + 5_000))
    state = world.make_writer(Q)
    assert state.latest[Q].state == "done"
    assert world.make_writer(Q).latest[Q].state == "done"
    run_batch(world, Q, 0)
    assert Counter(world.coordinator.visible) == flat(rows_of(0))


def test_a_writers_copy_of_the_state_never_takes_its_own_ignored_append() -> None:
    """Second review: the replay's sink runner (N) writes a shadowed state again just after a stalled
    driver's (Z's) intent for the same batch came in, so N's copy is ignored; Z's intent counts and Z
    commits the transactions N's tasks did not fence (Z ran 5 tasks, N runs 3). N's own state must not
    take the ignored copy as the query's state (its intent would then be taken beside Z's, and both
    commit): it reads the log again. Every row at most once."""
    rows = [f"b1-r{r}".encode() for r in range(15)]
    world = World(timeout_ms=TIMEOUT)
    run_batch(world, Q, 0)
    zombie_state = world.make_writer(Q)
    zombie_results = world.run_tasks([rows[i::5] for i in range(5)])
    world.make_writer(Q)  # the restarted driver's planner
    replay_results = world.run_tasks([rows[i::3] for i in range(3)])
    done = world.log.read().latest[Q]
    world.log.append(replace(done, state="intent", base=-1))  # a record landing late: the query is shadowed
    appended = world.log.append

    def zombie_first(record: IntentRecord) -> int:
        if record.state == "done" and record.batch_id == 0:  # the replay's rewrite of the shadowed state
            world.log.append = appended  # type: ignore[method-assign]
            with contextlib.suppress(TransactionError):
                world.committer().commit(Q, 1, zombie_results, True, recovered=zombie_state)
        return appended(record)

    world.log.append = zombie_first  # type: ignore[method-assign]
    with contextlib.suppress(TransactionError):
        world.sink_runner_commit(Q, 1, replay_results)
    visible = Counter(world.coordinator.visible)
    assert max(visible.values()) == 1, visible


def test_an_intent_stored_twice_by_a_retried_append_counts_and_commits() -> None:
    """Second review: the intent log's producer is not idempotent, so a retried append whose first attempt
    was stored writes the intent twice, and the delivery report names the second copy. The copy changes
    nothing (it equals the state): the batch commits, nothing is aborted."""
    world = World(timeout_ms=TIMEOUT)
    run_batch(world, Q, 0)
    world.make_writer(Q)
    results = world.run_tasks(rows_of(1))
    appended = world.log.append

    def twice(record: IntentRecord) -> int:
        if record.state == "intent":
            appended(record)  # stored, its answer lost: the retry stores it again
        return appended(record)

    world.log.append = twice  # type: ignore[method-assign]
    world.sink_runner_commit(Q, 1, results)
    world.log.append = appended  # type: ignore[method-assign]
    assert world.make_writer(Q).latest[Q].state == "done"
    assert Counter(world.coordinator.visible) == flat(rows_of(0)) + flat(rows_of(1))
    assert world.counters["aborted"] == 0
