from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import Producer

from sparkafka.ops.committed_view import CONTROL_ABORT, CONTROL_COMMIT, committed_view, read_raw_batches
from tests.support.kafka import Kafka


def test_oracle_on_committed_aborted_and_open_transactions(
    kafka_conf: dict[str, str], new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2)
    plain = Producer(kafka_conf)
    plain.produce(topic, b"plain-0", partition=0)
    plain.flush(30)
    txn = Producer({**kafka_conf, "transactional.id": f"oracle-{topic}"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(topic, b"committed-0", partition=0)
    txn.produce(topic, b"committed-1", partition=1)
    txn.commit_transaction(30)
    txn.begin_transaction()
    txn.produce(topic, b"aborted-0", partition=0)
    txn.flush(30)
    txn.abort_transaction(30)
    plain.produce(topic, b"plain-1", partition=1)
    plain.flush(30)

    # Kafka writes the abort's markers after answering EndTxn: the view waits for them (settle_s).
    view = committed_view(kafka_conf, topic, settle_s=10)
    raw = read_raw_batches(kafka_conf, topic)
    markers = [b.control_type for b in raw[0] if b.is_control]
    assert markers == [CONTROL_COMMIT, CONTROL_ABORT]
    assert any(r.value == b"aborted-0" for b in raw[0] for r in b.records), "raw view must show aborted data"

    assert [r.value for r in view[0]] == [b"plain-0", b"committed-0"]
    assert [r.value for r in view[1]] == [b"committed-1", b"plain-1"]

    # A transaction left open hides itself and everything after it in its partition.
    txn.begin_transaction()
    txn.produce(topic, b"open-1", partition=1)
    txn.flush(30)
    plain.produce(topic, b"after-open", partition=1)
    plain.flush(30)
    assert [r.value for r in committed_view(kafka_conf, topic)[1]] == [b"committed-1", b"plain-1"]
    txn.commit_transaction(30)
    assert [r.value for r in committed_view(kafka_conf, topic, settle_s=10)[1]] == [
        b"committed-1",
        b"plain-1",
        b"open-1",
        b"after-open",
    ]


def test_a_partition_holding_megabytes_is_read_whole(kafka: Kafka) -> None:
    """kafka-python's network client takes no answer over 1 MB unless told: a raw fetch of a partition
    holding more than that failed until its time-out ("Invalid frame length"; the soak's oracle on 2.4 MB,
    and the exactly-once sink's marker search reads the same way)."""
    topic = kafka.topic(partitions=1)
    producer = Producer({**kafka.conf, "linger.ms": 50, "batch.size": 1_000_000})
    values = [f"{i:06d}".encode() * 170 for i in range(3_000)]  # about 3 MB, in batches of up to 1 MB
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0
    assert [r.value for r in committed_view(kafka.conf, topic)[0]] == values
