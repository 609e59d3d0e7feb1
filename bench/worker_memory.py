"""Memory of the read path under Spark: the RSS of every Python process Spark starts, batch by batch.

Reads a backlog (default 4,000,000 records of 100 B in 4 partitions) on a local Apache Kafka with
``format("sparkafka")`` at ``maxOffsetsPerTrigger`` 400,000 into ``noop`` (availableNow, so about ten
micro-batches), on ``local[2]``, and samples every 0.2 s the resident set size of each process under this
one: Spark's JVM and its Python processes (the worker daemon and the workers it forks, the streaming
source's planner process). Prints, per process, its role, peak RSS, and its RSS at the end of the first and
of the last batch (flat over time: the last no higher than the first plus a margin), and the goal (issue 29):
each Python worker at most 300 MB.

    python bench/worker_memory.py [--records N] [--batch-records B] [--partitions P] [--kafka KEY=VALUE]

Linux only (reads ``/proc``). Nothing is timed here beyond the rate printed for reference.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from source_throughput import fill
from sparkafka.local import ApacheKafka
from sparkafka.local.spark import local_spark, stop_spark

GOAL_MB = 300
PAGE = os.sysconf("SC_PAGE_SIZE")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        tree.setdefault(_parent(int(name)), []).append(int(name))
    return tree


def descendants(root: int) -> list[int]:
    """Every process under ``root`` (not ``root`` itself), read from ``/proc`` now."""
    tree = _children()
    out: list[int] = []
    todo = list(tree.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(tree.get(pid, []))
    return out


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE / 1e6
    except (OSError, IndexError, ValueError):
        return None


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def role(pid: int) -> str:
    """What a process is, from its command line: the JVM, the worker daemon, a worker, a planner process."""
    args = _cmdline(pid)
    text = " ".join(args)
    if not args:
        return "gone"
    if args[0].endswith("java"):
        return "Kafka broker (JVM)" if "kafka.Kafka" in text else "Spark JVM"
    if "pyspark.daemon" in text:  # the daemon forks the workers: they keep its command line
        forked = "pyspark.daemon" in " ".join(_cmdline(_parent(pid)))
        return "Python worker (forked by pyspark.daemon)" if forked else "Python pyspark.daemon"
    for module in ("pyspark.sql.worker.", "pyspark.sql.streaming.", "pyspark.worker"):
        if module in text:
            name = text.split(module, 1)[1].split()[0]
            return f"Python {module}{name}"
    return " ".join(a.rsplit("/", 1)[-1] for a in args[:3])


@dataclass
class Process:
    role: str
    peak_mb: float = 0.0
    at_batch_end: dict[int, float] = field(default_factory=dict)


class Sampler:
    """Samples the RSS of every process under this one, in a thread, until stopped."""

    def __init__(self, period_s: float = 0.2) -> None:
        self.period_s = period_s
        self.processes: dict[int, Process] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._lock = threading.Lock()

    def _sample(self) -> dict[int, float]:
        now: dict[int, float] = {}
        for pid in descendants(os.getpid()):
            mb = rss_mb(pid)
            if mb is None:
                continue
            now[pid] = mb
            with self._lock:
                proc = self.processes.get(pid)
                if proc is None:
                    proc = self.processes[pid] = Process(role(pid))
                proc.peak_mb = max(proc.peak_mb, mb)
        return now

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self._sample()

    def mark(self, batch_id: int) -> None:
        """Record every live process's RSS as of the end of ``batch_id``."""
        for pid, mb in self._sample().items():
            with self._lock:
                self.processes[pid].at_batch_end[batch_id] = mb

    def marked(self, batch_id: int) -> bool:
        """Whether the end of ``batch_id`` has been recorded."""
        with self._lock:
            return any(batch_id in p.at_batch_end for p in self.processes.values())

    @contextlib.contextmanager
    def running(self) -> Iterator[Sampler]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=4_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batch-records", type=int, default=400_000)
    parser.add_argument(
        "--kafka",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a librdkafka setting for the source",
    )
    args = parser.parse_args()
    with ApacheKafka() as broker:
        conf = {"bootstrap.servers": broker.bootstrap_servers}
        topic = f"bench-memory-{uuid.uuid4().hex[:8]}"
        total = fill(conf, topic, args.records, args.partitions)
        print(f"filled {topic}: {total:,} records of 100 B in {args.partitions} partitions")
        spark = local_spark(app_name="bench-memory")
        try:
            run(spark, broker.bootstrap_servers, topic, total, args)
        finally:
            stop_spark(spark)


def run(spark: object, bootstrap: str, topic: str, total: int, args: argparse.Namespace) -> None:
    from pyspark.sql.streaming import StreamingQueryListener

    sampler = Sampler()

    class Marks(StreamingQueryListener):  # type: ignore[misc]
        def onQueryStarted(self, event: object) -> None:
            pass

        def onQueryProgress(self, event: object) -> None:
            sampler.mark(event.progress.batchId)  # type: ignore[attr-defined]

        def onQueryIdle(self, event: object) -> None:
            pass

        def onQueryTerminated(self, event: object) -> None:
            pass

    spark.streams.addListener(Marks())  # type: ignore[attr-defined]
    reader = (
        spark.readStream.format("sparkafka")  # type: ignore[attr-defined]
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.batch_records))
    )
    for setting in args.kafka:
        key, _, value = setting.partition("=")
        reader = reader.option(f"kafka.{key}", value)
    with tempfile.TemporaryDirectory() as checkpoint, sampler.running():
        started = time.perf_counter()
        query = (
            reader.load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        elapsed = time.perf_counter() - started
        last = (query.lastProgress or {}).get("batchId")
        deadline = time.monotonic() + 30  # the listener's last call arrives on its own thread, after the end
        while last is not None and not sampler.marked(last) and time.monotonic() < deadline:
            time.sleep(0.05)
    batches = sorted({b for p in sampler.processes.values() for b in p.at_batch_end})
    print(f"read {total:,} records in {len(batches)} batches, {total / elapsed:,.0f} records/s")
    first, last = (batches[0], batches[-1]) if batches else (None, None)
    print(f"{'pid':>8}  {'peak MB':>8}  {f'batch {first}':>9}  {f'batch {last}':>9}  role")
    worst = 0.0
    for pid, proc in sorted(sampler.processes.items(), key=lambda kv: -kv[1].peak_mb):
        a = proc.at_batch_end.get(first, float("nan")) if first is not None else float("nan")
        b = proc.at_batch_end.get(last, float("nan")) if last is not None else float("nan")
        print(f"{pid:>8}  {proc.peak_mb:>8.0f}  {a:>9.0f}  {b:>9.0f}  {proc.role}")
        if proc.role.startswith("Python worker"):
            worst = max(worst, proc.peak_mb)
    verdict = "met" if worst <= GOAL_MB else "missed"
    print(f"largest Python worker peak: {worst:.0f} MB (goal <= {GOAL_MB} MB: {verdict})")


if __name__ == "__main__":
    main()
