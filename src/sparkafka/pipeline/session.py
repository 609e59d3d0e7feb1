"""The SparkSession a pipeline runs in: local, or whatever ``spark-submit`` was told.

``sparkafka run`` starts a local Spark (``[spark] master``, default ``local[2]``). Run through
``spark-submit`` (see docs/deploy.md), the JVM and its settings already exist: the master, deploy mode,
executors and the driver's addresses come from spark-submit, and a pipeline file's ``[spark] master`` is
ignored with a warning; ``[spark.config]`` still applies.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from sparkafka.pipeline.config import PipelineConfig

__all__ = ["DEFAULT_MASTER", "describe_master", "pipeline_spark", "submitted"]

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[2]"


def submitted() -> bool:
    """Whether spark-submit started this interpreter (it hands the Python driver its JVM's gateway port)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def pipeline_spark(cfg: PipelineConfig) -> Any:
    """A SparkSession for ``cfg`` with format("sparkafka") registered."""
    import sparkafka
    from sparkafka.local.spark import local_spark

    app_name = f"sparkafka-{cfg.name}"
    if not submitted():
        return local_spark(master=cfg.master or DEFAULT_MASTER, app_name=app_name, config=cfg.spark_config)
    if cfg.master:
        log.warning("%s: [spark] master %r is ignored: spark-submit's --master applies", cfg.path, cfg.master)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    for key, value in cfg.spark_config.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    sparkafka.register(session)
    return session


def describe_master(spark: Any) -> str:
    """Where the pipeline runs, for ``--dry-run``."""
    master = spark.sparkContext.master
    return f"{master} (from spark-submit)" if submitted() else master
