"""Executor-side reading, without Spark: exact ranges at volume, gaps from transaction markers, every
field of a record, data loss, a broker lost mid-read, and the position rule the read
loop's decisions rest on. Every test runs with both fetchers (the ``fetcher`` fixture): sparkafka's native
extension and the pure-Python one (confluent-kafka); every value read is checked against what was
produced, in order."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient

from sparkafka.client.core import close_all, learn_topics
from sparkafka.errors import DataLossError
from sparkafka.local.kafka_broker import ApacheKafka
from sparkafka.source import fetch, native_fetch
from sparkafka.source.fetch import ROWS_PER_BATCH, OffsetRange, read_ranges
from sparkafka.structs import TopicPartition
from tests.support.kafka import Kafka


def test_reads_exact_ranges_at_volume(
    kafka_conf: dict[str, str], new_topic: Callable[..., str], fetcher: Any
) -> None:
    topic = new_topic(partitions=2)
    producer = Producer({**kafka_conf, "linger.ms": 20})
    for i in range(60_000):  # partition p, offset o holds the value 2 * o + p
        producer.produce(topic, str(i).encode(), partition=i % 2)
    assert producer.flush(60) == 0
    ranges = [
        OffsetRange(TopicPartition(topic, 0), 0, 30_000),  # to the log end: data and EOF arrive together
        OffsetRange(TopicPartition(topic, 1), 1_234, 25_000),
    ]
    batches = list(read_ranges({**kafka_conf, "isolation.level": "read_committed"}, ranges, fetcher=fetcher))
    assert all(0 < b.num_rows <= ROWS_PER_BATCH for b in batches)
    assert all(len(set(b["partition"].to_pylist())) == 1 for b in batches)  # a batch is one partition's
    rows = [
        (p, o, v)
        for b in batches
        for p, o, v in zip(
            b["partition"].to_pylist(), b["offset"].to_pylist(), b["value"].to_pylist(), strict=True
        )
    ]
    # Every offset of each range once, in order (partition 0's range first), each with its own value.
    expected = [(r.tp.partition, o) for r in ranges for o in range(r.start, r.end)]
    assert [(p, o) for p, o, _ in rows] == expected
    assert [v for _, _, v in rows] == [str(2 * o + p).encode() for p, o in expected]


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


def _varied_record(i: int) -> dict[str, Any]:
    """Record ``i`` of ``_varied``: keys, null keys, empty keys; values, null and empty values; no headers,
    one, two (one with a null value, one empty), a non-ASCII key; explicit timestamps on the odd ones."""
    record: dict[str, Any] = {
        "key": [None, b"", f"k{i}".encode()][i % 3 if i % 5 else 2],
        "value": None if i % 7 == 0 else (b"" if i % 11 == 0 else f"v{i}".encode() * (i % 13)),
        "headers": [None, [("a", b"1")], [("b", None), ("c\u00e9", b"")]][i % 3],
    }
    return record | ({"timestamp": 1_700_000_000_000 + i} if i % 2 else {})


def _varied(conf: dict[str, str], topic: str, n: int) -> None:
    """``n`` records ``_varied_record(0 .. n - 1)`` in partition 0, so record ``i`` is at offset ``i``."""
    producer = Producer(conf)
    for i in range(n):
        producer.produce(topic, partition=0, **_varied_record(i))
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
            _check_varied(table, ranges, created, headers)
        assert tables["native"].equals(tables["python"])
    values = tables["native"]["value"].to_pylist()
    assert None in values  # null and empty told apart
    assert b"" in values


def _check_varied(table: pa.Table, ranges: list[OffsetRange], created: str, headers: bool) -> None:
    """Every row of ``table`` is the record ``_varied`` produced at its offset, the ranges in order; a
    timestamp given by the producer is kept (CreateTime), the broker's is taken (LogAppendTime).
    ``read_ranges`` reads partitions one after another in (topic, partition) order, whatever order the
    ranges came in (the topics' names are random, so the given order is either)."""
    rows = table.to_pylist()
    assert [(r["topic"], r["partition"], r["offset"]) for r in rows] == [
        (rng.tp.topic, 0, o) for rng in sorted(ranges, key=lambda r: r.tp) for o in range(rng.start, rng.end)
    ]
    for row in rows:
        produced = _varied_record(row["offset"])
        assert (row["key"], row["value"]) == (produced["key"], produced["value"]), row
        if headers:
            got = [(h["key"], h["value"]) for h in row["headers"]] if row["headers"] is not None else None
            assert got == produced["headers"], row
        else:
            assert "headers" not in row
        assert row["timestampType"] == (0 if row["topic"] == created else 1), row
        assert row["timestamp"] is not None, row
        if row["topic"] == created and "timestamp" in produced:
            assert int(row["timestamp"].timestamp() * 1000) == produced["timestamp"], row


def test_batches_are_bounded_in_bytes(
    kafka: Kafka, kafka_conf: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A native chunk stops taking records once its keys and values reach MAX_BATCH_BYTES: it passes the
    bound by less than one record (these are all of one size, and 64 of them, the extension's first take
    that measures their size, fit under the bound)."""
    topic = kafka.topic(partitions=1)
    values = kafka.produce(topic, [chr(65 + i % 26) * 1000 for i in range(300)])  # keys k0 .. k299
    monkeypatch.setattr(native_fetch, "MAX_BATCH_BYTES", 100_000)
    batches = list(read_ranges(kafka_conf, [OffsetRange(TopicPartition(topic, 0), 0, 300)], fetcher="native"))
    largest = max(len(f"k{i}") + len(v) for i, v in enumerate(values))
    sizes = [
        sum(len(k) + len(v) for k, v in zip(b["key"].to_pylist(), b["value"].to_pylist(), strict=True))
        for b in batches
    ]
    assert all(size < 100_000 + largest for size in sizes), sizes
    assert len(batches) >= 3  # 301,090 bytes in chunks of less than 101,004
    assert [o for b in batches for o in b["offset"].to_pylist()] == list(range(300))
    assert [v for b in batches for v in b["value"].to_pylist()] == [v.encode() for v in values]


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
    assert [v for b in batches for v in b["value"].to_pylist()] == [f"v{i}".encode() for i in range(8, 15)]


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
    assert seen["read_uncommitted"] == [f"t{t}-{i}".encode() for t in range(4) for i in range(5)]


EVENTS_MOVE_THE_POSITION = {"native": True, "python": False}
"""Whether an event moves a fetcher's position past its offset (measured): ``rd_kafka_consume_batch_queue``
in sparkafka_native (librdkafka 2.12.1) moves it past every message it returns, events too; confluent-kafka's
``consume`` (2.16, its own librdkafka) leaves it at an end-of-partition event's offset. read_ranges decides
the same under both rules: the unit tests run FakeFetcher with each."""


def test_a_fetchers_position_moves_past_every_record_and_per_its_rule_past_events(
    kafka: Kafka, kafka_conf: dict[str, str], fetcher: Any
) -> None:
    """The rule read_ranges' decisions rest on (the end - 1 case: an end-of-partition event may move the
    position past its offset while the record there is still to come), as the unit tests' FakeFetcher
    encodes it, followed by the real fetchers: after each fetch, the position is one past the last record
    seen, and one past every event's offset where ``EVENTS_MOVE_THE_POSITION``."""
    topic = kafka.topic(partitions=1)
    kafka.produce(topic, [f"v{i}" for i in range(5)])
    tp = TopicPartition(topic, 0)
    reader = fetch._fetcher(kafka_conf, fetcher)
    learn_topics(reader, {topic}, 30)
    reader.assign(tp, 0)
    try:
        read: list[int] = []
        events: list[tuple[int, int]] = []
        position = 0
        for end in (3, 100, 100, 100, 100):  # stop early at offset 3, then on to the end of the log
            got = reader.fetch(tp, end, 1000, 5.0, False)
            read += got.batch["offset"].to_pylist() if got.batch is not None else []
            offsets = [offset for _, _, _, offset in got.events if offset >= 0]
            assert got.last_offset is not None or offsets, (
                "a fetch within 5 s brought nothing, not even an event"
            )
            if got.last_offset is not None:
                position = max(position, got.last_offset + 1)
            if EVENTS_MOVE_THE_POSITION[fetcher]:
                position = max([position, *(offset + 1 for offset in offsets)])
            assert reader.position(tp) == position, (end, got)
            events += [(e.code(), offset) for e, _, _, offset in got.events]
            if events:
                break
        # Records 3 and 4 were seen by the fetch that stopped at 3 (past its end, so not returned) or came
        # after; then the end of the partition at the log end, 5.
        assert read in ([0, 1, 2], [0, 1, 2, 3, 4]), read
        assert events == [(KafkaError._PARTITION_EOF, 5)]
        assert reader.position(tp) == (6 if EVENTS_MOVE_THE_POSITION[fetcher] else 5)
    finally:
        reader.unassign()


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """An Apache Kafka for the tests that kill it (the suite's broker serves other tests meanwhile)."""
    with ApacheKafka(data_dir=tmp_path_factory.mktemp("kafka-fetch")) as broker:
        yield broker
        close_all()  # the process's cached clients of this broker go first: none logs its absence


def test_a_read_rides_out_its_broker_going_down_and_coming_back(
    own_broker: ApacheKafka, fetcher: Any
) -> None:
    """The partitions' leader is lost after the read's first batch (SIGKILL) and comes back on its ports and
    data while the read goes on: the read meets the outage, rides it out (the fetcher's leaderless and
    transport events), and gets every record once, in order."""
    conf = {"bootstrap.servers": own_broker.bootstrap_servers}
    topic = Kafka(conf).topic(partitions=2)
    producer = Producer(conf)
    for i in range(2_000):  # partition p, offset o: the value 2 * o + p
        producer.produce(topic, str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0
    ranges = [OffsetRange(TopicPartition(topic, p), 0, 1_000) for p in (0, 1)]
    batches = read_ranges({**conf, "isolation.level": "read_committed"}, ranges, fetcher=fetcher)
    got = [next(batches)]  # partition 0's first records (a batch holds one partition's)
    own_broker.kill(0)
    own_broker.restart(0, wait=False)  # a JVM starting: seconds in which nothing answers
    with pytest.raises(KafkaException):  # the read goes on while the broker is down, not after it is back
        AdminClient({**conf, "log_level": "0"}).list_topics(timeout=0.5)
    got += list(batches)
    rows = [
        (p, o, v)
        for b in got
        for p, o, v in zip(*(b[c].to_pylist() for c in ("partition", "offset", "value")), strict=True)
    ]
    expected = [(p, o) for p in (0, 1) for o in range(1_000)]
    assert [(p, o) for p, o, _ in rows] == expected
    assert [v for _, _, v in rows] == [str(2 * o + p).encode() for p, o in expected]
