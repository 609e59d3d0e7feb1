"""The developer loop agrees with itself: pre-commit runs what `make lint` runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_pre_commit_runs_exactly_what_make_lint_runs() -> None:
    makefile = ROOT.joinpath("Makefile").read_text()
    lint = re.search(r"^lint:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert lint is not None
    make_commands = [line.strip().replace("$(VENV)", ".venv") for line in lint.group(1).splitlines()]
    hooks = re.findall(r"entry: (.+)", ROOT.joinpath(".pre-commit-config.yaml").read_text())
    assert make_commands == [h.strip() for h in hooks]


def test_make_check_leaves_out_only_the_chaos_and_cluster_suites() -> None:
    makefile = ROOT.joinpath("Makefile").read_text()
    check = re.search(r"^check:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert check is not None
    assert "tests/unit" in check.group(1)
    assert '-m "not chaos and not cluster"' in check.group(1)
