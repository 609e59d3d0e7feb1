"""Issue 50: a mistake found after ``start()`` is one sentence, once, within 20 lines of the ``start()``.

A user's script (tests/integration/after_start_job.py, its own driver as ``python job.py`` runs one) makes
each mistake in a query of its own; the test reads what the script printed (stdout and stderr: Spark's log,
the Python traceback) from the query's ``load()`` to its end, and counts the lines up to sparkafka's
sentence and how often a sparkafka sentence appears. Before (measured on this machine): 93 to 103 lines,
the sentence three times. The master is ``local[2,3]``: tasks are retried as on a cluster, so a refusal a
task retried would show twice. The secured cluster's cases (a missing WRITE on the output topic, a missing
transactional-id grant) are in tests/integration/test_secure_acls.py, through ``run_cases`` here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

MAX_LINES = 20
MARK = "sparkafka.errors."


@dataclass(frozen=True)
class Seen:
    """What one case printed between ``start()`` and its end."""

    lines: list[str]

    def to_sentence(self, says: str) -> int | None:
        """How many lines were printed up to the first that holds ``says`` (None: never)."""
        return next((i + 1 for i, line in enumerate(self.lines) if says in line), None)

    @property
    def sentences(self) -> int:
        """How many times a sparkafka sentence was printed."""
        return sum(line.count(MARK) for line in self.lines)

    def __str__(self) -> str:
        return "\n".join(self.lines)


JOB = Path(__file__).with_name("after_start_job.py")


def as_shown(line: str) -> str:
    """A line as a terminal shows it: each carriage return starts over at the line's first column (Spark's
    console progress bar draws itself so, and clears itself with spaces before the next log line)."""
    shown: list[str] = []
    for part in line.split("\r"):
        shown[: len(part)] = part
    return "".join(shown).rstrip()


def run_cases(
    cases: list[dict[str, Any]],
    folder: Path,
    *,
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
) -> dict[str, Seen]:
    """Run ``cases`` (after_start_job's format) in one driver; what each printed, by name.

    ``python`` runs the job's file; ``env`` replaces this process's environment (the master is always
    ``local[2,3]``: tasks retried as on a cluster).
    """
    path = folder / "cases.json"
    path.write_text(json.dumps(cases))
    if env is None:
        env = {
            **os.environ,
            # As an activated venv gives it: PySpark 4.0 runs the data source it finds (pyspark_sparkafka)
            # with PYSPARK_PYTHON or python3 from the PATH (docs/troubleshooting.md)
            "PYSPARK_PYTHON": sys.executable,
        }
    env = {**env, "SPARKAFKA_TEST_MASTER": "local[2,3]", "SPARK_LOCAL_IP": "127.0.0.1"}
    result = subprocess.run(
        [python, str(JOB), str(path)],
        env=env,
        cwd=folder,
        capture_output=True,  # bytes: text mode would make each carriage return a line of its own
        timeout=900,
        check=False,
        start_new_session=True,
    )
    out, err = (b.decode(errors="replace") for b in (result.stdout, result.stderr))
    assert result.returncode == 0, err[-4000:]
    assert "@@NO FAILURE" not in err, err[-4000:]
    seen: dict[str, Seen] = {}
    current: list[str] | None = None
    for raw in (out + err).split("\n"):
        line = as_shown(raw)
        if line.startswith("@@START "):
            current = seen.setdefault(line.removeprefix("@@START "), Seen([])).lines
        elif line.startswith("@@END "):
            current = None
        elif current is not None:
            current.append(line)
    assert set(seen) == {c["name"] for c in cases}, err[-4000:]
    return seen


def case(
    name: str, folder: Path, source: Mapping[str, str] | None, sink: Mapping[str, str] | None, **more: Any
) -> dict[str, Any]:
    """One case of after_start_job: ``source``/``sink`` options (None: rate / noop)."""
    return {
        "name": name,
        "source": None if source is None else {"options": dict(source)},
        "sink": None if sink is None else {"options": dict(sink)},
        "checkpoint": str(folder / f"ck-{name}"),
        **more,
    }


def assert_one_sentence(seen: Seen, says: str) -> None:
    """The issue's target: the sentence within ``MAX_LINES`` lines of ``start()``, and only once."""
    at = seen.to_sentence(says)
    assert at is not None, str(seen)
    assert at <= MAX_LINES, f"{at} lines before the sentence:\n{seen}"
    assert seen.sentences == 1, str(seen)


def mistakes(bootstrap: str, source: str, output: str, folder: Path) -> dict[str, tuple[dict[str, Any], str]]:
    """Issue 50's mistakes, each a case and what its sentence says: ``source`` and ``output`` are topics
    with two partitions."""
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    kafka = {"kafka.bootstrap.servers": bootstrap}
    exactly_once = {
        "deliveryGuarantee": "exactly_once",
        "transactionalIdPrefix": f"eos-{uuid.uuid4().hex[:8]}",
    }
    partial = {**kafka, "subscribe": source, "startingOffsets": json.dumps({source: {"0": 0}})}
    acks = {**kafka, "topic": output, "kafka.acks": "1", **exactly_once}
    return {
        "missing source topic": (
            case("missing source topic", folder, {**kafka, "subscribe": missing}, None),
            f"topic(s) {missing}",
        ),
        "partial startingOffsets": (
            case("partial startingOffsets", folder, partial, None),
            "startingOffsets",
        ),
        "acks with exactly once": (case("acks with exactly once", folder, None, acks), "kafka.acks=1"),
        "missing output topic": (
            case("missing output topic", folder, None, {**kafka, "topic": missing}),
            f"topic={missing}: no such topic",
        ),
        "topic column names a missing topic": (
            case(
                "topic column names a missing topic",
                folder,
                None,
                {**kafka, **exactly_once},
                topic_column=missing,
            ),
            f"topic '{missing}' does not exist",
        ),
    }


def check_each(seen: Mapping[str, Seen], says: Mapping[str, str]) -> None:
    """``assert_one_sentence`` for every case (all failures reported), after printing what each showed."""
    for name, text in says.items():
        print(
            f"{name}: {seen[name].to_sentence(text)} lines to the sentence, {len(seen[name].lines)} in all, "
            f"{seen[name].sentences} sentence(s)"
        )
    failures = []
    for name, text in says.items():
        try:
            assert_one_sentence(seen[name], text)
        except AssertionError as e:
            failures.append(f"{name}: {e}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.lines
def test_each_mistake_after_start_is_one_sentence_once(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    cases = mistakes(bootstrap, new_topic(partitions=2), new_topic(partitions=2), tmp_path)
    seen = run_cases([c for c, _ in cases.values()], tmp_path)
    check_each(seen, {name: says for name, (_, says) in cases.items()})


def test_a_query_nobody_awaits_keeps_spark_s_report_in_the_log(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Spark's log of a failure is left out only while a call that raises it waits (awaitTermination,
    processAllAvailable, awaitAnyTermination): a query a notebook only looks at keeps its ERROR report,
    the log being the one place it is said."""
    cases = mistakes(bootstrap, new_topic(partitions=2), new_topic(partitions=2), tmp_path)
    awaited, says = cases["topic column names a missing topic"]
    sink = {**awaited["sink"]["options"], "transactionalIdPrefix": f"eos-{uuid.uuid4().hex[:8]}"}
    unawaited = {
        **awaited,
        "name": "unawaited",
        "sink": {"options": sink},
        "checkpoint": str(tmp_path / "ck-unawaited"),
        "unawaited": True,
    }
    seen = run_cases([awaited, unawaited], tmp_path)
    assert not any("terminated with error" in line for line in seen[awaited["name"]].lines)
    logged = [line for line in seen["unawaited"].lines if "terminated with error" in line]
    assert len(logged) == 1, str(seen["unawaited"])
    assert seen["unawaited"].sentences >= 2  # Spark's report, then the exception's one line
    assert seen["unawaited"].to_sentence(says) is not None
