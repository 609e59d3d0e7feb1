"""What event-time alignment decided at the last plan, as the source's metrics file, Prometheus, ``sparkafka
lag`` and ``sparkafka run`` show it (``AlignmentStatus``), and the words and times they print.

Written by the source runner on the driver side (``alignment.EventTimeAligner``, through the metrics file)
and read by the operator tools in other processes; nothing here asks Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from sparkafka.structs import TopicPartition

__all__ = [
    "ALIGNMENT_STATES",
    "AlignmentState",
    "AlignmentStatus",
    "PartitionEventTime",
    "describe_duration",
    "describe_time",
]

AlignmentState = Literal["active", "held", "idle", "finished", "empty"]
"""``active``: counts toward the slowest and reads what the other limits allow; ``held``: counts, is not the
slowest, and alignment ends its range before its latest offset (it waits for the slowest); ``idle``,
``finished``, ``empty``: does not count (see ``source.alignment``'s docstring)."""
ALIGNMENT_STATES: tuple[AlignmentState, ...] = get_args(AlignmentState)


@dataclass(frozen=True)
class PartitionEventTime:
    """One partition as the source's metrics show it."""

    event_time_ms: int | None
    """Its event time (see ``source.alignment``'s docstring); None for a partition with no record."""
    state: AlignmentState


@dataclass(frozen=True)
class AlignmentStatus:
    """The last plan's alignment, per partition: what the source's metrics file carries (``eventTime``)."""

    bound_ms: int | None
    """The batch reads no record at or after this timestamp; None: nothing counts, nothing is bound."""
    slowest: TopicPartition | None
    """The counted partition with the lowest event time where the batch starts."""
    partitions: Mapping[TopicPartition, PartitionEventTime]
    drift_ms: int = 0
    idle_timeout_ms: int | None = None
    slowest_quiet: bool = False
    """The slowest partition has nothing to read: it holds the others until it gets records or is idle."""
    slowest_pending: bool = False
    """The slowest partition has nothing to read because a transaction is open past its last stable offset:
    its event time is the transaction's first record's (``PartitionTimes.pending``)."""

    @property
    def held(self) -> list[TopicPartition]:
        """The partitions alignment stopped before their latest offset, in order."""
        return sorted(tp for tp, p in self.partitions.items() if p.state == "held")

    @property
    def hold(self) -> tuple[object, ...]:
        """What alignment holds back, behind what: (partitions held, the slowest, whether it is quiet, whether
        a transaction is open there), or ``()`` when it holds nothing. Log lines and ``sparkafka run``'s
        lines are written when it changes."""
        return (self.held, self.slowest, self.slowest_quiet, self.slowest_pending) if self.held else ()

    @property
    def slowest_ms(self) -> int | None:
        """The slowest partition's event time (the lowest among the counted partitions, where they are)."""
        return None if self.slowest is None else self.partitions[self.slowest].event_time_ms

    def to_json(self) -> dict[str, Any]:
        """The status as the metrics file holds it: camelCase keys, partitions per topic and partition."""
        parts: dict[str, dict[str, dict[str, Any]]] = {}
        for tp, p in sorted(self.partitions.items()):
            parts.setdefault(tp.topic, {})[str(tp.partition)] = {
                "eventTimeMs": p.event_time_ms,
                "state": p.state,
            }
        return {
            "driftMs": self.drift_ms,
            "idleTimeoutMs": self.idle_timeout_ms,
            "boundMs": self.bound_ms,
            "slowest": None if self.slowest is None else [self.slowest.topic, self.slowest.partition],
            "slowestQuiet": self.slowest_quiet,
            "slowestPending": self.slowest_pending,
            "partitions": parts,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AlignmentStatus:
        """The inverse of ``to_json``."""
        slowest = data.get("slowest")
        return cls(
            bound_ms=data.get("boundMs"),
            slowest=None if slowest is None else TopicPartition(str(slowest[0]), int(slowest[1])),
            partitions={
                TopicPartition(t, int(p)): PartitionEventTime(v.get("eventTimeMs"), v["state"])
                for t, parts in data.get("partitions", {}).items()
                for p, v in parts.items()
            },
            drift_ms=int(data.get("driftMs", 0)),
            idle_timeout_ms=data.get("idleTimeoutMs"),
            slowest_quiet=bool(data.get("slowestQuiet", False)),
            slowest_pending=bool(data.get("slowestPending", False)),
        )

    def describe_hold(self) -> str | None:
        """One sentence on what alignment holds back and behind which partition; None when it holds nothing.

        For the source's log and ``sparkafka run``'s progress lines (driver side).
        """
        held = self.held
        if not held or self.slowest is None:
            return None
        names = ", ".join(map(str, held[:8])) + (f" and {len(held) - 8} more" if len(held) > 8 else "")
        text = (
            f"event-time alignment holds {names} at {describe_time(self.bound_ms)} (slowest {self.slowest} "
            f"at {describe_time(self.slowest_ms)}, maxEventTimeDrift {describe_duration(self.drift_ms)})"
        )
        if self.slowest_pending:
            text += f"; {self.slowest} waits for a transaction left open (read_committed)"
            if self.idle_timeout_ms is None:
                text += (
                    ": set partitionIdleTimeout so that a partition delivering nothing stops holding the "
                    "others back (its records may then be late when the transaction commits)"
                )
            text += (
                "; the broker aborts a transaction after its transaction.timeout.ms, but not a hanging one "
                "(kafka-transactions.sh find-hanging, then abort)"
            )
        elif self.slowest_quiet:
            text += f"; {self.slowest} has no new records"
            if self.idle_timeout_ms is None:
                text += ": set partitionIdleTimeout so that a quiet partition stops holding the others back"
        return text


def describe_duration(ms: int) -> str:
    """``600000`` as ``10m``, ``1500`` as ``1500ms``: the largest unit that divides it."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def describe_time(ms: int | None) -> str:
    """An epoch-ms timestamp as ``2026-11-25 09:00:00.000 UTC`` for logs and progress lines."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
