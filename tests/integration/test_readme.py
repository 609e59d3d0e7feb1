"""The README's examples run, as written, against the test broker and SparkSession.

Only addresses, topic names and paths are substituted (the README's 127.0.0.1:9092 is the test broker, its
topic orders a fresh topic), so an example that stops working fails here. Its shell lines run through the
``sparkafka`` command (``make setup`` is what CI runs first; the broker is the session's).
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from sparkafka.cli import main
from tests.support.docs import ROOT, blocks, shell_commands, sparkafka_argv
from tests.support.kafka import Kafka
from tests.support.wait import wait_until

BLOCKS = blocks(ROOT / "README.md")


def test_every_readme_example_runs(
    spark: Any, kafka: Kafka, bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    orders = f"orders-{uuid.uuid4().hex[:8]}"

    def names(text: str) -> str:
        return re.sub(r"\borders(-[\w-]+)?\b", lambda m: orders + (m.group(1) or ""), text)

    (install,) = [b for b in BLOCKS if b.run_by == "tests/integration/test_readme.py"]
    commands = [sparkafka_argv(c) for c in shell_commands(install.code)]
    made = [argv for argv in commands if argv is not None and argv[0] != "broker"]
    assert [argv[:2] for argv in made] == [["topics", "create"]]
    for argv in made:
        assert main([names(a).replace("127.0.0.1:9092", bootstrap) for a in argv]) == 0
    assert capsys.readouterr().out.startswith(f"created topic {orders}: 4 partitions")
    kafka.create_topics([f"{orders}-copy"], 1)
    kafka.produce(orders, [json.dumps({"n": i}) for i in range(5)], partitions=4)

    python = [b for b in BLOCKS if b.lang == "python"]
    assert len(python) == 2, "a Python example was added to or removed from the README: update this test"
    namespace: dict[str, Any] = {}
    for block in python:
        code = block.code.replace("/tmp/sparkafka/orders-copy", str(tmp_path / "checkpoint"))
        code = names(code).replace("127.0.0.1:9092", bootstrap)
        exec(compile(code, block.where, "exec"), namespace)  # the README's own code
    assert capsys.readouterr().out.splitlines() == ["5"]  # the first job counted the five records
    (query,) = spark.streams.active  # the exactly-once example started its query
    try:
        wait_until(
            lambda: len(kafka.read_committed(f"{orders}-copy")) == 5,
            120,
            "the copy's five records, committed",
        )
    finally:
        query.stop()
