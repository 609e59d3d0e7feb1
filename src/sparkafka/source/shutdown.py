"""Turning Spark's SIGTERM to the Python source runner into a clean ``reader.stop()``.

Measured (PySpark 4.3): when a query stops, the JVM signals the source runner, which dies without calling
``reader.stop()``, so the last completed batch's offsets never reach the consumer group. Raising
``SystemExit`` from a SIGTERM handler makes the runner's ``finally: reader.stop()`` run. But a handler
fires between any two bytecodes of the main thread: raised inside a commit callback it would tear the
committer's bookkeeping. So the exit is deferred while the reader is inside one of its own calls
(``critical``) and happens at the end of it; when the runner is idle, blocked on its socket, it is raised
at once.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["RUNNER_MODULE", "ShutdownGuard", "guard"]

RUNNER_MODULE = "pyspark.sql.streaming.python_streaming_source_runner"


class ShutdownGuard:
    """Defers a SIGTERM-triggered ``SystemExit`` until the current ``critical`` section ends."""

    def __init__(self) -> None:
        """Not installed yet, no exit requested."""
        self._depth = 0
        self.requested = False
        self.installed = False

    def on_signal(self, signum: int, frame: object) -> None:
        """The SIGTERM handler: exit now, or when the current ``critical`` section ends if inside one."""
        # Spark may signal more than once; a second SystemExit would cut the final commit short.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        self.requested = True
        if self._depth == 0:
            raise SystemExit(0)

    @contextmanager
    def critical(self) -> Iterator[None]:
        """A section SIGTERM must not cut: a requested exit is raised when the outermost one ends."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0 and self.requested:
                raise SystemExit(0)

    def install_in_runner(self) -> None:
        """Install the handler, only in Spark's source runner's main thread, if SIGTERM is unhandled."""
        if self.installed:
            return
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if getattr(spec, "name", None) != RUNNER_MODULE:
            return
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
            return
        signal.signal(signal.SIGTERM, self.on_signal)
        self.installed = True


guard = ShutdownGuard()
"""One per process: the source runner hosts one reader."""
