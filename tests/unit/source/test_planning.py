from __future__ import annotations

import logging
from collections.abc import Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkafka.errors import ConfigError
from sparkafka.source.commits import CommitMark
from sparkafka.source.options import SourceOptions, Subscription, parse_source_options
from sparkafka.source.planning import (
    Offsets,
    apply_read_limit,
    bound_when_read,
    check_ending_map,
    check_found,
    check_starting_map,
    delay_batch,
    ending_offsets,
    offsets_from_json,
    offsets_to_json,
    resolve_startup,
    split_ranges,
    subscribed,
    topic_ids_from_json,
)
from sparkafka.structs import GroupOffset, TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


class FakeMetadata:
    """An in-memory cluster: per partition a log [earliest, latest) and record timestamps."""

    def __init__(self) -> None:
        self.logs = {A0: (5, 50), A1: (0, 10), B0: (0, 0)}
        self.timestamps = {A0: [(5, 1000), (20, 2000), (40, 3000)], A1: [(0, 1500)], B0: []}
        self.group: dict[TopicPartition, int | tuple[int, str] | None] = {A0: 30}
        """Commits: an offset, or (offset, metadata)."""

    def partitions(self, subscription: Subscription) -> set[TopicPartition]:
        return {tp for tp in self.logs if subscription.matches(tp.topic)}

    def earliest(self, tps: Iterable[TopicPartition]) -> Offsets:
        return {tp: self.logs[tp][0] for tp in tps}

    def latest(self, tps: Iterable[TopicPartition]) -> Offsets:
        return {tp: self.logs[tp][1] for tp in tps}

    def for_timestamp(self, tps: Iterable[TopicPartition], timestamp_ms: int) -> Offsets:
        out = {}
        for tp in tps:
            hits = [o for o, ts in self.timestamps[tp] if ts >= timestamp_ms]
            out[tp] = hits[0] if hits else -1
        return out

    def group_commits(
        self, group_id: str, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, GroupOffset | None]:
        commits = {tp: self.group.get(tp) for tp in tps}
        return {
            tp: None if c is None else GroupOffset(*c) if isinstance(c, tuple) else GroupOffset(c)
            for tp, c in commits.items()
        }


ALL = {A0, A1, B0}


def startup(**options: str) -> Offsets:
    opts = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a,b", **options})
    return resolve_startup(opts, FakeMetadata(), ALL)


def test_earliest_and_latest() -> None:
    assert startup(startingOffsets="earliest") == {A0: 5, A1: 0, B0: 0}
    assert startup(startingOffsets="latest") == {A0: 50, A1: 10, B0: 0}


def test_group_offsets_fall_back_to_auto_offset_reset() -> None:
    assert startup(**{"kafka.group.id": "g"}) == {A0: 30, A1: 10, B0: 0}
    assert startup(**{"kafka.group.id": "g", "kafka.auto.offset.reset": "earliest"}) == {A0: 30, A1: 0, B0: 0}
    with pytest.raises(ConfigError, match="no committed offset for a-1, b-0"):
        startup(**{"kafka.group.id": "g", "kafka.auto.offset.reset": "error"})


def test_a_group_commit_from_an_earlier_topic_of_the_name_is_no_commit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A sparkafka commit marks the topic id its offsets were read from: the topic recreated since (another
    id now), its offsets mean nothing in the new log and ``kafka.auto.offset.reset`` decides. Commits with
    no mark (another client's) or of the same id are used."""
    opts = parse_source_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "subscribe": "a,b",
            "kafka.group.id": "g",
            "kafka.auto.offset.reset": "earliest",
        }
    )
    meta = FakeMetadata()
    old = CommitMark("r", "h", 1, 0, topic_id="OLD", cluster="C").to_metadata()
    meta.group = {
        A0: (30, old),
        A1: (8, CommitMark("r", "h", 1, 0, topic_id="NEW", cluster="C").to_metadata()),
        B0: (4, ""),
    }
    with caplog.at_level(logging.WARNING):
        got = resolve_startup(opts, meta, ALL, {"a": "NEW", "b": "B"}, "C")
    assert got == {A0: 5, A1: 8, B0: 4}
    assert "group 'g''s offsets for a-0 were committed from an earlier topic" in caplog.text
    assert resolve_startup(opts, meta, ALL) == {A0: 30, A1: 8, B0: 4}  # no ids known: taken as they are


def test_a_group_commit_copied_from_another_cluster_is_taken_as_it_is() -> None:
    """MirrorMaker 2's offset sync translates a group's offsets to the other cluster and copies their
    metadata, marks included: the topic ids in them are the source cluster's. After a failover, a start
    from the group reads on from the translated offsets (not from ``kafka.auto.offset.reset``)."""
    opts = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a,b", "kafka.group.id": "g"})
    meta = FakeMetadata()
    mirrored = CommitMark("r", "h", 1, 0, topic_id="SRC-ID", cluster="SOURCE").to_metadata()
    meta.group = {A0: (30, mirrored), A1: (8, mirrored), B0: (4, mirrored)}
    assert resolve_startup(opts, meta, ALL, {"a": "DST-ID", "b": "DST-B"}, "TARGET") == {A0: 30, A1: 8, B0: 4}


def test_specific_offsets_fall_back_to_group() -> None:
    got = startup(**{"kafka.group.id": "g", "startingOffsets": '{"a": {"1": 7}, "b": {"0": -2}}'})
    assert got == {A0: 30, A1: 7, B0: 0}


@pytest.mark.parametrize(
    ("option", "given", "message"),
    [
        ("startingOffsets", '{"a": {"0": 9}}', r"it leaves out a-1, b-0; give -2 \(earliest\)"),
        (
            "startingOffsets",
            '{"a": {"0": 9, "1": 0, "7": 0}, "b": {"0": 0}}',
            "subscribe=a,b does not read a-7$",
        ),
        (
            "startingOffsetsByTimestamp",
            '{"b": {"0": 9}}',
            "leaves out a-0, a-1; give each a timestamp, or set",
        ),
    ],
)
def test_a_partial_start_map_without_group_raises_as_in_spark(option: str, given: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"option {option} must name exactly the partitions.*{message}"):
        startup(**{option: given, "kafka.auto.offset.reset": "earliest"})


def test_a_start_map_naming_partitions_not_read_raises_even_with_a_group() -> None:
    with pytest.raises(ConfigError, match="does not read c-0"):
        startup(**{"kafka.group.id": "g", "startingOffsets": '{"a": {"1": 7}, "c": {"0": 1}}'})


def test_timestamp_with_latest_fallback() -> None:
    latest = {"startingOffsetsByTimestampStrategy": "latest"}
    assert startup(startingTimestamp="1800", **latest) == {A0: 20, A1: 10, B0: 0}
    assert startup(startingTimestamp="0", **latest) == {A0: 5, A1: 0, B0: 0}


def test_kafkas_timestamp_sentinels_mean_earliest_and_latest_as_in_spark() -> None:
    assert startup(startingTimestamp="-2") == {A0: 5, A1: 0, B0: 0}
    assert startup(startingTimestamp="-1") == {A0: 50, A1: 10, B0: 0}
    assert startup(startingOffsetsByTimestamp='{"a": {"0": -1, "1": -2}, "b": {"0": -2}}') == {
        A0: 50,
        A1: 0,
        B0: 0,
    }
    assert batch_end(endingTimestamp="-2") == {A0: 5, A1: 0, B0: 0}


def test_timestamp_without_a_match_fails_by_default_as_in_spark() -> None:
    with pytest.raises(
        ConfigError, match=r"no offset matched .* a-1 \(timestamp 1800\), b-0 .*Strategy=latest"
    ):
        startup(startingTimestamp="1800")


def test_timestamps_per_partition_and_group_fallback_for_partitions_not_named() -> None:
    got = startup(
        startingOffsetsByTimestamp='{"a": {"1": 1500}}',
        **{"kafka.group.id": "g", "kafka.auto.offset.reset": "earliest"},
    )
    assert got == {A0: 30, A1: 0, B0: 0}
    with pytest.raises(ConfigError, match=r"a-0 \(timestamp 9000\)"):
        startup(startingOffsetsByTimestamp='{"a": {"0": 9000, "1": 0}, "b": {"0": 0}}')


def batch_end(**options: str) -> Offsets:
    opts = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a,b", **options}, batch=True)
    meta = FakeMetadata()
    return ending_offsets(opts, meta, ALL, meta.latest(ALL))


def test_batch_ends_by_timestamp_or_at_latest() -> None:
    assert batch_end() == {A0: 50, A1: 10, B0: 0}
    assert batch_end(endingOffsets='{"a": {"0": 30, "1": -1}, "b": {"0": 0}}') == {A0: 30, A1: 10, B0: 0}
    assert batch_end(endingTimestamp="1800") == {A0: 20, A1: 10, B0: 0}  # no match: latest, as in Spark
    by_time = '{"a": {"0": 3000, "1": 9000}, "b": {"0": 1}}'
    assert batch_end(endingOffsetsByTimestamp=by_time) == {A0: 40, A1: 10, B0: 0}


@pytest.mark.parametrize(
    ("option", "given", "message"),
    [
        ("endingOffsets", '{"a": {"0": 30, "1": -1}}', r"leaves out b-0; give -1 \(latest\)"),
        ("endingOffsets", '{"a": {"0": 1, "1": 1, "2": 1}, "b": {"0": 0}}', "does not read a-2$"),
        ("endingOffsetsByTimestamp", '{"a": {"0": 3000}}', "leaves out a-1, b-0; give each a timestamp$"),
    ],
)
def test_a_partial_end_map_raises_as_in_spark(option: str, given: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"option {option} must name exactly the partitions.*{message}"):
        batch_end(**{option: given})


def read_options(batch: bool = False, **options: str) -> SourceOptions:
    return parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a,b", **options}, batch)


def test_the_ending_map_in_effect_is_the_one_checked() -> None:
    """``check_ending_map`` is what ``load()`` runs (``admin.check_source``) and what the batch reader's
    ``ending_offsets`` runs: the same sentence. ``endingTimestamp`` takes precedence over both maps."""
    partial = '{"a": {"0": 30}}'
    for option in ("endingOffsets", "endingOffsetsByTimestamp"):
        with pytest.raises(ConfigError, match=f"option {option} must name exactly .* leaves out a-1, b-0"):
            check_ending_map(read_options(True, **{option: partial}), ALL)
    check_ending_map(read_options(True, endingTimestamp="1", endingOffsets=partial), ALL)
    check_ending_map(read_options(True), ALL)


def test_only_a_starting_json_map_is_checked_and_a_group_lets_it_leave_partitions_out() -> None:
    def check(**options: str) -> None:
        check_starting_map(read_options(**options), ALL)

    for start in ("earliest", "latest"):
        check(startingOffsets=start)
    check(startingTimestamp="1000")
    check(startingOffsets='{"a": {"0": -2, "1": -1}, "b": {"0": 4}}')  # -2, -1: earliest, latest
    check(startingOffsets='{"a": {"1": 4}}', **{"kafka.group.id": "g"})
    with pytest.raises(ConfigError, match=r"does not read c-0$"):  # a topic not subscribed: even with a group
        check(startingOffsets='{"a": {"1": 4}, "c": {"0": 1}}', **{"kafka.group.id": "g"})
    with pytest.raises(ConfigError, match=r"option startingOffsetsByTimestamp must name exactly .* leaves"):
        check(startingOffsetsByTimestamp='{"a": {"0": 1000}}')


COUNTS = {"a": 2, "b": 1, "_sparkafka-intents-p": 1}
"""Partition counts of the topics a cluster has (one of them sparkafka's own)."""


@pytest.mark.parametrize(
    ("subscription", "partitions"),
    [
        (Subscription(topics=("a", "b")), {A0, A1, B0}),
        (Subscription(topics=("a", "gone")), {A0, A1}),
        (Subscription(pattern="."), {A0, A1, B0}),  # never sparkafka's own topics
        (Subscription(pattern="^b$"), {B0}),
        (Subscription(partitions=(A1, TopicPartition("a", 5), TopicPartition("gone", 0))), {A1}),
    ],
)
def test_a_subscription_reads_the_partitions_that_exist(
    subscription: Subscription, partitions: set[TopicPartition]
) -> None:
    assert subscribed(subscription, COUNTS) == partitions


@pytest.mark.parametrize(
    ("subscription", "found", "sentence"),
    [
        (
            Subscription(topics=("a", "ordres", "b", "old")),
            {A0, A1, B0},
            "Unable to retrieve any partitions for topic(s) ordres, old (subscribe=a,ordres,b,old): they "
            "do not exist. Create them first, or check the names",
        ),
        (
            Subscription(partitions=(A0, TopicPartition("gone", 0), TopicPartition("gone", 1))),
            {A0},
            "Unable to retrieve any partitions for topic(s) gone (assign=a-0,gone-0,gone-1): they do not "
            "exist. Create them first, or check the names",
        ),
        (
            Subscription(pattern="orders-.*"),
            set(),
            "Unable to retrieve any partitions with subscribePattern='orders-.*': nothing matches. Create "
            "the topics first, or check the subscription",
        ),
    ],
)
def test_a_read_starts_only_from_topics_that_exist(
    subscription: Subscription, found: set[TopicPartition], sentence: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        check_found(subscription, found)
    assert str(raised.value) == sentence


def test_an_assigned_partition_that_does_not_exist_is_left_out_as_in_spark() -> None:
    check_found(Subscription(partitions=(A0, TopicPartition("a", 5))), {A0})  # a-5 is not read; a exists
    check_found(Subscription(pattern="a"), {A0, A1})


@pytest.mark.parametrize(
    ("options", "first", "last"),
    [
        ({}, ALL, ALL),  # the batch defaults: earliest to latest, both bound when the task starts
        ({"startingOffsets": '{"a": {"0": -2, "1": 4}, "b": {"0": -2}}'}, {A0, B0}, ALL),
        ({"endingOffsets": '{"a": {"0": 30, "1": -1}, "b": {"0": -1}}'}, ALL, {A1, B0}),
        ({"endingTimestamp": "1800"}, ALL, {A1, B0}),  # no record of a-1 or b-0 that new: latest
        (
            {"startingTimestamp": "1000", "endingOffsets": '{"a": {"0": 30, "1": 5}, "b": {"0": 0}}'},
            set(),
            set(),
        ),
    ],
)
def test_batch_reads_bind_earliest_and_latest_when_the_task_starts(
    options: dict[str, str], first: set[TopicPartition], last: set[TopicPartition]
) -> None:
    opts = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a,b", **options}, batch=True)
    meta = FakeMetadata()
    latest = meta.latest(ALL)
    assert bound_when_read(opts, ALL, ending_offsets(opts, meta, ALL, latest), latest) == (first, last)


T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_split_ranges_follows_sparks_example() -> None:
    # KafkaOffsetRangeCalculator: 900 and 100 new offsets with minPartitions=10 -> 9 tasks of 100 and 1.
    pieces = split_ranges([(T0, 0, 900), (T1, 0, 100)], 10, None)
    assert pieces == [(T0, i * 100, (i + 1) * 100) for i in range(9)] + [(T1, 0, 100)]


def test_split_ranges_without_a_reason_to_split_keeps_one_task_per_range() -> None:
    assert split_ranges([(T0, 0, 9), (T1, 4, 4)], None, None) == [(T0, 0, 9)]
    assert split_ranges([(T0, 0, 9), (T1, 0, 3)], 2, None) == [(T0, 0, 9), (T1, 0, 3)]


def test_split_ranges_max_records_then_min_partitions() -> None:
    assert split_ranges([(T0, 10, 20)], None, 3) == [(T0, 10, 12), (T0, 12, 14), (T0, 14, 17), (T0, 17, 20)]
    # max first (2 pieces of 5), then minPartitions=4 cuts each piece in two.
    assert split_ranges([(T0, 0, 10)], 4, 5) == [(T0, 0, 2), (T0, 2, 5), (T0, 5, 7), (T0, 7, 10)]


@given(
    st.lists(st.tuples(st.integers(0, 1_000), st.integers(0, 5_000)), min_size=1, max_size=6),
    st.one_of(st.none(), st.integers(1, 40)),
    st.one_of(st.none(), st.integers(1, 2_000)),
)
def test_split_ranges_cover_each_range_exactly_once(
    spans: list[tuple[int, int]], min_partitions: int | None, max_records: int | None
) -> None:
    ranges = [(TopicPartition("t", i), start, start + size) for i, (start, size) in enumerate(spans)]
    pieces = split_ranges(ranges, min_partitions, max_records)
    for tp, start, until in ranges:
        mine = [(s, u) for t, s, u in pieces if t == tp]
        covered = [o for s, u in mine for o in range(s, u)]
        assert covered == list(range(start, until))  # in order, no gap, no overlap, nothing empty
        assert all(u > s for s, u in mine)
        if max_records is not None:
            assert all(u - s <= max_records for s, u in mine)


def test_delay_batch_waits_for_min_offsets_until_the_delay() -> None:
    start, latest = {T0: 10, T1: 0}, {T0: 14, T1: 5}  # 9 new offsets
    first = delay_batch(start, latest, min_offsets=100, max_delay_ms=1000, now_ms=5_000, last_trigger_ms=0)
    assert first == (False, 5_000)  # the first trigger always runs (last trigger at 0)
    args = {"min_offsets": 100, "max_delay_ms": 1000}
    assert delay_batch(start, latest, **args, now_ms=5_500, last_trigger_ms=5_000) == (True, 5_000)
    assert delay_batch(start, latest, **args, now_ms=6_000, last_trigger_ms=5_000) == (False, 6_000)
    assert delay_batch(
        start, latest, min_offsets=9, max_delay_ms=1000, now_ms=5_100, last_trigger_ms=5_000
    ) == (
        False,
        5_100,
    )


def test_json_round_trip_is_sorted() -> None:
    offsets = {B0: 1, A1: 3, A0: 2}
    data = offsets_to_json(offsets)
    assert list(data) == ["a", "b"]
    assert list(data["a"]) == ["0", "1"]
    assert offsets_from_json(data) == offsets
    assert topic_ids_from_json(data) == {}


def test_json_keeps_the_ids_of_its_topics_beside_the_offsets() -> None:
    data = offsets_to_json({A0: 2, B0: 1}, {"b": "id-b", "a": "id-a", "c": "id-c"})
    assert data == {"a": {"0": 2}, "b": {"0": 1}, "@topicIds": {"a": "id-a", "b": "id-b"}}
    assert offsets_from_json(data) == {A0: 2, B0: 1}
    assert topic_ids_from_json(data) == {"a": "id-a", "b": "id-b"}
    assert offsets_to_json({A0: 2}, {"b": "id-b"}) == {"a": {"0": 2}}  # no key when no id is known


def test_read_limit_proportional_and_never_starving() -> None:
    start = {A0: 0, A1: 0, B0: 0}
    latest = {A0: 1000, A1: 10, B0: 0}
    end = apply_read_limit(start, latest, 101)
    assert sum(end.values()) == 101
    assert end[A1] >= 1
    assert end[B0] == 0
    assert apply_read_limit(start, latest, None) == latest


@given(
    st.dictionaries(
        st.builds(TopicPartition, st.sampled_from("xyz"), st.integers(0, 5)),
        st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
        min_size=1,
    ),
    st.one_of(st.none(), st.integers(1, 3000)),
)
def test_read_limit_properties(parts: dict[TopicPartition, tuple[int, int]], limit: int | None) -> None:
    start = {tp: s for tp, (s, _) in parts.items()}
    latest = {tp: s + n for tp, (s, n) in parts.items()}
    end = apply_read_limit(start, latest, limit)
    taken = {tp: end[tp] - start[tp] for tp in start}
    assert all(0 <= taken[tp] <= latest[tp] - start[tp] for tp in start)
    available = sum(latest[tp] - start[tp] for tp in start)
    assert sum(taken.values()) == (available if limit is None else min(limit, available))
    with_data = [tp for tp in start if latest[tp] > start[tp]]
    if limit is not None and limit >= len(with_data):
        assert all(taken[tp] >= 1 for tp in with_data)


def test_read_limit_never_moves_backwards() -> None:
    assert apply_read_limit({A0: 10}, {A0: 4}, None) == {A0: 10}


def test_event_check_never_compares_errors_with_none() -> None:
    from confluent_kafka import KafkaError

    from sparkafka.source.fetchers import _has_events

    class Msg:
        def __init__(self, error: object) -> None:
            self._error = error

        def error(self) -> object:
            return self._error

    eof = KafkaError(KafkaError._PARTITION_EOF)  # its == raises against None
    assert _has_events([Msg(None), Msg(eof)])
    assert _has_events([Msg(eof)])
    assert not _has_events([Msg(None), Msg(None)])
    assert not _has_events([])
