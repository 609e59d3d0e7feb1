from __future__ import annotations

from sparkafka.ops.committed_view import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    RawBatch,
    RawRecord,
    committed_records,
)


def rec(offset: int, value: str) -> RawRecord:
    return RawRecord(partition=0, offset=offset, key=None, value=value.encode())


def data(base: int, *values: str, pid: int = -1) -> RawBatch:
    return RawBatch(
        base_offset=base,
        producer_id=pid,
        is_transactional=pid >= 0,
        records=tuple(rec(base + i, v) for i, v in enumerate(values)),
    )


def marker(offset: int, pid: int, kind: int) -> RawBatch:
    return RawBatch(base_offset=offset, producer_id=pid, is_transactional=True, control_type=kind)


def values(records: list[RawRecord]) -> list[str]:
    return [r.value.decode() for r in records if r.value is not None]


def test_plain_records_are_visible() -> None:
    assert values(committed_records([data(0, "a", "b"), data(2, "c")])) == ["a", "b", "c"]


def test_committed_and_aborted_transactions_interleaved() -> None:
    batches = [
        data(0, "p1-a", pid=1),
        data(1, "p2-a", pid=2),
        data(2, "plain"),
        data(3, "p1-b", pid=1),
        marker(4, 2, CONTROL_ABORT),
        marker(5, 1, CONTROL_COMMIT),
        data(6, "p2-b", pid=2),
        marker(7, 2, CONTROL_COMMIT),
    ]
    assert values(committed_records(batches)) == ["p1-a", "plain", "p1-b", "p2-b"]


def test_open_transaction_hides_everything_from_its_first_offset() -> None:
    batches = [
        data(0, "before"),
        data(1, "open", pid=7),
        data(2, "after-plain"),
        data(3, "c", pid=8),
        marker(4, 8, CONTROL_COMMIT),
    ]
    # The last stable offset is 1: a read_committed consumer stops there.
    assert values(committed_records(batches)) == ["before"]


def test_same_producer_next_transaction_after_abort() -> None:
    batches = [
        data(0, "x", pid=3),
        marker(1, 3, CONTROL_ABORT),
        data(2, "y", pid=3),
        marker(3, 3, CONTROL_COMMIT),
    ]
    assert values(committed_records(batches)) == ["y"]


def test_marker_without_data_is_harmless() -> None:
    assert values(committed_records([marker(0, 9, CONTROL_COMMIT), data(1, "z")])) == ["z"]


def test_next_offset_uses_last_offset_when_records_were_compacted() -> None:
    batch = RawBatch(base_offset=10, records=(rec(10, "a"),), last_offset=14)
    assert batch.next_offset == 15
    assert RawBatch(base_offset=3, control_type=CONTROL_COMMIT, producer_id=1).next_offset == 4


def test_a_transaction_is_open_until_its_marker() -> None:
    from sparkafka.ops.committed_view import has_open_transaction

    assert not has_open_transaction([data(0, "plain")])
    assert has_open_transaction([data(0, "a", pid=1)])
    assert not has_open_transaction([data(0, "a", pid=1), marker(1, 1, CONTROL_COMMIT)])
    assert has_open_transaction([data(0, "a", pid=1), marker(1, 1, CONTROL_ABORT), data(2, "b", pid=1)])
    assert has_open_transaction([data(0, "a", pid=1), data(1, "b", pid=2), marker(2, 1, CONTROL_COMMIT)])
