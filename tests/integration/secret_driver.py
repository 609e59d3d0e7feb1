"""Everything a user might share after running sparkafka with a password, written to one folder.

Usage: python -m tests.integration.secret_driver SETTINGS_JSON OUT_DIR

SETTINGS_JSON holds ``{"kafka": {kafka.* options}, "source": TOPIC, "output": TOPIC, "group": GROUP,
"prefix": PREFIX, "denied": TOPIC}``. Runs, in its own SparkSession with the event log and the UI on: a batch
read (``explain`` in every mode), a streaming read committing to its group into the exactly-once sink
(``lastProgress``, ``recentProgress``), an option error and an authorization refusal (their messages),
then fetches the Spark UI's SQL, Environment, jobs and streaming pages over HTTP. Writes all of it under
OUT_DIR; sparkafka's loggers log at DEBUG to OUT_DIR/driver.log. The test (test_secure_secrets.py) looks
for the password in everything under OUT_DIR, the process's output and the metrics files.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
import urllib.request
from pathlib import Path

from sparkafka import register
from sparkafka.local.broker import free_port
from sparkafka.local.spark import local_spark, stop_spark


def _page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return str(answer.read().decode(errors="replace"))


def _ui_pages(base: str, app_id: str, out: Path) -> None:
    pages = {"environment": "/environment/", "sql": "/SQL/", "jobs": "/jobs/"}
    pages["streaming"] = "/StreamingQuery/"
    for name, path in pages.items():
        (out / f"ui-{name}.html").write_text(_page(base + path))
    # The SQL tab's table is filled by its script from the REST API (Spark 4): the same, with the plans
    api = _page(f"{base}/api/v1/applications/{app_id}/sql?details=true&planDescription=true")
    (out / "ui-sql-api.json").write_text(api)
    for execution in sorted({int(e["id"]) for e in json.loads(api)}):
        page = _page(f"{base}/SQL/execution/?id={execution}")
        (out / f"ui-sql-execution-{execution}.html").write_text(page)


def main(argv: list[str]) -> int:
    settings = json.loads(Path(argv[0]).read_text())
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(out / "driver.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("sparkafka").addHandler(handler)
    logging.getLogger("sparkafka").setLevel(logging.DEBUG)
    kafka: dict[str, str] = settings["kafka"]
    (out / "events").mkdir(exist_ok=True)  # Spark's event log needs its directory before it starts
    spark = local_spark(
        master="local[2]",
        config={
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": str(out / "events"),
            "spark.ui.enabled": "true",
            "spark.ui.port": str(free_port()),
        },
    )
    try:
        register(spark)
        batch = spark.read.format("sparkafka").options(**kafka).option("subscribe", settings["source"]).load()
        plans = io.StringIO()
        with contextlib.redirect_stdout(plans):
            for mode in ("simple", "extended", "codegen", "cost", "formatted"):
                batch.explain(mode)
        (out / "explain.txt").write_text(plans.getvalue())
        (out / "rows.txt").write_text(str(batch.count()))

        query = (
            spark.readStream.format("sparkafka")
            .options(**kafka)
            .option("subscribe", settings["source"])
            .option("kafka.group.id", settings["group"])
            .option("startingOffsets", "earliest")
            .load()
            .select("key", "value")
            .writeStream.format("sparkafka")
            .options(**kafka)
            .option("topic", settings["output"])
            .option("deliveryGuarantee", "exactly_once")
            .option("transactionalIdPrefix", settings["prefix"])
            .option("checkpointLocation", str(out / "checkpoint"))
            .queryName("secured")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(180)
        (out / "progress.json").write_text(
            json.dumps({"last": query.lastProgress, "recent": query.recentProgress}, default=str)
        )
        if query.exception() is not None:
            (out / "query-failed.txt").write_text(str(query.exception()))
            return 3

        errors = []
        for options in (
            {"subscribe": settings["source"], "startingOffsets": "nope"},  # an option error
            {"subscribe": settings["denied"]},  # an authorization refusal
        ):
            try:
                spark.read.format("sparkafka").options(**kafka).options(**options).load().count()
            except Exception as e:  # noqa: BLE001 - every error's text is what this records
                errors.append(str(e))
        (out / "errors.txt").write_text("\n\n".join(errors))
        _ui_pages(str(spark.sparkContext.uiWebUrl).rstrip("/"), spark.sparkContext.applicationId, out)
        print("DONE", flush=True)
        return 0
    finally:
        stop_spark(spark)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
