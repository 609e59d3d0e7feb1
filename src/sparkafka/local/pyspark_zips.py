"""Bytecode for the zips PySpark's Python workers import pyspark from: compiled once, by the setup.

Spark starts each Python worker (its daemons, their forked workers, a streaming query's source runner) with
``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's zip first on ``PYTHONPATH``; with PySpark installed by
pip, ``SPARK_HOME`` is the package, and since 4.x the package carries those zips. They hold source only
(pyspark.zip: 1,286 ``.py`` files, no ``.pyc``), and Python compiles what it imports from a zip each time,
so every worker compiled pyspark's modules before its first row: ``import pyspark.worker,
pyspark.sql.worker.plan_data_source_read`` took 0.81 s from the zip as shipped and 0.31 s with bytecode
beside the sources, a daemon's own start 0.55 s and 0.20 s (measured side by side on a 2-core machine,
2026-11-28). A fresh driver starts some seven daemons in a row before its first micro-batch ends.

When: ``make setup`` runs ``python -m sparkafka.local.pyspark_zips`` in its own process; a zip that already
has bytecode for each source is left alone (a check of its names). Development support only: the tests, the
demo and the benchmarks run in the venv it compiles; a user's PySpark is theirs to keep.

How: a ``.pyc`` beside each ``.py`` in the zip (``zipimport`` looks there, not in ``__pycache__``), as
checked hash-based bytecode (PEP 552): the importer hashes the source and compiles it anew if the two
differ, so the bytecode can never run in place of other source. The zip is rewritten whole into a
temporary file and renamed over the old one. A Python process that imported from the zip before the rename
and imports more from it after reads the old offsets in the new file and fails, so run it when no Spark job
of this venv is running (the setup does, before any).
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

__all__ = ["compile_zip", "pyspark_zips"]

_CHECKED_HASH = (0b11).to_bytes(4, "little")
"""PEP 552 flags: hash-based (bit 0), checked against the source at import (bit 1)."""


def pyspark_zips() -> list[Path]:
    """The zips Spark puts on its Python workers' path, in the installed PySpark (none before 4.x)."""
    import pyspark

    return sorted((Path(pyspark.__file__).parent / "python" / "lib").glob("*.zip"))


def compile_zip(path: Path) -> int:
    """Adds a checked ``.pyc`` beside each ``.py`` in the zip at ``path`` that lacks one; returns how many.

    A source that does not compile (pyspark.zip holds test files with syntax Python warns about, none that
    fails) is left without bytecode, as the importer would compile it. Zero: the zip is left as it was.
    """
    path = path.absolute()
    with zipfile.ZipFile(path) as zin:
        names = set(zin.namelist())
        missing = {n for n in names if n.endswith(".py") and n + "c" not in names}
        if not missing:
            return 0
        fd, partial = tempfile.mkstemp(prefix=path.name + ".", suffix=".partial", dir=path.parent)
        os.close(fd)
        added = 0
        try:
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zout:
                for info in zin.infolist():
                    data = zin.read(info)
                    zout.writestr(info, data)
                    # Named as zipimport names what it compiles itself, so tracebacks read the same.
                    origin = f"{path}{os.sep}{info.filename}"
                    if info.filename in missing and (pyc := _bytecode(data, origin)) is not None:
                        entry = zipfile.ZipInfo(info.filename + "c", date_time=info.date_time)
                        entry.compress_type = zipfile.ZIP_DEFLATED
                        zout.writestr(entry, pyc)
                        added += 1
            if added:
                os.chmod(partial, path.stat().st_mode & 0o777)
                os.replace(partial, path)
        finally:
            Path(partial).unlink(missing_ok=True)  # replaced, or not wanted
    return added


def _bytecode(source: bytes, filename: str) -> bytes | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyspark's own test files: "is" with a literal, and the like
        try:
            code = compile(source, filename, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return None
    header = importlib.util.MAGIC_NUMBER + _CHECKED_HASH + importlib.util.source_hash(source)
    return header + marshal.dumps(code)


def main() -> None:
    """``make setup``: each of PySpark's zips compiled, one line for each that was."""
    for path in pyspark_zips():
        try:
            added = compile_zip(path)
        except OSError as e:  # a PySpark installed read-only, or another user's: only a speed-up is missed
            sys.stdout.write(f"left {path} as it is ({e}): PySpark's workers compile it as they start\n")
            continue
        if added:
            sys.stdout.write(f"compiled {added} modules in {path} (PySpark's workers import from it)\n")


if __name__ == "__main__":
    main()
