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

from sparkafka.local.maven_dist import MavenDist

__all__ = ["SPARK_KAFKA", "SPARK_KAFKA_VERSION", "spark_jars"]

SPARK_KAFKA_VERSION = "4.2.0"
"""The connector's version: the newest on Maven Central on 2026-11-24 (PySpark 4.3's own is not served)."""

SPARK_KAFKA = MavenDist(
    title=f"Spark's Kafka connector {SPARK_KAFKA_VERSION}",
    coordinate=f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_KAFKA_VERSION}",
    data="spark_kafka",
    checksums="spark-kafka-jars.sha256",
    folder=f"spark-sql-kafka-{SPARK_KAFKA_VERSION}",
    size="about 12 MB",
)


def spark_jars(quiet: bool = True) -> str:
    """The connector's jars as a ``spark.jars`` value (comma-separated paths), installing them if needed.

    Raises:
        BrokerError: Maven is missing or cannot fetch, or a jar does not match its checksum.
    """
    libs = SPARK_KAFKA.install(quiet)
    return ",".join(str(p) for p in sorted(libs.glob("*.jar")))


if __name__ == "__main__":
    raise SystemExit(SPARK_KAFKA.main(None, "Install Spark's Kafka connector from Maven Central"))
