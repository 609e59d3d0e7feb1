"""The offset committer's policy, against a fake Kafka client and a fake clock."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkafka.source.commits import (
    LIVE_WINDOW_S,
    MAX_PENDING_COMMITS,
    RECHECK_AFTER_S,
    CommitMark,
    OffsetCommitter,
    SourceMetrics,
    read_source_metrics,
)
from sparkafka.source.options import CommitMode
from sparkafka.structs import GroupOffset, TopicPartition

A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)

Done = object


class FakeClient:
    """Answers commits only when ``answer`` is called, like a broker on the other side of a socket."""

    def __init__(self, group: Mapping[TopicPartition, int] | None = None) -> None:
        self.group: dict[TopicPartition, int] = dict(group or {})
        self.marks: dict[TopicPartition, str] = {}
        """The metadata each partition's last commit carried."""
        self.sent: list[dict[TopicPartition, int]] = []
        self.waiting: list[tuple[Mapping[TopicPartition, int], object]] = []
        self.reject: str | None = None
        self.closed = False
        self.committed_calls = 0
        self.metadata: list[str] = []

    def commit_async(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str], done: object
    ) -> None:
        self.sent.append(dict(offsets))
        self.metadata.append(metadata[min(offsets)])
        self.waiting.append((offsets, done, dict(metadata)))

    def committed(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, GroupOffset | None]:
        self.committed_calls += 1
        return {
            tp: GroupOffset(self.group[tp], self.marks.get(tp, "")) if tp in self.group else None
            for tp in tps
        }

    def answer(self) -> None:
        waiting, self.waiting = self.waiting, []
        for offsets, done, metadata in waiting:
            if self.reject is None:
                self.group.update(offsets)
                self.marks.update(metadata)
            done(offsets, self.reject)  # type: ignore[operator]

    def poll(self, timeout_s: float) -> None:
        self.answer()

    def close(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def committer(
    client: FakeClient, mode: CommitMode = "on_checkpoint", interval_ms: int = 5000, path: Path | None = None
) -> tuple[OffsetCommitter, Clock]:
    clock = Clock()
    c = OffsetCommitter(
        lambda: client, "g", mode=mode, interval_ms=interval_ms, metrics_file=path, clock=clock
    )
    return c, clock


def test_on_checkpoint_commits_each_completed_batch_once_and_counts() -> None:
    client = FakeClient()
    c, _ = committer(client)
    c.completed({A0: 10, A1: 5})
    c.tick()
    for _ in range(80):  # idle polling with the same start offsets sends nothing new
        c.completed({A0: 10, A1: 5})
    c.completed({A0: 20, A1: 5})
    c.tick()
    assert client.sent == [{A0: 10, A1: 5}, {A0: 20}]
    assert client.group == {A0: 20, A1: 5}
    assert c.metrics.commits_succeeded == 2
    assert c.metrics.commits_failed == 0
    assert c.metrics.committed == {A0: 20, A1: 5}


def test_a_recreated_topic_gets_its_new_logs_offsets_committed_and_never_the_old_ones() -> None:
    """Each commit marks its topic's id. A restart's first batch end comes from the old log (the checkpoint)
    once discovery shows a new id: not committed. The new log's offsets go to the group although they are
    below what the group held, and an answer to a commit sent for the old log confirms nothing."""
    client = FakeClient()
    c, _ = committer(client)
    c.topics_now({"a"}, {"a": "OLD"}, "C")
    c.completed({A0: 1000}, {"a": "OLD"})
    assert client.sent == [{A0: 1000}]
    c.completed({A0: 1001}, {"a": "OLD"})  # sent, not yet answered: the topic is recreated meanwhile
    c.topics_now({"a"}, {"a": "NEW"}, "C")
    client.answer()
    c.completed({A0: 1001}, {"a": "OLD"})  # the old log's end again (a restart's start): never committed
    c.completed({A0: 300}, {"a": "NEW"})
    c.tick()
    assert client.sent[-1] == {A0: 300}
    assert client.group == {A0: 300}
    mark = CommitMark.from_metadata(client.marks[A0])
    assert mark is not None
    assert (mark.topic_id, mark.cluster) == ("NEW", "C")
    c.completed({A0: 400}, {"a": "NEW"})
    assert client.sent[-1] == {A0: 400}


def test_a_new_topic_id_in_a_later_batch_is_a_recreated_topic_without_a_discovery() -> None:
    client = FakeClient()
    c, _ = committer(client)
    c.completed({A0: 50}, {"a": "OLD"})
    c.completed({A0: 7}, {"a": "NEW"})
    c.tick()
    assert client.group == {A0: 7}


def test_a_group_offset_marked_with_an_earlier_topic_id_is_not_this_runs_floor() -> None:
    """Learning the group's offsets at its first commit, one committed from the earlier topic of the name
    (a restart after the recreation) is no commit: the new log's lower offsets are not held back."""
    client = FakeClient({A0: 1000})
    client.marks[A0] = CommitMark("r", "h", 1, 0, topic_id="OLD", cluster="C").to_metadata()
    c, _ = committer(client)
    c.topics_now({"a"}, {"a": "NEW"}, "C")
    c.completed({A0: 300}, {"a": "NEW"})
    c.tick()
    assert client.group == {A0: 300}


def test_a_restart_whose_checkpoint_has_no_topic_ids_commits_no_offset_of_an_unknown_log() -> None:
    """A checkpoint written without ids (an older version; a broker that gave none then) after which the
    topic was recreated: the end it holds is from no known log, so it is not committed under the new id;
    the source moves the partition to the new log, whose lower offsets are then committed."""
    client = FakeClient()
    c, _ = committer(client)
    c.topics_now({"a"}, {"a": "NEW"}, "C")
    c.completed({A0: 1000}, {})
    c.tick()
    assert client.sent == []
    c.partitions_moved({A0: 300})
    c.completed({A0: 300}, {"a": "NEW"})
    c.tick()
    assert client.group == {A0: 300}


def test_a_moved_partition_gets_its_lower_offsets_committed() -> None:
    """A log that now ends below the query's position (truncated; a recreated topic on a broker without
    topic ids): the source moves the partition, and the group follows it down."""
    client = FakeClient()
    c, _ = committer(client)
    c.completed({A0: 500, A1: 40})
    c.tick()
    c.completed({A0: 510, A1: 40})  # sent; answered only after the move is seen
    c.partitions_moved({A0: 20})
    client.answer()  # the answer of the commit sent before the move: confirms nothing of A0
    c.completed({A0: 510, A1: 40})  # Spark's commit() of the batch before the move: from the old position
    c.completed({A0: 20, A1: 40})  # the batch that starts A0 at its new position
    c.tick()
    c.completed({A0: 35, A1: 41})
    c.tick()
    assert client.group == {A0: 35, A1: 41}


def test_a_deletion_no_discovery_has_seen_yet_is_no_reset_either() -> None:
    """The committer asks whether a topic whose group offsets are gone still exists before taking that for
    a reset (discovery may not have run since the deletion)."""
    b0 = TopicPartition("b", 0)
    client = FakeClient()
    clock = Clock()
    c = OffsetCommitter(
        lambda: client,
        "g",
        mode="on_checkpoint",
        clock=clock,
        topics_exist=lambda topics: set(topics) - {"b"},
    )
    c.completed({A0: 10, b0: 7})
    c.tick()
    del client.group[b0]
    clock.now += RECHECK_AFTER_S + 1
    c.completed({A0: 12})
    c.tick()
    assert client.group == {A0: 12}
    assert c.stopped_by is None
    client.group[A0] = 3  # a real reset still stops the run's commits
    clock.now += RECHECK_AFTER_S + 1
    c.completed({A0: 14})
    c.tick()
    assert c.stopped_by is not None


def test_a_deleted_topics_offsets_gone_from_the_group_are_no_reset(caplog: pytest.LogCaptureFixture) -> None:
    """Kafka deletes a deleted topic's offsets from the group. A query that idled past the re-check and
    commits again must not take that for a reset and stop committing its other topics."""
    b0 = TopicPartition("b", 0)
    client = FakeClient()
    c, clock = committer(client)
    c.topics_now({"a", "b"}, {})
    c.completed({A0: 10, b0: 7})
    c.tick()
    assert client.group == {A0: 10, b0: 7}
    del client.group[b0]  # topic b deleted: its offsets go with it
    c.topics_now({"a"}, {})
    clock.now += RECHECK_AFTER_S + 1
    c.completed({A0: 12})
    c.tick()
    assert client.group == {A0: 12}
    assert c.stopped_by is None


def test_disabled_never_creates_a_client() -> None:
    def factory() -> FakeClient:
        raise AssertionError("no client for a disabled committer")

    c = OffsetCommitter(factory, "g", mode="disabled")  # type: ignore[arg-type, return-value]
    c.completed({A0: 3})
    c.tick()
    c.close()
    assert c.metrics.commits_succeeded == 0


def test_never_moves_the_group_backwards() -> None:
    client = FakeClient(group={A0: 50})
    c, _ = committer(client)
    c.completed({A0: 10, A1: 7})
    c.tick()
    assert client.sent == [{A1: 7}]
    c.completed({A0: 50, A1: 7})
    c.completed({A0: 51, A1: 7})
    c.tick()
    assert client.sent == [{A1: 7}, {A0: 51}]
    assert client.group == {A0: 51, A1: 7}
    assert client.committed_calls == 1


def test_rejected_commit_is_counted_retried_after_backoff_and_never_raises(tmp_path: Path) -> None:
    client = FakeClient()
    client.reject = "UNKNOWN_MEMBER_ID: the group has active members"
    path = tmp_path / "m.json"
    c, clock = committer(client, interval_ms=1000, path=path)
    c.completed({A0: 10})
    c.tick()
    assert c.metrics.commits_failed == 1
    assert "UNKNOWN_MEMBER_ID" in (c.metrics.last_error or "")
    for _ in range(50):  # within the back-off: no new attempt
        c.tick()
    assert len(client.sent) == 1
    client.reject = None
    clock.now += 1.0
    c.tick()
    c.tick()
    assert client.group == {A0: 10}
    assert (c.metrics.commits_succeeded, c.metrics.commits_failed) == (1, 1)
    written = read_source_metrics("g", path)
    assert written is not None
    assert (written.commits_succeeded, written.commits_failed, written.committed) == (1, 1, {A0: 10})


def test_periodic_commits_at_most_every_interval_and_newest_wins() -> None:
    client = FakeClient()
    c, clock = committer(client, mode="periodic", interval_ms=5000)
    c.completed({A0: 1})
    c.tick()
    for end in range(2, 10):
        clock.now += 1.0
        c.completed({A0: end})
        c.tick()
    # t = 0 s: first commit; t = 5 s (end 6): second; the rest waits for t = 10 s.
    assert client.sent == [{A0: 1}, {A0: 6}]
    c.close()
    # The newest offsets at once, then the same again marked "stopped" (``CommitMark``).
    assert client.sent == [{A0: 1}, {A0: 6}, {A0: 9}, {A0: 9}]
    assert [CommitMark.from_metadata(m).stopped for m in client.metadata] == [False, False, False, True]  # type: ignore[union-attr]
    assert client.closed


def test_periodic_with_zero_interval_commits_every_batch() -> None:
    client = FakeClient()
    c, _ = committer(client, mode="periodic", interval_ms=0)
    for end in (1, 2, 3):
        c.completed({A0: end})
        c.tick()
    assert [s[A0] for s in client.sent] == [1, 2, 3]


def test_pending_commits_are_bounded() -> None:
    class Silent(FakeClient):
        def poll(self, timeout_s: float) -> None:
            pass  # the broker never answers

    client = Silent()
    c, _ = committer(client)
    for end in range(1, MAX_PENDING_COMMITS + 50):
        c.completed({A0: end})
    assert c.pending == MAX_PENDING_COMMITS
    assert len(client.sent) == MAX_PENDING_COMMITS
    client.answer()  # answers arrive: the newest offsets go out next
    c.tick()
    assert client.sent[-1] == {A0: MAX_PENDING_COMMITS + 49}


def test_failed_group_lookup_counts_as_failed_commit() -> None:
    class Down(FakeClient):
        def committed(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
            raise RuntimeError("broker down")

    c, _ = committer(Down())
    c.completed({A0: 4})
    assert c.metrics.commits_failed == 1
    assert "broker down" in (c.metrics.last_error or "")


@given(st.lists(st.dictionaries(st.sampled_from([A0, A1]), st.integers(0, 1000), min_size=1), max_size=30))
def test_the_group_only_moves_forward_to_completed_offsets(batches: list[dict[TopicPartition, int]]) -> None:
    client = FakeClient()
    c, clock = committer(client)
    seen: dict[TopicPartition, int] = {}
    for offsets in batches:
        before = dict(client.group)
        c.completed(offsets)
        clock.now += 10
        c.tick()
        for tp, o in offsets.items():
            seen[tp] = max(o, seen.get(tp, -1))
        assert all(client.group[tp] >= before.get(tp, -1) for tp in client.group)
        assert client.group == seen


def test_metrics_round_trip_json() -> None:
    m = SourceMetrics("g", "periodic", 3, 1, {A0: 5, TopicPartition("b", 2): 9}, "x", 42, 7)
    assert SourceMetrics.from_json(json.loads(json.dumps(m.to_json()))) == m


def test_metrics_missing_file_is_none(tmp_path: Path) -> None:
    assert read_source_metrics("nobody", tmp_path / "absent.json") is None


@pytest.mark.parametrize("group", ["g", "a/b", ""])
def test_default_metrics_file_is_one_safe_name(group: str) -> None:
    from sparkafka.source.commits import default_metrics_file

    assert "/" not in default_metrics_file(group).name


def test_each_commit_carries_a_mark_saying_which_run_committed_and_when() -> None:
    client = FakeClient()
    c, _ = committer(client)
    c.completed({A0: 4})
    c.completed({A0: 6})
    marks = [CommitMark.from_metadata(m) for m in client.metadata]
    assert all(m is not None for m in marks)
    assert len({m.run for m in marks if m}) == 1
    assert CommitMark.from_metadata("written by someone else") is None
    assert CommitMark.from_metadata(None) is None


def test_after_an_idle_spell_the_group_is_read_again_and_a_reset_is_never_written_over() -> None:
    client = FakeClient()
    c, clock = committer(client)
    c.completed({A0: 10, A1: 10})
    client.answer()
    reads = client.committed_calls
    c.completed({A0: 11, A1: 11})  # busy: no extra read before each commit
    client.answer()
    assert client.committed_calls == reads
    client.group = {A0: 0, A1: 11}  # an operator resets A0 while the query idles
    clock.now += RECHECK_AFTER_S
    c.completed({A0: 12, A1: 12})
    assert client.committed_calls == reads + 1
    assert client.sent[-1] == {A0: 11, A1: 11}  # nothing sent after the reset
    assert c.stopped_by is not None
    assert "a-0 11 -> 0" in c.stopped_by
    assert "changed by another client" in (c.metrics.last_error or "")
    c.completed({A0: 20, A1: 20})
    c.close()
    assert client.group == {A0: 0, A1: 11}
    assert client.closed


def test_after_an_idle_spell_an_unchanged_group_is_committed_to_as_before() -> None:
    client = FakeClient()
    c, clock = committer(client)
    c.completed({A0: 10})
    client.answer()
    clock.now += RECHECK_AFTER_S
    c.completed({A0: 12})
    client.answer()
    assert client.group == {A0: 12}
    assert c.stopped_by is None


def test_a_stopping_run_marks_its_last_commit_stopped_without_moving_an_offset() -> None:
    client = FakeClient()
    c, _ = committer(client)
    c.completed({A0: 4, A1: 2})
    client.answer()
    c.close()
    last = CommitMark.from_metadata(client.metadata[-1])
    assert last is not None
    assert last.stopped
    assert client.sent[-1] == {A0: 4, A1: 2}
    assert client.group == {A0: 4, A1: 2}
    assert c.metrics.commits_succeeded == 1  # the mark is not a commit of new offsets


def test_a_run_stopped_by_a_reset_marks_nothing() -> None:
    client = FakeClient()
    c, clock = committer(client)
    c.completed({A0: 4})
    client.answer()
    client.group = {A0: 0}
    clock.now += RECHECK_AFTER_S
    c.completed({A0: 5})
    sent = len(client.sent)
    c.close()
    assert len(client.sent) == sent
    assert client.group == {A0: 0}


def test_group_commits_are_counted_over_every_run_as_the_sinks_counters_are(tmp_path: Path) -> None:
    path = tmp_path / "source-g.json"
    first, _ = committer(FakeClient(), path=path)
    first.completed({A0: 10})
    first.tick()
    assert json.loads(path.read_text())["commitsSucceeded"] == 1
    restarted, _ = committer(FakeClient({A0: 10}), path=path)  # the query's next run, same metrics file
    restarted.completed({A0: 20})
    restarted.tick()
    assert restarted.metrics.commits_succeeded == 2
    assert json.loads(path.read_text())["commitsSucceeded"] == 2


def test_the_stopped_mark_never_writes_over_a_reset_made_while_the_query_idled() -> None:
    """Review finding F4: idle past the tool's window, the group was reset, then the query stopped."""
    client = FakeClient()
    c, clock = committer(client)
    c.completed({A0: 10, A1: 10})
    client.answer()
    clock.now += LIVE_WINDOW_S + 1
    client.group = {A0: 0, A1: 0}
    c.close()
    assert client.group == {A0: 0, A1: 0}
    assert c.stopped_by is not None


def test_a_group_whose_offsets_were_deleted_counts_as_moved() -> None:
    client = FakeClient()
    c, clock = committer(client)
    c.completed({A0: 10})
    client.answer()
    client.group = {}  # kafka-consumer-groups --delete-offsets
    clock.now += RECHECK_AFTER_S
    c.completed({A0: 12})
    assert c.stopped_by is not None
    assert client.group == {}


def test_a_partition_answered_with_an_error_is_a_failed_read_not_a_deleted_offset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OffsetFetch may answer one partition with an error (TOPIC_AUTHORIZATION_FAILED after an ACL change):
    read as "nothing committed", ``_moved_by_another`` would take it for an offset another client deleted
    and stop this run's commits for good; it is a failed read instead (counted, asked again later)."""
    from confluent_kafka import KafkaError

    from sparkafka.errors import BrokerError
    from sparkafka.source import commits

    tp = TopicPartition("t", 0)

    class Answer:
        topic, partition, offset, metadata = "t", 0, -1001, None
        error = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)

    class Consumer:
        def committed(self, _partitions: object, timeout: float) -> list[Answer]:
            return [Answer()]

        def close(self) -> None:
            pass

    monkeypatch.setattr(commits, "new_consumer", lambda _settings: Consumer())
    client = commits.KafkaCommitClient({"bootstrap.servers": "127.0.0.1:1"}, "g", timeout_s=1)
    with pytest.raises(BrokerError, match="TOPIC_AUTHORIZATION_FAILED"):
        client.committed([tp])
