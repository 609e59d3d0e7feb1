"""The wheels as a user installs them: into a fresh venv outside the source tree, with no register().

``sparkafka`` (pure Python) is built from this tree (``python -m build``, a few seconds); ``sparkafka-native``
is the wheel ``make native`` built and installed into the source venv (``.venv/native-wheels``),
the one ``make dist`` ships. Each test makes a venv in a temporary directory and installs into it with pip,
offline (``--no-index``): sparkafka and sparkafka-native from the wheels, every other requirement found
already installed in a directory of links to the source venv's dependencies (pyspark, pyarrow,
confluent-kafka, ...), so nothing is downloaded and pip still checks each declared requirement and the
``[native]`` extra. That directory holds no sparkafka, no ``pyspark_sparkafka``, no sparkafka_native and no
``.pth`` file: the source tree and the source venv's own sparkafka are not importable. The job runs with
that venv's Python on the PATH, as after ``source venv/bin/activate`` (PySpark's workers run ``python3``
from the PATH), in a plain SparkSession: ``format("sparkafka")`` is found by PySpark's lookup.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from sparkafka import __version__
from sparkafka.sink.at_start import REGISTER_FOR_EXACTLY_ONCE
from tests.integration.test_after_start import case, check_each, mistakes, run_cases
from tests.support.docs import troubleshooting_entry
from tests.support.kafka import Kafka

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
OURS = ("sparkafka", "sparkafka_native", "pyspark_sparkafka", "__editable__")
"""What the links to the source venv leave out: our packages, their metadata, the editable finder."""
MANYLINUX_LIBS = {
    "libc.so.6",
    "libm.so.6",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
}
"""What every manylinux policy lets an extension take from the system (PEP 600's glibc libraries, libgcc)."""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with this tree's sparkafka wheel and the native wheel ``make native`` built."""
    out = tmp_path_factory.mktemp("wheels")
    # Built from a copy of what the wheel is made of: setuptools writes build/ and an egg-info beside its
    # sources, which in the checkout would be shared with any other build running there.
    tree = tmp_path_factory.mktemp("tree")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out), str(tree)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, (
        f"building the wheel failed:\n{built.stdout[-3000:]}\n{built.stderr[-3000:]}"
    )
    native = sorted((ROOT / ".venv" / "native-wheels").glob("sparkafka_native-*.whl"))
    assert native, "no sparkafka_native wheel in .venv/native-wheels: run `make native`"
    (out / native[-1].name).symlink_to(native[-1])
    return out


@pytest.fixture(scope="module")
def dependencies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Links to everything in the source venv's site-packages but sparkafka's own packages and .pth files."""
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    out = tmp_path_factory.mktemp("deps")
    for entry in site.iterdir():
        if entry.name.startswith(OURS) or entry.suffix == ".pth":
            continue
        (out / entry.name).symlink_to(entry)
    return out


def fresh_venv(where: Path, dependencies: Path, wheels: Path, requirement: str) -> Path:
    """A venv at ``where`` with ``requirement`` installed from ``wheels`` by pip, offline; its bin dir."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    site = next((where / "lib").glob("python3.*/site-packages"))
    (site / "dependencies.pth").write_text(f"{dependencies}\n")
    pip = [sys.executable, "-m", "pip", "--python", str(where / "bin" / "python"), "install", "--quiet"]
    # Without the PYTHONPATH an older line's tests run under (scripts/test_lines.sh: this tree's src/, whose
    # egg-info pip would take for sparkafka installed already).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run(
        [*pip, "--no-index", "--find-links", str(wheels), requirement], check=True, cwd=where, env=env
    )
    return where / "bin"


JOB = textwrap.dedent(
    """
    import json, os, sys
    from pyspark.sql import SparkSession

    bootstrap, source, sink, prefix, fetcher = sys.argv[1:6]
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    df = (
        spark.read.format("sparkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("fetcher", fetcher)
        .load()
    )
    out = {"values": sorted(r.value.decode() for r in df.select("value").collect())}
    import pyspark_sparkafka, sparkafka
    out["files"] = [sparkafka.__file__, pyspark_sparkafka.__file__]
    try:
        import sparkafka_native
        out["native"] = sparkafka_native.__file__
    except ImportError:
        out["native"] = None
    if sink:
        def write():
            (
                df.select("key", "value").write.format("sparkafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", sink)
                .option("deliveryGuarantee", "exactly_once")
                .option("transactionalIdPrefix", prefix)
                .mode("append")
                .save()
            )
        try:
            write()
        except Exception as e:
            out["unregistered"] = str(e)
        sparkafka.register(spark)
        write()
    spark.stop()
    print("RESULT " + json.dumps(out))
    """
)


def run_script(
    bin_dir: Path,
    cwd: Path,
    text: str,
    *args: str,
    path_first: Path,
    extra_env: dict[str, str] | None = None,
    check: bool = True,
) -> str:
    """Run the job ``text`` with the venv's Python, from ``cwd``, ``path_first`` first on the PATH and none
    of this process's Python or PySpark settings; what its last ``RESULT `` line says. ``check``: the job
    must exit 0."""
    script = cwd / "job.py"
    script.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK", "VIRTUAL_ENV"))}
    env.update(
        PATH=f"{path_first}{os.pathsep}{env['PATH']}",
        SPARK_LOCAL_IP="127.0.0.1",
        TMPDIR=str(cwd),  # metrics files
        **(extra_env or {}),
    )
    done = subprocess.run(
        [str(bin_dir / "python"), str(script), *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if check:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert lines, done.stdout[-3000:] + done.stderr[-3000:]
    return lines[-1].removeprefix("RESULT ")


def run_job(bin_dir: Path, cwd: Path, *args: str) -> dict[str, object]:
    """Run ``JOB`` with the venv's Python first on the PATH (as after activating it); its JSON result."""
    activated = {"VIRTUAL_ENV": str(bin_dir.parent)}
    return dict(json.loads(run_script(bin_dir, cwd, JOB, *args, path_first=bin_dir, extra_env=activated)))


@pytest.mark.lines
def test_both_wheels_read_and_write_exactly_once_without_the_source(
    tmp_path: Path, wheels: Path, dependencies: Path, kafka: Kafka, new_topic: Callable[..., str]
) -> None:
    venv = tmp_path / "venv"
    bin_dir = fresh_venv(venv, dependencies, wheels, "sparkafka[native]")
    version = subprocess.run(
        [str(bin_dir / "sparkafka"), "--version"], capture_output=True, text=True, check=True
    )
    assert __version__ in version.stdout
    source, sink = new_topic(partitions=2), new_topic(partitions=2)
    values = kafka.produce(source, [f"v{i}" for i in range(20)], partitions=2)
    prefix = f"install-{uuid.uuid4().hex[:8]}"
    out = run_job(bin_dir, tmp_path, kafka.conf["bootstrap.servers"], source, sink, prefix, "native")
    assert out["values"] == sorted(values)
    files = [*out["files"], out["native"]]  # type: ignore[misc]
    assert all(str(f).startswith(str(venv)) for f in files), files
    assert REGISTER_FOR_EXACTLY_ONCE in str(out["unregistered"])
    assert sorted(v.decode() for v in kafka.read_committed(sink) if v is not None) == sorted(values)


def test_the_pure_wheel_alone_reads_through_confluent_kafka(
    tmp_path: Path, wheels: Path, dependencies: Path, kafka: Kafka, new_topic: Callable[..., str]
) -> None:
    venv = tmp_path / "venv"
    bin_dir = fresh_venv(venv, dependencies, wheels, "sparkafka")
    source = new_topic(partitions=2)
    values = kafka.produce(source, [f"p{i}" for i in range(10)], partitions=2)
    out = run_job(bin_dir, tmp_path, kafka.conf["bootstrap.servers"], source, "", "", "auto")
    assert out["native"] is None
    assert out["values"] == sorted(values)
    assert all(str(f).startswith(str(venv)) for f in out["files"]), out["files"]  # type: ignore[attr-defined]


def test_a_new_user_s_mistakes_from_the_wheels_are_each_one_sentence_troubleshooting_lists(
    tmp_path: Path, wheels: Path, dependencies: Path, kafka: Kafka, new_topic: Callable[..., str]
) -> None:
    """Issue 50's walk-through: from the wheels, outside the tree, the venv not activated (its python run by
    path, no PYSPARK_PYTHON), a user's script makes each mistake (tests/integration/after_start_job.py, run
    as a file): each is one sentence, once, within 20 lines, and docs/troubleshooting.md lists it."""
    bin_dir = fresh_venv(tmp_path / "venv", dependencies, wheels, "sparkafka")
    cases = mistakes(
        kafka.conf["bootstrap.servers"], new_topic(partitions=2), new_topic(partitions=2), tmp_path
    )
    cases["bad option at load"] = (
        case(
            "bad option at load",
            tmp_path,
            {
                "kafka.bootstrap.servers": kafka.conf["bootstrap.servers"],
                "subscribe": "t",
                "startingOffsets": "nope",
            },
            None,
        ),
        "option startingOffsets='nope' is not allowed",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK", "VIRTUAL_ENV"))}
    seen = run_cases([c for c, _ in cases.values()], tmp_path, python=str(bin_dir / "python"), env=env)
    check_each(seen, {name: says for name, (_, says) in cases.items()})
    for name in cases:
        (line,) = [line for line in seen[name].lines if "sparkafka.errors." in line]
        sentence = line.split("sparkafka.errors.", 1)[1].split(": ", 1)[1]
        assert troubleshooting_entry(sentence) is not None, (
            f"{name}: not in docs/troubleshooting.md: {sentence}"
        )


def test_the_native_wheel_is_manylinux_with_openssl_inside(wheels: Path, tmp_path: Path) -> None:
    """The native wheel ``make dist`` ships: tagged ``manylinux_2_N`` for the highest glibc version its
    extension's symbols need (the lowest tag it honestly meets), and its extension needs no libssl or
    libcrypto from the system, only the libraries every manylinux policy allows (OpenSSL is built in)."""
    wheel = next(wheels.glob("sparkafka_native-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        info = next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))
        tags = [t.removeprefix("Tag: ") for t in z.read(info).decode().splitlines() if t.startswith("Tag: ")]
        extension = Path(z.extract(next(n for n in z.namelist() if n.endswith(".so")), tmp_path))
    tag = re.fullmatch(r"cp311-abi3-manylinux_2_(\d+)_x86_64", tags[0]) if len(tags) == 1 else None
    assert tag, tags
    assert wheel.name.endswith(f"-{tag.group(0)}.whl")
    dynamic = subprocess.run(["readelf", "-d", str(extension)], capture_output=True, text=True, check=True)
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic.stdout))
    assert needed, dynamic.stdout
    assert needed <= MANYLINUX_LIBS, needed - MANYLINUX_LIBS
    symbols = subprocess.run(
        ["readelf", "--dyn-syms", "-W", str(extension)], capture_output=True, text=True, check=True
    )
    glibc = max(int(minor) for minor in re.findall(r"@GLIBC_2\.(\d+)", symbols.stdout))
    assert int(tag.group(1)) == glibc
    ldd = subprocess.run(["ldd", str(extension)], capture_output=True, text=True, check=True).stdout
    assert not re.search(r"libssl|libcrypto", ldd), ldd


COUNT_JOB = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession

    bootstrap, source = sys.argv[1:3]
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    try:
        df = spark.read.format("sparkafka").option("kafka.bootstrap.servers", bootstrap)
        print(f"RESULT rows {df.option('subscribe', source).load().count()}")
    except Exception as e:  # a Py4JJavaError: Spark's error class is inside its text
        import re
        found = re.search(r"\\[([A-Z_]+)\\]", str(e))
        print(f"RESULT error {found[1] if found else str(e).splitlines()[0]}")
    spark.stop()
    """
)


def test_format_sparkafka_from_a_venv_python_run_without_activating_it(
    tmp_path: Path, wheels: Path, dependencies: Path, kafka: Kafka, new_topic: Callable[..., str]
) -> None:
    """``/path/to/venv/bin/python job.py`` with another ``python3`` first on the PATH (the venv not
    activated) and no ``register``: Spark looks ``pyspark_sparkafka`` up with ``python3`` from the PATH, which
    has no PySpark, and says DATA_SOURCE_NOT_FOUND; with ``PYSPARK_PYTHON`` naming the venv's Python, the
    one-line fix docs/troubleshooting.md gives, the same job reads."""
    bin_dir = fresh_venv(tmp_path / "venv", dependencies, wheels, "sparkafka")
    other = tmp_path / "other"  # a python3 without PySpark, as a system's is
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    source = new_topic(partitions=1)
    kafka.produce(source, [f"n{i}" for i in range(7)], partitions=1)
    bootstrap = kafka.conf["bootstrap.servers"]

    def result(extra: dict[str, str]) -> str:
        return run_script(
            bin_dir,
            tmp_path,
            COUNT_JOB,
            bootstrap,
            source,
            path_first=other / "bin",
            extra_env=extra,
            check=False,
        )

    assert result({}) == "error DATA_SOURCE_NOT_FOUND"
    assert result({"PYSPARK_PYTHON": str(bin_dir / "python")}) == "rows 7"
