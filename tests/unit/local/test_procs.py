"""Processes we start are stopped with everything they started, including their own process groups."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from sparkafka.local.procs import kill_group, session_members, start_group, stop_group
from tests.support.wait import pid_alive, wait_until

# A child that starts a grandchild in a process group of its own (as PySpark's daemon does for each Python
# worker), writes the grandchild's pid, and waits.
SPAWNER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], process_group=0)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(120)
"""


def _spawn(tmp_path: Path) -> tuple[object, int]:
    pid_file = tmp_path / "grandchild.pid"
    proc = start_group([sys.executable, "-c", SPAWNER, str(pid_file)], tmp_path / "log")
    wait_until(
        lambda: pid_file.exists() and bool(pid_file.read_text()),
        30,
        "the spawner to write its grandchild's pid",
        detail=(tmp_path / "log").read_text,
        interval_s=0.05,
    )
    grandchild = int(pid_file.read_text())
    assert os.getpgid(grandchild) != proc.pid  # its own group: killpg on the child's group would miss it
    assert grandchild in session_members(proc.pid)
    return proc, grandchild


def _gone(pid: int) -> None:
    wait_until(lambda: not pid_alive(pid), 10, f"the grandchild {pid} to exit", interval_s=0.05)


def test_kill_group_kills_descendants_in_other_process_groups(tmp_path: Path) -> None:
    proc, grandchild = _spawn(tmp_path)
    assert kill_group(proc) != 0  # type: ignore[arg-type]
    _gone(grandchild)


def test_stop_group_stops_the_leader_and_sweeps_its_session(tmp_path: Path) -> None:
    proc, grandchild = _spawn(tmp_path)
    stop_group(proc, timeout_s=10)  # type: ignore[arg-type]
    assert proc.poll() is not None  # type: ignore[attr-defined]
    _gone(grandchild)
