"""Every CLI tool that talks to Kafka asks for a first answer within --timeout (default 5 s) before anything
else, as load() and the sinks do, and no failure ends in an empty reason."""

from __future__ import annotations

import argparse

import pytest

from sparkafka.cli import _settings, build_parser
from sparkafka.client import contact
from sparkafka.client.core import broker_error

TOOLS = [
    ["lag", "--group", "g"],
    ["txn", "list", "--prefix", "p"],
    ["txn", "resolve", "abort", "--prefix", "p", "--query", "q"],
    ["offsets", "show", "--checkpoint", "/c"],
    ["offsets", "reset", "--group", "g", "--to", "earliest"],
    ["offsets", "replan", "--checkpoint", "/c", "--prefix", "p"],
    ["topics", "list"],
    ["topics", "describe", "t"],
    ["topics", "create", "t"],
    ["doctor"],
]


def _args(tool: list[str], *extra: str) -> argparse.Namespace:
    return build_parser().parse_args([*tool, "--bootstrap-servers", "h:1", *extra])


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: " ".join(t[:2]))
def test_each_tool_takes_a_timeout_for_the_first_answer(
    tool: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[dict[str, str], float]] = []
    monkeypatch.setattr(
        contact, "first_answer", lambda conf, timeout_s: asked.append((dict(conf), timeout_s))
    )
    assert _settings(_args(tool)) == {"bootstrap.servers": "h:1"}
    assert _settings(_args(tool, "--timeout", "12")) == {"bootstrap.servers": "h:1"}
    assert asked == [({"bootstrap.servers": "h:1"}, 5.0), ({"bootstrap.servers": "h:1"}, 12.0)]


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (TimeoutError(), "no answer in time (TimeoutError)"),
        (RuntimeError(""), "RuntimeError with no message"),
    ],
)
def test_a_failure_never_ends_in_an_empty_reason(error: Exception, reason: str) -> None:
    said = str(broker_error("reading committed offsets of group 'g'", {"bootstrap.servers": "h:1"}, error))
    assert said == f"reading committed offsets of group 'g' failed against bootstrap servers h:1: {reason}"
