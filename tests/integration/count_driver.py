"""A count per key, run as its own process so tests can kill it: a sparkafka topic -> count -> sparkafka.

Usage: python -m tests.integration.count_driver BOOTSTRAP SOURCE_TOPIC OUT_TOPIC CHECKPOINT DELIVERY MODE
[PREFIX]. ``df.groupBy("key").count()`` written with ``outputMode(MODE)`` as records keyed by the key whose
value is ``<key>=<count>``, 4 source records per micro-batch (several batches), Trigger.AvailableNow.
Exits 0 when the query has processed all input, 3 when it failed (the whole error is printed).
"""

from __future__ import annotations

import sys
from typing import Any

from sparkafka import register
from sparkafka.local.spark import local_spark, stop_spark
from tests.support.drivers import await_query

RECORDS_PER_BATCH = 4


def count_query(spark: Any, bootstrap: str, source: str) -> Any:
    """The count per key of ``source``'s values (the key), as the sink's key and ``<key>=<count>`` value."""
    df = (
        spark.readStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", RECORDS_PER_BATCH)
        .load()
    )
    counts = df.selectExpr("CAST(value AS STRING) AS key").groupBy("key").count()
    return counts.selectExpr("key", "concat(key, '=', CAST(count AS STRING)) AS value")


def main(argv: list[str]) -> int:
    bootstrap, source, out, checkpoint, delivery, mode = argv[:6]
    prefix = argv[6] if len(argv) > 6 else None
    spark = local_spark(master="local[2,4]")  # failed tasks are retried
    try:
        register(spark)
        writer = (
            count_query(spark, bootstrap, source)
            .writeStream.format("sparkafka")
            .outputMode(mode)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", out)
            .option("deliveryGuarantee", delivery)
            .option("checkpointLocation", checkpoint)
        )
        if prefix:
            writer = writer.option("transactionalIdPrefix", prefix)
        query = writer.trigger(availableNow=True).start()
        return await_query(query, f"DONE {query.id}")
    finally:
        stop_spark(spark)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
