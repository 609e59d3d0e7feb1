"""Executor-side reading, without Spark: exact ranges at volume, gaps from transaction markers, every
field of a record, data loss. Every test runs with both fetchers: sparkafka's native
extension and the pure-Python one (confluent-kafka)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient

from sparkafka.errors import DataLossError
from sparkafka.source import native_fetch
from sparkafka.source.fetch import OffsetRange, read_ranges
from sparkafka.structs import TopicPartition
from tests.support.kafka import Kafka


@pytest.fixture(params=["native", "python"])
def fetcher(request: pytest.FixtureRequest) -> str:
    """Which fetcher ``read_ranges`` uses (option ``fetcher``): both run every test here."""
    return str(request.param)


def test_reads_exact_ranges_at_volume(
    kafka_conf: dict[str, str], new_topic: Callable[..., str], fetcher: Any
) -> None:
    topic = new_topic(partitions=2)
    producer = Producer({**kafka_conf, "linger.ms": 20})
    for i in range(60_000):
        producer.produce(topic, str(i).encode(), partition=i % 2)
    producer.flush(60)
    ranges = [
        OffsetRange(TopicPartition(topic, 0), 0, 30_000),  # to the log end: data and EOF arrive together
        OffsetRange(TopicPartition(topic, 1), 1_234, 25_000),
    ]
    batches = list(read_ranges({**kafka_conf, "isolation.level": "read_committed"}, ranges, fetcher=fetcher))
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
    kafka_conf: dict[str, str], new_topic: Callable[..., str], fetcher: Any
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
            fetcher=fetcher,
        )
    )
    assert [v for b in batches for v in b["value"].to_pylist()] == [b"t0", b"t1", b"t2"]


def test_reads_the_end_of_a_partition_the_broker_cannot_list_within_a_short_fetch_wait(
    tansu_conf: dict[str, str], monkeypatch: pytest.MonkeyPatch, fetcher: Any
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
    batches = list(read_ranges(conf, [OffsetRange(tp, 5_990, 6_000)], fetcher=fetcher))
    assert [int(v) for b in batches for v in b["value"].to_pylist()] == list(range(5_990, 6_000))
    assert broker_gaps.fetched_end_offsets(conf, {tp: 5_990}, read_committed=True) == {tp: 6_000}
    assert not broker_gaps.latest_is_exact(kafka_conf)
    assert broker_gaps.fetch_wait_ms(kafka_conf) != "1"  # the short wait did stall, and was raised


def _varied(conf: dict[str, str], topic: str, n: int) -> None:
    """``n`` records in partition 0: keys, null keys, empty keys; values, null and empty values; no headers,
    one, two (one with a null value, one empty), a non-ASCII key; explicit timestamps on some."""
    producer = Producer(conf)
    for i in range(n):
        headers = [None, [("a", b"1")], [("b", None), ("c\u00e9", b"")]][i % 3]
        producer.produce(
            topic,
            key=[None, b"", f"k{i}".encode()][i % 3 if i % 5 else 2],
            value=None if i % 7 == 0 else (b"" if i % 11 == 0 else f"v{i}".encode() * (i % 13)),
            headers=headers,
            partition=0,
            **({"timestamp": 1_700_000_000_000 + i} if i % 2 else {}),
        )
    assert producer.flush(30) == 0


def test_both_fetchers_give_the_same_rows_for_every_field(kafka: Kafka, kafka_conf: dict[str, str]) -> None:
    created, appended = (
        kafka.topic(partitions=1),
        kafka.topic(partitions=1, config={"message.timestamp.type": "LogAppendTime"}),
    )
    for topic in (created, appended):
        _varied(kafka_conf, topic, 500)
    ranges = [
        OffsetRange(TopicPartition(created, 0), 3, 497),
        OffsetRange(TopicPartition(appended, 0), 0, 500),
    ]
    for headers in (True, False):
        tables = {
            f: pa.Table.from_batches(list(read_ranges(kafka_conf, ranges, headers, fetcher=f)))
            for f in ("native", "python")
        }
        for table in tables.values():
            table.validate(full=True)
        assert tables["native"].num_rows == 994
        assert tables["native"].equals(tables["python"])
    values = tables["native"]["value"].to_pylist()
    assert None in values  # null and empty told apart
    assert b"" in values
    assert set(tables["native"]["timestampType"].to_pylist()) == {0, 1}


def test_batches_are_bounded_in_bytes(
    kafka: Kafka, kafka_conf: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = kafka.topic(partitions=1)
    kafka.produce(topic, [chr(65 + i % 26) * 1000 for i in range(300)])
    monkeypatch.setattr(native_fetch, "MAX_BATCH_BYTES", 50_000)
    batches = list(read_ranges(kafka_conf, [OffsetRange(TopicPartition(topic, 0), 0, 300)], fetcher="native"))
    assert len(batches) >= 4
    assert all(sum(len(v) for v in b["value"].to_pylist()) <= 2 * 50_000 for b in batches)
    assert [o for b in batches for o in b["offset"].to_pylist()] == list(range(300))


def test_a_range_below_the_log_start_is_data_loss_unless_allowed(
    kafka: Kafka, kafka_conf: dict[str, str], fetcher: Any
) -> None:
    topic = kafka.topic(partitions=1)
    kafka.produce(topic, [f"v{i}" for i in range(20)])
    admin = AdminClient(kafka_conf)
    for future in admin.delete_records([CTopicPartition(topic, 0, 8)]).values():
        future.result(30)
    lost = [OffsetRange(TopicPartition(topic, 0), 2, 15)]
    with pytest.raises(DataLossError, match=r"offsets 2\.\.7 were removed"):
        list(read_ranges(kafka_conf, lost, fetcher=fetcher))
    batches = list(read_ranges(kafka_conf, lost, fail_on_data_loss=False, fetcher=fetcher))
    assert [o for b in batches for o in b["offset"].to_pylist()] == list(range(8, 15))


def test_read_committed_skips_aborted_records_and_read_uncommitted_keeps_them(
    kafka: Kafka, kafka_conf: dict[str, str], fetcher: Any
) -> None:
    topic = kafka.topic(partitions=1)
    kafka.transactions(topic, 4, 5, aborted=lambda n: n % 2 == 1)
    ranges = [OffsetRange(TopicPartition(topic, 0), 0, 24)]  # 20 records and 4 markers
    seen = {}
    for isolation in ("read_committed", "read_uncommitted"):
        conf = {**kafka_conf, "isolation.level": isolation}
        seen[isolation] = [
            v
            for b in read_ranges(conf, ranges, poll_timeout_ms=20_000, fetcher=fetcher)
            for v in b["value"].to_pylist()
        ]
    assert seen["read_committed"] == [f"t{t}-{i}".encode() for t in (0, 2) for i in range(5)]
    assert len(seen["read_uncommitted"]) == 20
