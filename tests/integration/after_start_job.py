"""A user's script that makes the mistakes of issue 50, one query each, printing what a user would see.

Usage: python -m tests.integration.after_start_job CASES_JSON (or the file alone: it imports only
sparkafka and PySpark)

CASES_JSON is a file holding a list of cases, each ``{"name", "source", "sink", "checkpoint"}``: ``source``
is ``{"options": {...}}`` for ``readStream.format("sparkafka")``, or null for Spark's rate source (one string
column ``value``, and a ``topic`` column if the case gives ``"topic_column"``); ``sink`` is
``{"options": {...}}`` for ``writeStream.format("sparkafka")``, or null for ``format("noop")``;
``"unawaited": true`` looks at ``query.isActive`` until the query ends instead of awaiting it. The script
runs on ``local[2]`` (``SPARKAFKA_TEST_MASTER`` another master), calls ``sparkafka.register``
(``SPARKAFKA_TEST_REGISTER=0``: it does not), then for each case prints ``@@START <name>`` to stderr before
the query is made (``load()`` onwards), starts it, waits for it, and lets a failure print as an uncaught
exception would (``traceback.print_exc``: the same lines), then ``@@END <name>``. Everything else on stderr
is Spark's and sparkafka's own output, as the user sees it.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

import sparkafka


def run(spark: Any, case: dict[str, Any]) -> None:
    print(f"@@START {case['name']}", file=sys.stderr, flush=True)
    if case["source"] is None:
        df = spark.readStream.format("rate").option("rowsPerSecond", "20").load()
        df = df.selectExpr("CAST(value AS STRING) AS value")
        if case.get("topic_column"):
            df = df.selectExpr("value", f"'{case['topic_column']}' AS topic")
    else:
        df = spark.readStream.format("sparkafka").options(**case["source"]["options"]).load()
    if case["sink"] is None:
        writer = df.writeStream.format("noop")
    else:
        writer = df.writeStream.format("sparkafka").options(**case["sink"]["options"])
    writer = writer.option("checkpointLocation", case["checkpoint"])
    query = writer.start()
    if case.get("unawaited"):  # a notebook's way: nobody waits; the query's state is looked at
        deadline = time.monotonic() + 120
        while query.isActive and time.monotonic() < deadline:
            time.sleep(0.1)
        failure = query.exception()
        if failure is not None:
            raise failure
    elif query.awaitTermination(120):
        return
    print("@@NO FAILURE", file=sys.stderr, flush=True)
    query.stop()


def main(path: str) -> None:
    spark = (
        SparkSession.builder.master(os.environ.get("SPARKAFKA_TEST_MASTER", "local[2]"))
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    if os.environ.get("SPARKAFKA_TEST_REGISTER", "1") == "1":
        sparkafka.register(spark)
    for case in json.loads(Path(path).read_text()):
        try:
            run(spark, case)
        except Exception:  # noqa: BLE001 - printed as Python prints an uncaught exception
            traceback.print_exc()
        sys.stderr.flush()
        print(f"@@END {case['name']}", file=sys.stderr, flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
