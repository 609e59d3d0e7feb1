"""The Apache Kafka install: the pinned list is complete and consistent; a second run downloads nothing;
an offline machine gets one line naming what could not be fetched."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sparkafka.errors import BrokerError
from sparkafka.local import kafka_dist, maven_dist, spark_kafka_dist

DATA = Path(kafka_dist.__file__).parent / "apache_kafka"


def test_pom_and_module_pin_the_same_kafka_version() -> None:
    pom = (DATA / "pom.xml").read_text()
    kafka = re.search(r"<artifactId>kafka_2\.13</artifactId>\s*<version>([^<]+)</version>", pom)
    assert kafka is not None
    assert kafka.group(1) == kafka_dist.KAFKA_VERSION


def test_checksum_list_names_the_broker_jars_once_each_with_sha256() -> None:
    sums = kafka_dist.KAFKA.expected_checksums()
    assert f"kafka_2.13-{kafka_dist.KAFKA_VERSION}.jar" in sums
    for module in ("kafka-server", "kafka-storage", "kafka-raft", "kafka-metadata", "kafka-clients"):
        assert f"{module}-{kafka_dist.KAFKA_VERSION}.jar" in sums
    assert all(re.fullmatch(r"[0-9a-f]{64}", digest) for digest in sums.values())
    listed = [ln for ln in (DATA / "kafka-jars.sha256").read_text().splitlines() if ln and ln[0] != "#"]
    assert len(listed) == len(sums)  # no jar listed twice


def test_an_installed_and_verified_copy_is_used_without_maven(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fake jars whose checksums are the pinned ones cannot be made, so the check is fed its own list."""
    monkeypatch.setenv("SPARKAFKA_CACHE_DIR", str(tmp_path))
    libs = tmp_path / f"kafka-{kafka_dist.KAFKA_VERSION}" / "libs"
    libs.mkdir(parents=True)
    (libs / "a.jar").write_bytes(b"a")
    import hashlib

    monkeypatch.setattr(
        maven_dist.MavenDist, "expected_checksums", lambda _: {"a.jar": hashlib.sha256(b"a").hexdigest()}
    )
    monkeypatch.setattr(maven_dist.shutil, "which", lambda _: None)  # no mvn: it must not be needed
    assert kafka_dist.install(quiet=True) == libs
    assert kafka_dist.installed_libs() == libs  # the stamp is written: later runs read one file
    (libs / "a.jar").write_bytes(b"tampered")
    (libs / ".verified").unlink()
    with pytest.raises(BrokerError, match="mvn` is not on PATH"):
        kafka_dist.install(quiet=True)  # an altered jar is not trusted: it would be fetched again


@pytest.mark.skipif(shutil.which("mvn") is None, reason="needs Maven (the setup installs Kafka with it)")
def test_offline_machine_gets_one_line_naming_what_could_not_be_fetched(tmp_path: Path) -> None:
    # Maven's HTTPS through a proxy on a closed local port: exactly what a machine without a network sees.
    env = {
        **os.environ,
        "SPARKAFKA_CACHE_DIR": str(tmp_path),
        "MAVEN_OPTS": "-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=9 -Dhttp.proxyHost=127.0.0.1 "
        "-Dhttp.proxyPort=9",
    }
    done = subprocess.run(
        [sys.executable, "-m", "sparkafka.local.kafka_dist"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: could not fetch Apache Kafka {kafka_dist.KAFKA_VERSION} ")
    assert f"org.apache.kafka:kafka_2.13:{kafka_dist.KAFKA_VERSION}" in last
    assert "Traceback" not in done.stderr
    assert not (tmp_path / f"kafka-{kafka_dist.KAFKA_VERSION}" / "libs").exists()  # nothing half-installed


def test_spark_connector_pin_names_the_four_jars_spark_lacks() -> None:
    pom = (Path(spark_kafka_dist.__file__).parent / "spark_kafka" / "pom.xml").read_text()
    pinned = re.search(
        r"<artifactId>spark-sql-kafka-0-10_2\.13</artifactId>\s*<version>([^<]+)</version>", pom
    )
    assert pinned is not None
    assert pinned.group(1) == spark_kafka_dist.SPARK_KAFKA_VERSION
    sums = spark_kafka_dist.SPARK_KAFKA.expected_checksums()
    version = spark_kafka_dist.SPARK_KAFKA_VERSION
    assert {
        f"spark-sql-kafka-0-10_2.13-{version}.jar",
        f"spark-token-provider-kafka-0-10_2.13-{version}.jar",
    } < set(sums)
    assert len(sums) == 4
    assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in sums.values())
