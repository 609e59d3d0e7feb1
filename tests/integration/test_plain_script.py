"""A plain PySpark script, run as a newcomer runs it: ``.venv/bin/python script.py``, no venv activated."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.support.kafka import produce

SCRIPT = """
import sys
from pyspark.sql import SparkSession
import sparkafka

spark = (
    SparkSession.builder.master("local[1]")
    .config("spark.ui.enabled", "false")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .getOrCreate()
)
sparkafka.register(spark)
df = (
    spark.read.format("sparkafka")
    .option("kafka.bootstrap.servers", sys.argv[1])
    .option("subscribe", sys.argv[2])
    .option("startingOffsets", "earliest")
    .load()
)
print("COUNT", df.count())
spark.stop()
"""


def test_script_outside_the_venv_gets_workers_with_sparkafka(
    kafka_conf: dict[str, str], bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    produce(kafka_conf, topic, ["a", "b", "c"])
    script = tmp_path / "count.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = "/usr/bin:/bin"  # "python3" here is the system's, without pyspark or sparkafka
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    result = subprocess.run(
        [sys.executable, str(script), bootstrap, topic],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        start_new_session=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "COUNT 3" in result.stdout
