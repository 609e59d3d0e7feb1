"""The tests' fixtures, loaded as a pytest plugin (``pytest_plugins`` in tests/conftest.py).

One broker (Apache Kafka started once per test process, or SPARKAFKA_TEST_BOOTSTRAP), one SparkSession per
test process, a Schema Registry, topics; tansu (``tansu_conf``) only for the tests about tansu itself and
``broker_gaps``. ``make test`` runs the tests in parallel processes (pytest-xdist, ``--dist loadgroup``):
each process has its own broker and SparkSession, every test takes them through these fixtures, and the
order below puts the longest tests first. The run ends with its time against the budget (``--time-budget``)
and the figures tests recorded (``record_figures``). See tests/README.md.
"""

from __future__ import annotations

import gc
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from sparkafka.client.core import close_all
from sparkafka.local import EmbeddedBroker
from sparkafka.local.kafka_broker import JAVA_OPTIONS_ENV, ApacheKafka
from sparkafka.ops.probes import Capability, probe_broker
from tests.support.kafka import Kafka

pytest_plugins = ["tests.support.secure"]  # the secured broker's fixtures (test_secure_*.py)

_capabilities: dict[str, Capability] = {}

TEST_BROKER_CONFIG = {
    # Tests write records with fixed timestamps years old: time retention would delete them mid-test (seen
    # in CI: a partition's log start moved past its 30 records between two reads of one test).
    "log.retention.ms": "-1",
    # Recovery tests wait for the broker to abort a transaction past its timeout: it looks every 250 ms
    # (Kafka: every 10 s; ApacheKafka's default, for the demo: 1 s), so the wait ends soon after the timeout.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "250",
    # A group's first member is not held 3 s (Kafka's default) for others to join: tests' groups have one.
    "group.initial.rebalance.delay.ms": "0",
}
"""The suite's Apache Kafka: ApacheKafka's defaults (one node, few threads, no auto-created topics) and
these, each for a test's sake."""

# Every JVM the tests start (the suite's brokers and those tests start, their own or through the CLI; Spark
# drivers in the test processes and in subprocesses) lives for seconds to minutes and carries little, so the
# C2 compiler's work at start costs more CPU than it gives back: with C1 alone (TieredStopAtLevel=1) a broker
# starts on 3.5 s of CPU instead of 6, a Spark driver with two small queries on 10 s instead of 16-20
# (measured side by side on this 2-core machine, 2026-11-28). Spark's launcher adds SPARK_SUBMIT_OPTS to the
# driver's command; ApacheKafka adds SPARKAFKA_BROKER_JAVA_OPTS. Set here, at import, before any JVM starts,
# so subprocesses inherit them; a value already set wins. The serial collector for Spark's small heaps.
# pytest_configure adds class-data-sharing archives to these two defaults (tests/support/jvm_archives.py).
SPARK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
BROKER_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
os.environ.setdefault("SPARK_SUBMIT_OPTS", SPARK_JVM_OPTIONS)
os.environ.setdefault(JAVA_OPTIONS_ENV, BROKER_JVM_OPTIONS)

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
    with ApacheKafka(data_dir=tmp_path_factory.mktemp("kafka"), config=TEST_BROKER_CONFIG) as kafka:
        yield {"bootstrap.servers": kafka.bootstrap_servers}
        close_all()  # the process's cached clients go first: none is left to log the broker's absence
        gc.collect()


@pytest.fixture(scope="session")
def proxied_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One Apache Kafka node behind the fault-injecting protocol proxy (``tests/support/kafka_proxy.py``):
    every client, the broker's own marker requests included, goes through ``proxied_kafka.proxy``. Started
    by the first test that asks for it; tests that do share ``pytest.mark.xdist_group("proxied-kafka")``, so
    one test process starts it. Each test clears the rules it added (``proxy.clear()``)."""
    from tests.support.kafka_proxy import ProxiedKafka

    with ProxiedKafka(data_dir=tmp_path_factory.mktemp("proxied"), config=TEST_BROKER_CONFIG) as broker:
        yield broker
        close_all()  # this process's cached clients, of this broker too, go before it does


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
    """``require("create_partitions")`` skips the test, with the probe's finding, on an external broker
    (SPARKAFKA_TEST_BOOTSTRAP) found lacking it. On the suite's own Apache Kafka a failed probe fails the
    test, and so does a probe that could not tell (a timeout on a busy machine is no missing capability):
    CI never skips a test and stays green."""
    external = "SPARKAFKA_TEST_BOOTSTRAP" in os.environ

    def _require(name: str) -> None:
        cap = _capabilities.get(name) or probe_broker(kafka_conf, name)
        if cap.conclusive:  # a probe that could not tell is asked again by the next test
            _capabilities[name] = cap
        if cap.ok:
            return
        if not cap.conclusive:
            pytest.fail(f"the probe for {name} could not tell whether the broker has it: {cap.detail}")
        if not external:
            pytest.fail(f"the suite's Apache Kafka lacks {name}: {cap.detail}")
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


@pytest.fixture(params=["native", "python"])
def fetcher(request: pytest.FixtureRequest) -> str:
    """The source's option ``fetcher``: a test taking this runs twice, reading with sparkafka's native
    extension and with confluent-kafka, where the two could differ (what is read, exactly once, through
    data loss and a lost leader)."""
    return str(request.param)


# -- the run: its order, the figures tests record, its time against the budget -------------------------------

_FIRST = ("chaos", "cluster")
"""Markers of the longest tests (minutes each, a cluster of their own): started first, so that parallel
processes fill the time around them instead of waiting behind one started late."""

_figures: list[tuple[str, str]] = []
_started = time.time()


_archive_builders: list[subprocess.Popen[bytes]] = []


def pytest_configure(config: pytest.Config) -> None:
    """In the process that starts the run (pytest-xdist's controller, before its workers start; they and
    every subprocess inherit the environment): the JVMs' class-data-sharing archives, their builds started
    in the background where missing when the run has integration tests (a unit test run only takes what is
    there). Options a user set are left alone.

    In every process: on a PySpark whose ``collect`` leaves its socket for the garbage collector to close
    (``pyspark.util._load_from_socket`` returns instead of yielding: 4.0 and 4.1, "The socket will be
    automatically closed when garbage-collected"), that socket's ResourceWarning is PySpark's, not a test's.
    """
    import inspect

    from pyspark import util as pyspark_util

    if not inspect.isgeneratorfunction(pyspark_util._load_from_socket):
        config.addinivalue_line(
            "filterwarnings",
            r"ignore:Exception ignored in. <socket\.socket:pytest.PytestUnraisableExceptionWarning",
        )
    if hasattr(config, "workerinput"):
        return
    from tests.support.jvm_archives import prepare

    integration = not config.args or any(
        "integration" in arg or (Path(arg.split("::")[0]) / "integration").is_dir() for arg in config.args
    )
    (spark, broker), builders = prepare(SPARK_JVM_OPTIONS, BROKER_JVM_OPTIONS, build=integration)
    _archive_builders.extend(builders)
    if os.environ.get("SPARK_SUBMIT_OPTS") == SPARK_JVM_OPTIONS:
        os.environ["SPARK_SUBMIT_OPTS"] = spark
    if os.environ.get(JAVA_OPTIONS_ENV) == BROKER_JVM_OPTIONS:
        os.environ[JAVA_OPTIONS_ENV] = broker


def pytest_unconfigure(config: pytest.Config) -> None:
    """A build still going at the end of the run is stopped: the run leaves no process behind."""
    from sparkafka.local.procs import stop_group

    while _archive_builders:
        stop_group(_archive_builders.pop(), timeout_s=30)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--time-budget",
        type=float,
        default=None,
        metavar="MINUTES",
        help="print the run's time against this budget last (a warning when over it, never a failure: "
        "shared machines are noisy); SPARKAFKA_BUDGET_SINCE (epoch seconds) counts from an earlier start",
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The chaos and cluster tests first, the unit tests last, the integration tests between (each group in
    its own order): pytest-xdist hands tests out in this order, so the processes finish together."""

    def rank(item: pytest.Item) -> int:
        for i, marker in enumerate(_FIRST):
            if item.get_closest_marker(marker) is not None:
                return i
        return len(_FIRST) + ("unit" in item.path.parts)

    items.sort(key=rank)  # stable: within a group, the collection's order (module fixtures stay together)


@pytest.fixture
def record_figures(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """``record_figures(text)``: lines printed at the end of the run, pass or fail, from any test process
    (a test's own output is not shown from pytest-xdist's workers)."""

    def record(text: str) -> None:
        request.node.user_properties.append(("figures", text))

    return record


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # In the process that prints (the only one under pytest-xdist, whose workers' reports arrive here).
    if report.when == "call":
        _figures.extend((report.nodeid, str(v)) for k, v in report.user_properties if k == "figures")


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """After the slowest tests (--durations): the figures tests recorded, then the time against the budget."""
    for nodeid, text in _figures:
        terminalreporter.write_sep("-", f"figures of {nodeid}")
        terminalreporter.write_line(text)
    budget = config.getoption("--time-budget")
    if budget is None or hasattr(config, "workerinput"):  # pytest-xdist's workers print nothing
        return
    since = os.environ.get("SPARKAFKA_BUDGET_SINCE")
    minutes = (time.time() - (float(since) if since else _started)) / 60
    what = "since the run started (setup and lint too)" if since else "of tests"
    line = f"time: {minutes:.1f} min {what}, budget {budget:g} min"
    if minutes > budget:
        line = f"WARNING {line}: over it. See the slowest tests above and tests/README.md"
    terminalreporter.write_line(line, yellow=minutes > budget, bold=minutes > budget)
