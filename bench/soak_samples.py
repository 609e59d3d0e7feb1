"""The soak's samples and their trends (``bench/soak.py``): what each sample reads from the driver's
processes, the driver JVM, the checkpoints and the broker, and the least-squares growth each series shows
over the second half of a run. Runs in the soak's own process, between batches of the queries it watches.

The driver JVM's heap is judged by its live set: ``jcmd`` takes a class histogram, which runs a full
collection first, so its total is what the heap holds alive. The GC log's heap after a collection (G1's
young collections leave old regions' garbage until a concurrent cycle) and the JVM's RSS (the heap growing
toward its maximum, ``-Xmx``) are printed beside it, not judged: each climbs while nothing is kept. What the
JVM holds outside its heap is judged by Native Memory Tracking's committed total less the heap's
(``-XX:NativeMemoryTracking=summary``, which the soak starts the driver with).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import statistics
import struct
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkafka.local.procs import GroupProcess, session_members
from sparkafka.metrics_files import metrics_dir
from sparkafka.sink.intents import intent_topic

# -- samples -------------------------------------------------------------------------------------------


_GC = re.compile(r"Pause.*?(\d+)M->(\d+)M\((\d+)M\)")


def _proc(pid: int) -> dict[str, Any] | None:
    """RSS (MB), descriptors, threads and a role of process ``pid``; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        ppid = int(re.search(r"PPid:\s+(\d+)", status)[1])  # type: ignore[index]
    except (OSError, TypeError):
        return None
    rss = int(re.search(r"VmRSS:\s+(\d+)", status)[1]) / 1024 if "VmRSS" in status else 0.0  # type: ignore[index]
    threads = int(re.search(r"Threads:\s+(\d+)", status)[1])  # type: ignore[index]
    args = [a.decode(errors="replace") for a in cmd if a]
    module = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "-m"), "")
    if args and args[0].endswith("java"):
        role = "driver JVM"
    elif "soak_driver.py" in " ".join(args):
        role = "driver Python"
    elif module.endswith("python_streaming_source_runner"):
        role = "source runners"
    elif module:
        role = "Python workers"
    else:
        role = "other"
    return {"pid": pid, "ppid": ppid, "role": role, "rss": rss, "fds": fds, "threads": threads}


JVM_OPTS = "-XX:NativeMemoryTracking=summary"
"""Added to the driver JVM's options, so that ``jvm_sample`` can read its memory outside the heap."""

INFORMATIONAL = {
    "driver heap after young GC MB": "G1's young collections leave old garbage; the live heap is judged",
    "driver JVM RSS MB (max)": "the heap growing toward -Xmx plus the non-heap; both are judged apart",
    "driver heap committed MB": "what G1 has taken toward -Xmx, not what it keeps alive",
}
"""Series printed and plotted but not judged, each with why: each climbs while nothing is kept."""


@dataclass(frozen=True)
class JvmSample:
    """One look at the driver JVM: its live heap after a full collection, its committed heap and what it has
    committed outside the heap (MB), and its live objects by class (class -> (instances, bytes))."""

    live_mb: float
    committed_mb: float | None
    non_heap_mb: float | None
    histogram: dict[str, tuple[int, int]]
    native: dict[str, float] = field(default_factory=dict)
    """Native Memory Tracking's committed MB per category outside the heap (Class, Thread, Code, GC, ...)."""
    threads: dict[str, int] = field(default_factory=dict)
    """The JVM's threads by name, digits folded (``Executor task launch worker for task #``) -> count."""


def driver_jvm(driver: GroupProcess | None) -> int | None:
    """The pid of the driver's JVM among the processes of ``driver``'s session, if it has one now."""
    procs = [p for pid in (session_members(driver.pid) if driver else []) if (p := _proc(pid))]
    return next((p["pid"] for p in procs if p["role"] == "driver JVM"), None)


def parse_jcmd(out: str) -> JvmSample | None:
    """A ``JvmSample`` from the output of ``jcmd -f`` running GC.class_histogram, GC.heap_info and
    VM.native_memory summary (None without the histogram's total)."""
    histogram: dict[str, tuple[int, int]] = {}
    native: dict[str, float] = {}
    threads: dict[str, int] = {}
    live = committed = nmt_total = nmt_heap = None
    for line in out.splitlines():
        if match := re.match(r'"(.+?)" ', line):
            name = re.sub(r"#?\d+", "#", match[1])
            threads[name] = threads.get(name, 0) + 1
        elif (match := re.match(r"-\s+(.+?) \(reserved=\d+KB, committed=(\d+)KB", line)) and match[
            1
        ] != "Java Heap":
            native[match[1]] = int(match[2]) / 1024
        if match := re.match(r"\s*\d+:\s+(\d+)\s+(\d+)\s+(\S+)", line):
            histogram[match[3]] = (int(match[1]), int(match[2]))
        elif match := re.match(r"Total\s+(\d+)\s+(\d+)\s*$", line):
            live = int(match[2]) / 2**20
        elif match := re.match(
            r"\s*(?:garbage-first heap|def new generation|tenured generation|PSYoungGen|ParOldGen)"
            r"\s+total (\d+)K",
            line,
        ):
            committed = (committed or 0.0) + int(match[1]) / 1024
        elif match := re.match(r"Total: reserved=\d+KB, committed=(\d+)KB", line):
            nmt_total = int(match[1]) / 1024
        elif match := re.search(r"Java Heap \(reserved=\d+KB, committed=(\d+)KB", line):
            nmt_heap = int(match[1]) / 1024
    if live is None:
        return None
    non_heap = nmt_total - nmt_heap if nmt_total is not None and nmt_heap is not None else None
    return JvmSample(live, committed, non_heap, histogram, native, threads)


def jvm_sample(driver: GroupProcess | None, work: Path) -> JvmSample | None:
    """The driver JVM's ``JvmSample`` through one ``jcmd`` attach (a full collection, about a second); None
    when there is no driver JVM, no jcmd, or it cannot attach (a driver being restarted)."""
    jvm, jcmd = driver_jvm(driver), shutil.which("jcmd")
    if jvm is None or jcmd is None:
        return None
    commands = work / "jcmd.txt"
    commands.write_text("GC.class_histogram\nGC.heap_info\nVM.native_memory summary\nThread.print\n")
    try:
        done = subprocess.run(
            [jcmd, str(jvm), "-f", str(commands)], check=False, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        return None
    return parse_jcmd(done.stdout)


def histogram_growth(
    first: dict[str, tuple[int, int]], last: dict[str, tuple[int, int]], top: int = 12
) -> list[str]:
    """The classes whose live bytes grew most between two histograms, as lines to print."""
    grown = sorted(
        ((last[c][1] - first.get(c, (0, 0))[1], last[c][0] - first.get(c, (0, 0))[0], c) for c in last),
        reverse=True,
    )
    return [f"  {b / 1e6:>+9.2f} MB {n:>+10,} objects  {c}" for b, n, c in grown[:top] if b > 0]


def _growth(first: dict[str, float], last: dict[str, float], unit: str, top: int = 8) -> list[str]:
    grown = sorted(((last[k] - first.get(k, 0.0), k) for k in last), reverse=True)
    return [f"  {d:>+9.2f} {unit}  {k}" for d, k in grown[:top] if d > 0]


def report_heap(snapshots: list[JvmSample | None]) -> None:
    """Print what grew in the driver JVM over the second half (between two samples: its first and last):
    live objects by class, native memory by category, threads by name."""
    if len(snapshots) != 2 or snapshots[0] is None or snapshots[1] is None:
        return
    first, last = snapshots
    print("\nthe driver JVM's live objects that grew most over the second half (jcmd GC.class_histogram)")
    print("\n".join(histogram_growth(first.histogram, last.histogram)))
    print("\nits native memory outside the heap that grew (jcmd VM.native_memory summary, committed)")
    print("\n".join(_growth(first.native, last.native, "MB")) or "  nothing")
    print("\nits threads that grew, by name (jcmd Thread.print, digits folded)")
    counts = _growth(
        {k: float(v) for k, v in first.threads.items()}, {k: float(v) for k, v in last.threads.items()}, ""
    )
    print("\n".join(counts) or "  nothing")


def _dir_size(path: Path) -> tuple[float, int]:
    """(MB on disk, files) under ``path``: blocks, not lengths (Kafka preallocates its index files)."""
    total, files = 0, 0
    for root, _dirs, names in os.walk(path):
        for name in names:
            try:
                total += (Path(root) / name).stat().st_blocks * 512
                files += 1
            except OSError:
                pass
    return total / 1e6, files


@dataclass
class Sampler:
    """Takes the samples (see the module docstring) into ``rows``: one dict per sample."""

    work: Path
    kafka_data: Path
    prefixes: dict[str, str]
    broker_counts: Callable[[], tuple[int, int]]
    """The broker's transactional ids and producer ids (raises OSError, RuntimeError or struct.error)."""
    rows: list[dict[str, Any]] = field(default_factory=list)
    last_jvm: JvmSample | None = None
    """The driver JVM's last sample that could be read (its live objects by class, native memory, threads)."""
    _gc_seen: int = 0

    def heap_after_gc(self) -> float | None:
        """The smallest heap after a GC since the last sample (MB), from the driver JVMs' GC logs."""
        after: list[int] = []
        for log in sorted(self.work.glob("gc-*.log")):
            for line in log.read_text(errors="replace").splitlines():
                match = _GC.search(line)
                if match:
                    after.append(int(match[2]))
        fresh, self._gc_seen = after[self._gc_seen :], len(after)
        return float(min(fresh)) if fresh else None

    def take(self, driver: GroupProcess | None, run: int, batches: int, timings: dict[str, float]) -> None:
        procs = [p for pid in (session_members(driver.pid) if driver else []) if (p := _proc(pid))]
        row: dict[str, Any] = {"batches": batches, "run": run, "at": time.time(), **timings}
        by_role: dict[str, list[dict[str, Any]]] = {}
        for p in procs:
            by_role.setdefault(p["role"], []).append(p)
        for role, members in by_role.items():
            row[f"{role} RSS MB (max)"] = max(m["rss"] for m in members)
            row[f"{role} count"] = len(members)
        row["descriptors (all)"] = sum(p["fds"] for p in procs)
        row["threads (all)"] = sum(p["threads"] for p in procs)
        row["descriptors (driver JVM)"] = sum(p["fds"] for p in by_role.get("driver JVM", []))
        row["threads (driver JVM)"] = sum(p["threads"] for p in by_role.get("driver JVM", []))
        heap = self.heap_after_gc()
        if heap is not None:
            row["driver heap after young GC MB"] = heap
        jvm = jvm_sample(driver, self.work)
        if jvm is not None:
            row["driver live heap MB"] = jvm.live_mb
            if jvm.committed_mb is not None:
                row["driver heap committed MB"] = jvm.committed_mb
            if jvm.non_heap_mb is not None:
                row["driver JVM non-heap MB"] = jvm.non_heap_mb
            self.last_jvm = jvm
        size, files = 0.0, 0
        for ck in self.work.glob("ck-*"):
            s, f = _dir_size(ck)
            size, files = size + s, files + f
        row["checkpoint MB"], row["checkpoint files"] = size, files
        intents = 0.0
        for prefix in self.prefixes.values():
            for d in self.kafka_data.glob(f"node-*/{intent_topic(prefix)}-0"):
                intents += _dir_size(d)[0]
        row["intent logs MB"] = intents
        msize, mfiles = _dir_size(metrics_dir())
        row["metrics files"], row["metrics MB"] = mfiles, msize
        try:
            row["broker transactional ids"], row["broker producer ids"] = self.broker_counts()
        except (OSError, RuntimeError, struct.error) as e:
            print(f"  (broker counts not read: {e})", flush=True)
        self.rows.append(row)


def batch_timings(progress: list[dict[str, Any]]) -> dict[str, float]:
    """Median planning (latestOffset + queryPlanning) and commit (addBatch + commitOffsets) ms per query."""
    out: dict[str, float] = {}
    for name in ("eos", "agg", "alo"):
        lines = [p["durationMs"] for p in progress if p["query"] == name and p.get("rows")]
        if lines:
            out[f"{name} planning ms"] = statistics.median(
                d.get("latestOffset", 0) + d.get("queryPlanning", 0) for d in lines
            )
            out[f"{name} addBatch+commit ms"] = statistics.median(
                d.get("addBatch", 0) + d.get("commitOffsets", 0) for d in lines
            )
    return out


# -- growth ---------------------------------------------------------------------------------------------

FLOORS = {"MB": 5.0, "files": 5.0, "count": 1.0, "descriptors": 3.0, "threads": 3.0, "ms": 20.0, "ids": 3.0}
"""Growth below these (per unit a series' name ends in) is flat whatever the noise: one more file now and
then is no leak."""


@dataclass
class Trend:
    series: str
    first: float
    last: float
    slope: float
    """Growth per 1,000 batches."""
    noise: float
    span: int
    """Batches the fit spans."""
    points: int

    @property
    def growth(self) -> float:
        return self.slope * self.span / 1000

    @property
    def floor(self) -> float:
        return next((v for k, v in FLOORS.items() if k in self.series), 1.0)

    @property
    def flat(self) -> bool:
        return self.growth <= max(2 * self.noise, self.floor)


def trend(rows: list[dict[str, Any]], series: str) -> Trend | None:
    """The least-squares slope of ``series`` against batches over the last driver run in the second half
    of the run (a driver's restart starts its processes' series afresh)."""
    if not rows:
        return None
    half = rows[-1]["batches"] / 2
    last_run = rows[-1]["run"]
    points = [
        (r["batches"], r[series])
        for r in rows
        if r["batches"] >= half and r["run"] == last_run and series in r
    ]
    if len(points) < 4:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    residuals = [y - (my + slope * (x - mx)) for x, y in points]
    noise = math.sqrt(sum(r * r for r in residuals) / max(1, len(points) - 2))
    return Trend(series, ys[0], ys[-1], slope * 1000, noise, xs[-1] - xs[0], len(points))


def series_names(rows: list[dict[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for row in rows:
        for key in row:
            if key not in ("batches", "run", "at"):
                names[key] = None
    return list(names)


def plot(rows: list[dict[str, Any]], path: Path, faults: list[tuple[int, str]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = series_names(rows)
    cols = 3
    fig, axes = plt.subplots(
        math.ceil(len(names) / cols), cols, figsize=(15, 2.3 * math.ceil(len(names) / cols))
    )
    for ax, name in zip(axes.flat, names, strict=False):
        pts = [(r["batches"], r[name]) for r in rows if name in r]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], ".-", markersize=3)
        for at, _what in faults:
            ax.axvline(at, color="red", alpha=0.3)
        ax.set_title(name, fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    fig.supxlabel("batches of the exactly-once query (red: a fault)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
