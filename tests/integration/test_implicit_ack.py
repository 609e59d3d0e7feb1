"""librdkafka's implicit ack, made to happen every run: a broker (behind ``tests/support/kafka_proxy.py``)
that refuses the first Produce request of each partition with NOT_LEADER_OR_FOLLOWER while the client's
next request of that partition is already on its way, and accepts that one.

librdkafka 2.16 then reports the refused records delivered ("implicitly acked by subsequent batch success")
though Apache Kafka never wrote them: it accepts a first sequence above 0 from a producer id it holds no
state for. The first two tests pin down that behaviour and when librdkafka's defaults expose it; the rest
show that neither sink loses a record to it (``sparkafka.sink.delivery``: one request in flight, and a
tripwire that fails the task on an implicit ack), through Spark and through the task's own code.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sparkafka.errors import ConfigError, DeliveryError
from sparkafka.sink.options import InputColumns, parse_sink_options
from sparkafka.sink.task import write_task
from sparkafka.sink.twophase import TwoPhaseCommitter
from tests.support.kafka import Kafka
from tests.support.kafka_proxy import ProxiedKafka, Rule, first_produce_per_partition, pipelined
from tests.support.wait import wait_until

pytestmark = pytest.mark.xdist_group("proxied-kafka")  # one test process starts the proxied broker

RECORDS = 2_000
PARTITIONS = 3
SMALL_BATCHES = {"kafka.batch.num.messages": "1", "kafka.linger.ms": "0"}
"""The settings of the reproduction in the issue: a request per record, sent as soon as it is made."""


@pytest.fixture
def proxied(proxied_kafka: ProxiedKafka) -> ProxiedKafka:
    return proxied_kafka


@pytest.fixture
def broker(proxied: ProxiedKafka) -> Iterator[Kafka]:
    """The proxied broker as tests use it; its rules and log cleared after each test."""
    yield Kafka({"bootstrap.servers": proxied.bootstrap_servers})
    proxied.proxy.clear()


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _plain_producer(broker: Kafka, **settings: Any) -> tuple[Any, _Lines]:
    from confluent_kafka import Producer

    lines = _Lines()
    logger = logging.Logger(f"test-{uuid.uuid4().hex[:6]}")
    logger.addHandler(lines)
    producer = Producer(
        {**broker.conf, "enable.idempotence": True, "debug": "eos", "logger": logger, **settings}
    )
    producer.list_topics(timeout=30)
    return producer, lines


def _in_log(broker: Kafka, topic: str) -> int:
    return len(broker.committed(topic, settle_s=0))


@pytest.mark.parametrize("in_flight", [5, 1])
def test_librdkafka_reports_a_refused_record_delivered_unless_one_request_is_in_flight(
    proxied: ProxiedKafka, broker: Kafka, in_flight: int
) -> None:
    """The assumption the sinks' defence rests on (re-check it on a librdkafka upgrade): with 5 requests
    in flight (librdkafka's default) the first record of each partition is lost and reported delivered, no
    error, its line logged under ``debug=eos``; with 1 nothing is lost and nothing is pipelined."""
    topic = broker.topic(partitions=PARTITIONS)
    rule = proxied.proxy.add(first_produce_per_partition(topic, until_pipelined=True, delay_s=1.0))
    producer, lines = _plain_producer(
        broker,
        **{"batch.num.messages": 1, "linger.ms": 0, "max.in.flight.requests.per.connection": in_flight},
    )
    errors: list[Any] = []
    for i in range(300):
        producer.produce(
            topic, f"v{i}".encode(), partition=i % PARTITIONS, on_delivery=lambda e, _m: errors.append(e)
        )
    assert producer.flush(30) == 0
    assert [e for e in errors if e is not None] == []
    assert len(rule.fired) >= PARTITIONS
    implicit = [line for line in lines.lines if "implicitly acked" in line]
    if in_flight == 1:
        assert _in_log(broker, topic) == 300
        assert implicit == []
        assert not any(r.in_flight for r in proxied.proxy.produce_requests(topic))
    else:
        acked = sum(int(re.search(r"(\d+) message\(s\) implicitly acked", line)[1]) for line in implicit)
        assert acked >= PARTITIONS, "librdkafka no longer loses these records: re-check sink.delivery"
        assert _in_log(broker, topic) == 300 - acked


def test_librdkafka_defaults_pipeline_a_partition_only_while_few_records_are_in_flight(
    proxied: ProxiedKafka, broker: Kafka
) -> None:
    """Where librdkafka's defaults (5 in flight, ``linger.ms`` 5) expose the loss: a partition's second
    request goes out while the first is unanswered only if the requests in flight hold at most four
    records together (its limit counts messages). A burst of 3 is followed at once; a burst of 10 waits
    for its answer, however long (here 1 s)."""
    topic = broker.topic(partitions=2)
    proxied.proxy.add(Rule(lambda r: r.api_key == 0, "slow", delay_s=1.0, times=None, release=pipelined))
    producer, _ = _plain_producer(broker)
    for partition, burst in ((0, 3), (1, 10)):
        for round_ in range(2):
            for i in range(burst):
                producer.produce(topic, f"{round_}-{i}".encode(), partition=partition)
            seen = 2 * partition + round_
            wait_until(
                lambda seen=seen: len(proxied.proxy.produce_requests(topic)) > seen,
                30,
                f"request {round_ + 1} of partition {partition} to reach the broker",
            )
        assert producer.flush(30) == 0
    requests = proxied.proxy.produce_requests(topic)
    assert {tp.partition for r in requests for tp in r.in_flight} == {0}, [
        (r.batches, r.in_flight) for r in requests
    ]


def _query(spark: Any, broker: Kafka, source: str, out: str, delivery: str, tmp: Path, **options: str) -> Any:
    bootstrap = broker.conf["bootstrap.servers"]
    writer = (
        spark.readStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
        .writeStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("deliveryGuarantee", delivery)
        .option("checkpointLocation", str(tmp / "ck"))
    )
    if delivery == "exactly_once":
        writer = writer.option("transactionalIdPrefix", f"ia-{uuid.uuid4().hex[:8]}")
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.trigger(availableNow=True).start()
    assert query.awaitTermination(240), "the query did not finish"
    assert query.exception() is None, str(query.exception())
    return query


def _values(n: int) -> list[str]:
    return [f"r{i}" for i in range(n)]


@pytest.mark.parametrize("delivery", ["exactly_once", "at_least_once"])
@pytest.mark.parametrize("settings", ["small-batches", "defaults"])
def test_a_sink_loses_no_record_when_the_first_produce_of_each_partition_is_refused(
    spark: Any, proxied: ProxiedKafka, broker: Kafka, tmp_path: Path, delivery: str, settings: str
) -> None:
    """The issue's reproduction, as a user runs it (sparkafka source -> sink, availableNow): before the fix,
    with a request per record, both sinks wrote 1,997 of 2,000 and the query ended well. At the sink's
    defaults and with several batches per partition, no partition's requests are ever pipelined."""
    records = RECORDS if settings == "small-batches" else 20_000
    source, out = broker.topic(partitions=PARTITIONS), broker.topic(partitions=PARTITIONS)
    broker.produce(source, _values(records), partitions=PARTITIONS)
    rule = proxied.proxy.add(first_produce_per_partition(out, until_pipelined=True, delay_s=0.5))
    options = SMALL_BATCHES if settings == "small-batches" else {}
    _query(spark, broker, source, out, delivery, tmp_path, **options)
    got = broker.committed_values(out)
    assert len(rule.fired) >= PARTITIONS
    assert set(_values(records)) - {v.decode() for v in got if v} == set(), "records lost"
    if delivery == "exactly_once":
        assert max(got.values()) == 1
        assert sum(got.values()) == records
    requests = proxied.proxy.produce_requests(out)
    assert not any(r.in_flight for r in requests), "a partition's requests were pipelined"
    if settings == "defaults":
        per_partition = Counter(tp.partition for r in requests for tp in r.partitions)
        assert min(per_partition.values()) >= 2, per_partition  # several batches per partition


def test_the_tripwire_fails_an_at_least_once_task_on_an_implicit_ack_and_its_retry_writes_everything(
    spark: Any, proxied: ProxiedKafka, broker: Kafka, tmp_path: Path
) -> None:
    """With 5 requests in flight (allowed at least once, with a warning) the implicit ack happens; the
    tripwire fails the task and Spark's retry (the suite's session retries tasks, as a cluster does) writes
    its rows again: every record at least once, the first attempt's twice."""
    source, out = broker.topic(partitions=PARTITIONS), broker.topic(partitions=PARTITIONS)
    broker.produce(source, _values(RECORDS), partitions=PARTITIONS)
    proxied.proxy.add(first_produce_per_partition(out, until_pipelined=True, delay_s=1.0))
    options = {**SMALL_BATCHES, "kafka.max.in.flight.requests.per.connection": "5"}
    _query(spark, broker, source, out, "at_least_once", tmp_path, **options)
    got = broker.committed_values(out)
    assert set(_values(RECORDS)) - {v.decode() for v in got if v} == set(), "records lost"
    assert sum(got.values()) > RECORDS, "no task was retried: the implicit ack went unnoticed"


def _sink_options(broker: Kafka, topic: str, delivery: str, **kafka: str) -> Any:
    options = {f"kafka.{k}": v for k, v in broker.conf.items()}
    options.update({"topic": topic, "deliveryGuarantee": delivery})
    if delivery == "exactly_once":
        options["transactionalIdPrefix"] = f"ia-{uuid.uuid4().hex[:8]}"
    parsed = parse_sink_options(options)
    return replace(parsed, kafka={**parsed.kafka, **kafka})


def test_exactly_once_refuses_more_than_one_request_in_flight(broker: Kafka) -> None:
    with pytest.raises(ConfigError, match=r"kafka.max.in.flight.requests.per.connection=5 is not allowed"):
        parse_sink_options(
            {
                "kafka.bootstrap.servers": broker.conf["bootstrap.servers"],
                "topic": "t",
                "deliveryGuarantee": "exactly_once",
                "transactionalIdPrefix": "p",
                "kafka.max.in.flight.requests.per.connection": "5",
            }
        )


def test_the_tripwire_aborts_an_exactly_once_task_before_its_transaction_can_be_committed(
    proxied: ProxiedKafka, broker: Kafka
) -> None:
    """The second defence alone: 5 in flight forced past the option check. The task fails on the implicit
    ack, having aborted its transaction: nothing of it is ever visible."""
    out = broker.topic(partitions=PARTITIONS)
    proxied.proxy.add(first_produce_per_partition(out, until_pipelined=True, delay_s=1.0))
    options = _sink_options(
        broker,
        out,
        "exactly_once",
        **{"max.in.flight.requests.per.connection": "5", "batch.num.messages": "1", "linger.ms": "0"},
    )
    rows = pa.RecordBatch.from_pydict({"value": pa.array(_values(300), pa.string())})
    with pytest.raises(DeliveryError, match="implicitly acked by subsequent batch success"):
        write_task(options, InputColumns(), iter([rows]), 0, f"q-{uuid.uuid4().hex[:6]}")
    assert broker.committed(out, settle_s=10) == []


def _bursts(proxied: ProxiedKafka, topic: str, bursts: int, size: int) -> Iterator[pa.RecordBatch]:
    """Arrow batches of ``size`` rows for partition 0, each given once the one before it reached the broker:
    a task whose input trickles in, a few rows per linger window."""
    for b in range(bursts):
        values = [f"b{b}-{i}" for i in range(size)]
        yield pa.RecordBatch.from_pydict(
            {"value": pa.array(values, pa.string()), "partition": pa.array([0] * size, pa.int32())}
        )
        wait_until(
            lambda b=b: len(proxied.proxy.produce_requests(topic)) > b,
            30,
            f"burst {b} to reach the broker",
        )


@pytest.mark.parametrize("delivery", ["exactly_once", "at_least_once"])
def test_a_sink_task_at_its_defaults_loses_nothing_when_its_input_trickles_in(
    proxied: ProxiedKafka, broker: Kafka, delivery: str
) -> None:
    """Where librdkafka's own defaults lost records (the sinks' defaults before one request in flight): a
    task whose rows arrive three at a time, each burst sent on its own while the first request waits for
    its refusal. Every burst is written, and no request of the partition went out while another was
    unanswered."""
    out = broker.topic(partitions=1)
    rule = proxied.proxy.add(first_produce_per_partition(out, until_pipelined=True, delay_s=1.0))
    options = _sink_options(broker, out, delivery)
    query = f"q-{uuid.uuid4().hex[:6]}"
    result = write_task(options, InputColumns(partition=True), _bursts(proxied, out, 4, 3), 0, query)
    if delivery == "exactly_once":
        TwoPhaseCommitter.for_options(options).commit(query, 0, [result], streaming=False)
    got = broker.committed_values(out)
    assert sorted(v.decode() for v in got if v) == sorted(f"b{b}-{i}" for b in range(4) for i in range(3))
    assert len(rule.fired) == 1  # the partition's first request was refused
    assert not any(r.in_flight for r in proxied.proxy.produce_requests(out))
