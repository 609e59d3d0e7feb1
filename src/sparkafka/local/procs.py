"""Child processes in their own process groups, stopped by PID (never by name).

Used for everything sparkafka's local tooling starts: the embedded broker, a standalone Spark cluster,
pipeline drivers in the demo and the tests. Each child gets its own session (so a signal reaches the whole
tree it starts, e.g. a Spark worker's executor JVM and its Python workers) and, on Linux, dies with the
process that started it (``PR_SET_PDEATHSIG``), so a crashed test leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["die_with_parent", "kill_group", "session_members", "start_group", "stop_group", "tail_file"]

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn``: a new session, SIGTERM when the parent dies (Linux)."""
    # Runs in the child between fork and exec.
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    os.setsid()


def start_group(
    cmd: Sequence[str],
    log_path: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in a new process group, stdout and stderr appended to ``log_path``."""
    with open(Path(log_path), "ab") as log_file:  # the child keeps its own descriptor
        return subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - needed for PDEATHSIG; no threads run here
        )


def stop_group(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> int:
    """SIGTERM ``proc``'s process group, SIGKILL it after ``timeout_s``; returns the exit status."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return kill_group(proc)
    _kill_session(proc.pid)  # children that outlived the leader (still in its session, so still ours)
    return code


def kill_group(proc: subprocess.Popen[bytes]) -> int:
    """SIGKILL everything ``proc`` started at once (a crash, for failure tests)."""
    _kill_session(proc.pid)
    return proc.wait()


def session_members(sid: int) -> list[int]:
    """Processes in session ``sid`` (Linux ``/proc``; empty elsewhere)."""
    members = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    if os.getsid(int(entry.name)) == sid:
                        members.append(int(entry.name))
    return members


def _kill_session(sid: int) -> None:
    # The child is a session leader (die_with_parent), and its group is the session's first group; some
    # descendants start groups of their own (PySpark's daemon puts each Python worker in one), so the
    # session, not the group, is what holds everything the child started.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(sid, signal.SIGKILL)
    for pid in session_members(sid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def tail_file(path: str | os.PathLike[str], lines: int = 20) -> str:
    """The last ``lines`` lines of a child's log, for error messages."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"
