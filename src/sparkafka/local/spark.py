"""A local SparkSession configured the way sparkafka's demo and tools need it."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["local_spark", "stop_spark"]

_LOG4J = """rootLogger.level = error
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d %p %c: %m%n
"""


def local_spark(
    master: str = "local[2]",
    app_name: str = "sparkafka",
    scratch: str | None = None,
    config: Mapping[str, str] | None = None,
) -> Any:
    """A quiet SparkSession bound to 127.0.0.1, with workers on this interpreter and sparkafka registered."""
    tmp = Path(scratch or tempfile.mkdtemp(prefix="sparkafka-spark-"))
    tmp.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log4j = tmp / "log4j2.properties"
    log4j.write_text(_LOG4J)
    java_opts = f"-Djava.io.tmpdir={tmp} -Dlog4j.configurationFile=file:{log4j}"
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in (config or {}).items():
        builder = builder.config(key, value)
    session = (
        builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.local.dir", str(tmp))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    import sparkafka

    register = getattr(sparkafka, "register", None)
    if register is not None:
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
    except Exception:  # subprocess.TimeoutExpired: the JVM ignored its closed stdin
        proc.kill()
        proc.wait()
