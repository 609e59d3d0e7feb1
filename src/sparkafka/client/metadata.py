"""Cluster lookups for the driver (``AdminMetadata``): topics, partitions, offsets, groups, retried.

Runs on the driver side (Spark's source planner process, the sink's writer and commit, the CLI tools) and
never in reader or writer tasks. Built on ``sparkafka.client.core`` (construction, caches, retries) and
``sparkafka.client.broker_gaps`` (end offsets on a broker whose ListOffsets(latest) is wrong): it is the
layer above both, so neither imports it.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from sparkafka.client import broker_gaps
from sparkafka.client.conf import against_servers
from sparkafka.client.core import (
    DEFAULT_TIMEOUT_S,
    LEADER_ELECTION_S,
    TIMED_OUT,
    UNKNOWN_TOPIC_OR_PARTITION,
    admin_client,
    broker_error,
    error_code,
    is_leaderless,
    is_retriable,
    new_consumer,
    raise_leaderless,
    with_retries,
)
from sparkafka.client.security import Access, denied_all, denied_by
from sparkafka.errors import AuthorizationError, BrokerError, PartitionsGoneError
from sparkafka.structs import (
    KAFKA_INTERNAL_TOPICS,
    GroupOffset,
    TimestampedOffset,
    TopicPartition,
    committed_offsets,
    group_commits,
)

__all__ = ["AdminMetadata", "Offsets", "TopicInfo"]

log = logging.getLogger(__name__)


class NoOffsetAnsweredError(Exception):
    """ListOffsets(earliest/latest) gave a partition no offset and no error: its leader's request failed."""

    retriable = True


def _offset(answer: Any, tp: TopicPartition, what: str, logical: bool) -> int:
    """The offset of one partition's ListOffsets answer; below 0 only where ``logical`` allows it."""
    offset = int(answer.offset)
    if offset < 0 and not logical:
        raise NoOffsetAnsweredError(f"{tp} answered offset {offset} for {what}")
    return offset


T = TypeVar("T")


def _topic_id(uuid: Any) -> str | None:
    """A confluent-kafka ``Uuid`` in Kafka's text form (``Uuid.toString``: URL-safe base64, unpadded); None
    for none or Kafka's zero id (a broker without topic ids, before 2.8).

    Not ``str(uuid)``: librdkafka writes standard base64 (``+`` and ``/``), which ``kafka-topics``
    does not print.
    """
    if uuid is None:
        return None
    high, low = uuid.get_most_significant_bits(), uuid.get_least_significant_bits()
    if high == low == 0:
        return None
    raw = high.to_bytes(8, "big", signed=True) + low.to_bytes(8, "big", signed=True)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


_NOT_FOUND = {UNKNOWN_TOPIC_OR_PARTITION, 29}  # 29: TOPIC_AUTHORIZATION_FAILED
_UNSUPPORTED = {-165, 35}  # librdkafka's _UNSUPPORTED_FEATURE, Kafka's UNSUPPORTED_VERSION


OFFSET_FETCH_CHUNK = 2_000
"""Partitions asked per OffsetFetch of a group's offsets (librdkafka's cost grows with their square)."""

COORDINATOR_WAIT_S = 5.0
"""How long one OffsetFetch waits for the group's coordinator before the consumer's error events are read:
librdkafka waits out the whole timeout when FindCoordinator is refused by ACL, and reports that only there."""


def _offset_fetch(consumer: Any, tps: list[TopicPartition], left: float) -> list[Any]:
    """One OffsetFetch of ``tps`` by a Consumer of the group, waiting at most ``COORDINATOR_WAIT_S`` (and
    ``left``, the time its caller has left).

    A time-out is replaced by the error the consumer reported meanwhile, if any (GROUP_AUTHORIZATION_FAILED
    from FindCoordinator: then a refusal in one sentence at once, not a time-out after ``timeout_s``), else
    raised as ``TimeoutError`` (worded; librdkafka's own time-out would be retried alike), which
    ``with_retries`` asks again within its time.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka import TopicPartition as CTopicPartition

    asked = [CTopicPartition(tp.topic, tp.partition) for tp in tps]
    wait = min(left, COORDINATOR_WAIT_S)
    try:
        return list(consumer.committed(asked, timeout=wait))
    except KafkaException as e:
        if error_code(e) != TIMED_OUT:
            raise
        while (event := consumer.poll(0)) is not None:
            if event.error() is not None:
                raise KafkaException(event.error()) from e
        raise TimeoutError(f"no answer within {wait:.1f} s from the group's coordinator") from e


class TopicInfo(NamedTuple):
    """One topic as DescribeTopics answers it."""

    partitions: int
    """Its partition count."""
    topic_id: str | None
    """Its id in Kafka's text form (URL-safe base64, as ``kafka-topics --describe`` prints it); None when
    the broker has none (before Kafka 2.8)."""


Offsets = dict[TopicPartition, int]


class AdminMetadata:
    """Cluster lookups for the driver, every one retried (``with_retries``) within ``timeout_s``.

    Not picklable on purpose: create it where it is used (the client is cached per process).

    Args:
        conf: librdkafka settings (``kafka.*`` options without the prefix).
        timeout_s: bound on each lookup, retries included; an unreachable broker fails within it, naming
            the bootstrap servers. Keep it well above ``LEADER_ELECTION_S`` (see ``DEFAULT_TIMEOUT_S``).
        clock, sleep: injectable for tests of the retry policy.
        admin: the AdminClient to use; default the process's cached one for ``conf`` (``admin_client``).
        group_reader: makes the consumer that reads a group's committed offsets (``committed``), given the
            group id; default a confluent-kafka Consumer of that group (it never joins it).
    """

    def __init__(
        self,
        conf: Mapping[str, str],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        admin: Any = None,
        group_reader: Callable[[str], Any] | None = None,
    ) -> None:
        """Keep the settings and the client; nothing is asked of the broker yet."""
        self._conf = dict(conf)
        self._group_reader = group_reader or self._new_group_reader
        self._timeout_s = timeout_s
        self._clock = clock
        self._sleep = sleep
        self._read_committed = conf.get("isolation.level", "read_committed") == "read_committed"
        self._admin = admin if admin is not None else admin_client(conf)

    def _retry(self, what: str, call: Callable[[float], T], access: Access | None = None) -> T:
        return with_retries(
            what, self._conf, call, self._timeout_s, clock=self._clock, sleep=self._sleep, access=access
        )

    def require(self, accesses: Iterable[Access], missing: Sequence[Access] = ()) -> list[Access]:
        """Raise one ``AuthorizationError`` naming each of ``accesses`` the brokers say this user lacks.

        Runs on the driver before a query reads, commits or writes anything, so a missing ACL is one
        sentence at start, not a task failure after a batch was written. Asks the brokers which operations
        the user may perform (Kafka's authorized operations, KIP-430: DescribeTopicPartitions and
        DescribeGroups), one lookup per resource. Topics and groups only (Kafka tells nothing of the kind
        for transactional ids: a missing WRITE there fails the first transaction, worded the same). A topic
        that does not exist, or a broker that does not say, passes: the caller reports it as it did.

        ``missing``: accesses the caller already knows are lacking (asked another way), named in the same
        sentence (``security.denied_all``).

        Returns:
            The accesses that could not be checked (a topic that does not exist, a broker that does not
            say), for a caller that checks again once they can be.
        """
        from confluent_kafka import TopicCollection

        unchecked: list[Access] = []
        lacking: list[Access] = []
        for access in accesses:
            if access.resource == "topic":

                def topic(left: float, name: str = access.name) -> Any:
                    futures = self._admin.describe_topics(
                        TopicCollection([name]), include_authorized_operations=True, request_timeout=left
                    )
                    return futures[name].result(left)

                ask: Callable[[float], Any] = topic
            elif access.resource == "group":

                def group(left: float, name: str = access.name) -> Any:
                    futures = self._admin.describe_consumer_groups(
                        [name], include_authorized_operations=True, request_timeout=left
                    )
                    return futures[name].result(left)

                ask = group
            else:
                unchecked.append(access)
                continue
            try:  # not retried: a topic that does not exist (UNKNOWN_TOPIC_OR_PARTITION) is not for us
                described = with_retries(
                    f"asking what {access.resource} {access.name} allows",
                    self._conf,
                    ask,
                    self._timeout_s,
                    clock=self._clock,
                    sleep=self._sleep,
                    retriable=lambda e: error_code(e) != UNKNOWN_TOPIC_OR_PARTITION and is_retriable(e),
                    access=access,
                )
            except AuthorizationError:  # not even DESCRIBE
                lacking.append(access)
                continue
            except BrokerError as e:  # the topic does not exist, or the broker cannot say: not for us
                log.debug("authorized operations of %s %s not known: %s", access.resource, access.name, e)
                unchecked.append(access)
                continue
            allowed = {getattr(op, "name", str(op)) for op in described.authorized_operations or ()}
            if not allowed:
                unchecked.append(access)
            elif not allowed & {access.operation, "ALL"}:
                lacking.append(access)
        if lacking or missing:
            raise denied_all(self._conf, [*lacking, *missing])
        return unchecked

    def topics(self) -> dict[str, int]:
        """Every topic the cluster has, with its partition count (Kafka's internal topics left out, as its
        Admin ``listTopics`` does; a user topic named ``__orders`` is listed)."""
        metadata = self._retry("listing topics", lambda left: self._admin.list_topics(timeout=left))
        out: dict[str, int] = {}
        for name, topic in metadata.topics.items():
            if name in KAFKA_INTERNAL_TOPICS or topic.error is not None:
                continue
            out[name] = len(topic.partitions)
        return out

    def cluster_id(self) -> str | None:
        """The cluster's id, from a Metadata answer (any user may ask: DescribeCluster needs DESCRIBE on
        the cluster), asked once per instance; None where the broker gives none.

        Topic ids are the cluster's own: a commit copied from another cluster (MirrorMaker 2's offset sync)
        names the other cluster's ids, and only this id tells the two apart (``source.commits``).
        """
        if not hasattr(self, "_cluster"):

            def attempt(left: float) -> str | None:
                found = self._admin.list_topics(timeout=left).cluster_id
                return str(found) if found else None

            self._cluster: str | None = self._retry("reading the cluster's id", attempt)
        return self._cluster

    def describe_topics(self, names: Iterable[str]) -> dict[str, TopicInfo]:
        """The partition count and id of each topic of ``names`` that exists: one Metadata request.

        A topic the cluster does not have, or that this client may not describe, is left out, as
        ``topics`` leaves it out. A broker that cannot describe topics is answered from its topic list,
        without ids.
        """
        from confluent_kafka import KafkaException, TopicCollection

        wanted = sorted(set(names))
        if not wanted:
            return {}

        def attempt(left: float) -> dict[str, TopicInfo] | None:
            futures = self._admin.describe_topics(TopicCollection(wanted), request_timeout=left)
            out: dict[str, TopicInfo] = {}
            for name, future in futures.items():
                try:
                    described = future.result(left)
                except KafkaException as e:
                    if error_code(e) in _NOT_FOUND:
                        continue
                    if error_code(e) in _UNSUPPORTED:
                        return None
                    raise
                out[name] = TopicInfo(len(described.partitions), _topic_id(described.topic_id))
            return out

        described = self._retry("describing topics", attempt)
        if described is None:
            return {t: TopicInfo(n, None) for t, n in self.topics().items() if t in wanted}
        return described

    def replicas(self) -> tuple[int, dict[str, int]]:
        """Broker count, and per topic its smallest replica count."""
        metadata = self._retry("listing topics", lambda left: self._admin.list_topics(timeout=left))
        counts = {
            name: min((len(p.replicas) for p in topic.partitions.values()), default=0)
            for name, topic in metadata.topics.items()
            if topic.error is None
        }
        return len(metadata.brokers), counts

    def _list_offsets(
        self,
        specs: dict[TopicPartition, Any],
        what: str,
        logical: bool = False,
        *,
        read_committed: bool | None = None,
    ) -> Offsets:
        """ListOffsets: the offset per partition (see ``_list_answers``)."""
        return self._list_answers(
            specs, what, lambda answer, tp: _offset(answer, tp, what, logical), read_committed=read_committed
        )

    def _timestamped(
        self, specs: dict[TopicPartition, Any], what: str
    ) -> dict[TopicPartition, TimestampedOffset | None]:
        """ListOffsets by a timestamp spec: the record found, with its timestamp; None where there is none."""

        def read(answer: Any, tp: TopicPartition) -> TimestampedOffset | None:
            offset = int(answer.offset)
            return TimestampedOffset(offset, int(answer.timestamp)) if offset >= 0 else None

        return self._list_answers(specs, what, read)

    def _list_answers(
        self,
        specs: dict[TopicPartition, Any],
        what: str,
        read: Callable[[Any, TopicPartition], T],
        *,
        read_committed: bool | None = None,
    ) -> dict[TopicPartition, T]:
        """ListOffsets, retrying only the partitions that answered a retriable error; ``read`` turns each
        partition's answer (confluent-kafka's ``ListOffsetsResultInfo``) into the result. The isolation
        level is the settings' unless ``read_committed`` says.

        An offset below 0 is no answer unless ``logical`` (by timestamp, -1 means "no record that new").
        librdkafka gives -1001 without an error for every partition of a leader its request to failed
        (``rd_kafka_ListOffsets_leaders_queried_cb`` fills the results in advance and only a leader's answer
        overwrites them): seen in the chaos test after a broker kill, as long as its cached metadata
        still named the dead leader. So it is treated as leaderless below.

        Each request is cut off after ``LEADER_ELECTION_S`` (it may be waiting for a dead leader). When a
        partition answers UNKNOWN_TOPIC_OR_PARTITION or a leaderless error (``is_leaderless``; librdkafka's
        "No leaders found" also means a deleted topic), the metadata is asked before retrying: a topic it
        no longer has is reported gone (``PartitionsGoneError``, at once); otherwise the topic was just
        created or its partitions are between leaders, and the refreshed metadata lets the retry reach the
        new leaders.
        """
        from confluent_kafka import IsolationLevel
        from confluent_kafka import TopicPartition as CTopicPartition

        committed = self._read_committed if read_committed is None else read_committed
        level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
        found: dict[TopicPartition, T] = {}
        todo = dict(specs)

        def attempt(left: float) -> dict[TopicPartition, T]:
            request = {CTopicPartition(tp.topic, tp.partition): spec for tp, spec in todo.items()}
            futures = self._admin.list_offsets(
                request, isolation_level=level, request_timeout=min(left, LEADER_ELECTION_S)
            )
            failed: list[BaseException] = []
            doubtful: set[TopicPartition] = set()
            for ctp, future in futures.items():
                tp = TopicPartition(ctp.topic, ctp.partition)
                try:
                    found[tp] = read(future.result(left), tp)
                    todo.pop(tp, None)
                except Exception as e:  # noqa: BLE001 - per-partition KafkaException: classified by the retry policy
                    refusal = denied_by(e, self._conf, Access("DESCRIBE", "topic", tp.topic))
                    if refusal is not None:
                        raise refusal from None
                    if (
                        error_code(e) == UNKNOWN_TOPIC_OR_PARTITION
                        or is_leaderless(e)
                        or isinstance(e, NoOffsetAnsweredError)
                    ):
                        doubtful.add(tp)
                    failed.append(e)
            if doubtful:
                present = self._present_topics(min(left, LEADER_ELECTION_S))
                gone = {tp for tp in doubtful if tp.topic not in present}
                if gone:
                    raise PartitionsGoneError(
                        gone,
                        f"looking up {what} offsets {against_servers(self._conf)}: "
                        f"{', '.join(map(str, sorted(gone)))} no longer exist (topic deleted)",
                    )
            if failed:  # a non-retriable error first: it fails the lookup at once
                raise next((e for e in failed if not is_retriable(e)), failed[0])
            return found

        if not specs:
            return {}
        return self._retry(f"looking up {what} offsets", attempt)

    def _present_topics(self, timeout_s: float) -> set[str]:
        """The topics the cluster's metadata has; asking refreshes the client's metadata cache too.

        Not retried here: it runs inside a retried attempt. A topic listed with an error other than
        UNKNOWN_TOPIC_OR_PARTITION (say, no leader yet) is present.
        """
        metadata = self._admin.list_topics(timeout=timeout_s)
        return {
            name
            for name, topic in metadata.topics.items()
            if topic.error is None or error_code(topic.error) != UNKNOWN_TOPIC_OR_PARTITION
        }

    def earliest(self, tps: Iterable[TopicPartition]) -> Offsets:
        """The first offset still in the log of each partition (ListOffsets earliest)."""
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets({tp: OffsetSpec.earliest() for tp in tps}, "earliest")

    def latest(self, tps: Iterable[TopicPartition]) -> Offsets:
        """The end of each partition as this isolation level reads it (read_committed: the LSO).

        On a broker whose ListOffsets(latest) is wrong (``broker_gaps``), the ends are resolved by
        fetching, from the broker's answer or, when ``tps`` is a mapping, from its values where higher
        (offsets known not to be past the end: the query's position). Such a broker is first asked for its
        metadata: partitions of deleted topics raise ``PartitionsGoneError``, as Apache Kafka's
        UNKNOWN_TOPIC_OR_PARTITION does (fetching them hangs on tansu, measured).
        """
        from confluent_kafka.admin import OffsetSpec

        answer = self._list_offsets({tp: OffsetSpec.latest() for tp in tps}, "latest")
        if not answer or self.latest_is_exact():
            return answer
        existing = self.topics()
        gone = {tp for tp in answer if tp.topic not in existing}
        if gone:
            names = ", ".join(map(str, sorted(gone)))
            raise PartitionsGoneError(gone, f"{names} no longer exist (topic deleted)")
        floors: Mapping[TopicPartition, int] = tps if isinstance(tps, Mapping) else {}
        bounds = {tp: max(o, floors.get(tp, 0)) for tp, o in answer.items()}
        fetched = broker_gaps.fetched_end_offsets(self._conf, bounds, self._read_committed, self._timeout_s)
        return {**answer, **fetched}

    def high_watermarks(self, tps: Iterable[TopicPartition]) -> Offsets:
        """The end of each partition as read_uncommitted reads it (the high watermark), whatever the settings'
        isolation level: past the last stable offset when a transaction is open there. Not resolved by
        fetching on a broker whose ListOffsets(latest) is wrong (``broker_gaps``)."""
        from confluent_kafka.admin import OffsetSpec

        specs = {tp: OffsetSpec.latest() for tp in tps}
        return self._list_offsets(specs, "high watermark", read_committed=False)

    def latest_is_exact(self) -> bool:
        """Whether this broker's ListOffsets(latest) answers the end of a partition (``broker_gaps``): then
        a reader's own end lookup (``get_watermark_offsets``) is right too. Cached per process."""
        return broker_gaps.latest_is_exact(self._conf, self._timeout_s, self._admin)

    def for_timestamp(self, tps: Iterable[TopicPartition], timestamp_ms: int) -> Offsets:
        """Per partition, the first offset whose record timestamp is at or after ``timestamp_ms``.

        -1 where no record is that new (ListOffsets by timestamp); callers pick the fallback.
        """
        from confluent_kafka.admin import OffsetSpec

        specs = {tp: OffsetSpec.for_timestamp(timestamp_ms) for tp in tps}
        return self._list_offsets(specs, "timestamp", logical=True)

    def newest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, TimestampedOffset | None]:
        """Per partition its record with the largest timestamp (ListOffsets MAX_TIMESTAMP, KIP-734: Apache
        Kafka 3.0 and later); None for a partition that holds no record."""
        from confluent_kafka.admin import OffsetSpec

        return self._timestamped({tp: OffsetSpec.max_timestamp() for tp in tps}, "max timestamp")

    def at_time(
        self, tps: Iterable[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, TimestampedOffset | None]:
        """Per partition its first record whose timestamp is at or after ``timestamp_ms``, with that record's
        timestamp (ListOffsets by timestamp); None where no record is that new."""
        from confluent_kafka.admin import OffsetSpec

        return self._timestamped({tp: OffsetSpec.for_timestamp(timestamp_ms) for tp in tps}, "timestamp")

    def committed(
        self, group_id: str, tps: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets for ``tps`` (None: every partition it has committed)."""
        return committed_offsets(self._committed(group_id, tps))

    def group_commits(
        self, group_id: str, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, GroupOffset | None]:
        """The group's commits for ``tps``, each with its metadata string (None where it has none)."""
        return group_commits(self._committed(group_id, tps))

    def commit_metadata(self, group_id: str, tps: Iterable[TopicPartition]) -> dict[TopicPartition, str]:
        """The metadata string of each of the group's commits for ``tps`` ("" where none)."""
        return {
            TopicPartition(p.topic, p.partition): str(p.metadata or "")
            for p in self._committed(group_id, tps)
        }

    def _committed(self, group_id: str, tps: Iterable[TopicPartition] | None) -> list[Any]:
        """OffsetFetch through a Consumer of the group, never the AdminClient's ListConsumerGroupOffsets.

        librdkafka's AdminClient crashes the process (SIGSEGV: ``rd_kafka_handle_OffsetFetch`` asks a
        consumer group handle the AdminClient does not have to find the coordinator again) when the answer
        is NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE: a group's first lookup on a new cluster, a
        coordinator that moves (librdkafka issue 5040, still open in 2.16). A Consumer has that handle, and
        it never joins the group: nothing but ``committed`` is asked of it (``_offset_fetch``). ``tps`` None
        asks for every partition of every topic, ``OFFSET_FETCH_CHUNK`` at a time (librdkafka matches an
        answer's partitions to the request's one by one), and keeps those the group has committed.
        """
        every = tps is None
        if tps is None:
            tps = {TopicPartition(t, p) for t, n in self.topics().items() for p in range(n)}
        wanted = sorted(set(tps))
        if not wanted:
            return []
        readers: list[Any] = []

        def attempt(left: float) -> list[Any]:
            if not readers:  # made here, so that a setting the consumer refuses is worded as any failure
                readers.append(self._group_reader(group_id))
            deadline = self._clock() + left
            answer: list[Any] = []
            for start in range(0, len(wanted), OFFSET_FETCH_CHUNK):
                chunk = wanted[start : start + OFFSET_FETCH_CHUNK]  # each waits only for the time still left
                answer += _offset_fetch(readers[0], chunk, max(deadline - self._clock(), 0.001))
            raise_leaderless(answer)  # else read as "nothing committed"
            return answer

        try:
            access = Access("DESCRIBE", "group", group_id)
            result = self._retry(f"reading committed offsets of group {group_id!r}", attempt, access)
        finally:
            for reader in readers:
                reader.close()
        return [p for p in result if p.offset >= 0] if every else result

    def _new_group_reader(self, group_id: str) -> Any:
        # read_uncommitted: OffsetFetch without RequireStable, as the AdminClient asked and Flink asks; with
        # it, an open transaction that sends offsets to this group would hold the lookup until it ends.
        settings = {
            "group.id": group_id,
            "enable.auto.commit": "false",
            "isolation.level": "read_uncommitted",
        }
        return new_consumer({**self._conf, **settings})

    def topic_config(self, topic: str) -> dict[str, Any]:
        """The topic's configs as DescribeConfigs answers them: name -> confluent-kafka ``ConfigEntry``."""
        from confluent_kafka.admin import ConfigResource, ResourceType

        def attempt(left: float) -> Any:
            resource = ConfigResource(ResourceType.TOPIC, topic)
            futures = self._admin.describe_configs([resource], request_timeout=left)
            return next(iter(futures.values())).result(left)

        return dict(self._retry(f"describing the configs of {topic}", attempt))

    def group_state(self, group_id: str) -> tuple[str, list[str]]:
        """The group's state (``Empty``, ``Stable``, ``Dead``, ...) and its members (client id @ host).

        Judge activity by the state: some brokers (tansu) answer a Stable group with no member list.
        """

        def attempt(left: float) -> Any:
            futures = self._admin.describe_consumer_groups([group_id], request_timeout=left)
            return futures[group_id].result(left)

        access = Access("DESCRIBE", "group", group_id)
        described = self._retry(f"describing group {group_id!r}", attempt, access)
        state = (
            str(getattr(described.state, "name", described.state)).replace("_", " ").title().replace(" ", "")
        )
        return state, [f"{m.client_id}@{m.host}" for m in described.members]

    def alter_committed(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Set the group's committed offsets (the group must have no members: the broker refuses otherwise).

        Raises:
            BrokerError: the broker refused some partition (the message names it).
        """
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka import TopicPartition as CTopicPartition

        parts = [CTopicPartition(tp.topic, tp.partition, o) for tp, o in sorted(offsets.items())]

        def attempt(left: float) -> Any:
            request = [ConsumerGroupTopicPartitions(group_id, parts)]
            futures = self._admin.alter_consumer_group_offsets(request, request_timeout=left)
            answer = next(iter(futures.values())).result(left)
            raise_leaderless(answer.topic_partitions)  # setting offsets again is idempotent
            return answer

        result = self._retry(
            f"setting committed offsets of group {group_id!r}", attempt, Access("READ", "group", group_id)
        )
        refused = [f"{p.topic}-{p.partition}: {p.error}" for p in result.topic_partitions if p.error]
        if refused:
            raise broker_error(
                f"setting committed offsets of group {group_id!r}", self._conf, "; ".join(refused)
            )
