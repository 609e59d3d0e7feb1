"""Class-data-sharing archives for the JVMs the tests start: Spark drivers and Apache Kafka nodes.

A JVM spends much of its start loading and verifying classes (Spark's driver some 20,000, a Kafka node some
8,000): with a dynamic CDS archive (JDK 13+, ``-XX:ArchiveClassesAtExit`` once, ``-XX:SharedArchiveFile``
after) it maps them ready-made. Measured side by side on this 2-core machine (2026-11-28), a Spark driver
that starts and runs two small queries: 9.8-10.5 s of CPU without, 6.0-6.8 s with; its ``getOrCreate``
5.3-5.7 s of wall time against 3.2-3.3 s. The suite starts dozens of drivers and brokers, on 2 cores.

When: ``prepare`` runs once per test run, in the process that starts it (pytest-xdist's controller, before
its workers start), and starts a build, in the background, only where the archive is missing: once per
JVM, set of jars (a fresh venv's jars are new files: CI builds them each run) and options, into
``~/.cache/sparkafka/cds`` (about 170 MB for Spark's, 55 MB for Kafka's; the newest few kept). It returns
the options to add: the workers and every subprocess inherit them through the environment.

Only a speed-up: an archive that fails to build is left out, with one line saying so, and a JVM whose class
path does not match its archive (a test's other venv) runs without it, silently (``-Xlog:cds*=off``: the
JVM's warning would land in a test's captured output). Tests only: the demo and the benchmarks run the
JVM's defaults.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from sparkafka.local.kafka_broker import JAVA_OPTIONS_ENV, ApacheKafka
from sparkafka.local.procs import start_group

__all__ = ["build", "prepare"]

QUIET = "-Xlog:cds*=off"
"""No word from CDS: a mismatched or missing archive only means a slower start."""

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sparkafka" / "cds"

_SPARK_WORKLOAD = textwrap.dedent(
    """
    import sys, tempfile
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import (
        DataSource, DataSourceReader, DataSourceStreamReader, InputPartition,
    )

    class Reader(DataSourceReader):
        def read(self, partition):
            yield (1, "a")

    class Stream(DataSourceStreamReader):
        def initialOffset(self):
            return {"o": 0}
        def latestOffset(self):
            return {"o": 2}
        def partitions(self, start, end):
            return [InputPartition(i) for i in range(start["o"], end["o"])]
        def read(self, partition):
            yield (partition.value, "b")

    class Source(DataSource):
        @classmethod
        def name(cls):
            return "cds_warm"
        def schema(self):
            return "k int, v string"
        def reader(self, schema):
            return Reader()
        def streamReader(self, schema):
            return Stream()

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    spark.dataSource.register(Source)
    spark.range(100).selectExpr("id % 3 AS k").groupBy("k").count().collect()
    spark.read.format("cds_warm").load().collect()
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            spark.readStream.format("cds_warm").load()
            .writeStream.format("noop").option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start()
        )
        query.awaitTermination(120)
    # The archive is written as the driver JVM exits, which it does once its stdin closes: wait for it.
    gateway = spark.sparkContext._gateway
    spark.stop()
    gateway.shutdown()
    gateway.proc.stdin.close()
    gateway.proc.wait(120)
    """
)


KEEP = 4
"""Archives kept per kind besides the one in use (each fresh venv has new jar times, so a new key): the
newest, so that a few checkouts side by side keep theirs; older ones are deleted (a JVM that mapped one
keeps it until it exits)."""


def prepare(
    spark_options: str, broker_options: str, *, build: bool
) -> tuple[tuple[str, str], list[subprocess.Popen[bytes]]]:
    """``spark_options`` and ``broker_options`` each with its archive's options added, and the builds
    started (``build``) for the archives missing: ``python -m tests.support.jvm_archives``, each in a
    session of its own (``procs.start_group``; stop it with ``procs.stop_group``), its output in
    ``<kind>-build.log`` beside the archives. The options name an archive before it exists: a JVM that
    starts before the build has renamed it into place runs without (silently), one after maps it, so the
    build (about 40 s of one core) runs beside the first tests instead of ahead of them."""
    CACHE.mkdir(parents=True, exist_ok=True)
    builders: list[subprocess.Popen[bytes]] = []
    options = []
    for kind, given, key in (
        ("spark", spark_options, _spark_key(spark_options)),
        ("kafka", broker_options, _kafka_key(broker_options)),
    ):
        if key is None:  # no JVM or jars to match
            options.append(given)
            continue
        path = CACHE / f"{kind}-{key}.jsa"
        _prune(kind, path)
        if not path.exists() and build:
            command = [sys.executable, "-m", "tests.support.jvm_archives", kind, given, str(path)]
            builders.append(start_group(command, CACHE / f"{kind}-build.log"))
        options.append(f"{given} -XX:SharedArchiveFile={path} {QUIET}")
    return (options[0], options[1]), builders


def build(kind: str, options: str, path: Path, run: Callable[[str], None] | None = None) -> bool:
    """Builds ``path`` (``run``: the kind's workload under the options plus ``ArchiveClassesAtExit``) into a
    partial file renamed into place once whole. False, with one line on stderr (the build's log), when it
    could not."""
    run = run or {"spark": _build_spark, "kafka": _build_kafka}[kind]
    partial = Path(tempfile.mkdtemp(prefix="partial-", dir=CACHE)) / path.name
    try:
        run(f"{options} -XX:ArchiveClassesAtExit={partial}")
        if partial.exists():
            os.replace(partial, path)
            return True
        print(f"tests: no {kind} class-data archive (its JVM wrote none)", file=sys.stderr)
    except Exception as e:  # noqa: BLE001 - only a speed-up: whatever stops the build, say so, go on
        print(f"tests: no {kind} class-data archive ({type(e).__name__}: {e})", file=sys.stderr)
    finally:
        shutil.rmtree(partial.parent, ignore_errors=True)
    return False


def _prune(kind: str, current: Path) -> None:
    """Deletes all but the newest ``KEEP`` archives of ``kind`` besides ``current``, and partial builds
    left for over an hour (a build stopped by SIGKILL)."""
    others = sorted(
        (p for p in CACHE.glob(f"{kind}-*.jsa") if p != current),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in others[KEEP:]:
        old.unlink(missing_ok=True)
    for partial in CACHE.glob("partial-*"):
        if time.time() - partial.stat().st_mtime > 3600:
            shutil.rmtree(partial, ignore_errors=True)


def _fingerprint(options: str, jars: Path) -> str:
    """The archive's key: the JVM (its binary and version file), the jars (names, sizes, times) and the
    options; any of them changed makes another archive (``_prune`` deletes the old ones past ``KEEP``)."""
    java = Path(os.path.realpath(_which("java")))
    parts = [str(java), str(java.stat().st_mtime_ns), options]
    release = java.parent.parent / "release"
    if release.exists():
        parts.append(release.read_text())
    for jar in sorted(jars.glob("*.jar")):
        st = jar.stat()
        parts.append(f"{jar}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _which(program: str) -> str:
    found = shutil.which(program)
    if found is None:
        raise FileNotFoundError(program)
    return found


def _spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _spark_key(options: str) -> str | None:
    try:
        return _fingerprint(options, _spark_jars())
    except OSError:
        return None


def _build_spark(options: str) -> None:
    env = {**os.environ, "SPARK_SUBMIT_OPTS": options, "PYSPARK_PYTHON": sys.executable}
    subprocess.run(
        [sys.executable, "-c", _SPARK_WORKLOAD],
        env=env,
        check=True,
        timeout=300,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _kafka_key(options: str) -> str | None:
    from sparkafka.local.kafka_dist import installed_libs

    libs = installed_libs()
    try:
        return None if libs is None else _fingerprint(options, libs)
    except OSError:
        return None


def _build_kafka(options: str) -> None:
    """A node that formats its storage, starts, takes a transaction and a group's commit, and stops (its
    archive is written as it exits; the storage tool's, written first, is overwritten)."""
    before = os.environ.get(JAVA_OPTIONS_ENV)
    os.environ[JAVA_OPTIONS_ENV] = options
    try:
        with tempfile.TemporaryDirectory() as data, ApacheKafka(data_dir=Path(data)) as kafka:
            conf = {"bootstrap.servers": kafka.bootstrap_servers}
            admin = AdminClient(conf)  # kept until its future resolves
            admin.create_topics([NewTopic("cds-warm", 1, 1)])["cds-warm"].result(60)
            producer = Producer({**conf, "transactional.id": "cds-warm"})
            producer.init_transactions(60)
            producer.begin_transaction()
            producer.produce("cds-warm", b"v")
            producer.commit_transaction(60)
            consumer = Consumer(
                {**conf, "group.id": "cds-warm", "auto.offset.reset": "earliest", "enable.auto.commit": False}
            )
            consumer.subscribe(["cds-warm"])
            for _ in range(60):
                message = consumer.poll(1.0)
                if message is not None and message.error() is None:
                    consumer.commit(message, asynchronous=False)
                    break
            consumer.close()
            producer.flush(10)
            del producer, admin  # gone before the node stops: nothing left to log its absence
    finally:
        if before is None:
            os.environ.pop(JAVA_OPTIONS_ENV, None)
        else:
            os.environ[JAVA_OPTIONS_ENV] = before


def _stopped_by_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(1)  # so that ``build`` cleans up its partial file, and the broker stops


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stopped_by_sigterm)
    sys.exit(0 if build(sys.argv[1], sys.argv[2], Path(sys.argv[3])) else 1)
