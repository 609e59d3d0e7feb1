"""Apache Kafka's broker jars: installed once from Maven Central into a cache outside the repository.

Runs in the process of ``make`` (``python -m sparkafka.local.kafka_dist``), of ``sparkafka broker`` or of a
test session, before a broker starts. Maven (``mvn``, the ordinary client for Maven Central) resolves
``apache_kafka/pom.xml`` beside this module, which pins ``org.apache.kafka:kafka_2.13`` and a logging
binding; every jar it copies must match ``apache_kafka/kafka-jars.sha256`` (the complete list, name and
SHA-256, generated once with ``--write-checksums``). Only then is the folder moved into place, so a half
download is never used. A second run finds the verified folder and downloads nothing (Maven is not even
started).

Where: ``$SPARKAFKA_CACHE_DIR``, else ``$XDG_CACHE_HOME/sparkafka``, else ``~/.cache/sparkafka``;
``kafka-<version>/libs`` holds the jars, ``m2`` Maven's own repository (so nothing lands in ``~/.m2``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

from sparkafka.errors import BrokerError

__all__ = ["KAFKA_VERSION", "cache_dir", "install", "installed_libs"]

KAFKA_VERSION = "4.4.0"
"""The Apache Kafka release the project runs (the newest 4.x whose jars resolved on 2026-11-24)."""

_DATA = "apache_kafka"
_CHECKSUMS = "kafka-jars.sha256"
_VERIFIED = ".verified"
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def cache_dir() -> Path:
    """Where downloads are kept: ``$SPARKAFKA_CACHE_DIR``, ``$XDG_CACHE_HOME/sparkafka``, ``~/.cache/...``."""
    explicit = os.environ.get("SPARKAFKA_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sparkafka"


def _data(name: str) -> bytes:
    return resources.files("sparkafka.local").joinpath(_DATA, name).read_bytes()


def expected_checksums() -> dict[str, str]:
    """Jar name -> SHA-256, from the committed list."""
    out: dict[str, str] = {}
    for raw in _data(_CHECKSUMS).decode().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            digest, name = line.split(maxsplit=1)
            out[name] = digest
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _mismatches(libs: Path, expected: dict[str, str]) -> list[str]:
    """What differs between ``libs`` and the list: missing, unexpected or altered jars (empty: all good)."""
    present = {p.name for p in libs.glob("*.jar")}
    problems = [f"{name} missing" for name in sorted(set(expected) - present)]
    problems += [f"{name} not in the pinned list" for name in sorted(present - set(expected))]
    problems += [
        f"{name} has SHA-256 {digest[:12]}..., expected {expected[name][:12]}..."
        for name in sorted(present & set(expected))
        if (digest := _sha256(libs / name)) != expected[name]
    ]
    return problems


def _home(version: str = KAFKA_VERSION) -> Path:
    return cache_dir() / f"kafka-{version}"


def installed_libs() -> Path | None:
    """The verified jar folder if this version is installed, else None (cheap: reads one stamp file)."""
    libs = _home() / "libs"
    stamp = libs / _VERIFIED
    want = hashlib.sha256(_data(_CHECKSUMS)).hexdigest()
    if stamp.is_file() and stamp.read_text().strip() == want:
        return libs
    return None


def _maven(pom: Path, output: Path, m2: Path) -> None:
    """``mvn dependency:copy-dependencies`` of ``pom`` into ``output``; BrokerError with Maven's reason."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError(
            "Apache Kafka's jars are fetched with Maven, and `mvn` is not on PATH: install it "
            "(`apt-get install maven`), or use the pip-only broker with `sparkafka broker --tansu`"
        )
    cmd = [
        mvn,
        "-B",
        "-q",
        f"-Dmaven.repo.local={m2}",
        "-f",
        str(pom),
        "-Dstyle.color=never",
        f"{_DEPENDENCY_PLUGIN}:copy-dependencies",
        f"-DoutputDirectory={output}",
        "-DincludeScope=runtime",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        text = _ANSI.sub("", done.stdout + done.stderr)
        errors = [
            ln.removeprefix("[ERROR]").split(" -> [Help")[0].strip()
            for ln in text.splitlines()
            if ln.startswith("[ERROR]")
        ]
        reason = next((e for e in errors if e), text.strip().splitlines()[-1] if text.strip() else "")
        reason = re.sub(r"\s+", " ", reason)[:400]
        raise BrokerError(
            f"could not fetch Apache Kafka {KAFKA_VERSION} (org.apache.kafka:kafka_2.13:{KAFKA_VERSION} and "
            f"its dependencies) from Maven Central with mvn (exit {done.returncode}): {reason}"
        )


def install(quiet: bool = False) -> Path:
    """The verified jar folder, downloading and checking it first if needed.

    Raises:
        BrokerError: Maven is missing or cannot fetch (offline), or a jar does not match its checksum.
    """
    libs = installed_libs()
    if libs is not None:
        return libs
    expected = expected_checksums()
    home = _home()
    home.mkdir(parents=True, exist_ok=True)
    libs = home / "libs"
    if libs.is_dir() and not _mismatches(libs, expected):  # verified before, stamp lost
        (libs / _VERIFIED).write_text(hashlib.sha256(_data(_CHECKSUMS)).hexdigest() + "\n")
        return libs
    if not quiet:
        sys.stderr.write(
            f"installing Apache Kafka {KAFKA_VERSION} from Maven Central into {home} (about 45 MB, once)\n"
        )
        sys.stderr.flush()
    with tempfile.TemporaryDirectory(dir=home, prefix="download-") as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_bytes(_data("pom.xml"))
        fetched = Path(tmp) / "libs"
        _maven(pom, fetched, cache_dir() / "m2")
        problems = _mismatches(fetched, expected)
        if problems:
            raise BrokerError(
                f"Apache Kafka {KAFKA_VERSION}'s jars do not match the pinned checksums "
                f"(sparkafka/local/{_DATA}/{_CHECKSUMS}): " + "; ".join(problems[:5])
            )
        (fetched / _VERIFIED).write_text(hashlib.sha256(_data(_CHECKSUMS)).hexdigest() + "\n")
        if libs.exists():
            shutil.rmtree(libs)
        fetched.rename(libs)
    return libs


def write_checksums(target: Path) -> None:
    """Resolve the pom afresh and write every jar's SHA-256 to ``target`` (run once, on a version change)."""
    with tempfile.TemporaryDirectory(prefix="sparkafka-kafka-") as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_bytes(_data("pom.xml"))
        fetched = Path(tmp) / "libs"
        _maven(pom, fetched, cache_dir() / "m2")
        lines = [f"# Apache Kafka {KAFKA_VERSION}: every jar of apache_kafka/pom.xml, generated by", ""]
        lines[0] += " `python -m sparkafka.local.kafka_dist --write-checksums`"
        lines[1:] = [f"{_sha256(p)}  {p.name}" for p in sorted(fetched.glob("*.jar"))]
        target.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write-checksums", action="store_true", help="regenerate the pinned list (maintainers)"
    )
    args = parser.parse_args(argv)
    try:
        if args.write_checksums:
            target = Path(__file__).parent / _DATA / _CHECKSUMS
            write_checksums(target)
            sys.stdout.write(f"wrote {target}\n")
            return 0
        libs = install()
    except BrokerError as e:
        sys.stderr.write(f"error: {e}\n")
        return 1
    sys.stdout.write(f"Apache Kafka {KAFKA_VERSION}: {libs}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
