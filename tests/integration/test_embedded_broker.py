from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from sparkafka.errors import BrokerError
from sparkafka.local import EmbeddedBroker
from sparkafka.local.procs import GroupProcess
from tests.support.wait import pid_alive, wait_until


def _wait_gone(pid: int, what: str) -> None:
    wait_until(lambda: not pid_alive(pid), 15, what, interval_s=0.05)


def test_start_answers_metadata_and_stop_kills_the_process(tmp_path: Path) -> None:
    with EmbeddedBroker(log_path=tmp_path / "b.log") as broker:
        host, _port = broker.bootstrap_servers.split(":")
        assert host == "127.0.0.1"
        pid = broker.pid
        assert pid is not None
        assert pid_alive(pid)
        metadata = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
        assert metadata.brokers
    _wait_gone(pid, "the stopped broker to exit")
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
    cmd = [sys.executable, "-c", script, str(tmp_path / "child.log")]
    with GroupProcess(cmd, stdout=subprocess.PIPE) as parent:
        broker_pid = int(parent.readline())
        assert pid_alive(broker_pid)
        os.kill(parent.pid, signal.SIGKILL)  # the parent alone: its broker must go by itself
        parent.wait()
        _wait_gone(broker_pid, "the broker to exit with the process that started it")
