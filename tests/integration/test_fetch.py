"""Executor-side reading, without Spark: exact ranges at volume, gaps from transaction markers."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from sparkafka.source.fetch import OffsetRange, read_ranges
from sparkafka.structs import TopicPartition
from tests.support.kafka import Kafka


def test_reads_exact_ranges_at_volume(kafka_conf: dict[str, str], new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=2)
    producer = Producer({**kafka_conf, "linger.ms": 20})
    for i in range(60_000):
        producer.produce(topic, str(i).encode(), partition=i % 2)
    producer.flush(60)
    ranges = [
        OffsetRange(TopicPartition(topic, 0), 0, 30_000),  # to the log end: data and EOF arrive together
        OffsetRange(TopicPartition(topic, 1), 1_234, 25_000),
    ]
    batches = list(read_ranges({**kafka_conf, "isolation.level": "read_committed"}, ranges))
    seen = {
        (p, o)
        for b in batches
        for p, o in zip(b["partition"].to_pylist(), b["offset"].to_pylist(), strict=True)
    }
    rows = sum(b.num_rows for b in batches)
    assert rows == len(seen) == 30_000 + (25_000 - 1_234)
    assert min(o for p, o in seen if p == 1) == 1_234
    assert max(o for p, o in seen if p == 1) == 24_999


def test_stops_at_end_when_last_offsets_are_transaction_markers(
    kafka_conf: dict[str, str], new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)
    txn = Producer({**kafka_conf, "transactional.id": f"fetch-{topic}"})
    txn.init_transactions(30)
    for i in range(3):
        txn.begin_transaction()
        txn.produce(topic, f"t{i}".encode(), partition=0)
        txn.commit_transaction(30)
    # Log: t0 @0, COMMIT @1, t1 @2, COMMIT @3, t2 @4, COMMIT @5; the range ends after the last marker.
    batches = list(
        read_ranges(
            {**kafka_conf, "isolation.level": "read_committed"},
            [OffsetRange(TopicPartition(topic, 0), 0, 6)],
            poll_timeout_ms=20_000,
        )
    )
    assert [v for b in batches for v in b["value"].to_pylist()] == [b"t0", b"t1", b"t2"]


def test_reads_the_end_of_a_partition_the_broker_cannot_list_within_a_short_fetch_wait(
    tansu_conf: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """tansu returns nothing to a fetch whose max wait ends before it has listed the partition's batches
    (``broker_gaps``); with a 1 ms first wait, 6,000 one-record batches are enough to show it (measured).
    The reader and the end-offset lookup raise the wait and read on, from where they got to."""
    from sparkafka.client import broker_gaps

    monkeypatch.setattr(broker_gaps, "FETCH_WAITS_MS", (1, 100, 1000))
    monkeypatch.setattr(broker_gaps, "_wait_level", {})
    kafka_conf = tansu_conf  # the gap is tansu's; on Apache Kafka broker_gaps is not used
    topic = Kafka(kafka_conf).topic(partitions=1)
    producer = Producer({**kafka_conf, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(6_000):
        producer.produce(topic, str(i).encode(), partition=0)
        if i % 500 == 499:
            producer.flush(30)
    assert producer.flush(30) == 0
    tp = TopicPartition(topic, 0)
    conf = {**kafka_conf, "isolation.level": "read_committed"}
    batches = list(read_ranges(conf, [OffsetRange(tp, 5_990, 6_000)]))
    assert [int(v) for b in batches for v in b["value"].to_pylist()] == list(range(5_990, 6_000))
    assert broker_gaps.fetched_end_offsets(conf, {tp: 5_990}, read_committed=True) == {tp: 6_000}
    assert not broker_gaps.latest_is_exact(kafka_conf)
    assert broker_gaps.fetch_wait_ms(kafka_conf) != "1"  # the short wait did stall, and was raised
