"""Spark's own Kafka connector (``format("kafka")``): installed once from Maven Central, for comparison.

A test and benchmark dependency only: the side-by-side tests (``tests/integration/test_vs_spark.py``) and
``bench/vs_spark.py`` put these jars on ``spark.jars`` to read and write the same topics with both
connectors. Nothing in the product loads them. Runs in the process of ``make`` (``make test`` and the
benchmark's target install it), of a test session or of the benchmark.

Version: the connector is built per Spark release, and Spark 4.3.0's is not on Maven Central
(2026-11-24); 4.2.0, the newest there, runs on the pinned PySpark 4.3 (the side-by-side tests show it).
``spark_kafka/pom.xml`` keeps the four jars Spark itself lacks (the connector, its token provider,
kafka-clients 3.9.2 and commons-pool2); ``spark_kafka/spark-kafka-jars.sha256`` pins them.
"""

from __future__ import annotations

import pyspark

from sparkafka.local.maven_dist import MavenDist

__all__ = [
    "SPARK_KAFKA",
    "SPARK_KAFKA_BY_LINE",
    "SPARK_KAFKA_VERSION",
    "line_connector_version",
    "spark_jars",
    "spark_line",
]

SPARK_KAFKA_VERSION = "4.2.0"
"""The connector's version: the newest on Maven Central on 2026-11-24 (PySpark 4.3's own is not served)."""


def _dist(version: str, data: str, checksums: str = "spark-kafka-jars.sha256") -> MavenDist:
    return MavenDist(
        title=f"Spark's Kafka connector {version}",
        coordinate=f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}",
        data=data,
        checksums=checksums,
        folder=f"spark-sql-kafka-{version}",
        size="about 12 MB",
    )


SPARK_KAFKA = _dist(SPARK_KAFKA_VERSION, "spark_kafka")

SPARK_KAFKA_BY_LINE = {
    "4.0": _dist("4.0.0", "spark_kafka_4_0"),
    "4.1": _dist("4.1.1", "spark_kafka_4_1"),
    "4.2": SPARK_KAFKA,
    "4.3": SPARK_KAFKA,
}
"""Each PySpark line's connector (the tests' matrix of lines, issue 51): a release of its own line whose
jars are all served here (4.0.1 to 4.0.4 and 4.1.2 to 4.1.3 lack their token provider's jar on the mirror
this machine reaches, 2026-11-29), 4.2.0 for 4.3 (whose own is not served)."""


def spark_line() -> str:
    """The installed PySpark's line, ``4.3``: which connector the side-by-side tests put beside it (test
    support only; the product tells lines apart by what PySpark offers, ``sparkafka.spark_lines``)."""
    return ".".join(pyspark.__version__.split(".")[:2])


def _line_dist() -> MavenDist:
    """The connector for the installed PySpark's line (the newest pinned one for a line not listed)."""
    return SPARK_KAFKA_BY_LINE.get(spark_line(), SPARK_KAFKA)


def line_connector_version() -> str:
    """The version of the connector ``spark_jars`` puts beside the installed PySpark (``4.0.0`` on 4.0)."""
    return _line_dist().coordinate.rsplit(":", 1)[-1]


def spark_jars(quiet: bool = True) -> str:
    """The connector's jars for the installed PySpark's line as a ``spark.jars`` value (comma-separated
    paths), installing them if needed.

    Raises:
        BrokerError: Maven is missing or cannot fetch, or a jar does not match its checksum.
    """
    libs = _line_dist().install(quiet)
    return ",".join(str(p) for p in sorted(libs.glob("*.jar")))


if __name__ == "__main__":
    raise SystemExit(
        _line_dist().main(
            None, "Install Spark's Kafka connector of the installed PySpark's line from Maven Central"
        )
    )
