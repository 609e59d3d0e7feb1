"""The developer loop agrees with itself: pre-commit runs what `make lint` runs."""

from __future__ import annotations

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


def test_the_tests_jvms_take_a_class_data_archive_only_where_one_is_had(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """tests/support/jvm_archives.py: options gain the archive (and CDS's silence) once it is built or found;
    a unit run builds nothing; a build that fails or writes nothing leaves the options as they were."""
    from tests.support import jvm_archives

    monkeypatch.setattr(jvm_archives, "CACHE", tmp_path)
    built: list[str] = []

    def build(options: str) -> None:
        built.append(options)
        Path(options.split("-XX:ArchiveClassesAtExit=")[1]).write_bytes(b"jsa")

    def broken(options: str) -> None:
        raise RuntimeError("no JVM")

    assert jvm_archives._with_archive("x", "-Xa", "k1", None) == "-Xa"
    assert not built
    with_archive = jvm_archives._with_archive("x", "-Xa", "k1", build)
    assert with_archive == f"-Xa -XX:SharedArchiveFile={tmp_path / 'x-k1.jsa'} -Xlog:cds*=off"
    assert built[0].startswith("-Xa -XX:ArchiveClassesAtExit=")
    assert jvm_archives._with_archive("x", "-Xa", "k1", build) == with_archive  # found, not built again
    assert len(built) == 1
    assert jvm_archives._with_archive("x", "-Xa", "k2", broken) == "-Xa"
    assert jvm_archives._with_archive("x", "-Xa", "k3", lambda options: None) == "-Xa"
    assert jvm_archives._with_archive("x", "-Xa", None, build) == "-Xa"  # no key: no JVM or jars to match
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x-k1.jsa"]  # no partial file or folder left
