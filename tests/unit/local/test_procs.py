"""Processes we start are stopped with everything they started, including their own process groups."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from sparkafka.local.procs import kill_group, session_members, start_group, stop_group

# A child that starts a grandchild in a process group of its own (as PySpark's daemon does for each Python
# worker), writes the grandchild's pid, and waits.
SPAWNER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], process_group=0)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0): it has exited if its state is Z.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def _spawn(tmp_path: Path) -> tuple[object, int]:
    pid_file = tmp_path / "grandchild.pid"
    proc = start_group([sys.executable, "-c", SPAWNER, str(pid_file)], tmp_path / "log")
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()):
        assert time.monotonic() < deadline, (tmp_path / "log").read_text()
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    assert os.getpgid(grandchild) != proc.pid  # its own group: killpg on the child's group would miss it
    assert grandchild in session_members(proc.pid)
    return proc, grandchild


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_kill_group_kills_descendants_in_other_process_groups(tmp_path: Path) -> None:
    proc, grandchild = _spawn(tmp_path)
    assert kill_group(proc) != 0  # type: ignore[arg-type]
    assert _gone(grandchild)


def test_stop_group_stops_the_leader_and_sweeps_its_session(tmp_path: Path) -> None:
    proc, grandchild = _spawn(tmp_path)
    stop_group(proc, timeout_s=10)  # type: ignore[arg-type]
    assert proc.poll() is not None  # type: ignore[attr-defined]
    assert _gone(grandchild)
