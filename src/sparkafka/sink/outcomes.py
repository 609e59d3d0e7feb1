"""What became of a transaction that the coordinator can no longer speak for: decided from the data.

Runs on the driver (recovery when a writer is made, a batch's commit, ``sparkafka txn resolve``), and only
when an EndTxn answer is not sure of the outcome (``txn_control.classify``):

- PRODUCER_FENCED / INVALID_PRODUCER_EPOCH: the id's epoch was bumped since the transaction was flushed,
  by the broker's timeout abort (then it was aborted), or by an InitProducerId after it had ended (then it
  may have been committed): a zombie task attempt, a second writer on the prefix, librdkafka finishing an
  abort in the background. The answer cannot tell which.
- INVALID_PRODUCER_ID_MAPPING: the coordinator forgot the id (``transactional.id.expiration.ms``, 7 days by
  default, passed with the batch pending).

The proof is in the log. Every transaction ends with a COMMIT or ABORT marker carrying its producer id
and epoch in each partition it wrote to, and each task's transaction also writes one witness record (key
``#witness/<query>/<task>``, ``intents.witness_key``) into the prefix's intent log: a compacted topic with
no time retention, in which that record stays the newest of its key until the batch is settled, so its
marker is never cleaned away, whatever the output's retention. A handle's probe names that partition and
an offset its marker cannot precede: the partition's end as the driver saw it just before writing the
commit intent, since no transaction is committed before its intent. A producer's transactions end in
order, so the first marker of the producer id at or after that offset is this transaction's, or a later
one's:

============================================  ==========================================================
first marker of the producer id from there    outcome
============================================  ==========================================================
COMMIT with the transaction's epoch           committed
any other marker                              aborted (a later transaction's marker: this one ended
                                              before the intent, so it was never committed)
none up to the partition's end                aborted: an epoch bump or an expiry comes only after the
                                              coordinator has written all of a transaction's markers,
                                              with acks=all, so a COMMIT would be there
COMMIT with the epoch above its own           unknown: impossible under transaction version 1 (a fence
                                              aborts at epoch + 1); version 2 bumps the epoch at the end
none, and the evidence is gone                unknown: the log no longer holds the offset (records of
                                              the intent topic deleted by hand)
============================================  ==========================================================

An unknown outcome leaves the batch pending and stops every writer on the prefix with one sentence naming
``sparkafka txn resolve`` (the operator says whether the rows are in the output); a search that could not
be made now (a broker down) leaves it pending for the next writer to try again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from sparkafka.client.metadata import AdminMetadata
from sparkafka.client.raw_log import LogRangeGoneError, Marker, find_marker
from sparkafka.errors import AuthorizationError, BrokerError
from sparkafka.sink.txn_control import TxnHandle, TxnOutcome
from sparkafka.structs import TopicPartition

__all__ = ["DataEvidence", "Finding", "KafkaEvidence", "judge"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Finding:
    """What the data says of a transaction: its outcome (None: unknown) and the evidence, in words."""

    outcome: TxnOutcome | None
    why: str
    retry: bool = False
    """Unknown only because the data could not be read now (a broker down): asking later may tell."""


def judge(handle: TxnHandle, marker: Marker | None, gone: str | None = None) -> Finding:
    """The decision table of the module docstring, for ``handle``'s probe; pure.

    Args:
        handle: the transaction; its probe names the partition and offset that were searched.
        marker: the first marker of its producer id found at or after the probe's offset, or None.
        gone: why the search could not be made (the log no longer holds the offset), or None.
    """
    probe = handle.probe
    assert probe is not None
    where = f"{probe.topic}-{probe.partition}"
    if marker is not None:
        if marker.commit and marker.epoch == handle.epoch:
            return Finding("committed", f"{where} holds its COMMIT marker at offset {marker.offset}")
        if marker.commit and marker.epoch == handle.epoch + 1:
            # Impossible under transaction version 1 (a fence takes epoch + 1 and aborts): the broker ran
            # the transaction as version 2, which bumps the epoch at every end. This rule cannot read that.
            return Finding(
                None,
                f"the first marker of producer id {handle.producer_id} in {where} is a COMMIT of epoch "
                f"{marker.epoch}, one above its own (transaction version 2?)",
            )
        kind = "a COMMIT" if marker.commit else "an ABORT"
        return Finding(
            "aborted",
            f"the first marker of producer id {handle.producer_id} in {where} from offset {probe.offset} "
            f"is {kind} of epoch {marker.epoch} at offset {marker.offset}",
        )
    if gone is not None:
        return Finding(None, gone)
    return Finding(
        "aborted", f"{where} has no marker of producer id {handle.producer_id} from offset {probe.offset}"
    )


class DataEvidence(Protocol):
    """Where a batch's transactions leave their markers, and what those markers say."""

    def mark_positions(self, handles: Sequence[TxnHandle]) -> tuple[TxnHandle, ...]:
        """``handles`` with each probe's offset set to its partition's end now (before the intent)."""
        ...

    def find(self, handle: TxnHandle, intent_at_ms: int, now_ms: int) -> Finding:
        """What the markers say of ``handle`` (written in an intent at ``intent_at_ms``)."""
        ...


class KafkaEvidence:
    """``DataEvidence`` on the broker: ListOffsets for the positions, raw fetches for the markers."""

    def __init__(self, conf: Mapping[str, str], timeout_s: float) -> None:
        """Keep the settings; nothing is asked of the broker until a method is called."""
        self._conf = {**conf, "isolation.level": "read_uncommitted"}
        self._timeout_s = timeout_s

    def mark_positions(self, handles: Sequence[TxnHandle]) -> tuple[TxnHandle, ...]:
        """One ListOffsets(latest, read_uncommitted) for every probe partition of the batch."""
        probes = {TopicPartition(h.probe.topic, h.probe.partition) for h in handles if h.probe is not None}
        if not probes:
            return tuple(handles)
        ends = AdminMetadata(self._conf, self._timeout_s).latest(probes)
        return tuple(
            h.with_probe_offset(ends[TopicPartition(h.probe.topic, h.probe.partition)]) if h.probe else h
            for h in handles
        )

    def find(self, handle: TxnHandle, intent_at_ms: int, now_ms: int) -> Finding:
        """Search the probe partition for the producer id's first marker (see ``judge``).

        The search reads at least up to the partition's end as ListOffsets answers it now, after the
        EndTxn answer: a leader with a stale high watermark cannot end it before the marker.
        """
        probe = handle.probe
        assert probe is not None
        tp = TopicPartition(probe.topic, probe.partition)
        try:
            end = AdminMetadata(self._conf, self._timeout_s).latest([tp])[tp]
            marker = find_marker(self._conf, tp, handle.producer_id, (probe.offset, end), self._timeout_s)
        except LogRangeGoneError as e:
            return judge(handle, None, gone=f"{e}, where its marker would be")
        except AuthorizationError:
            raise  # asking again cannot mend it: the sentence names the ACL, and the batch stays pending
        except BrokerError as e:
            return Finding(None, f"its marker could not be looked for in {tp}: {e}", retry=True)
        finding = judge(handle, marker)
        log.warning(
            "transaction %s (producer id %d, epoch %d): %s (%s)",
            handle.transactional_id,
            handle.producer_id,
            handle.epoch,
            finding.outcome or "unknown",
            finding.why,
        )
        return finding
