"""The tests' fixtures, loaded as a pytest plugin (``pytest_plugins`` in tests/conftest.py).

One broker (Apache Kafka started once per run, or SPARKAFKA_TEST_BOOTSTRAP), one SparkSession, a Schema
Registry, topics; tansu (``tansu_conf``) only for the tests about tansu itself and ``broker_gaps``.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from sparkafka.client.core import close_all
from sparkafka.local import EmbeddedBroker
from sparkafka.local.kafka_broker import ApacheKafka
from sparkafka.ops.probes import Capability, probe_broker
from tests.support.kafka import Kafka

pytest_plugins = ["tests.support.secure"]  # the secured broker's fixtures (test_secure_*.py)

_capabilities: dict[str, Capability] = {}

# No timing in a test: Hypothesis's per-example deadline fails on a busy shared machine, not on a bug.
settings.register_profile("sparkafka", deadline=None)
settings.load_profile("sparkafka")


@pytest.fixture(scope="session")
def kafka_conf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """librdkafka settings for the test broker: SPARKAFKA_TEST_BOOTSTRAP if set, else Apache Kafka (KRaft,
    one node) started for this test run. Tests name everything uniquely: the broker need not be empty."""
    external = os.environ.get("SPARKAFKA_TEST_BOOTSTRAP")
    if external:
        yield {"bootstrap.servers": external}
        return
    # Tests write records with fixed timestamps years old: time retention would delete them mid-test (seen
    # in CI: a partition's log start moved past its 30 records between two reads of one test).
    with ApacheKafka(data_dir=tmp_path_factory.mktemp("kafka"), config={"log.retention.ms": "-1"}) as kafka:
        yield {"bootstrap.servers": kafka.bootstrap_servers}
        close_all()  # the process's cached clients go first: none is left to log the broker's absence
        gc.collect()


@pytest.fixture(scope="session")
def tansu_conf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """librdkafka settings for an embedded tansu: for tests of tansu itself and of ``broker_gaps``."""
    log_path = tmp_path_factory.mktemp("tansu") / "tansu.log"
    with EmbeddedBroker(log_path=log_path) as broker:
        yield {"bootstrap.servers": broker.bootstrap_servers}


@pytest.fixture(scope="session")
def registry_url() -> Iterator[str]:
    """A Schema Registry: SPARKAFKA_TEST_SCHEMA_REGISTRY if set, else the small test server on 127.0.0.1.

    Tests name their subjects uniquely, so a real registry's existing subjects do not matter.
    """
    external = os.environ.get("SPARKAFKA_TEST_SCHEMA_REGISTRY")
    if external:
        yield external
        return
    from tests.support.schema_registry import TestSchemaRegistry

    with TestSchemaRegistry() as registry:
        yield registry.url


@pytest.fixture(scope="session")
def bootstrap(kafka_conf: dict[str, str]) -> str:
    return kafka_conf["bootstrap.servers"]


@pytest.fixture(scope="session")
def require(kafka_conf: dict[str, str]) -> Callable[[str], None]:
    """``require("create_partitions")`` skips the test, with the probe's finding, on a broker lacking it."""

    def _require(name: str) -> None:
        if name not in _capabilities:
            _capabilities[name] = probe_broker(kafka_conf, name)
        cap = _capabilities[name]
        if not cap.ok:
            pytest.skip(f"broker lacks {name} (needs a conformant broker: {cap.detail})")

    return _require


@pytest.fixture
def kafka(kafka_conf: dict[str, str]) -> Kafka:
    """The test broker: ``kafka.topic(partitions)``, ``.produce``, ``.committed``, ``.group_offsets``."""
    return Kafka(kafka_conf)


@pytest.fixture
def new_topic(kafka: Kafka) -> Callable[..., str]:
    """Create uniquely named topics: ``new_topic(partitions=4)``.

    They are not deleted afterwards (names are unique, so an external broker may keep them): with librdkafka
    2.16 on tansu, deleting a topic that a live consumer has read makes that consumer's process crash, and
    Spark's Python workers cache consumers across tests. Names are unique, so nothing leaks between tests.
    (Measured: tansu answers a Fetch that was in flight at the deletion with error 3 for a topic librdkafka
    cannot name, "Received Fetch response (error 3) for unknown topic"; librdkafka's main thread then dies
    in rd_kafka_metadata_update_op -> rd_kafka_metadata_cache_find -> strcmp on a NULL name. A consumer that
    has unassigned but not closed is enough: the in-flight fetch is the trigger. Reader tasks are retried in
    a fresh worker; a driver-side end-offset lookup caught in that window takes the query's source runner
    down.)
    """
    return kafka.topic


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One SparkSession on local[2], quiet, with its scratch space under the test's temp dir.

    Failed tasks are retried (up to 3 attempts), as on a cluster: on tansu, a librdkafka consumer that
    read a topic which is then deleted can crash its Python worker (measured with confluent-kafka 2.16);
    Spark's retry runs in a fresh worker with a fresh consumer.

    Spark's own Kafka connector is on ``spark.jars`` (installed by the setup, pinned and checksummed:
    ``sparkafka.local.spark_kafka_dist``), so the side-by-side tests can read and write with
    ``format("kafka")`` in the same session.
    """
    from sparkafka.local.spark import local_spark, stop_spark
    from sparkafka.local.spark_kafka_dist import spark_jars

    session = local_spark(
        master="local[2,3]",
        scratch=str(tmp_path_factory.mktemp("spark")),
        app_name="sparkafka-tests",
        config={"spark.jars": spark_jars(quiet=False)},
    )
    try:
        yield session
    finally:
        stop_spark(session)


@pytest.fixture
def checkpoint(tmp_path: Path) -> str:
    return str(tmp_path / "checkpoint")
