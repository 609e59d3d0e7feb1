"""Child processes in their own process groups, stopped by PID (never by name).

Used for everything sparkafka's local tooling starts: the embedded broker, a standalone Spark cluster,
pipeline drivers in the demo and the tests (``GroupProcess``). Each child gets its own session (so a signal
reaches the whole tree it starts, e.g. a Spark worker's executor JVM and its Python workers) and, on Linux,
dies with the process that started it (``PR_SET_PDEATHSIG``), so a crashed test leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

__all__ = [
    "GroupProcess",
    "Service",
    "die_with_parent",
    "kill_group",
    "poll_until",
    "session_members",
    "start_group",
    "stop_group",
    "tail_file",
]

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
        return _spawn(cmd, log_file, subprocess.STDOUT, env, cwd, text=False)


_Output = int | IO[Any] | None
"""Where a child's stdout or stderr goes: ``subprocess.PIPE``, ``DEVNULL``, ``STDOUT``, a file, or ours."""


def _spawn(
    cmd: Sequence[str],
    stdout: _Output,
    stderr: _Output,
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
    *,
    text: bool,
) -> subprocess.Popen[Any]:
    return subprocess.Popen(
        list(cmd),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        text=text,
        preexec_fn=die_with_parent,  # noqa: PLW1509 - needed for PDEATHSIG; no threads run here
    )


def stop_group(proc: subprocess.Popen[Any], timeout_s: float = 10.0, sig: int = signal.SIGTERM) -> int:
    """``sig`` to ``proc``'s process group, SIGKILL it after ``timeout_s``; returns the exit status."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return kill_group(proc)
    _kill_session(proc.pid)  # children that outlived the leader (still in its session, so still ours)
    return code


def kill_group(proc: subprocess.Popen[Any]) -> int:
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


def poll_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.2) -> bool:
    """Check ``condition`` every ``interval_s`` until it holds (True) or ``timeout_s`` has passed (False).

    A wait for something that happens, never a fixed sleep: it returns as soon as ``condition`` holds.
    """
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)
    return True


class Service:
    """A local service (a broker, a cluster) used as a context manager: ``start()`` on entry, ``stop()`` on
    exit. Subclasses define both; ``start`` returns the started service."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class GroupProcess:
    """A child in a session of its own (a pipeline driver, a server), signalled as a whole, never by name.

    Its stdout and stderr are appended to ``log_path``, or, without one, go where ``stdout`` and ``stderr``
    say (``subprocess.PIPE``, ``DEVNULL``, ``STDOUT``; None: where ours go); piped output is text. Used as a
    context manager, it SIGKILLs whatever is left of its session on the way out.
    """

    def __init__(
        self,
        cmd: Sequence[str],
        *,
        log_path: str | os.PathLike[str] | None = None,
        stdout: _Output = None,
        stderr: _Output = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.name = Path(cmd[0]).name if len(cmd) < 3 or cmd[1] != "-m" else cmd[2]
        self.log_path = None if log_path is None else Path(log_path)
        if log_path is not None:
            self.proc: subprocess.Popen[Any] = start_group(cmd, log_path, env, cwd)
        else:
            self.proc = _spawn(cmd, stdout, stderr, env, cwd, text=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the child's process group (SIGINT: what Ctrl-C in a terminal sends)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def interrupt(self, sig: int = signal.SIGINT, timeout_s: float = 120.0) -> str:
        """``sig`` to the group, then wait for the child to exit (``subprocess.TimeoutExpired`` after
        ``timeout_s``); returns what it wrote to a pipe and was not read yet."""
        self.signal_group(sig)
        return self.communicate(timeout_s)

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 10.0) -> int:
        """``sig`` to the group, SIGKILL after ``timeout_s``; returns the exit status (``stop_group``)."""
        return stop_group(self.proc, timeout_s, sig)

    def kill(self) -> int:
        """SIGKILL everything in the child's session at once (a crash); returns the exit status."""
        code = kill_group(self.proc)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        return code

    def wait(self, timeout_s: float | None = None) -> int:
        return self.proc.wait(timeout=timeout_s)

    def communicate(self, timeout_s: float | None = None) -> str:
        """Wait for the child to exit; returns what it wrote to a pipe and was not read yet."""
        out, _ = self.proc.communicate(timeout=timeout_s)
        return str(out or "")

    def readline(self) -> str:
        """The next line of piped stdout ("" once the child closed it).

        Read a byte at a time, never ahead: ``communicate`` reads the pipe itself, so it would miss what a
        buffered ``readline`` had taken beyond the line.
        """
        assert self.proc.stdout is not None, "stdout is not piped"
        line = bytearray()
        while not line.endswith(b"\n"):
            byte = os.read(self.proc.stdout.fileno(), 1)
            if not byte:
                break
            line += byte
        return line.decode(getattr(self.proc.stdout, "encoding", None) or "utf-8")

    def wait_for(self, condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.2) -> bool:
        """True once ``condition`` holds; False if the child exits first or ``timeout_s`` passes."""
        met = False

        def done() -> bool:
            nonlocal met
            met = condition()
            return met or not self.alive()

        poll_until(done, timeout_s, interval_s)
        return met

    def tail(self, lines: int = 20) -> str:
        """The last lines of the child's log (with ``log_path``)."""
        return tail_file(self.log_path, lines) if self.log_path is not None else "(output not logged)"

    def __enter__(self) -> GroupProcess:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.kill()
