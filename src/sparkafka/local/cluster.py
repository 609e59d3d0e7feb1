"""A Spark standalone cluster on this machine, from the installed pyspark, for tests and benchmarks.

The pip package has no ``sbin/start-*.sh``, but its ``bin/spark-class`` runs the Master and Worker classes.
Every daemon listens on 127.0.0.1 only (``SPARK_LOCAL_IP``, ``--host``; the master's REST submission server
is off), runs in its own session (a worker's session holds its executor JVMs and their Python workers, so
killing a worker kills everything it runs, as losing a machine does) and is stopped by PID.
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sparkafka.errors import SparkafkaError
from sparkafka.local.broker import free_port
from sparkafka.local.procs import Service, kill_group, start_group, stop_group, tail_file

__all__ = ["ClusterError", "StandaloneCluster", "spark_home"]

log = logging.getLogger(__name__)

_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"


class ClusterError(SparkafkaError):
    """The local standalone cluster did not start."""


def spark_home() -> Path:
    """The Spark distribution inside the installed pyspark package (it has ``bin/spark-class``)."""
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").is_file():
        raise ClusterError(f"{home} has no bin/spark-class: is pyspark installed from PyPI?")
    return home


@dataclass
class _Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path


class StandaloneCluster(Service):
    """A master and ``workers`` workers (``cores`` cores and ``memory`` each) on 127.0.0.1.

    Use as a context manager::

        with StandaloneCluster(workers=2) as cluster:
            spark = SparkSession.builder.master(cluster.master_url).getOrCreate()

    Args:
        workers: how many worker daemons to start.
        cores: cores each worker offers.
        memory: memory each worker offers (``1g``).
        work_dir: where logs and the workers' application folders go; a temporary folder when None.
        start_timeout_s: how long to wait for the master to lead and for each worker to register.
    """

    def __init__(
        self,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        work_dir: str | os.PathLike[str] | None = None,
        start_timeout_s: float = 90.0,
    ) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="sparkafka-cluster-"))
        self._timeout_s = start_timeout_s
        self._master: _Daemon | None = None
        self._workers: list[_Daemon | None] = []
        self.port = 0

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:PORT``."""
        return f"spark://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment the daemons run with (also right for spark-submit against this cluster)."""
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        }

    def start(self) -> StandaloneCluster:
        """Start the master, then the workers, each waited for; raises ClusterError with the log's tail."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        try:
            self.port = free_port()
            self._master = self._spawn(
                "master",
                [_MASTER, "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", "0"],
                "I have been elected leader",
            )
            for i in range(self.workers):
                self._workers.append(self._start_worker(i))
        except BaseException:
            self.stop()
            raise
        log.info("standalone cluster at %s with %d workers", self.master_url, self.workers)
        return self

    def _start_worker(self, index: int) -> _Daemon:
        args = [
            _WORKER,
            "--host",
            "127.0.0.1",
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--webui-port",
            "0",
            "--work-dir",
            str(self.work_dir / f"worker-{index}"),
            self.master_url,
        ]
        return self._spawn(f"worker-{index}", args, "Successfully registered with master")

    def _spawn(self, name: str, args: list[str], ready: str) -> _Daemon:
        log_path = self.work_dir / f"{name}.log"
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        daemon = _Daemon(name, start_group(cmd, log_path, self.env()), log_path)
        deadline = time.monotonic() + self._timeout_s
        while time.monotonic() < deadline:
            if daemon.proc.poll() is not None:
                code = daemon.proc.returncode
                raise ClusterError(f"spark {name} exited with {code}: {tail_file(log_path)}")
            if ready in log_path.read_text(errors="replace"):
                return daemon
            time.sleep(0.1)
        stop_group(daemon.proc)
        raise ClusterError(f"spark {name} not ready in {self._timeout_s:.0f} s: {tail_file(log_path)}")

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index`` with its executors and their Python workers: a machine lost."""
        daemon = self._workers[index]
        if daemon is not None:
            kill_group(daemon.proc)
            self._workers[index] = None
            log.info("killed spark %s (pid %d)", daemon.name, daemon.proc.pid)

    def worker_running(self, pid: int) -> int | None:
        """The index of the worker that started ``pid`` (an executor's Python worker, say), by session."""
        try:
            group = os.getsid(pid)
        except ProcessLookupError:
            return None
        for i, daemon in enumerate(self._workers):
            if daemon is not None and daemon.proc.pid == group:
                return i
        return None

    def executors_by_worker(self) -> dict[int, int]:
        """How many executors each worker has launched so far (from their application folders)."""
        counts: dict[int, int] = {}
        for i in range(len(self._workers)):
            counts[i] = len(list((self.work_dir / f"worker-{i}").glob("app-*/*/")))
        return counts

    def stop(self) -> None:
        """Stop the workers, then the master, each by its process group. Idempotent."""
        for i, daemon in enumerate(self._workers):
            if daemon is not None:
                stop_group(daemon.proc, timeout_s=15.0)
                self._workers[i] = None
        if self._master is not None:
            stop_group(self._master.proc, timeout_s=15.0)
            self._master = None
        atexit.unregister(self.stop)
