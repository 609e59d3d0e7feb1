"""The tests' one wait: poll a real condition until it holds, and fail naming what was awaited."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from sparkafka.local.procs import GroupProcess, poll_until

__all__ = ["pid_alive", "wait_until"]


def wait_until(
    predicate: Callable[[], bool],
    timeout_s: float,
    what: str,
    *,
    process: GroupProcess | None = None,
    detail: Callable[[], str] | None = None,
    interval_s: float = 0.2,
) -> None:
    """Return as soon as ``predicate()`` holds; fail naming ``what`` after ``timeout_s``.

    With ``process``, fail at once if that process exits first (its log's last lines in the message).
    ``detail`` adds to the failure message what it returns then (a log, the last value seen).
    """
    if process is None:
        met = poll_until(predicate, timeout_s, interval_s)
    else:
        met = process.wait_for(predicate, timeout_s, interval_s)
    if met:
        return
    extra = f"\n{detail()}" if detail is not None else ""
    if process is not None:
        extra += f"\n{process.tail(30)}" if process.log_path is not None else ""
        if not process.alive():
            raise AssertionError(f"{process.name} exited with {process.returncode} before {what}{extra}")
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}{extra}")


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, exited but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:  # reaped since, or no /proc (not Linux)
        return not Path("/proc/self").exists()
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"  # the state follows the command name in parentheses
