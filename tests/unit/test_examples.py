"""The example pipelines say, in their header, every environment variable they need."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.toml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_header_names_every_environment_variable(example: Path) -> None:
    text = example.read_text()
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    used = set(re.findall(r"\$\{(\w+)\}", text))
    assert used, "an example with no ${VAR} needs no such header"
    assert {v for v in used if v not in header} == set()
