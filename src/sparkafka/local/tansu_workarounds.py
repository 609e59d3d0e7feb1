"""Work-arounds for the embedded broker's (tansu 0.6) known gaps: the one place the demo and tests use them.

Product code never calls these: it must be correct on Apache Kafka, and meets tansu's ListOffsets gap in
``sparkafka.client.broker_gaps`` (end offsets resolved by fetching). These let tests and the demo
produce data whose ListOffsets answers are exact anyway, and give the chaos harness an independent view
of the log ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["SEAL_VALUE", "exact_latest_producer_conf", "fetched_end_offsets", "seal_latest_offsets"]

SEAL_VALUE = b"__sparkafka_seal__"


def seal_latest_offsets(conf: Mapping[str, str], topic: str, partitions: Iterable[int]) -> None:
    """Make ListOffsets(latest) right on tansu after a bulk produce.

    tansu answers "latest" with the base offset of the newest stored batch + 1, which is the true log end
    only when that batch holds one record. So after producing in bulk (and flushing), this appends one
    single-record batch with value ``SEAL_VALUE`` to each partition. Readers of sealed topics must expect
    one such record per partition per seal.
    """
    from confluent_kafka import Producer

    producer = Producer({**conf, "batch.num.messages": 1, "linger.ms": 0})
    for partition in partitions:
        producer.produce(topic, SEAL_VALUE, partition=partition)
        producer.flush(30)


def exact_latest_producer_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """Producer settings that put every record in its own batch, so tansu's ListOffsets(latest) is exact.

    Slow (one request per record): use for the few hundred records a test needs, and
    ``seal_latest_offsets`` after bulk loads.
    """
    return {**conf, "batch.num.messages": "1", "linger.ms": "0"}


def fetched_end_offsets(conf: Mapping[str, str], topic: str) -> dict[int, int]:
    """Each partition's log end as fetches see it, for tansu with S3 storage (the chaos harness).

    There, ListOffsets(latest) asked from one client can lag records another client has just had
    acknowledged with acks=all, for seconds (measured: 36 of 40 answers stale under a steady feed), while
    fetches return them. So a query run with ``Trigger.AvailableNow`` can stop short of the true end (it
    is exact later); a harness that wants everything processed compares against these ends and runs again.
    """
    from sparkafka.ops.committed_view import read_raw_batches

    return {p: (b[-1].next_offset if b else 0) for p, b in read_raw_batches(conf, topic).items()}
