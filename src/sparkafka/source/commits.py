"""Committing completed micro-batches' offsets back to the Kafka consumer group (Flink's ON_CHECKPOINTS).

The offsets of record are Spark's checkpoint; the group's offsets are a copy for lag tools and for
``startingOffsets=group``. So a commit is asynchronous, best effort and counted, and a failed one never
fails the query. The committer only ever hears of offsets whose batch is already in Spark's commit log
(see ``KafkaStreamReader``), which is what makes a committed offset safe: no batch before it can re-run.

Everything here is driven by the caller (``completed`` when a batch is known done, ``tick`` on every offset
poll, ``close`` on stop), so it needs no thread of its own and is tested with a fake client and clock.

A query commits without joining the group (it is never a member), so Kafka shows its group as Empty while
it runs. Two things keep an operator's reset (``sparkafka offsets reset``) from being overwritten:

- every commit carries a mark in its metadata (``CommitMark``: this run, host, pid, wall-clock time, and
  the query's driver and application, ``driver_process``), and the tool refuses to reset a group a
  sparkafka query committed to within ``LIVE_WINDOW_S``, naming that driver;
- before a commit that follows ``RECHECK_AFTER_S`` or more without one (an idle query, which the tool may
  take for stopped), the committer reads the group again; if its offsets are not the ones this run left,
  another client moved them, and the committer stops committing for the rest of the run (an error, in the
  log and the metrics), so the reset stands. ``RECHECK_AFTER_S`` is below ``LIVE_WINDOW_S``: a group the
  tool sees as idle is always read again before this run writes to it (up to the milliseconds between that
  read and the commit).

Offsets belong to a topic's log, and a topic deleted and created again under its name has a new log (and a
new topic id) whose offsets start over. So each commit's mark names the cluster and the topic id its offsets
were read from; a commit whose mark names this cluster and another id than the topic has now is no commit
at all for it (``offset_of_topic``: the start from ``startingOffsets=group`` and this committer's own
reading of the group), while a commit copied from another cluster (MirrorMaker 2's offset sync copies the
metadata too) is taken as it is. A completed batch read from an earlier topic of the name, or without the
ids of a topic that has them now, is never committed, and a partition the source moved (a recreated topic,
a log that ends below the query's position) gets its new offsets committed even below what the group held.
Topics no longer found (deleted, or no longer subscribed) are forgotten: Kafka deletes a deleted topic's
offsets from the group, which is no reset. Before, a query restarted after its topic was recreated
committed its checkpoint's end from the old log, and a later start from the group skipped the new log's
first records (measured: 100 of 800 read).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from sparkafka.client.core import new_consumer, raise_partition_error, with_retries
from sparkafka.metrics_files import default_metrics_path, read_json, write_json_atomically
from sparkafka.source.alignment_status import AlignmentStatus
from sparkafka.source.driver_process import QueryDriver, driver_of
from sparkafka.source.options import CommitMode
from sparkafka.structs import GroupOffset, TopicPartition, group_commits

__all__ = [
    "LIVE_WINDOW_S",
    "MAX_PENDING_COMMITS",
    "RECHECK_AFTER_S",
    "CommitClient",
    "CommitMark",
    "KafkaCommitClient",
    "OffsetCommitter",
    "SourceMetrics",
    "default_metrics_file",
    "offset_of_topic",
    "read_source_metrics",
    "write_source_metrics",
]

log = logging.getLogger(__name__)

MAX_PENDING_COMMITS = 100
"""Flink's bound on commits in flight; beyond it the newest offsets wait for an answer."""

LIVE_WINDOW_S = 600.0
"""A group a sparkafka query committed to this recently is taken to have that query running."""

RECHECK_AFTER_S = 60.0
"""After this long without committing, the committer reads the group before its next commit."""

_MARK_PREFIX = "sparkafka "

Done = Callable[[Mapping[TopicPartition, int], str | None], None]


@dataclass(frozen=True)
class CommitMark:
    """What a sparkafka source writes in its offset commits' metadata: who committed, and when."""

    run: str
    """This run of the query's source (new at each start)."""
    host: str
    pid: int
    at_ms: int
    """Wall-clock time of the commit, in ms."""
    stopped: bool = False
    """Written by the run's last commit, when its query stopped: nothing commits to the group after it."""
    topic_id: str | None = None
    """The id of the topic the offsets were read from (None where the broker gives none)."""
    cluster: str | None = None
    """The id of the cluster the offsets were read from (None where the broker gives none)."""
    driver: QueryDriver | None = None
    """The query's driver as its user knows it (``driver_process``); None in marks of earlier versions,
    whose ``pid`` alone named the committer: Spark's source runner, a process the user never started."""

    def to_metadata(self) -> str:
        """The commit metadata string (well under Kafka's offset.metadata.max.bytes, 4096)."""
        body: dict[str, Any] = {"run": self.run, "host": self.host, "pid": self.pid, "at": self.at_ms}
        if self.stopped:
            body["stopped"] = True
        if self.topic_id:
            body["tid"] = self.topic_id
        if self.cluster:
            body["cid"] = self.cluster
        if self.driver is not None:
            body["driver"] = self.driver.to_json()
        return _MARK_PREFIX + json.dumps(body, sort_keys=True, separators=(",", ":"))

    def committer(self) -> str:
        """Who made the commit, in the words its user knows: the application, the driver's pid, the host.

        Example: ``application 'orders-etl' (local-1764000000000), driver pid 4242 on host-a``; a mark of
        an earlier version names Spark's source runner.
        """
        driver = self.driver
        if driver is None:
            return f"Spark's source runner pid {self.pid} on {self.host}"
        named = []
        if driver.app_name is not None:
            named.append(
                f"application {driver.app_name!r}" + (f" ({driver.app_id})" if driver.app_id else "")
            )
        if driver.pid is not None:
            named.append(f"driver pid {driver.pid}")
        return f"{', '.join(named) or 'a driver'} on {self.host}"

    @classmethod
    def from_metadata(cls, metadata: str | None) -> CommitMark | None:
        """The mark in a commit's metadata; None for anything else (another client's commit)."""
        if not metadata or not metadata.startswith(_MARK_PREFIX):
            return None
        try:
            data = json.loads(metadata[len(_MARK_PREFIX) :])
            return cls(
                str(data["run"]),
                str(data["host"]),
                int(data["pid"]),
                int(data["at"]),
                bool(data.get("stopped", False)),
                str(data["tid"]) if data.get("tid") else None,
                str(data["cid"]) if data.get("cid") else None,
                QueryDriver.from_json(data["driver"]) if isinstance(data.get("driver"), dict) else None,
            )
        except (ValueError, KeyError, TypeError):
            return None


def offset_of_topic(commit: GroupOffset | None, topic_id: str | None, cluster_id: str | None) -> int | None:
    """The offset of ``commit`` as a commit of the topic whose id is ``topic_id`` now, on the cluster whose
    id is ``cluster_id``.

    None when there is no commit, or when its mark names this cluster and another topic id: it was read
    from an earlier topic of the same name, deleted since, and its offsets mean nothing in the new log. A
    commit without a mark (another client's, an older sparkafka's), one made on another cluster and copied
    here (MirrorMaker 2 translates the offset and copies the metadata), or where an id is not known, is
    taken as it is.
    """
    if commit is None:
        return None
    mark = CommitMark.from_metadata(commit.metadata)
    if (
        mark is not None
        and mark.cluster
        and mark.cluster == cluster_id
        and mark.topic_id
        and topic_id
        and mark.topic_id != topic_id
    ):
        return None
    return commit.offset


class CommitClient(Protocol):
    """What the committer needs from Kafka (a group-less, assign-mode consumer in production)."""

    def commit_async(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str], done: Done
    ) -> None:
        """Send an offset commit, each partition with its ``metadata``; ``done(offsets, error or None)`` is
        called by ``poll``."""

    def committed(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, GroupOffset | None]:
        """The group's commits now, with their metadata (None where it has none)."""

    def poll(self, timeout_s: float) -> None:
        """Serve commit callbacks, waiting at most ``timeout_s`` for one."""

    def close(self) -> None:
        """Release the client; no callback is served after it."""
        ...


@dataclass
class SourceMetrics:
    """What a running source reports about its group commits (also written to its metrics file)."""

    group_id: str
    mode: str
    commits_succeeded: int = 0
    commits_failed: int = 0
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    """The last offsets the group accepted from this source (next record to read, per partition)."""
    last_error: str | None = None
    pid: int = field(default_factory=os.getpid)
    updated_ms: int = 0
    event_time: AlignmentStatus | None = None
    """Event-time alignment (``maxEventTimeDrift``) at the last plan: each partition's event time, state."""

    def to_json(self) -> dict[str, Any]:
        """The metrics as the metrics file holds them: camelCase keys, offsets per topic and partition."""
        committed: dict[str, dict[str, int]] = {}
        for tp, offset in sorted(self.committed.items()):
            committed.setdefault(tp.topic, {})[str(tp.partition)] = offset
        return {
            "groupId": self.group_id,
            "mode": self.mode,
            "commitsSucceeded": self.commits_succeeded,
            "commitsFailed": self.commits_failed,
            "committedOffsets": committed,
            "lastError": self.last_error,
            "pid": self.pid,
            "updatedMs": self.updated_ms,
            **({"eventTime": self.event_time.to_json()} if self.event_time is not None else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SourceMetrics:
        """Metrics read back from ``to_json``'s form."""
        return cls(
            group_id=data["groupId"],
            mode=data["mode"],
            commits_succeeded=int(data["commitsSucceeded"]),
            commits_failed=int(data["commitsFailed"]),
            committed={
                TopicPartition(t, int(p)): int(o)
                for t, parts in data["committedOffsets"].items()
                for p, o in parts.items()
            },
            last_error=data.get("lastError"),
            pid=int(data.get("pid", 0)),
            updated_ms=int(data.get("updatedMs", 0)),
            event_time=AlignmentStatus.from_json(data["eventTime"]) if data.get("eventTime") else None,
        )


def default_metrics_file(group_id: str) -> Path:
    """Where a source committing for ``group_id`` writes its metrics unless option metricsFile says."""
    return default_metrics_path("source", group_id)


def read_source_metrics(
    group_id: str, metrics_file: str | os.PathLike[str] | None = None
) -> SourceMetrics | None:
    """The metrics last written by a source committing for ``group_id`` (None before its first write)."""
    path = Path(metrics_file) if metrics_file is not None else default_metrics_file(group_id)
    data = read_json(path)
    return None if data is None else SourceMetrics.from_json(data)


def write_source_metrics(path: Path, metrics: SourceMetrics) -> None:
    """Write ``metrics`` to ``path`` (atomically), stamped with the time; a failure only warns."""
    metrics.updated_ms = int(time.time() * 1000)
    try:
        write_json_atomically(path, metrics.to_json())
    except OSError as e:
        log.warning("could not write source metrics to %s: %s", path, e)


def _describe(offsets: Mapping[TopicPartition, int]) -> str:
    return ", ".join(f"{tp}@{o}" for tp, o in sorted(offsets.items()))


class OffsetCommitter:
    """Commits the newest completed offsets to ``group_id`` according to ``mode``.

    Args:
        client_factory: builds the Kafka client on first use (so a disabled committer never connects).
        group_id: the consumer group.
        mode: ``on_checkpoint`` commits every completed batch; ``periodic`` at most every ``interval_ms``
            (the newest completed batch wins); ``disabled`` never commits.
        interval_ms: the periodic interval, and the back-off before re-sending offsets whose commit failed.
        metrics_file: where metrics go on every change (None: not written).
        clock: monotonic seconds; injectable for tests.
        wall_ms: wall-clock milliseconds, for the commits' marks; injectable for tests.
        topics_exist: which of the topics given exist now (the source's metadata): a partition whose group
            offset is gone is a reset only if its topic still exists.
        driver: the query's driver, named in the commits' marks (default: ``driver_of`` this process).
    """

    def __init__(
        self,
        client_factory: Callable[[], CommitClient],
        group_id: str,
        *,
        mode: CommitMode,
        interval_ms: int = 5_000,
        metrics_file: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        topics_exist: Callable[[Iterable[str]], Iterable[str]] | None = None,
        driver: QueryDriver | None = None,
    ) -> None:
        """Set up the state; the client is built only when the first commit is due."""
        self._factory = client_factory
        self._client: CommitClient | None = None
        self._mode = mode
        self._interval_s = interval_ms / 1000
        self._metrics_file = metrics_file
        self._clock = clock
        self.metrics = SourceMetrics(group_id=group_id, mode=mode)
        earlier = read_source_metrics(group_id, metrics_file) if metrics_file is not None else None
        if earlier is not None:  # totals over every run, as the sink's counters are (``sink_metrics``)
            self.metrics.commits_succeeded = earlier.commits_succeeded
            self.metrics.commits_failed = earlier.commits_failed
        self._target: dict[TopicPartition, int] = {}
        self._confirmed: dict[TopicPartition, int] | None = None
        self._ids: dict[str, str] = {}
        """Each topic's id now: from the source's discovery (``topics_now``), else its newest batch's."""
        self._discovered: set[str] = set()
        """Topics whose id in ``_ids`` came from a discovery (a batch with another id is older then)."""
        self._present: set[str] | None = None
        """The topics the last discovery found (None before one)."""
        self._cluster: str | None = None
        self._moved: dict[TopicPartition, int] = {}
        """Partitions the source moved, and where to: until a batch ends there, offsets of theirs are
        from before the move (``partitions_moved``)."""
        self._generation: dict[TopicPartition, int] = {}
        self._topics_exist = topics_exist
        self._pending: deque[Mapping[TopicPartition, int]] = deque()
        self._last_sent_at: float | None = None
        self._last_failed_at: float | None = None
        self._wall_ms = wall_ms
        self._run = uuid.uuid4().hex[:12]
        self._host = socket.gethostname()
        self._driver = driver if driver is not None else driver_of()
        self.stopped_by: str | None = None
        """Why this run stopped committing (another client moved the group's offsets); None while it does."""

    @property
    def enabled(self) -> bool:
        """Whether this committer commits (``mode`` is not ``disabled``, and no reset stopped it)."""
        return self._mode != "disabled" and self.stopped_by is None

    @property
    def pending(self) -> int:
        """Commits sent and not answered yet."""
        return len(self._pending)

    def topics_now(
        self, topics: Iterable[str], topic_ids: Mapping[str, str], cluster_id: str | None = None
    ) -> None:
        """The topics the source discovered just now (every discovery), their ids and the cluster's.

        A topic whose id changed was recreated, and one no longer found was deleted (or left the
        subscription): what this run knew of its offsets (completed, confirmed) belongs to a log that is
        gone and is forgotten, so a new log's offsets go to the group even below them, and Kafka deleting
        a deleted topic's offsets from the group is not taken for a reset.
        """
        self._present = set(topics)
        self._cluster = cluster_id or self._cluster
        for topic in {tp.topic for tp in self._target} - self._present:
            self._forget(topic, "is no longer found")
        for topic, topic_id in topic_ids.items():
            self._set_id(topic, topic_id)
            self._discovered.add(topic)

    def partitions_moved(self, moved: Mapping[TopicPartition, int]) -> None:
        """The source moved partitions to the positions ``moved`` gives (``data_loss``: a recreated topic, a
        log that ends below the query's position): their next offsets go to the group even below what it
        holds.

        Until the batch that starts them there completes (its end is the position itself), offsets of
        theirs are from before the move (Spark's ``commit`` of the batch before, a commit in flight) and
        are not taken: each partition's generation moves on, and answers to commits sent before it are
        ignored.
        """
        for tp, position in moved.items():
            self._target.pop(tp, None)
            if self._confirmed is not None:
                self._confirmed.pop(tp, None)
            self._moved[tp] = position
            self._generation[tp] = self._generation.get(tp, 0) + 1

    def _set_id(self, topic: str, topic_id: str) -> None:
        before = self._ids.get(topic)
        self._ids[topic] = topic_id
        if before is not None and before != topic_id:
            self._forget(topic, f"was recreated (id {topic_id}, before {before})")

    def _forget(self, topic: str, why: str) -> None:
        log.info(
            "topic %s %s: group %s's offsets of its old log are forgotten", topic, why, self.metrics.group_id
        )
        self._target = {tp: o for tp, o in self._target.items() if tp.topic != topic}
        if self._confirmed is not None:
            self._confirmed = {tp: o for tp, o in self._confirmed.items() if tp.topic != topic}

    def completed(
        self, offsets: Mapping[TopicPartition, int], topic_ids: Mapping[str, str] | None = None
    ) -> None:
        """The batch ending at ``offsets``, read from the topics whose ids are ``topic_ids``, is in Spark's
        commit log: its offsets may go to the group.

        Not those of a topic whose id now is another (the batch was read from a log since deleted: a query
        restarted on its checkpoint after the topic was recreated).
        """
        if not self.enabled:
            return
        ids = topic_ids or {}
        stale: set[str] = set()
        for topic in {tp.topic for tp in offsets}:
            batch_id = ids.get(topic)
            if self._present is not None and topic not in self._present:
                stale.add(topic)  # deleted since the batch was read
            elif batch_id is None:
                if topic in self._discovered:  # an end without the ids the topic has now: from what log?
                    stale.add(topic)
            elif batch_id == self._ids.get(topic):
                continue
            elif topic in self._discovered:
                stale.add(topic)
            else:  # batches complete in order: a new id in a later batch means a recreated topic
                self._set_id(topic, batch_id)
        for tp, offset in offsets.items():
            if tp in self._moved:
                if offset != self._moved[tp]:
                    continue  # from before the move
                del self._moved[tp]
            if tp.topic not in stale and offset >= 0 and offset > self._target.get(tp, -1):
                self._target[tp] = offset
        self.tick()

    def tick(self) -> None:
        """Serve callbacks and send what is due; cheap enough for Spark's ~80 offset polls a second."""
        if not self.enabled:
            return
        if self._client is not None:
            self._client.poll(0)
        self._send_if_due(force=False)

    def close(self, timeout_s: float = 30.0) -> None:
        """Send the newest completed offsets regardless of the interval, wait for answers, release.

        Spark does not kill the source runner while it stops (it sends SIGTERM and closes the socket), so
        waiting is safe; 10 s proved too short on a loaded machine (the commit landed, its answer was
        never counted).
        """
        if self._mode == "disabled":
            return
        with contextlib.suppress(Exception):
            deadline = self._clock() + timeout_s
            if self.enabled:
                self._send_if_due(force=True)
                self._wait_for_answers(deadline)
                self._mark_stopped()
            self._wait_for_answers(deadline)
        if self._pending:
            log.warning("source stopped with %d offset commit(s) unanswered", len(self._pending))
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None

    def _wait_for_answers(self, deadline: float) -> None:
        while self._pending and self._client is not None and self._clock() < deadline:
            self._client.poll(0.1)

    def _mark_stopped(self) -> None:
        """Commit the group's offsets as this run left them once more, marked stopped (``CommitMark``).

        Tells ``sparkafka offsets reset`` that this query no longer commits, so a reset need not wait.
        Sent only when every commit was answered and the group still holds what this run confirmed (read
        first: a reset made while the run idled stands), so it moves no offset.
        """
        if self._client is None or self._confirmed is None or self._pending or self.stopped_by:
            return
        offsets = {tp: self._confirmed[tp] for tp in self._target if tp in self._confirmed}
        if not offsets or self._moved_by_another(self._clock()):  # a reset made while this run idled stands
            return
        mark = self._mark(stopped=True)
        self._pending.append(offsets)

        def done(sent: Mapping[TopicPartition, int], error: str | None) -> None:
            with contextlib.suppress(ValueError):
                self._pending.remove(sent)
            if error is not None:
                log.warning(
                    "could not mark group %s as no longer committed to: %s", self.metrics.group_id, error
                )

        self._client.commit_async(offsets, self._marks(offsets, mark), done)

    def _mark(self, stopped: bool = False) -> CommitMark:
        """This run's mark for a commit sent now (``stopped``: its last)."""
        return CommitMark(self._run, self._host, os.getpid(), self._wall_ms(), stopped, driver=self._driver)

    def _marks(self, offsets: Mapping[TopicPartition, int], mark: CommitMark) -> dict[TopicPartition, str]:
        """Each partition's commit metadata: ``mark``, naming its topic's id."""
        by_topic = {
            topic: replace(mark, topic_id=self._ids.get(topic), cluster=self._cluster).to_metadata()
            for topic in {tp.topic for tp in offsets}
        }
        return {tp: by_topic[tp.topic] for tp in offsets}

    def _due(self) -> dict[TopicPartition, int]:
        assert self._confirmed is not None
        return {tp: o for tp, o in self._target.items() if o > self._confirmed.get(tp, -1)}

    def _send_if_due(self, force: bool) -> None:
        now = self._clock()
        if not self._target or (not force and self._holding_back(now)):
            return
        if self._client is None:
            self._client = self._factory()
        if self._confirmed is None and not self._learn_group_offsets(now):
            return
        due = self._due()
        if not due or len(self._pending) >= MAX_PENDING_COMMITS:
            return
        if self._pending and dict(self._pending[-1]) == due:
            return
        idle = self._last_sent_at is not None and now - self._last_sent_at >= RECHECK_AFTER_S
        if idle and not self._pending and self._moved_by_another(now):
            return
        self._pending.append(due)
        self._last_sent_at = now
        mark = self._mark()
        sent = ({topic: self._ids.get(topic) for topic in {tp.topic for tp in due}}, dict(self._generation))
        self._client.commit_async(
            due, self._marks(due, mark), lambda offsets, error: self._on_done(offsets, error, *sent)
        )

    def _holding_back(self, now: float) -> bool:
        """Whether the periodic interval, or the back-off after a failure, says to wait."""
        sent = self._last_sent_at
        if self._mode == "periodic" and sent is not None and now - sent < self._interval_s:
            return True
        return self._last_failed_at is not None and now - self._last_failed_at < self._interval_s

    def _moved_by_another(self, now: float) -> bool:
        """Whether the group's offsets differ from those this run left (a reset); if so, stop for good."""
        assert self._confirmed is not None
        current = self._read_group(now)
        if current is None:
            return True
        # A partition this run confirmed that now holds another offset, or none (its offset was deleted).
        moved = {tp: o for tp, o in current.items() if tp in self._confirmed and o != self._confirmed[tp]}
        absent = {tp.topic for tp, o in moved.items() if o is None}
        if absent and self._topics_exist is not None:
            # Kafka deletes a deleted topic's offsets from the group: no reset, whatever discovery knows yet.
            try:
                gone = absent - set(self._topics_exist(absent))
            except Exception as e:  # noqa: BLE001 - cannot tell now: a failed attempt, asked again later
                self._record_failure(f"looking up topics {sorted(absent)} failed: {e}", now)
                return True
            for topic in gone:
                self._forget(topic, "was deleted")
            moved = {tp: o for tp, o in moved.items() if tp.topic not in gone}
        if not moved:
            return False
        self.stopped_by = (
            f"the offsets of group {self.metrics.group_id} were changed by another client (a reset?): "
            + ", ".join(
                f"{tp} {self._confirmed[tp]} -> {'deleted' if o is None else o}"
                for tp, o in sorted(moved.items())
            )
            + "; this query stops committing to the group until it is restarted, so the change stands"
        )
        log.error("%s", self.stopped_by)
        self._record_failure(self.stopped_by, now)
        return True

    def _read_group(self, now: float) -> dict[TopicPartition, int | None] | None:
        """The group's committed offsets for the target's partitions, as offsets of the topics' logs now
        (``offset_of_topic``); None (a counted failure) on error."""
        assert self._client is not None
        try:
            commits = self._client.committed(self._target)
        except Exception as e:  # noqa: BLE001 - any client error is a failed attempt: counted, retried later
            self._record_failure(f"reading the group's committed offsets failed: {e}", now)
            return None
        return {tp: offset_of_topic(c, self._ids.get(tp.topic), self._cluster) for tp, c in commits.items()}

    def _learn_group_offsets(self, now: float) -> bool:
        """Read the group's offsets once, so a restart from an older checkpoint never moves them back."""
        current = self._read_group(now)
        if current is None:
            return False
        self._confirmed = {tp: o for tp, o in current.items() if o is not None}
        behind = {tp: o for tp, o in self._target.items() if o < self._confirmed.get(tp, -1)}
        if behind:
            log.info(
                "group %s is already ahead of this source for %s; not committing those partitions backwards",
                self.metrics.group_id,
                ", ".join(f"{tp} ({self._confirmed[tp]} > {o})" for tp, o in sorted(behind.items())),
            )
        return True

    def _on_done(
        self,
        offsets: Mapping[TopicPartition, int],
        error: str | None,
        sent_ids: Mapping[str, str | None],
        generations: Mapping[TopicPartition, int],
    ) -> None:
        with contextlib.suppress(ValueError):
            self._pending.remove(offsets)
        if error is not None:
            self._record_failure(f"committing {_describe(offsets)} failed: {error}", self._clock())
            return
        assert self._confirmed is not None
        for tp, o in offsets.items():
            same_log = sent_ids.get(tp.topic) == self._ids.get(tp.topic)  # not a recreated topic's old log
            if same_log and generations.get(tp, 0) == self._generation.get(tp, 0):  # nor a moved partition's
                self._confirmed[tp] = max(o, self._confirmed.get(tp, -1))
        self._last_failed_at = None
        m = self.metrics
        m.commits_succeeded += 1
        m.committed.update(offsets)
        log.info(
            "committed offsets to group %s: %s (succeeded %d, failed %d)",
            m.group_id,
            _describe(offsets),
            m.commits_succeeded,
            m.commits_failed,
        )
        self.publish()

    def _record_failure(self, why: str, now: float) -> None:
        m = self.metrics
        m.commits_failed += 1
        m.last_error = why
        self._last_failed_at = now
        log.warning(
            "offset commit to group %s: %s (the query goes on; succeeded %d, failed %d)",
            m.group_id,
            why,
            m.commits_succeeded,
            m.commits_failed,
        )
        self.publish()

    def publish(self) -> None:
        """Write ``metrics`` to the metrics file, if there is one (on every change, and when the source's
        event-time status in them changes)."""
        if self._metrics_file is not None:
            write_source_metrics(self._metrics_file, self.metrics)


class KafkaCommitClient:
    """``CommitClient`` over a confluent-kafka consumer that never joins the group (assign-mode commits)."""

    def __init__(self, conf: Mapping[str, str], group_id: str, timeout_s: float = 10.0) -> None:
        """Create the consumer now; ``timeout_s`` bounds each ``committed`` lookup, retries included."""
        settings: dict[str, Any] = dict(conf)
        settings.update(
            {
                "group.id": group_id,
                "enable.auto.commit": "false",
                "enable.auto.offset.store": "false",
                "on_commit": self._on_commit,
            }
        )
        self._timeout_s = timeout_s
        self._callbacks: deque[tuple[Mapping[TopicPartition, int], Done]] = deque()
        self._conf = conf
        self._consumer = new_consumer(settings)

    def commit_async(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str], done: Done
    ) -> None:
        """Send an offset commit; ``done`` is called from ``poll``, or at once if sending fails."""
        from confluent_kafka import TopicPartition as CTopicPartition

        parts = [
            CTopicPartition(tp.topic, tp.partition, o, metadata=metadata[tp])
            for tp, o in sorted(offsets.items())
        ]
        self._callbacks.append((offsets, done))
        try:
            self._consumer.commit(offsets=parts, asynchronous=True)
        except Exception as e:  # noqa: BLE001 - any client error fails this commit attempt: counted, retried
            self._callbacks.pop()
            done(offsets, str(e))

    def _on_commit(self, error: Any, partitions: list[Any]) -> None:
        # librdkafka answers commits in the order they were sent (one coordinator, one connection).
        if not self._callbacks:
            return
        offsets, done = self._callbacks.popleft()
        reasons = [str(error)] if error is not None else []
        reasons += [f"{p.topic}-{p.partition}: {p.error}" for p in partitions if p.error is not None]
        done(offsets, "; ".join(reasons) or None)

    def committed(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, GroupOffset | None]:
        """The group's commits now (None where it has none), retried within ``timeout_s``."""
        from confluent_kafka import TopicPartition as CTopicPartition

        wanted = [CTopicPartition(tp.topic, tp.partition) for tp in sorted(tps)]

        def attempt(left: float) -> Any:
            answer = self._consumer.committed(wanted, timeout=left)
            # A partition answered with an error is a failed read (counted, asked again), never "nothing
            # committed": that would read as another client deleting the offset and stop this run's commits.
            raise_partition_error(answer)
            return answer

        result = with_retries("reading the group's committed offsets", self._conf, attempt, self._timeout_s)
        return group_commits(result)

    def poll(self, timeout_s: float) -> None:
        """Serve commit callbacks, waiting at most ``timeout_s`` for one."""
        # No assignment, so poll only serves callbacks (on_commit) and never returns records.
        self._consumer.poll(timeout_s)

    def close(self) -> None:
        """Close the consumer."""
        self._consumer.close()
