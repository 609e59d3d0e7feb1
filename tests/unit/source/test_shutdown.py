from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from sparkafka.source.shutdown import ShutdownGuard


@pytest.fixture(autouse=True)
def keep_sigterm() -> Iterator[None]:
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


def test_signal_while_idle_exits_at_once_and_ignores_repeats() -> None:
    g = ShutdownGuard()
    with pytest.raises(SystemExit):
        g.on_signal(signal.SIGTERM, None)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN


def test_signal_inside_a_call_waits_for_its_end() -> None:
    g = ShutdownGuard()
    steps: list[str] = []

    def nested_calls() -> None:
        with g.critical():
            with g.critical():
                g.on_signal(signal.SIGTERM, None)
                steps.append("inner finished")
            steps.append("outer finished")

    with pytest.raises(SystemExit):
        nested_calls()
    assert steps == ["inner finished", "outer finished"]


def test_not_installed_outside_the_source_runner() -> None:
    g = ShutdownGuard()
    g.install_in_runner()
    assert not g.installed
    assert signal.getsignal(signal.SIGTERM) != g.on_signal
