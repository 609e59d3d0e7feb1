"""Jars from Maven Central, pinned and checksummed, installed once into a cache outside the repository.

Runs in the process of ``make``, of ``sparkafka broker``, of a test session or of a benchmark, before the
jars are used. Maven (``mvn``, the ordinary client for Maven Central) resolves a pom committed beside the
module that names the distribution (``MavenDist.data``); every jar it copies must match the checksum list
beside that pom (the complete list, name and SHA-256, generated once with ``write_checksums``). Only then
is the folder moved into place, so a half download is never used. A second run finds the verified folder
and downloads nothing (Maven is not even started).

Where: ``$SPARKAFKA_CACHE_DIR``, else ``$XDG_CACHE_HOME/sparkafka``, else ``~/.cache/sparkafka``;
``<folder>/libs`` holds a distribution's jars, ``m2`` Maven's own repository (so nothing lands in ``~/.m2``).
Two distributions use it: Apache Kafka's broker (``kafka_dist``) and Spark's own Kafka connector, a test
and benchmark dependency only (``spark_kafka_dist``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from sparkafka.errors import BrokerError

__all__ = ["MavenDist", "cache_dir"]

_VERIFIED = ".verified"
_CENTRAL_ONLY = """<settings><mirrors><mirror>
  <id>central-only</id><mirrorOf>*</mirrorOf><url>https://repo1.maven.org/maven2</url>
</mirror></mirrors></settings>
"""
"""Maven's settings for every fetch: Maven Central for every repository a pom names. Spark 4.0's and 4.1's
poms name a Google mirror of it first, whose host does not resolve from every network (measured: here),
and Maven stops at a transfer error rather than trying Central."""
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def cache_dir() -> Path:
    """Where downloads are kept: ``$SPARKAFKA_CACHE_DIR``, ``$XDG_CACHE_HOME/sparkafka``, ``~/.cache/...``."""
    explicit = os.environ.get("SPARKAFKA_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sparkafka"


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


@dataclass(frozen=True)
class MavenDist:
    """One pinned distribution: a pom and its checksum list in ``sparkafka/local/<data>/``."""

    title: str
    """What it is, for messages: ``Apache Kafka 4.4.0``."""
    coordinate: str
    """The artifact the pom pins, for messages: ``org.apache.kafka:kafka_2.13:4.4.0``."""
    data: str
    """The package folder holding ``pom.xml`` and ``checksums``."""
    checksums: str
    """The checksum list's file name in ``data``."""
    folder: str
    """The folder under ``cache_dir()`` whose ``libs`` holds the jars."""
    size: str
    """About how much is downloaded, for the one line printed before a download."""
    hint: str = ""
    """What to do instead when Maven is missing (appended to that error)."""

    def _data(self, name: str) -> bytes:
        return resources.files("sparkafka.local").joinpath(self.data, name).read_bytes()

    def _stamp(self) -> str:
        return hashlib.sha256(self._data(self.checksums)).hexdigest()

    def expected_checksums(self) -> dict[str, str]:
        """Jar name -> SHA-256, from the committed list."""
        out: dict[str, str] = {}
        for raw in self._data(self.checksums).decode().splitlines():
            line = raw.strip()
            if line and not line.startswith("#"):
                digest, name = line.split(maxsplit=1)
                out[name] = digest
        return out

    def home(self) -> Path:
        return cache_dir() / self.folder

    def installed_libs(self) -> Path | None:
        """The verified jar folder if installed, else None (cheap: reads one stamp file)."""
        libs = self.home() / "libs"
        stamp = libs / _VERIFIED
        if stamp.is_file() and stamp.read_text().strip() == self._stamp():
            return libs
        return None

    def install(self, quiet: bool = False) -> Path:
        """The verified jar folder, downloading and checking it first if needed.

        Raises:
            BrokerError: Maven is missing or cannot fetch (offline), or a jar does not match its checksum.
        """
        libs = self.installed_libs()
        if libs is not None:
            return libs
        expected = self.expected_checksums()
        home = self.home()
        home.mkdir(parents=True, exist_ok=True)
        libs = home / "libs"
        if libs.is_dir() and not _mismatches(libs, expected):  # verified before, stamp lost
            (libs / _VERIFIED).write_text(self._stamp() + "\n")
            return libs
        if not quiet:
            sys.stderr.write(f"installing {self.title} from Maven Central into {home} ({self.size}, once)\n")
            sys.stderr.flush()
        with tempfile.TemporaryDirectory(dir=home, prefix="download-") as tmp:
            pom = Path(tmp) / "pom.xml"
            pom.write_bytes(self._data("pom.xml"))
            fetched = Path(tmp) / "libs"
            self._maven(pom, fetched)
            problems = _mismatches(fetched, expected)
            if problems:
                raise BrokerError(
                    f"{self.title}'s jars do not match the pinned checksums "
                    f"(sparkafka/local/{self.data}/{self.checksums}): " + "; ".join(problems[:5])
                )
            (fetched / _VERIFIED).write_text(self._stamp() + "\n")
            if libs.exists():
                shutil.rmtree(libs)
            fetched.rename(libs)
        return libs

    def _maven(self, pom: Path, output: Path) -> None:
        """``mvn dependency:copy-dependencies`` of ``pom`` into ``output`` (BrokerError: Maven failed)."""
        mvn = shutil.which("mvn")
        if mvn is None:
            raise BrokerError(
                f"{self.title}'s jars are fetched with Maven, and `mvn` is not on PATH: install it "
                f"(`apt-get install maven`){self.hint}"
            )
        settings = pom.parent / "settings.xml"
        settings.write_text(_CENTRAL_ONLY)
        cmd = [
            mvn,
            "-B",
            "-q",
            "-s",
            str(settings),
            f"-Dmaven.repo.local={cache_dir() / 'm2'}",
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
                f"could not fetch {self.title} ({self.coordinate} and its dependencies) from Maven Central "
                f"with mvn (exit {done.returncode}): {reason}"
            )

    def write_checksums(self) -> Path:
        """Resolve the pom afresh and write every jar's SHA-256 beside it (run once, on a version change)."""
        target = Path(__file__).parent / self.data / self.checksums
        with tempfile.TemporaryDirectory(prefix="sparkafka-maven-") as tmp:
            pom = Path(tmp) / "pom.xml"
            pom.write_bytes(self._data("pom.xml"))
            fetched = Path(tmp) / "libs"
            self._maven(pom, fetched)
            header = f"# {self.title}: every jar of {self.data}/pom.xml, generated by `--write-checksums`"
            lines = [header] + [f"{_sha256(p)}  {p.name}" for p in sorted(fetched.glob("*.jar"))]
            target.write_text("\n".join(lines) + "\n")
        return target

    def main(self, argv: list[str] | None, description: str) -> int:
        """``python -m`` entry point: install (or ``--write-checksums``), one line either way."""
        import argparse

        parser = argparse.ArgumentParser(description=description)
        parser.add_argument(
            "--write-checksums", action="store_true", help="regenerate the pinned list (maintainers)"
        )
        args = parser.parse_args(argv)
        try:
            if args.write_checksums:
                sys.stdout.write(f"wrote {self.write_checksums()}\n")
                return 0
            libs = self.install()
        except BrokerError as e:
            sys.stderr.write(f"error: {e}\n")
            return 1
        sys.stdout.write(f"{self.title}: {libs}\n")
        return 0
