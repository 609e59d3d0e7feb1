"""The source under broker faults: a broker killed and restarted while a pattern query discovers.

(A topic deleted under a running query is in test_source.py, with discovery on and off.)
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import NewTopic

from sparkafka.client.core import admin_client, close_all
from sparkafka.local.kafka_broker import ApacheKafka
from tests.support.kafka import produce
from tests.support.queries import memory_query, memory_values, source
from tests.support.wait import wait_until


def test_pattern_query_rides_out_a_broker_restart_during_discovery(
    spark: Any, tmp_path: Path, checkpoint: str
) -> None:
    # A broker of its own: killing the suite's broker would fail the other tests' queries.
    broker = ApacheKafka(data_dir=tmp_path / "kafka").start()
    query = None
    try:
        conf = {"bootstrap.servers": broker.bootstrap_servers}
        admin = admin_client(conf)
        prefix = f"rs{uuid.uuid4().hex[:6]}"
        for future in admin.create_topics([NewTopic(f"{prefix}-a", 1, 1)]).values():
            future.result(30)
        first = produce(conf, f"{prefix}-a", ["a0", "a1", "a2"])
        df = source(
            spark,
            broker.bootstrap_servers,
            subscribePattern=f"{prefix}-.*",
            startingOffsets="earliest",
            partitionDiscoveryIntervalMs=0,  # every latestOffset call lists topics: discovery in progress
            metadataTimeoutMs=60_000,
        )
        name = f"q_{uuid.uuid4().hex[:8]}"
        query = memory_query(df, name, checkpoint)
        query.processAllAvailable()
        assert sorted(memory_values(spark, name)) == first
        broker.kill(0)  # SIGKILL: the machine lost; its data stays

        def discovering() -> bool:  # a trigger asking the source for offsets (so listing topics) now
            status = query.status
            return bool(status["isTriggerActive"]) and status["message"].startswith("Getting offsets")

        # The outage the idle query's discovery meets: a trigger seen listing topics with the broker down.
        wait_until(
            discovering,
            60,
            "a trigger to list topics while the broker is down",
            detail=lambda: repr(query.status),
        )
        broker.restart(0)  # same port and data: topics and records survive
        for future in admin_client(conf).create_topics([NewTopic(f"{prefix}-b", 2, 1)]).values():
            future.result(60)
        second = produce(conf, f"{prefix}-b", ["b0", "b1"], 2)
        query.processAllAvailable()
        assert query.exception() is None
        assert sorted(memory_values(spark, name)) == sorted(first + second)
    finally:
        if query is not None:
            query.stop()
        close_all()  # the process's cached clients of this broker go first: none logs its absence
        broker.stop()
