"""Apache Kafka itself (KRaft, one or more brokers on 127.0.0.1) for ``sparkafka broker``, demo and tests.

Each node is one JVM (``kafka.Kafka``) in its own process group, broker and controller in one process
(KRaft combined mode); ``brokers=3`` makes a three-voter controller quorum, so any one node may die. Data
lives in a folder of its own (a temporary one unless given) and survives a node's kill and restart. The jars
come from ``kafka_dist`` (Maven Central, checksummed, cached). Nodes are stopped by PID: on ``stop()``, at
interpreter exit, and (Linux) when the starting process dies (``PR_SET_PDEATHSIG``).

Defaults suit a laptop and a shared 2-core machine: a 512 MB heap per node, few network and I/O threads,
no topic auto-creation (a misspelt topic is an error, as ``sparkafka run`` treats it), replication of the
internal topics at ``min(3, brokers)`` with ``min.insync.replicas`` ``min(2, brokers)``, and timed-out
transactions aborted within about a second of their timeout (the broker's check runs every 1 s, not 10 s).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sparkafka.errors import BrokerError
from sparkafka.local.broker import free_port
from sparkafka.local.kafka_dist import KAFKA_VERSION, install
from sparkafka.local.procs import Service, kill_group, start_group, stop_group, tail_file

__all__ = ["ApacheKafka"]

log = logging.getLogger(__name__)

JAVA_OPTIONS_ENV = "SPARKAFKA_BROKER_JAVA_OPTS"
"""An environment variable of JVM options added to every node's (and the storage tool's) command, after
the defaults. The tests set ``-XX:TieredStopAtLevel=1`` (tests/support/plugin.py): their brokers start often
and carry little, so the C2 compiler's CPU at start costs more than it returns. Unset for the demo and the
benchmarks, which run with the JVM's defaults."""

_LOG4J = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
"""


@dataclass
class _Node:
    node_id: int
    port: int
    controller_port: int
    data: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.data.parent / f"node-{self.node_id}.log"


class ApacheKafka(Service):
    """Apache Kafka on 127.0.0.1: ``brokers`` KRaft nodes (each broker and controller), free ports.

    Use as a context manager, or call ``start()`` and ``stop()``::

        with ApacheKafka() as kafka:
            print(kafka.bootstrap_servers)

    Args:
        brokers: how many nodes; each is a broker and a voter of the controller quorum.
        data_dir: where the nodes' logs and data go; a temporary folder (removed at ``stop()``) when None.
        heap: the JVM heap of each node (``-Xmx``).
        config: broker settings added to (or replacing) the defaults, for every node.
        start_timeout_s: how long to wait for every broker to answer metadata requests.
        port: the first node's client port (a free one when None).
    """

    LOG4J = _LOG4J
    """The nodes' log4j2 configuration: warnings, and the line saying a node started."""

    def __init__(
        self,
        brokers: int = 1,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        heap: str = "512m",
        config: Mapping[str, str] | None = None,
        start_timeout_s: float = 90.0,
        port: int | None = None,
    ) -> None:
        if brokers < 1:
            raise BrokerError(f"brokers must be at least 1, got {brokers}")
        self.brokers = brokers
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="sparkafka-kafka-"))
        self.heap = heap
        self._config = dict(config or {})
        self._timeout_s = start_timeout_s
        self._port = port
        self._nodes: list[_Node] = []
        self._libs: Path | None = None
        self.version = KAFKA_VERSION
        self.started_in_s = 0.0

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:P1,127.0.0.1:P2,...``, for ``kafka.bootstrap.servers``."""
        if not self._nodes:
            raise BrokerError("Apache Kafka is not running: call start() first")
        return ",".join(f"127.0.0.1:{n.port}" for n in self._nodes)

    @property
    def pids(self) -> list[int | None]:
        """Each node's process id, None for a node that is down."""
        return [n.proc.pid if n.proc else None for n in self._nodes]

    @property
    def pid(self) -> int | None:
        """The first node's process id."""
        return self.pids[0] if self._nodes else None

    @property
    def log_path(self) -> Path:
        """The first node's log file."""
        return self._nodes[0].log_path

    def node_ports(self) -> list[int]:
        """Each node's client port, in node order (node ``i`` has id ``i + 1``)."""
        return [n.port for n in self._nodes]

    def _defaults(self) -> dict[str, str]:
        rf, isr = str(min(3, self.brokers)), str(min(2, self.brokers))
        return {
            "process.roles": "broker,controller",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "num.partitions": "1",
            "default.replication.factor": rf,
            "min.insync.replicas": isr,
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": "10",
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": isr,
            "transaction.state.log.num.partitions": "10",
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": isr,
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
            "log.dirs": "",  # per node
        }

    def _listeners(self, node: _Node) -> dict[str, str]:
        """The node's listener settings: plaintext clients on ``node.port`` (``SecureKafka`` overrides)."""
        return {
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
        }

    def _properties(self, node: _Node) -> str:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self._nodes)
        props = {
            **self._defaults(),
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            **self._listeners(node),
            "log.dirs": str(node.data),
            **self._config,
        }
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def admin_settings(self) -> dict[str, str]:
        """Librdkafka settings of a client with every right on the cluster (the readiness check's)."""
        return {"bootstrap.servers": self.bootstrap_servers}

    def _prepare(self) -> None:
        """Before the storage is formatted: files the properties name (``SecureKafka``'s certificates)."""

    def _format_args(self) -> list[str]:
        """More arguments for ``kafka-storage format`` (``SecureKafka``'s SCRAM credentials)."""
        return []

    def _java(self, main: str, *args: str, heap: str | None = None) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise BrokerError(
                "Apache Kafka needs Java 17 or newer on PATH (`apt-get install openjdk-17-jre`)"
            )
        assert self._libs is not None
        return [
            java,
            f"-Xmx{heap or self.heap}",
            "-Xms128m",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            *os.environ.get(JAVA_OPTIONS_ENV, "").split(),
            "-cp",
            f"{self._libs}/*",
            main,
            *args,
        ]

    def start(self) -> ApacheKafka:
        """Install if needed, format each node's storage, start every node, wait until all answer.

        Raises:
            BrokerError: Java or the jars are missing, a node exits, or the cluster is not ready in time
                (with the node's log tail).
        """
        if self._nodes:
            return self
        began = time.monotonic()
        self._libs = install()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "log4j2.properties").write_text(self.LOG4J)
        self._nodes = [
            _Node(i + 1, free_port(), free_port(), self.data_dir / f"node-{i + 1}")
            for i in range(self.brokers)
        ]
        if self._port:
            self._nodes[0].port = self._port
        atexit.register(self.stop)
        try:
            self._prepare()
            self._format()
            for node in self._nodes:
                self._launch(node)
            self._wait_ready(self.brokers)
        except BaseException:
            self.stop()
            raise
        self.started_in_s = time.monotonic() - began
        log.info("Apache Kafka %s ready at %s", self.version, self.bootstrap_servers)
        return self

    def _format(self) -> None:
        """``kafka-storage format`` for every node at once (one JVM each, in parallel): one cluster id."""
        cluster_id = "-"
        while cluster_id.startswith("-"):  # as Kafka's Uuid.randomUuid: "-..." reads as an option (1 in 64)
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        procs = []
        for node in self._nodes:
            props = self.data_dir / f"node-{node.node_id}.properties"
            # 0600: a secured broker's properties hold its PLAIN users' passwords (Kafka's JAAS settings)
            fd = os.open(props, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(self._properties(node))
            cmd = self._java(
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={cluster_id}",
                "-c",
                str(props),
                *self._format_args(),
                heap="256m",
            )
            procs.append((node, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
        for node, proc in procs:
            out, _ = proc.communicate(timeout=120)
            if proc.returncode != 0:
                text = out.decode(errors="replace").strip().splitlines()
                raise BrokerError(f"formatting node {node.node_id}'s storage failed: {' '.join(text[-3:])}")

    def _launch(self, node: _Node) -> None:
        props = self.data_dir / f"node-{node.node_id}.properties"
        node.proc = start_group(self._java("kafka.Kafka", str(props)), node.log_path)

    def _wait_ready(self, brokers: int) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + self._timeout_s
        admin = AdminClient({**self.admin_settings(), "log_level": 0})
        seen = 0
        while time.monotonic() < deadline:
            for node in self._nodes:
                if node.proc is not None and node.proc.poll() is not None:
                    raise BrokerError(
                        f"Apache Kafka node {node.node_id} exited with code {node.proc.returncode} at start; "
                        f"last lines of {node.log_path}:\n{tail_file(node.log_path)}"
                    )
            try:
                seen = len(admin.list_topics(timeout=1.0).brokers)
            except Exception:  # noqa: BLE001 - KafkaException until the brokers answer
                seen = 0
            if seen >= brokers:
                return
            time.sleep(0.1)
        raise BrokerError(
            f"Apache Kafka: {seen} of {brokers} brokers answered within {self._timeout_s:.0f} s; last lines "
            f"of {self._nodes[0].log_path}:\n{tail_file(self._nodes[0].log_path)}"
        )

    def kill(self, index: int) -> None:
        """SIGKILL node ``index`` (0-based) at once: a machine lost. Its data stays for ``restart``."""
        node = self._nodes[index]
        if node.proc is not None:
            kill_group(node.proc)
            node.proc = None

    def restart(self, index: int, wait: bool = True) -> None:
        """Start node ``index`` again on its ports and data (after ``kill``); wait until it is back."""
        node = self._nodes[index]
        if node.proc is None:
            self._launch(node)
        if wait:
            self._wait_ready(self.brokers)

    def tail_log(self, index: int = 0, lines: int = 20) -> str:
        """The last ``lines`` lines of node ``index``'s log."""
        return tail_file(self._nodes[index].log_path, lines)

    def stop(self, timeout_s: float = 20.0) -> None:
        """Stop every node: SIGTERM to all at once (a controlled shutdown), SIGKILL after ``timeout_s``.

        Idempotent; removes the data folder if it was a temporary one.
        """
        nodes, self._nodes = self._nodes, []
        running = [n.proc for n in nodes if n.proc is not None]
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in running:
            stop_group(proc, max(0.1, deadline - time.monotonic()))
        atexit.unregister(self.stop)
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
