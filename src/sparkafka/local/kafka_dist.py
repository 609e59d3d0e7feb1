"""Apache Kafka's broker jars: installed once from Maven Central into a cache outside the repository.

Runs in the process of ``make`` (``python -m sparkafka.local.kafka_dist``), of ``sparkafka broker`` or of a
test session, before a broker starts. ``apache_kafka/pom.xml`` beside this module pins
``org.apache.kafka:kafka_2.13`` and a logging binding; ``apache_kafka/kafka-jars.sha256`` lists every jar
with its SHA-256. How they are fetched, checked and cached: ``sparkafka.local.maven_dist``. The jars land
in ``kafka-<version>/libs`` under the cache.
"""

from __future__ import annotations

from pathlib import Path

from sparkafka.local.maven_dist import MavenDist, cache_dir

__all__ = ["KAFKA", "KAFKA_VERSION", "cache_dir", "install", "installed_libs"]

KAFKA_VERSION = "4.4.0"
"""The Apache Kafka release the project runs (the newest 4.x whose jars resolved on 2026-11-24)."""

KAFKA = MavenDist(
    title=f"Apache Kafka {KAFKA_VERSION}",
    coordinate=f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
    data="apache_kafka",
    checksums="kafka-jars.sha256",
    folder=f"kafka-{KAFKA_VERSION}",
    size="about 45 MB",
    hint=", or use the pip-only broker with `sparkafka broker --tansu`",
)


def installed_libs() -> Path | None:
    """The verified broker jars if installed, else None (cheap: reads one stamp file)."""
    return KAFKA.installed_libs()


def install(quiet: bool = False) -> Path:
    """The verified broker jars, downloading and checking them first if needed (BrokerError if not)."""
    return KAFKA.install(quiet)


if __name__ == "__main__":
    raise SystemExit(KAFKA.main(None, "Install Apache Kafka's broker jars from Maven Central"))
