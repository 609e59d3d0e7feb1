"""The developer loop agrees with itself: pre-commit runs what `make lint` runs."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

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


def test_a_class_data_archive_is_renamed_into_place_whole_or_not_at_all(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """tests/support/jvm_archives.py: a build writes its archive under a partial name and renames it once
    the JVM has written it; a build that fails or writes nothing leaves no file, partial or whole."""
    from tests.support import jvm_archives

    monkeypatch.setattr(jvm_archives, "CACHE", tmp_path)
    target = tmp_path / "x-k.jsa"
    given: list[str] = []

    def writes(options: str) -> None:
        given.append(options)
        partial = Path(options.split("-XX:ArchiveClassesAtExit=")[1])
        assert partial != target
        partial.write_bytes(b"jsa")

    def fails(options: str) -> None:
        raise RuntimeError("no JVM")

    assert not jvm_archives.build("x", "-Xa", target, fails)
    assert not jvm_archives.build("x", "-Xa", target, lambda options: None)
    assert list(tmp_path.iterdir()) == []
    assert jvm_archives.build("x", "-Xa", target, writes)
    assert given[0].startswith("-Xa -XX:ArchiveClassesAtExit=")
    assert [p.name for p in tmp_path.iterdir()] == ["x-k.jsa"]
    assert target.read_bytes() == b"jsa"


def test_the_tests_jvms_name_their_archive_and_only_old_ones_are_pruned(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The options name the archive before it exists (a JVM without it starts silently, without CDS); a
    unit run starts no build; the newest KEEP archives of a kind besides the current one stay."""
    from tests.support import jvm_archives

    monkeypatch.setattr(jvm_archives, "CACHE", tmp_path)
    monkeypatch.setattr(jvm_archives, "_spark_key", lambda options: "now")
    monkeypatch.setattr(jvm_archives, "_kafka_key", lambda options: None)
    for age in range(jvm_archives.KEEP + 2):
        old = tmp_path / f"spark-old{age}.jsa"
        old.write_bytes(b"")
        os.utime(old, (1000 - age, 1000 - age))
    (spark, kafka), builders = jvm_archives.prepare("-Xs", "-Xk", build=False)
    assert spark == f"-Xs -XX:SharedArchiveFile={tmp_path / 'spark-now.jsa'} -Xlog:cds*=off"
    assert kafka == "-Xk"  # no broker jars installed: nothing to match
    assert builders == []
    kept = sorted(p.name for p in tmp_path.glob("spark-*.jsa"))
    assert kept == [f"spark-old{age}.jsa" for age in range(jvm_archives.KEEP)]
