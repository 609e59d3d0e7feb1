"""The SparkSession a pipeline runs in: local, or whatever ``spark-submit`` was told.

Runs in the user's driver process. ``sparkafka run`` starts a local Spark (``[spark] master``, default
``local[2]``): quiet, bound to 127.0.0.1, scratch space in a temp dir removed at exit, with the Python
workers on this interpreter; the pipeline file's ``[spark.config]`` is applied last, so it overrides every
default here.
Run through ``spark-submit`` (see docs/deploy.md), the JVM and its settings already exist: the master,
deploy mode, executors and the driver's addresses come from spark-submit, and a pipeline file's
``[spark] master`` is ignored with a warning; ``[spark.config]`` still applies.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sparkafka.pipeline.config import PipelineConfig

__all__ = ["DEFAULT_MASTER", "describe_master", "local_session", "pipeline_spark", "stop_spark", "submitted"]

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[2]"

_LOG4J = """rootLogger.level = error
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d %p %c: %m%n
"""


def local_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "sparkafka",
    scratch: str | None = None,
    config: Mapping[str, str] | None = None,
) -> Any:
    """A quiet local SparkSession on 127.0.0.1, workers on this interpreter, sparkafka registered.

    ``config`` is applied after the defaults (UI off, two shuffle partitions, scratch dirs), so it wins.
    Without ``scratch``, a temp dir of its own, removed when the process exits.
    """
    if scratch is None:
        tmp = Path(tempfile.mkdtemp(prefix="sparkafka-spark-"))
        # Its own scratch (Spark's local dirs, the JVM's temp files) goes with this process: every
        # `sparkafka run` left one in /tmp before (348 after a day of tests). Registered before the context
        # starts, so it runs after PySpark's own exit hooks (atexit runs the last registered first).
        atexit.register(shutil.rmtree, tmp, True)
    else:
        tmp = Path(scratch)
    tmp.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log4j = tmp / "log4j2.properties"
    log4j.write_text(_LOG4J)
    java_opts = f"-Djava.io.tmpdir={tmp} -Dlog4j.configurationFile=file:{log4j}"
    from pyspark.sql import SparkSession

    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.local.dir": str(tmp),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.sql.shuffle.partitions": "2",
    }
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**defaults, **(config or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    from sparkafka.datasource import register

    register(session)
    return session


def stop_spark(session: Any, timeout_s: float = 30.0) -> None:
    """Stop ``session`` and wait for its JVM to exit, so no Spark process outlives the caller's work.

    ``SparkSession.stop`` leaves the gateway JVM running until the Python process exits; here the JVM is
    told to exit (its stdin is closed, as PySpark does at interpreter exit) and is killed by PID if it has
    not exited within ``timeout_s``.
    """
    from pyspark import SparkContext

    session.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is None:
        return
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout=timeout_s)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: the JVM ignored its closed stdin
        proc.kill()
        proc.wait()


def submitted() -> bool:
    """Whether spark-submit started this interpreter (it hands the Python driver its JVM's gateway port)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def pipeline_spark(cfg: PipelineConfig) -> Any:
    """A SparkSession for ``cfg`` with format("sparkafka") registered."""
    from sparkafka.datasource import register

    app_name = f"sparkafka-{cfg.name}"
    if not submitted():
        return local_session(master=cfg.master or DEFAULT_MASTER, app_name=app_name, config=cfg.spark_config)
    if cfg.master:
        log.warning("%s: [spark] master %r is ignored: spark-submit's --master applies", cfg.path, cfg.master)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    for key, value in cfg.spark_config.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    register(session)
    return session


def describe_master(spark: Any) -> str:
    """Where the pipeline runs, for ``--dry-run``."""
    master = spark.sparkContext.master
    return f"{master} (from spark-submit)" if submitted() else master
