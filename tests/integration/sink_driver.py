"""A streaming query, run as its own process so tests can kill it: JSON files -> sparkafka sink.

Usage: python -m tests.integration.sink_driver BOOTSTRAP TOPIC INPUT_DIR CHECKPOINT DELIVERY [PREFIX [TASKS]]
Exits 0 when the query has processed all input (Trigger.AvailableNow), 3 when the query failed (the
whole error is printed). SPARKAFKA_TEST_SPECULATION=true starts Spark with spark.speculation on;
SPARKAFKA_TEST_SINK_OPTIONS, a JSON object of option name to value, adds writer options (for example
``{"kafka.transaction.timeout.ms": "10000"}``). Tests run the same query (``sink_query``) in their own
SparkSession where no process needs killing: a restart on the checkpoint, a run without faults.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from sparkafka import register
from sparkafka.local.spark import local_spark, stop_spark
from tests.support.drivers import await_query

FILES_PER_BATCH = 2


def sink_query(
    spark: Any,
    bootstrap: str,
    topic: str,
    input_dir: str,
    checkpoint: str,
    delivery: str,
    prefix: str | None = None,
    tasks: int = 2,
    options: Mapping[str, str] | None = None,
) -> Any:
    """Start the query: ``input_dir``'s JSON files (``id``, ``customer``), ``FILES_PER_BATCH`` a batch,
    written keyed by customer over ``tasks`` tasks, until the input ends (availableNow)."""
    df = (
        spark.readStream.schema("id long, customer string")
        .option("maxFilesPerTrigger", FILES_PER_BATCH)
        .json(input_dir)
        .selectExpr("customer as key", "cast(id as string) as value")
        .repartition(tasks)
    )
    writer = (
        df.writeStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("deliveryGuarantee", delivery)
        .option("checkpointLocation", checkpoint)
    )
    if prefix:
        writer = writer.option("transactionalIdPrefix", prefix)
    return writer.options(**(options or {})).trigger(availableNow=True).start()


def main(argv: list[str]) -> int:
    bootstrap, topic, input_dir, checkpoint, delivery = argv[:5]
    prefix = argv[5] if len(argv) > 5 and argv[5] != "-" else None
    tasks = int(argv[6]) if len(argv) > 6 else 2
    speculation = os.environ.get("SPARKAFKA_TEST_SPECULATION", "false")
    # Up to 4 attempts per task: failed tasks are retried.
    spark = local_spark(master="local[2,4]", config={"spark.speculation": speculation})
    try:
        register(spark)
        options = json.loads(os.environ.get("SPARKAFKA_TEST_SINK_OPTIONS", "{}"))
        query = sink_query(spark, bootstrap, topic, input_dir, checkpoint, delivery, prefix, tasks, options)
        return await_query(query, "DONE")
    finally:
        stop_spark(spark)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
