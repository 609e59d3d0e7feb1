"""The committed-view oracle: exactly what a correct ``read_committed`` consumer would see in a topic.

It reads the raw record batches of each partition (``sparkafka.client.raw_log``: kafka-python fetches
with ``read_uncommitted``, so control batches and aborted data are visible), then applies the COMMIT/ABORT
markers per producer id itself. It never relies on the broker's aborted-transactions list, which some
brokers (tansu) never fill, so it judges exactly-once tests correctly even on such brokers.

Rules applied (Kafka's transactional read semantics):
  * Records of non-transactional batches are visible.
  * Records of a transactional batch are visible once a COMMIT control record of the same producer id
    follows them, and never once an ABORT follows.
  * Nothing at or after the last stable offset (the first offset of a transaction still open) is visible.
  * Control records themselves are never visible.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from sparkafka.client.raw_log import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    RawBatch,
    RawRecord,
    parse_batches,
    read_raw_batches,
)

__all__ = [
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "RawBatch",
    "RawRecord",
    "committed_records",
    "committed_view",
    "has_open_transaction",
    "parse_batches",
    "read_raw_batches",
]


def committed_records(batches: Iterable[RawBatch]) -> list[RawRecord]:
    """The records of one partition that a read_committed consumer sees, in offset order.

    Args:
        batches: the partition's batches in log order (each once).
    """
    visible: list[RawRecord] = []
    pending: dict[int, list[RawRecord]] = {}
    open_since: dict[int, int] = {}
    for batch in batches:
        if batch.is_control:
            records = pending.pop(batch.producer_id, [])
            open_since.pop(batch.producer_id, None)
            if batch.control_type == CONTROL_COMMIT:
                visible.extend(records)
        elif batch.is_transactional:
            pending.setdefault(batch.producer_id, []).extend(batch.records)
            open_since.setdefault(batch.producer_id, batch.base_offset)
        else:
            visible.extend(batch.records)
    last_stable = min(open_since.values(), default=None)
    if last_stable is not None:
        visible = [r for r in visible if r.offset < last_stable]
    visible.sort(key=lambda r: r.offset)
    return visible


def has_open_transaction(batches: Iterable[RawBatch]) -> bool:
    """Whether a transactional batch in one partition's ``batches`` has no marker after it yet."""
    open_ids: set[int] = set()
    for batch in batches:
        if batch.is_control:
            open_ids.discard(batch.producer_id)
        elif batch.is_transactional:
            open_ids.add(batch.producer_id)
    return bool(open_ids)


def committed_view(
    conf: Mapping[str, str], topic: str, timeout_s: float = 30.0, settle_s: float = 0.0
) -> dict[int, list[RawRecord]]:
    """Per partition, the records of ``topic`` that a correct read_committed consumer sees.

    Kafka answers EndTxn once a transaction's outcome is decided and writes its markers into the
    partitions after that, so right after a commit its records can still look open. With ``settle_s``,
    partitions with a transaction still open are read again until none is, for up to ``settle_s``; a
    transaction left open past that stays open in the view.
    """
    batches = read_raw_batches(conf, topic, None, timeout_s)
    deadline = time.monotonic() + settle_s
    while (
        waiting := [p for p, b in batches.items() if has_open_transaction(b)]
    ) and time.monotonic() < deadline:
        time.sleep(0.1)
        batches.update(read_raw_batches(conf, topic, waiting, timeout_s))
    return {p: committed_records(b) for p, b in batches.items()}
