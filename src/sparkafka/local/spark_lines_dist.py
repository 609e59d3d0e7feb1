"""PySpark's older lines for the tests' matrix (issue 51): one venv per line, outside the repository.

Development support, run by ``scripts/test_lines.sh`` (and so by ``make test``): under
``<cache>/lines/<line>/venv`` (``maven_dist.cache_dir``: ``~/.cache/sparkafka``) a venv with that line's
PySpark (its sdist from PyPI, checked against the SHA-256 pinned here before it is installed), sparkafka
(editable, without its dependencies, so the line's PySpark stays; the test script puts its own clone's
``src`` first on the path, so one venv serves every clone), the native fetch's wheel the main venv built,
and what the tests that run on every line need. A second run finds the venv's stamp and does nothing; a
changed pin or ``pyproject.toml`` makes it anew.

    python -m sparkafka.local.spark_lines_dist [--line 4.0] ...      # prints each venv's python
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from sparkafka.errors import BrokerError
from sparkafka.local.maven_dist import cache_dir

__all__ = ["LINES", "Line", "line_python"]

REPO = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Line:
    """One PySpark line: the release its venv runs, the SHA-256 of that release's sdist on PyPI, and the
    Python minor version its venv is made with."""

    version: str
    sha256: str
    python: str = "3.11"


LINES = {
    "4.0": Line("4.0.5", "a0d44b0e7faf0458ad83b7aa664e7ed8b96beed8a55d66ce3b0dfac2309dfca6"),
    "4.1": Line("4.1.4", "bcbd5e18690cf79d438e97210ad06fb8d451a251bb77becc2b0418868d2acd73", "3.12"),
    "4.2": Line("4.2.1", "d79b7c8ee41e66a9202fe6f600ca90b931ca571ae9dbdf31c58d2672e5102da0"),
}
"""Each older line's newest release on PyPI (2026-11-29; PySpark publishes sdists only). The main venv
runs the newest line, 4.3 (``pyproject.toml``), on the lowest Python sparkafka declares (3.11), as does
every line here but 4.1, which runs on 3.12: each Python sparkafka declares is proven by one leg."""

_TEST_NEEDS = (
    "pytest",
    "pytest-timeout",
    "pytest-xdist",
    "hypothesis",
    "jsonschema",
    "build",
    "setuptools>=77",  # builds the wheel (tests/integration/test_install.py): the license as an SPDX string
)
"""Besides sparkafka's own dependencies: what the tests that run on every line import or run."""


def _requirements() -> list[str]:
    """The dependencies of sparkafka and its registry extra, without PySpark (the line's own is installed)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"]) + list(project["optional-dependencies"]["registry"])
    return [r for r in wanted if not r.replace(" ", "").startswith("pyspark")] + list(_TEST_NEEDS)


def _home(line: str) -> Path:
    return cache_dir() / "lines" / line


@functools.cache
def _interpreter(line: str) -> str:
    """The Python the line's venv is made with: ``python3.X`` for the line's pin, from the PATH or pyenv's
    versions, or this one (with a warning on stderr, so the log says that the pin's Python was not proven)
    where no such Python runs."""
    want = LINES[line].python
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == want:
        return sys.executable
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [shutil.which(f"python{want}"), *sorted(map(str, pyenv.glob(f"{want}.*/bin/python{want}")))]
    for found in filter(None, candidates):
        runs = subprocess.run([found, "-c", "pass"], capture_output=True, check=False)
        if runs.returncode == 0:  # pyenv's shim is on the PATH even where its version is not selected
            return found
    sys.stderr.write(
        f"warning: no python{want} runs here: the PySpark {line} venv runs Python "
        f"{sys.version_info[0]}.{sys.version_info[1]} instead, and Python {want} is not proven in this run\n"
    )
    return sys.executable


def _stamp(line: str) -> str:
    pin = LINES[line]
    # Names, not paths: a venv serves every clone (scripts/test_lines.sh puts the clone's src/ first).
    wheels = sorted(Path(w).name for w in _native_wheels())
    own = f"{sys.version_info[0]}.{sys.version_info[1]}"
    python = own if _interpreter(line) == sys.executable else pin.python  # a version: paths differ by clone
    text = "\n".join([pin.version, pin.sha256, python, *_requirements(), *wheels])
    return hashlib.sha256(text.encode()).hexdigest()


def _native_wheels() -> list[str]:
    return [str(p) for p in (REPO / ".venv" / "native-wheels").glob("sparkafka_native-*.whl")]


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = " ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
        raise BrokerError(f"{what} failed (exit {done.returncode}): {tail}")


def _sdist(line: str) -> Path:
    """The line's PySpark sdist, downloaded once into the cache and checked against its pinned digest."""
    pin = LINES[line]
    folder = cache_dir() / "lines" / "sdists"
    path = folder / f"pyspark-{pin.version}.tar.gz"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--dest",
                str(folder),
                f"pyspark=={pin.version}",
            ],
            f"downloading PySpark {pin.version}",
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != pin.sha256:
        path.unlink()
        raise BrokerError(
            f"PySpark {pin.version}'s sdist has SHA-256 {digest[:12]}..., pinned {pin.sha256[:12]}..."
        )
    return path


def line_python(line: str, quiet: bool = False) -> Path:
    """The Python of the line's venv, making or updating the venv first if needed."""
    home = _home(line)
    python = home / "venv" / "bin" / "python"
    stamp = home / "venv" / ".sparkafka-line"
    if python.exists() and stamp.is_file() and stamp.read_text().strip() == _stamp(line):
        return python
    if not quiet:
        sys.stderr.write(f"making the PySpark {LINES[line].version} venv in {home} (once)\n")
    sdist = _sdist(line)
    if (home / "venv").exists():
        shutil.rmtree(home / "venv")
    home.mkdir(parents=True, exist_ok=True)
    _run([_interpreter(line), "-m", "venv", str(home / "venv")], f"making the venv of PySpark {line}")
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    # With its [connect] extra: the Spark Connect client the tests through a local Connect server use, as the
    # line itself pins it.
    connect = f"pyspark[connect] @ {sdist.as_uri()}"
    _run([*pip, connect, *_requirements()], f"installing PySpark {LINES[line].version}")
    _run([*pip, "--no-deps", "-e", str(REPO)], "installing this tree's sparkafka")
    if _native_wheels():
        _run([*pip, "--no-deps", *_native_wheels()], "installing the native fetch")
    stamp.write_text(_stamp(line) + "\n")
    return python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--line", action="append", choices=sorted(LINES), help="default: every line")
    args = parser.parse_args(argv)
    try:
        for line in args.line or sorted(LINES):
            sys.stdout.write(f"PySpark {LINES[line].version}: {line_python(line)}\n")
    except BrokerError as e:
        sys.stderr.write(f"error: {e}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
