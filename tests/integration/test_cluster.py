"""The exactly-once pipeline on a Spark standalone cluster, submitted with spark-submit, losing a worker.

sparkafka is shipped as users ship it: a wheel built from this checkout, passed with ``--py-files`` (as
``.zip``), to a
driver and executors whose Python has the dependencies but not sparkafka (checked first), so every import
of sparkafka on the driver, in its Python data source runners and in the executors' Python workers comes
from the shipped wheel. Executors are separate JVMs under separate worker daemons; one worker (with its
executor and Python workers) is SIGKILLed while the query runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkafka.local.cluster import StandaloneCluster, spark_home
from sparkafka.local.procs import GroupProcess
from tests.support.kafka import Kafka
from tests.support.wait import wait_until

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
PER_BATCH = 2_000
RECORDS = 4 * PER_BATCH
"""Four batches: the worker is lost in batch 0's sink (its first task pauses mid-write), and the verdict
needs batches completed after the loss, with no record lost or doubled across it; more batches add time,
not evidence."""

PIPELINE = """
name = "cluster-pipeline"
checkpoint = "{checkpoint}"

[spark.config]
"spark.cores.max" = "2"
"spark.executor.cores" = "1"
"spark.executor.memory" = "512m"
"spark.task.maxFailures" = "4"
"spark.sql.shuffle.partitions" = "2"

[source]
decode = "raw"
[source.options]
"kafka.bootstrap.servers" = "{bootstrap}"
subscribe = "{src}"
startingOffsets = "earliest"
"kafka.group.id" = "{group}"
maxRecordsPerTrigger = "{per_batch}"

[sink]
key = "key"
value = "value"
[sink.options]
"kafka.bootstrap.servers" = "{bootstrap}"
topic = "{dst}"
deliveryGuarantee = "exactly_once"
transactionalIdPrefix = "{prefix}"
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(ROOT)],
        check=True,
        timeout=300,
    )
    (built,) = out.glob("sparkafka-*.whl")
    # --py-files puts only .py, .zip and .egg on the executors' path (pyspark's PACKAGE_EXTENSIONS); a
    # pure-Python wheel is a zip of the package, so it ships under a .zip name.
    return built.rename(built.with_suffix(".zip"))


@pytest.fixture(scope="module")
def runtime_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An interpreter with sparkafka's dependencies but not sparkafka, as on a cluster's nodes."""
    venv = tmp_path_factory.mktemp("runtime") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # A .pth line adds this venv's packages; .pth files inside it (sparkafka's editable install) are not run.
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = subprocess.run(
        [python, "-c", "import pyspark, confluent_kafka, kafka, pyarrow\nimport sparkafka"],
        check=False,
        capture_output=True,
        text=True,
    )
    assert "No module named 'sparkafka'" in probe.stderr, probe.stderr
    return python


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    with StandaloneCluster(workers=2, cores=1, memory="1g", work_dir=tmp_path_factory.mktemp("cluster")) as c:
        yield c


def _batches(log_json: Path) -> list[dict[str, object]]:
    if not log_json.exists():
        return []
    return [json.loads(line) for line in log_json.read_text().splitlines() if line.strip()]


def test_exactly_once_on_a_standalone_cluster_surviving_a_lost_worker(
    kafka: Kafka,
    bootstrap: str,
    tmp_path: Path,
    cluster: StandaloneCluster,
    wheel: Path,
    runtime_python: str,
) -> None:
    src, dst = kafka.topic(partitions=4), kafka.topic(partitions=4)
    prefix = f"cl-{uuid.uuid4().hex[:6]}"
    group = f"g-{prefix}"
    ids = [f"id-{i:06d}" for i in range(RECORDS)]
    kafka.produce(src, ids, partitions=4)
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(
        PIPELINE.format(
            checkpoint=tmp_path / "checkpoint",
            bootstrap=bootstrap,
            src=src,
            dst=dst,
            group=group,
            prefix=prefix,
            per_batch=PER_BATCH,
        )
    )
    log_json, driver_log = tmp_path / "batches.jsonl", tmp_path / "driver.log"
    # The first sink task to have written half its records pauses, holding an open transaction, and writes
    # its pid to the marker: the worker running it is then killed, mid-transaction.
    marker = tmp_path / "fault.marker"
    submit = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master",
        cluster.master_url,
        "--py-files",
        str(wheel),
        "--conf",
        f"spark.pyspark.python={runtime_python}",
        "--conf",
        f"spark.pyspark.driver.python={runtime_python}",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.log.level=INFO",  # the executor loss below is read from Spark's INFO log
        "--conf",
        "spark.executorEnv.SPARKAFKA_TEST_FAULT=task_mid_write:pause",
        "--conf",
        f"spark.executorEnv.SPARKAFKA_TEST_FAULT_MARKER={marker}",
        str(ROOT / "examples" / "submit_pipeline.py"),
        "run",
        str(pipeline),
        "--available-now",
        "--log-json",
        str(log_json),
    ]
    with GroupProcess(
        submit, log_path=driver_log, env={**cluster.env(), "COLUMNS": "160"}, cwd=tmp_path
    ) as proc:
        wait_until(
            lambda: marker.exists() and bool(marker.read_text()), 240, "a sink task to pause", process=proc
        )
        victim = cluster.worker_running(int(marker.read_text()))
        assert victim is not None, "the paused task runs in no worker of the cluster"
        before = cluster.executors_by_worker()
        assert all(n >= 1 for n in before.values()), f"executors per worker {before}: not spread out"
        batches_at_kill = len(_batches(log_json))
        cluster.kill_worker(victim)
        code = proc.wait(timeout_s=300)
    out = driver_log.read_text()
    assert code == 0, out[-4000:]
    assert len(_batches(log_json)) > batches_at_kill, "no batch completed after the worker was lost"
    # Spark 4.3's words for a task whose executor died under it (then rescheduled on the other worker).
    assert "its executor exited" in out, "the killed worker's task was not lost and rescheduled"

    seen = Counter(r.value.decode() for r in kafka.committed(dst))
    duplicates = {k: n for k, n in seen.items() if n > 1}
    lost = set(ids) - set(seen)
    assert not duplicates, f"{len(duplicates)} duplicated, e.g. {list(duplicates)[:5]}"
    assert not lost, f"{len(lost)} lost, e.g. {sorted(lost)[:5]}"
    assert set(seen) == set(ids)
    committed = kafka.group_offsets(group, src, 4)
    assert sum(committed.values()) == RECORDS, committed
