"""``KafkaMetadata`` for planning and ``EventTimeLog`` for alignment: the client layer's ``AdminMetadata``
plus the subscription's partitions and record timestamps by fetching; and what a read checks with the
brokers before it starts (``discover_initial``, at ``load()``: ``check_source``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sparkafka.client.metadata import AdminMetadata
from sparkafka.client.record_times import last_times, scan_times
from sparkafka.client.security import Access, authenticated
from sparkafka.source.event_time_log import LAST_LOOK_BACK, Scan
from sparkafka.source.options import SourceOptions, Subscription
from sparkafka.source.planning import Discovery, check_ending_map, check_found, subscribed
from sparkafka.structs import KAFKA_INTERNAL_TOPICS, TimestampedOffset, TopicPartition

__all__ = ["LAST_LOOK_BACK", "SourceMetadata", "check_source", "discover_initial", "source_access"]


def source_access(options: SourceOptions, topics: Iterable[str]) -> list[Access]:
    """The ACLs a query needs from the start: READ on each topic it reads, READ on the group it commits to.

    READ includes DESCRIBE (metadata, ListOffsets); READ on the group covers fetching its offsets and
    committing them, and the readers' coordinator lookup under ``kafka.group.id`` (``client.security``).
    """
    needed = [Access("READ", "topic", t) for t in sorted(set(topics))]
    if options.commit_mode != "disabled" and options.group_id:
        needed.append(Access("READ", "group", options.group_id))
    return needed


class SourceMetadata(AdminMetadata):
    """Cluster lookups for the source's planner (driver side), retried within ``metadataTimeoutMs``."""

    def require_source_access(self, options: SourceOptions, found: Iterable[TopicPartition]) -> None:
        """On a cluster that knows who the client is: raise for the first ACL ``source_access`` lacks.

        ``found``: the partitions discovered; topics named by the subscription are checked even when not
        found (a topic the user may not DESCRIBE is missing from every listing).
        """
        if authenticated(self._conf):
            sub = options.subscription
            named = {*sub.topics, *(tp.topic for tp in sub.partitions)}
            self.require(source_access(options, named | {tp.topic for tp in found}))  # a new group: unchecked

    def confirm_gone(self, topics: set[str]) -> None:
        """On a cluster that knows who the client is: raise ``AuthorizationError`` when the user may not
        DESCRIBE one of ``topics``, which discovery no longer finds (``data_loss.next_positions``).

        Runs on the driver, only when a subscribed topic went missing. Kafka answers
        TOPIC_AUTHORIZATION_FAILED for a topic the user may not describe whether or not it exists, so a
        deleted topic whose ACLs went with it also stops the query here, in a sentence naming the ACL,
        rather than being taken for deleted on a guess.
        """
        if authenticated(self._conf):
            self.require([Access("DESCRIBE", "topic", t) for t in sorted(topics)])

    def discover(self, subscription: Subscription, *, topic_ids: bool = True) -> Discovery:
        """The partitions that exist now and belong to the subscription, and their topics' ids (those the
        broker has: Kafka 2.8 and later).

        One DescribeTopics request for ``subscribe`` and ``assign``; a pattern lists the topics first.
        ``topic_ids`` False (``load()``'s check, which needs the partitions alone): one request for any
        subscription (a pattern's topic list gives the partition counts), no ids and no cluster id.
        """
        if subscription.pattern is not None:
            listed = self.topics()
            if not topic_ids:
                return Discovery(subscribed(subscription, listed), {})
            names = [t for t in listed if subscription.matches(t)]
        else:
            names = [tp.topic for tp in subscription.partitions] or list(subscription.topics)
        topics = self.describe_topics(t for t in names if t not in KAFKA_INTERNAL_TOPICS)
        counts = {t: info.partitions for t, info in topics.items()}
        ids = {t: info.topic_id for t, info in topics.items() if info.topic_id} if topic_ids else {}
        cluster = self.cluster_id() if ids else None  # asked once; only topic ids need it
        return Discovery(subscribed(subscription, counts), ids, cluster)

    def scan(
        self, ranges: Mapping[TopicPartition, tuple[int, int]], at_least_ms: int | None, max_records: int
    ) -> dict[TopicPartition, Scan]:
        """``EventTimeLog.scan``: fetches with this isolation level, within ``metadataTimeoutMs``."""
        found = scan_times(self._conf, ranges, at_least_ms, max_records, self._timeout_s)
        return {tp: Scan(record, scanned_to) for tp, (record, scanned_to) in found.items()}

    def last(self, ends: Mapping[TopicPartition, int]) -> dict[TopicPartition, TimestampedOffset | None]:
        """``EventTimeLog.last``: reads back from each end, the last 64 offsets first, then windows 16 times
        wider, until a record is found or the window reaches offset 0 or ``LAST_LOOK_BACK`` offsets (one
        fetch for all partitions a window, this isolation level, within ``metadataTimeoutMs`` each).
        Markers are one offset each, so the first window finds the record but behind an aborted
        transaction. A window's range ends where the one before began, but its read goes on to the end
        all the same: the offsets past its range hold no record a reader reads (that is why the window was
        opened), and a fetch cannot stop short of a record; so a partition with nothing to read in its
        last ``LAST_LOOK_BACK`` offsets costs 64 + 1,024 + 16,384 + 262,144 + 1,048,576 offsets, about
        1.27 x ``LAST_LOOK_BACK`` (the aligner reads it back once, then carries the answer while the end
        moves over nothing to read: ``EventTimeAligner._ask_last``). None: no record a reader reads within
        ``LAST_LOOK_BACK`` of the end."""
        out: dict[TopicPartition, TimestampedOffset | None] = dict.fromkeys(ends)
        todo = {tp: end for tp, end in ends.items() if end > 0}
        read, back = 0, min(64, LAST_LOOK_BACK)
        while todo:
            found = last_times(
                self._conf,
                {tp: (max(0, end - back), end - read) for tp, end in todo.items()},
                self._timeout_s,
            )
            for tp, end in list(todo.items()):
                if found[tp] is not None or end <= back or back >= LAST_LOOK_BACK:
                    out[tp] = found[tp]
                    del todo[tp]
            read, back = back, min(back * 16, LAST_LOOK_BACK)
        return out

    def pending(self, ends: Mapping[TopicPartition, int]) -> dict[TopicPartition, TimestampedOffset | None]:
        """``EventTimeLog.pending``: under read_committed, one ListOffsets (the high watermarks) for all,
        then one read_uncommitted fetch for the partitions whose log goes on past their end (a transaction
        open there); under read_uncommitted, nothing is asked."""
        out: dict[TopicPartition, TimestampedOffset | None] = dict.fromkeys(ends)
        if not self._read_committed or not ends:
            return out
        high = self.high_watermarks(ends)
        ranges = {tp: (end, high[tp]) for tp, end in ends.items() if high.get(tp, end) > end}
        if ranges:
            conf = {**self._conf, "isolation.level": "read_uncommitted"}
            for tp, (record, _) in scan_times(conf, ranges, None, 1, self._timeout_s).items():
                out[tp] = record
        return out


def discover_initial(
    metadata: SourceMetadata, options: SourceOptions, *, topic_ids: bool = True
) -> Discovery:
    """The partitions a read starts with (``metadata.discover``), once what it needs before it starts is
    there, each refusal one sentence: the ACLs ``source_access`` names, on a cluster that knows who the
    client is (``SourceMetadata.require_source_access``), and topics that exist (``planning.check_found``,
    Flink's behaviour).

    The one path of both checks: at ``load()`` (``check_source``, ``topic_ids`` False) and at
    the readers' first discovery. The ACLs first: a topic the user may not DESCRIBE is missing from every
    listing, and the sentence naming the ACL says more than "they do not exist".
    """
    found = metadata.discover(options.subscription, topic_ids=topic_ids)
    metadata.require_source_access(options, found.partitions)
    check_found(options.subscription, found.partitions)
    return found


def check_source(options: SourceOptions, *, admin: Any = None) -> None:
    """Refuse at ``load()``, in one sentence each, what no read of these options can run with.

    Runs after the first contact, with one more lookup (the partition counts of the subscription's
    topics, ``discover_initial``), before a query starts:

    - the topics ``subscribe`` or ``assign`` names exist, and a ``subscribePattern`` matches one
      (``planning.check_found``);
    - on a cluster that knows who the client is, READ on those topics
      (``SourceMetadata.require_source_access``);
    - an ``endingOffsets`` or ``endingOffsetsByTimestamp`` map names exactly the partitions read
      (``planning.check_ending_map``).

    The options are parsed as a batch read's (``schema`` cannot tell a stream from a batch), which settles
    what is left to the readers: READ on the group, which only a stream that commits to it needs
    (``offsetCommitMode``; a batch read never commits), and a starting JSON map, which a stream that
    resumes from its checkpoint ignores (a map written before partitions were added must not stop it),
    are checked when the stream starts, and the starting map when a batch read is planned. The readers
    check all of it again: a user who gives ``.schema(...)`` is never asked this. ``admin``: the
    AdminClient (tests pass a fake).
    """
    metadata = SourceMetadata(options.kafka, options.metadata_timeout_ms / 1000, admin=admin)
    found = discover_initial(metadata, options, topic_ids=False)
    check_ending_map(options, found.partitions)
