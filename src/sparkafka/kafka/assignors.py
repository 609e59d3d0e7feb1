"""Partition assignment: Flink's subtask assigner and Kafka's Range, RoundRobin and sticky assignors.

All functions are pure and deterministic: the same input always gives the same output, whatever the
iteration order of the mappings passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sparkafka.kafka.hashing import java_string_hash
from sparkafka.structs import TopicPartition

__all__ = [
    "flink_subtask_for",
    "range_assign",
    "round_robin_assign",
    "sticky_assign",
]

Assignment = dict[str, list[TopicPartition]]


def flink_subtask_for(topic: str, partition: int, parallelism: int) -> int:
    """The subtask (reader task) that owns ``topic``/``partition`` under Flink's KafkaTopicPartitionAssigner.

    ``start = ((topic.hashCode() * 31) & 0x7FFFFFFF) % parallelism``; partition ``p`` goes to
    ``(start + p) % parallelism``. The partitions of one topic are therefore spread round-robin, clockwise
    from a topic-dependent start index, so each task gets a near-uniform share of every topic.

    Example: with ``parallelism=3`` and a topic whose start index is 2, partitions 0, 1, 2, 3 go to tasks
    2, 0, 1, 2.
    """
    if parallelism <= 0:
        raise ValueError(f"parallelism must be positive, got {parallelism}")
    if partition < 0:
        raise ValueError(f"partition must be >= 0, got {partition}")
    # The low 31 bits of the product are the same with or without Java's int32 wrap-around.
    start = ((java_string_hash(topic) * 31) & 0x7FFFFFFF) % parallelism
    return (start + partition) % parallelism


def _members_by_topic(subscriptions: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    by_topic: dict[str, list[str]] = {}
    for member, topics in subscriptions.items():
        for topic in set(topics):
            by_topic.setdefault(topic, []).append(member)
    for members in by_topic.values():
        members.sort()
    return by_topic


def _empty_assignment(subscriptions: Mapping[str, Iterable[str]]) -> Assignment:
    return {member: [] for member in sorted(subscriptions)}


def range_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Iterable[str]]
) -> Assignment:
    """Kafka's ``RangeAssignor``.

    Per topic, the subscribed members are sorted lexicographically and each takes a contiguous range:
    ``n // c`` partitions, and the first ``n % c`` members one more. Topics missing from
    ``partitions_per_topic`` are skipped, as in Java.

    Example: 10 partitions, members C1, C2, C3 -> C1 [0-3], C2 [4-6], C3 [7-9]; with C4 as well ->
    C1 [0-2], C2 [3-5], C3 [6-7], C4 [8-9].

    Returns:
        Every member of ``subscriptions``, possibly with an empty list, each list in ascending
        (topic, partition) order.
    """
    assignment = _empty_assignment(subscriptions)
    for topic, members in sorted(_members_by_topic(subscriptions).items()):
        num_partitions = partitions_per_topic.get(topic)
        if num_partitions is None:
            continue
        per_member, with_extra = divmod(num_partitions, len(members))
        for i, member in enumerate(members):
            start = per_member * i + min(i, with_extra)
            length = per_member + (1 if i < with_extra else 0)
            assignment[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
    for parts in assignment.values():
        parts.sort()
    return assignment


def round_robin_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Iterable[str]]
) -> Assignment:
    """Kafka's ``RoundRobinAssignor``.

    All subscribed partitions, sorted by topic then partition, are dealt one at a time to the members in
    lexicographic order (a circular iterator), skipping members not subscribed to the partition's topic.

    Example: T1 with 4 partitions subscribed by C1, C2; T2 with 6 subscribed by C2, C3 ->
    C1 [T1-0, T1-2], C2 [T1-1, T1-3, T2-1, T2-3, T2-5], C3 [T2-0, T2-2, T2-4].
    """
    assignment = _empty_assignment(subscriptions)
    members = sorted(subscriptions)
    subscribed = {member: set(topics) for member, topics in subscriptions.items()}
    all_topics = sorted(set().union(*subscribed.values())) if subscribed else []
    cursor = 0
    for topic in all_topics:
        num_partitions = partitions_per_topic.get(topic)
        if num_partitions is None:
            continue
        for p in range(num_partitions):
            # Some member is subscribed (the topic came from a subscription), so this loop ends.
            while topic not in subscribed[members[cursor % len(members)]]:
                cursor += 1
            assignment[members[cursor % len(members)]].append(TopicPartition(topic, p))
            cursor += 1
    return assignment


def sticky_assign(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Iterable[str]],
    previous: Mapping[str, Iterable[TopicPartition]] | None = None,
) -> Assignment:
    """A balanced assignment that keeps as many partitions as possible where ``previous`` had them.

    When every member subscribes to the same topics, counts differ by at most one and the number of
    partitions that stay in place is the largest any balanced assignment can keep: members that already
    hold the most get the larger quotas, each keeps up to its quota, and the rest is dealt to the members
    with the fewest partitions. With differing subscriptions, partitions move from a member to a subscribed
    member holding at least two fewer until no such move exists.

    Example: 6 partitions held as A [0, 1, 2], B [3, 4, 5]; C joins -> A [0, 1], B [3, 4], C [2, 5]:
    only two partitions move.
    """
    assignment = _empty_assignment(subscriptions)
    if not assignment:
        return assignment
    subscribed = {member: set(topics) for member, topics in subscriptions.items()}
    valid = {
        TopicPartition(t, p)
        for t in set().union(*subscribed.values())
        for p in range(partitions_per_topic.get(t, 0))
    }
    # Keep what each member held before if it is still valid, subscribed and not claimed twice.
    kept: dict[str, list[TopicPartition]] = {member: [] for member in assignment}
    claimed: set[TopicPartition] = set()
    for member in sorted(previous or {}):
        if member not in kept:
            continue
        for tp in sorted(set((previous or {})[member])):
            if tp in valid and tp not in claimed and tp.topic in subscribed[member]:
                kept[member].append(tp)
                claimed.add(tp)

    if len({frozenset(topics) for topics in subscribed.values()}) == 1:
        # Homogeneous: the largest quotas go to the members keeping the most, ties by member id.
        base, extra = divmod(len(valid), len(assignment))
        ranked = sorted(assignment, key=lambda m: (-len(kept[m]), m))
        quotas = {m: base + (1 if i < extra else 0) for i, m in enumerate(ranked)}
        for member in assignment:
            del kept[member][quotas[member] :]

    for member, parts in kept.items():
        assignment[member].extend(parts)
    unassigned = sorted(valid - {tp for parts in assignment.values() for tp in parts})
    for tp in unassigned:
        candidates = [m for m in assignment if tp.topic in subscribed[m]]
        target = min(candidates, key=lambda m: (len(assignment[m]), m))
        assignment[target].append(tp)
    _rebalance(assignment, subscribed)
    for parts in assignment.values():
        parts.sort()
    return assignment


def _rebalance(assignment: Assignment, subscribed: Mapping[str, set[str]]) -> None:
    """Move partitions from fuller to emptier subscribed members until no move narrows the gap.

    Each move lowers the sum of squared counts, so the loop ends.
    """
    moved = True
    while moved:
        moved = False
        for donor in sorted(assignment, key=lambda m: (-len(assignment[m]), m)):
            for tp in sorted(assignment[donor], reverse=True):
                takers = [
                    m
                    for m in assignment
                    if tp.topic in subscribed[m] and len(assignment[m]) + 1 < len(assignment[donor])
                ]
                if takers:
                    taker = min(takers, key=lambda m: (len(assignment[m]), m))
                    assignment[donor].remove(tp)
                    assignment[taker].append(tp)
                    moved = True
                    break
            if moved:
                break
