"""librdkafka's own log lines, through one Python logger with a rate limit.

Every client sparkafka makes (``client.core``) gets ``LIBRDKAFKA_LOG`` as confluent-kafka's ``logger``; the
``RateLimit`` filter on it lets at most three lines of a kind through per minute, counting the rest. Runs
in whichever process makes a client: the driver, the Python workers. Measured before: a wrong bootstrap
address printed 581 "Connection refused" lines in 30 s (about 20 a second).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["LIBRDKAFKA_LOG", "RATE_LIMIT", "RateLimit", "librdkafka_lines", "logged"]

_PARENTHESISED = re.compile(r"\((?:[^()]|\([^()]*\))*\)")
"""A parenthesised detail, one level of nesting included: "(after 0ms in state CONNECT, 1 identical error(s)
suppressed)"."""


class RateLimit(logging.Filter):
    """Let at most ``burst`` records of a kind through in each ``window_s``; count and report the rest.

    A kind is a message with its numbers and parenthesised details taken out, so librdkafka's "Connect to
    ipv4#127.0.0.1:9 failed: Connection refused (after 0ms in state CONNECT)" from any client, with any
    timing, is one kind. The last record let through says that repeats are held back; the first one of
    the next window says how many were. DEBUG records always pass (they are only seen when asked for,
    and the exactly-once sink reads librdkafka's debug lines; ``sink.identity``).

    Example, with ``burst=3``: 20 identical errors a second for 5 s show as 3 lines, the third ending in
    "(more like this are held back for 60 s)"; 60 s after the first, the next such line ends in
    "(97 more like this in the last 60 s were not shown)".

    Args:
        burst: records of one kind let through per window.
        window_s: the window, from the first record of a kind.
        clock: injectable for tests.
    """

    def __init__(
        self, burst: int = 3, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.burst = burst
        self.window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[tuple[int, str], list[float]] = {}  # kind -> [window start, shown, held back]

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` is let through; the one that opens or closes a burst gets a note."""
        if record.levelno <= logging.DEBUG:
            return True
        message = record.getMessage()
        kind = (record.levelno, re.sub(r"\d+", "#", _PARENTHESISED.sub("", message)))
        now = self._clock()
        notes = []
        with self._lock:
            entry = self._seen.get(kind)
            if entry is None or now - entry[0] >= self.window_s:
                if entry is not None and entry[2]:
                    notes.append(
                        f"({entry[2]:.0f} more like this in the last {self.window_s:.0f} s were not shown)"
                    )
                if len(self._seen) >= 1000:  # old kinds go; a kind seen again starts afresh
                    self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self.window_s}
                entry = self._seen[kind] = [now, 0, 0]
            if entry[1] >= self.burst:
                entry[2] += 1
                return False
            entry[1] += 1
            if entry[1] == self.burst:
                notes.append(f"(more like this are held back for {self.window_s:.0f} s)")
        if notes:
            record.msg, record.args = " ".join([message, *notes]), None
        return True


LIBRDKAFKA_LOG = logging.getLogger("sparkafka.librdkafka")
"""The logger of every librdkafka client sparkafka makes (confluent-kafka's ``logger`` setting)."""
RATE_LIMIT = RateLimit()
"""The filter on ``LIBRDKAFKA_LOG`` (and on a caller's own librdkafka logger): one count per process."""
LIBRDKAFKA_LOG.addFilter(RATE_LIMIT)


def logged(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with confluent-kafka's ``logger``: ``LIBRDKAFKA_LOG``, unless the caller brought one.

    A caller's own logger (``sink.identity`` reads debug lines with one) keeps its handlers and level and
    gets the same rate limit. Added here, at construction, never to parsed options: those are pickled.
    """
    out = dict(settings)
    given = out.setdefault("logger", LIBRDKAFKA_LOG)
    if isinstance(given, logging.Logger) and given is not LIBRDKAFKA_LOG and RATE_LIMIT not in given.filters:
        given.addFilter(RATE_LIMIT)
    return out


@contextlib.contextmanager
def librdkafka_lines(shown: bool) -> Iterator[None]:
    """Within: whether ``LIBRDKAFKA_LOG`` passes librdkafka's lines on to the process's handlers.

    The ``sparkafka`` command runs each command within it (shown with ``--verbose``): a command says what
    failed in one sentence of its own, so librdkafka's lines are noise there, most of them retries the
    lookups ride out (a fresh broker's ``GETPID ... Coordinator load in progress: retrying``). Elsewhere
    (the user's driver, Spark's Python processes) the level is the process's logging's to set. The private
    loggers of the sink's producers follow it too (they forward only what this logger would show).
    """
    before = LIBRDKAFKA_LOG.level
    LIBRDKAFKA_LOG.setLevel(logging.NOTSET if shown else logging.CRITICAL + 1)
    try:
        yield
    finally:
        LIBRDKAFKA_LOG.setLevel(before)
