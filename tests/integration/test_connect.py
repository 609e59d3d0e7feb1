"""sparkafka through Spark Connect: a local Connect server on 127.0.0.1, a client session in this process."""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkafka.local.broker import free_port
from sparkafka.local.procs import GroupProcess
from tests.support.kafka import Kafka
from tests.support.wait import wait_until

# Both tests in one process, so they share the one Connect server (a JVM of its own) that ``remote`` starts.
pytestmark = [pytest.mark.xdist_group("spark-connect"), pytest.mark.lines]


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark Connect server (the spark-connect jar of the pip package) and a client session on it."""
    import pyspark
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    port = free_port()
    spark_home = Path(pyspark.__file__).parent
    conf = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.pyspark.python": sys.executable,  # the server's Python has sparkafka installed
        "spark.sql.shuffle.partitions": "2",
    }
    server_class = "org.apache.spark.sql.connect.service.SparkConnectServer"
    cmd = [str(spark_home / "bin" / "spark-submit"), "--class", server_class, "--master", "local[2]"]
    cmd += [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]
    cmd.append("spark-internal")  # the primary resource of a class inside Spark's own jars
    log_path = tmp_path_factory.mktemp("connect") / "server.log"
    # The server runs Python workers with PYSPARK_PYTHON: this interpreter, where sparkafka is installed.
    env = {**os.environ, "SPARK_HOME": str(spark_home), "PYSPARK_PYTHON": sys.executable}
    server = GroupProcess(cmd, log_path=log_path, env=env)

    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_until(
            listening, 180, f"the Connect server to listen on port {port}", process=server, interval_s=0.5
        )
        session = RemoteSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
        try:
            yield session
        finally:
            session.stop()
    finally:
        server.stop(timeout_s=30)


def test_read_and_exactly_once_write_through_spark_connect(
    remote: Any,
    kafka: Kafka,
    bootstrap: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import sparkafka

    src, dst = kafka.topic(partitions=2), kafka.topic(partitions=2)
    kafka.produce(src, [f"c{i}" for i in range(30)], 2)
    with caplog.at_level(logging.WARNING, logger="sparkafka"):
        sparkafka.register(remote)
    assert "sparkafka must be installed there" in caplog.text  # what the server needs, said once

    batch = (
        remote.read.format("sparkafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", src)
    )
    assert batch.load().count() == 30

    stream = (
        remote.readStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value")
    )
    query = (
        stream.writeStream.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", dst)
        .option("deliveryGuarantee", "exactly_once")
        .option("transactionalIdPrefix", f"connect-{uuid.uuid4().hex[:6]}")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(240)
    assert query.exception() is None
    # Progress reaches the remote client: how to watch a query from there (metrics files are the server's).
    progress = query.recentProgress
    assert sum(json.loads(p.json)["sink"]["numOutputRows"] for p in progress) == 30
    written = sorted((r.value or b"").decode() for r in kafka.committed(dst))
    assert written == sorted(f"c{i}" for i in range(30))


def test_option_errors_reach_the_connect_client_in_sparkafkas_words(remote: Any, bootstrap: str) -> None:
    import sparkafka

    sparkafka.register(remote)
    reader = remote.read.format("sparkafka").option("kafka.bootstrap.servers", bootstrap)
    with pytest.raises(
        Exception, match=r"set exactly one of the options subscribe \(comma-separated topics\)"
    ):
        reader.option("subscribePattern", "x").option("subscribe", "y").load().count()
