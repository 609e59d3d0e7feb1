"""``sparkafka.ops.prometheus.serve``: a script's queries exported through a StreamingQueryListener."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from sparkafka.local.broker import free_port
from sparkafka.ops.prometheus import serve
from tests.integration.test_pipeline_cli import scrape
from tests.support.kafka import produce
from tests.support.queries import memory_query, source
from tests.support.wait import wait_until


def test_serve_exports_every_sparkafka_query_of_the_session(
    spark: Any, kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], checkpoint: str
) -> None:
    topic = new_topic(partitions=2)
    produce(kafka_conf, topic, [f"v{i}" for i in range(25)], 2)
    port = free_port()
    server = serve(spark, port)
    name = f"q_{uuid.uuid4().hex[:8]}"
    query = memory_query(
        source(spark, bootstrap, subscribe=topic, startingOffsets="earliest"), name, checkpoint
    )
    try:
        query.processAllAvailable()
        q = (("query", name),)

        def exported() -> bool:
            m = scrape(port)
            behind = [
                v
                for (metric, labels), v in m.items()
                if metric == "sparkafka_records_behind_latest" and q[0] in labels
            ]
            return m.get(("sparkafka_input_records_total", q)) == 25 and len(behind) == 2 and not any(behind)

        wait_until(exported, 60, "the query's rows in /metrics")  # progress events arrive asynchronously
        assert scrape(port)[("sparkafka_batches_total", q)] >= 1
    finally:
        query.stop()
        server.close()
