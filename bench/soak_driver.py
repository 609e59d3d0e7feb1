"""The soak's Spark application (``bench/soak.py`` starts it, SIGKILLs it and starts it again on the same
checkpoints): three streaming queries of the shapes users run, on one sparkafka source each.

- ``eos``: source -> a stateless SQL step -> the exactly-once sink (each record's partition kept, modulo the
  output's partitions, so that a quiet input partition makes a quiet output partition);
- ``agg``: source -> an aggregation (count per key) in update mode -> the exactly-once sink;
- ``alo``: source -> the at-least-once sink.

Every completed micro-batch of each query is appended to ``progress.jsonl`` as one line (query, batch id,
Spark's durationMs, rows) as soon as the driver sees it, so a SIGKILL loses at most the lines of batches
that had not ended. ``--available-now`` runs each query to the end of its input and exits (the drain).

    python bench/soak_driver.py CONFIG.json [--available-now]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import sparkafka
from sparkafka.pipeline.session import local_session

QUERIES = ("eos", "agg", "alo")


def start(spark: Any, config: dict[str, Any], name: str, available_now: bool) -> Any:
    bootstrap = config["bootstrap"]
    source = (
        spark.readStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", config["input"])
        .option("startingOffsets", "earliest")
        .option("kafka.group.id", f"{config['group']}-{name}")
        .option("partitionDiscoveryIntervalMs", "5000")
        .option("maxOffsetsPerTrigger", str(config["max_per_batch"]))
        .load()
    )
    if name == "eos":
        df = source.selectExpr("key", "value", f"partition % {config['out_partitions']} as partition")
    elif name == "agg":
        df = source.groupBy("key").count().selectExpr("key", "cast(`count` as string) as value")
    else:
        df = source.selectExpr("key", "value")
    writer = (
        df.writeStream.format("sparkafka")
        .queryName(name)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", config["outputs"][name])
        .option("checkpointLocation", str(Path(config["work"]) / f"ck-{name}"))
        .option("kafka.transaction.timeout.ms", "60000")
    )
    if name == "alo":
        writer = writer.option("deliveryGuarantee", "at_least_once")
    else:
        writer = writer.option("deliveryGuarantee", "exactly_once")
        writer = writer.option("transactionalIdPrefix", config["prefixes"][name])
    if name == "agg":
        writer = writer.outputMode("update")
    trigger = {"availableNow": True} if available_now else {"processingTime": config["trigger"]}
    return writer.trigger(**trigger).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--available-now", action="store_true")
    args = parser.parse_args()
    config = json.loads(Path(args.config).read_text())
    work = Path(config["work"])
    spark = local_session(
        master="local[2,4]",
        app_name="sparkafka-soak",
        config={"spark.sql.shuffle.partitions": str(config["shuffle_partitions"]), **config["spark_conf"]},
    )
    sparkafka.register(spark)
    queries = {name: start(spark, config, name, args.available_now) for name in QUERIES}
    seen: dict[str, int] = dict.fromkeys(QUERIES, -1)
    out = (work / "progress.jsonl").open("a", buffering=1)
    print(f"soak driver {os.getpid()} started: {', '.join(QUERIES)}", flush=True)
    while True:
        for name, query in queries.items():
            for progress in query.recentProgress:
                batch = int(progress["batchId"])
                if batch > seen[name] and progress.get("numInputRows") is not None:
                    seen[name] = batch
                    line = {
                        "query": name,
                        "batch": batch,
                        "rows": progress["numInputRows"],
                        "durationMs": progress.get("durationMs", {}),
                        "at": time.time(),
                    }
                    out.write(json.dumps(line) + "\n")
            if query.exception() is not None:
                raise SystemExit(f"query {name} failed: {query.exception()}")
        if args.available_now and not any(q.isActive for q in queries.values()):
            break
        time.sleep(0.25)
    print("soak driver: every query ended", flush=True)


if __name__ == "__main__":
    main()
