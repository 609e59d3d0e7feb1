from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from sparkafka.errors import BrokerError
from sparkafka.local import EmbeddedBroker


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone for our purposes.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def _wait_gone(pid: int, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_start_answers_metadata_and_stop_kills_the_process(tmp_path: Path) -> None:
    with EmbeddedBroker(log_path=tmp_path / "b.log") as broker:
        host, _port = broker.bootstrap_servers.split(":")
        assert host == "127.0.0.1"
        pid = broker.pid
        assert pid is not None
        assert _alive(pid)
        metadata = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
        assert metadata.brokers
    assert _wait_gone(pid)
    with pytest.raises(BrokerError, match="not running"):
        _ = broker.bootstrap_servers


def test_missing_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SPARKAFKA_TANSU_BIN", str(tmp_path / "nope"))
    with pytest.raises(BrokerError, match="SPARKAFKA_TANSU_BIN"):
        EmbeddedBroker().start()


def test_binary_that_exits_reports_its_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "fake-tansu"
    fake.write_text("#!/bin/sh\necho 'fatal: storage engine unavailable' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("SPARKAFKA_TANSU_BIN", str(fake))
    with pytest.raises(BrokerError, match="storage engine unavailable") as info:
        EmbeddedBroker(port=1, log_path=tmp_path / "fake.log").start()
    assert "code 3" in str(info.value)


def test_broker_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from sparkafka.local import EmbeddedBroker
        b = EmbeddedBroker(log_path=sys.argv[1]).start()
        print(b.pid, flush=True)
        time.sleep(600)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "child.log")],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert parent.stdout is not None
        broker_pid = int(parent.stdout.readline())
        assert _alive(broker_pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert _wait_gone(broker_pid), "broker outlived the process that started it"
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
