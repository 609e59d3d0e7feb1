"""The setup's bytecode for PySpark's zips is what Python imports, never runs in place of other source, and is
added once."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from sparkafka.local.pyspark_zips import compile_zip

MODULE = b'VALUE = "from source one"\n\ndef fail():\n    raise RuntimeError("here")\n'


def _zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


def _import(archive: Path, code: str) -> str:
    """``code`` run in a fresh interpreter with ``archive`` added to its path, as Spark's workers get it."""
    env = {**os.environ, "PYTHONPATH": str(archive)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_each_module_gets_its_bytecode_and_imports_from_it(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "lib.zip", {"pkg/__init__.py": b"", "pkg/mod.py": MODULE, "pkg/data.txt": b"x"})

    assert compile_zip(archive) == 2
    with zipfile.ZipFile(archive) as z:
        assert sorted(z.namelist()) == sorted(
            ["pkg/__init__.py", "pkg/__init__.pyc", "pkg/mod.py", "pkg/mod.pyc", "pkg/data.txt"]
        )
        assert z.read("pkg/data.txt") == b"x"  # everything else copied as it was
    # The importer took the bytecode (a module from source has __file__ ending .py), and its traceback names
    # the source as the importer would, inside the zip.
    out = _import(
        archive,
        "import pkg.mod, traceback\n"
        "print(pkg.mod.__file__, pkg.mod.VALUE)\n"
        "try:\n    pkg.mod.fail()\nexcept RuntimeError as e:\n"
        "    print(traceback.extract_tb(e.__traceback__)[-1].filename)",
    )
    assert out.splitlines() == [
        f"{archive}/pkg/mod.pyc from source one",
        f"{archive}/pkg/mod.py",
    ]


def test_a_compiled_zip_is_left_alone(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "lib.zip", {"mod.py": MODULE})
    assert compile_zip(archive) == 1
    before = archive.stat()

    assert compile_zip(archive) == 0
    assert archive.stat().st_mtime_ns == before.st_mtime_ns
    assert archive.stat().st_ino == before.st_ino
    assert [p.name for p in tmp_path.iterdir()] == ["lib.zip"]  # no partial file left


def test_bytecode_never_runs_in_place_of_changed_source(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "lib.zip", {"mod.py": MODULE})
    compile_zip(archive)
    # The source replaced under its bytecode (as a hand edit of the zip would): the importer sees the hash
    # differ and compiles the source.
    with zipfile.ZipFile(archive) as z:
        pyc = z.read("mod.pyc")
    _zip(archive, {"mod.py": MODULE.replace(b"one", b"two"), "mod.pyc": pyc})

    assert _import(archive, "import mod; print(mod.VALUE)") == "from source two"


def test_a_source_that_does_not_compile_keeps_no_bytecode(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "lib.zip", {"good.py": MODULE, "bad.py": b"def (:\n"})

    assert compile_zip(archive) == 1
    with zipfile.ZipFile(archive) as z:
        assert sorted(z.namelist()) == ["bad.py", "good.py", "good.pyc"]
    # Nothing more to add: the zip is not rewritten on the next run (bad.py still lacks bytecode).
    before = archive.stat().st_ino
    assert compile_zip(archive) == 0
    assert archive.stat().st_ino == before
    assert [p.name for p in tmp_path.iterdir()] == ["lib.zip"]
