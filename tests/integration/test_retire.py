"""A prefix's commit-intent topic is made by its first write, not by a writer that never wrote, and
``sparkafka txn retire`` deletes it once no query uses it (the sentences of its refusals, the dry run).

The first write of a fresh prefix is the first batch's claim of transactional ids, made by each task
before its transaction writes its witness record into the same topic: the topic is sparkafka's own
(compacted), never one a produce made by auto-creation, also when a retired prefix is used again."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import ConfigResource

from sparkafka.client.core import admin_client
from sparkafka.sink.intents import WITNESS_PREFIX, intent_topic
from sparkafka.sink.options import parse_sink_options
from sparkafka.sink.twophase import TwoPhaseCommitter
from tests.integration.test_cli_details import cli
from tests.support.kafka import Kafka
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration


def test_the_intent_topic_comes_with_the_first_write_and_goes_with_retire(
    spark: Any, kafka: Kafka, new_topic: Callable[..., str], checkpoint: str
) -> None:
    bootstrap = kafka.conf["bootstrap.servers"]
    source, sink = new_topic(partitions=1), new_topic(partitions=1)
    prefix = f"retire-{uuid.uuid4().hex[:8]}"
    topic = intent_topic(prefix)

    def topics() -> set[str]:
        return set(admin_client(kafka.conf).list_topics(timeout=30).topics)

    def cleanup_policy() -> str:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        configs = admin_client(kafka.conf).describe_configs([resource])[resource].result(30)
        return str(configs["cleanup.policy"].value)

    def copy(values: list[str], where: str) -> Any:
        kafka.produce(source, values)
        return (
            spark.readStream.format("sparkafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .select("value")
            .writeStream.format("sparkafka")
            .options(**options)
            .option("transactionalIdPrefix", prefix)
            .option("checkpointLocation", where)
            .start()
        )

    # What every exactly-once writer does when Spark makes it, before any batch: recover. It writes
    # nothing, so it creates nothing (it created the topic before).
    options = {"kafka.bootstrap.servers": bootstrap, "topic": sink, "deliveryGuarantee": "exactly_once"}
    TwoPhaseCommitter.for_options(parse_sink_options({**options, "transactionalIdPrefix": prefix})).recover()
    assert topic not in topics()
    query = copy(["a", "b", "c"], checkpoint)
    try:
        query.processAllAvailable()
        assert topic in topics()  # the first batch's claim and commit made it
    finally:
        query.stop()
    assert sorted(kafka.read_committed(sink)) == [b"a", b"b", b"c"]
    assert cleanup_policy() == "compact"
    # Each task's transaction wrote its witness into the topic the claim had made (tombstoned once done).
    assert any((r.key or b"").startswith(WITNESS_PREFIX) for r in kafka.committed(topic))

    args = ["txn", "retire", "--bootstrap-servers", bootstrap, "--prefix", prefix]
    refused = cli(*args)
    assert refused.returncode == 1
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .startswith(f"sparkafka txn: query {query.id} wrote to {topic}")
    )
    assert refused.stderr.strip().endswith(
        "stop it first (retire a prefix no query runs with), or add --force"
    )
    dry = cli(*args, "--force")
    assert dry.returncode == 2
    assert f"would delete topic {topic} (1 queries' records)" in dry.stderr
    assert topic in topics()  # the dry run changed nothing
    done = cli(*args, "--force", "--yes")
    assert done.returncode == 0, done.stderr
    assert f"retired prefix {prefix}: deleted {topic}" in done.stdout
    wait_until(lambda: topic not in topics(), 30, f"{topic} deleted")
    gone = cli("txn", "list", "--bootstrap-servers", bootstrap, "--prefix", prefix)
    assert "has no commit-intent log" in gone.stderr

    # The retired prefix used again by a new query: its first batch's claims make the topic again, before
    # any task's transaction writes its witness there.
    again = copy(["d"], f"{checkpoint}-again")
    try:
        again.processAllAvailable()
    finally:
        again.stop()
    assert sorted(kafka.read_committed(sink)) == [b"a", b"a", b"b", b"b", b"c", b"c", b"d"]
    assert cleanup_policy() == "compact"
