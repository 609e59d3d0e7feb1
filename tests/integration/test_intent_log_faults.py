"""The commit-intent log when the network holds an append: a record that lands after its writer gave up.

The intent log is appended to by a plain producer, and an append the driver gave up on (its flush timed
out, the read-back did not find it, the batch failed) can still be carried out later: a request the broker
had queued, or the network held. Here the proxy (``tests/support/kafka_proxy.py``) holds one intent append
until the batch's replay has committed, then lets it through. Folding by log order alone took that stale
intent as the query's newest record: the next writer rolled it forward, recorded the batch as abandoned, and
a replay of the same batch wrote its rows a second time.

The scenarios need only the broker and the committer's real parts, called in the order Spark calls them.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from sparkafka.errors import TransactionError
from sparkafka.sink.intents import IntentLog, intent_topic
from sparkafka.sink.options import InputColumns, parse_sink_options
from sparkafka.sink.task import write_task
from sparkafka.sink.twophase import TwoPhaseCommitter
from tests.support.kafka import Kafka
from tests.support.kafka_proxy import PRODUCE, ProxiedKafka, Request, Rule
from tests.support.wait import wait_until

pytestmark = pytest.mark.xdist_group("proxied-kafka")  # one test process starts the proxied broker


@pytest.fixture
def broker(proxied_kafka: ProxiedKafka) -> Iterator[Kafka]:
    yield Kafka({"bootstrap.servers": proxied_kafka.bootstrap_servers})
    proxied_kafka.proxy.clear()


def _rows(batch: int) -> Iterator[pa.RecordBatch]:
    return iter([pa.RecordBatch.from_pydict({"value": pa.array([f"b{batch}-{i}" for i in range(10)])})])


def _intents_of(broker: Kafka, prefix: str, query: str, batch: int) -> list[bytes | None]:
    """The intent records of ``batch`` in the log, as written (raw: every one, also those folding skips)."""
    return [
        r.value
        for r in broker.committed(intent_topic(prefix), settle_s=0)
        if r.key == query.encode()
        and r.value
        and b'"state": "intent"' in r.value
        and f'"batch": {batch},'.encode() in r.value
    ]


def test_an_intent_append_carried_out_after_the_replay_committed_its_batch_changes_nothing(
    proxied_kafka: ProxiedKafka, broker: Kafka
) -> None:
    out = broker.topic(partitions=1)
    prefix, query = f"si-{uuid.uuid4().hex[:8]}", f"q-{uuid.uuid4().hex[:6]}"
    options = parse_sink_options(
        {
            **{f"kafka.{k}": v for k, v in broker.conf.items()},
            "topic": out,
            "deliveryGuarantee": "exactly_once",
            "transactionalIdPrefix": prefix,
            "metadataTimeoutMs": "3000",  # how long the driver waits for an intent append (its flush)
        }
    )

    def committer() -> Any:
        return TwoPhaseCommitter.for_options(options)

    def run_batch(batch: int) -> None:
        """One batch as Spark runs it: the writer (recovery), the task, the commit."""
        committer().recover()
        result = write_task(options, InputColumns(), _rows(batch), 0, query)
        committer().commit(query, batch, [result])

    run_batch(0)
    released = threading.Event()
    log_topic = intent_topic(prefix)

    def intent_append(request: Request) -> bool:  # the driver's append, not a task's witness record
        return (
            request.api_key == PRODUCE
            and request.transactional_id is None
            and any(tp.topic == log_topic for tp in request.partitions)
        )

    held = proxied_kafka.proxy.add(
        Rule(intent_append, "delay", delay_s=120, release=lambda _proxy, _request: released.is_set())
    )
    committer().recover()
    first = write_task(options, InputColumns(), _rows(1), 0, query)
    with pytest.raises(TransactionError, match="its commit intent could not be confirmed"):
        committer().commit(query, 1, [first])
    assert len(held.fired) == 1
    run_batch(1)  # the replay, after the query's restart: committed
    released.set()  # the first attempt's intent is carried out now, after the replay's records
    wait_until(lambda: len(_intents_of(broker, prefix, query, 1)) == 2, 30, "the held intent to land")

    state = committer().recover()  # the next batch's writer
    assert state.latest[query].batch_id == 1
    assert state.latest[query].state == "done"
    # It writes the query's record again, last in the log: compaction keeps only the last one of a key.
    last = [r for r in broker.committed(log_topic, settle_s=0) if r.key == query.encode()][-1]
    assert last.value is not None
    assert b'"batch": 1,' in last.value
    assert b'"state": "done"' in last.value
    run_batch(1)  # Spark replays batch 1 once more (its driver died before Spark's commit log): aborted
    run_batch(2)
    got = broker.committed_values(out)
    assert got == Counter({f"b{b}-{i}".encode(): 1 for b in range(3) for i in range(10)})
    assert IntentLog(broker.conf, prefix).read().latest[query].batch_id == 2
