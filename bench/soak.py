"""Days in minutes: a soak of a production query on Apache Kafka with its clocks compressed (``make soak``).

What it runs (``bench/soak_driver.py``, one Spark application): an exactly-once pipeline (a sparkafka
source, a stateless SQL step, the exactly-once sink), an aggregation in update mode into the exactly-once
sink, and an at-least-once query, each on the same input, at a 200 ms trigger. A feeder writes the input
at a steady rate, and two of its partitions fall quiet for a minute every two minutes, longer than the
broker keeps an idle producer's state. Faults come on a schedule: driver SIGKILLs (the driver is started
again on the same checkpoints), a broker restart, partitions added to the input topic, all in the first
half (the second half is one driver run, on which the trends are judged). Before the queries
start, each transactional id the exactly-once sinks will use is taken to a few hundred epoch bumps short of
Kafka's last epoch (raw InitProducerId requests), so every run crosses a producer-id rotation.

Kafka's clocks, compressed (and why each):

- ``producer.id.expiration.ms`` 30 s (1 day): the quiet partitions' producer state expires within each
  quiet spell, so a sink task's next write to them is from a producer id the partition no longer knows (the
  condition of librdkafka's implicit ack, docs/exactly-once.md);
- ``transactional.id.expiration.ms`` 60 s (7 days): transactional ids a query stops using (ids fenced when
  parallelism falls, a driver's last batch) are forgotten while the run goes on;
- small segments and ten minutes of retention on the input, segments of 30 s and an eager cleaner on the
  intent logs: retention and compaction run many times in a run instead of once a week.

It samples every ``--sample-every`` batches of the exactly-once query: each process of the driver (the JVM,
Python workers, the source runners) its RSS, open file descriptors and threads, the driver JVM's live heap
and its memory outside the heap (``bench/soak_samples.py``: what is judged and why), the checkpoints'
size and files, the intent logs' size on disk, sparkafka's metrics files, the broker's transactional ids
and producer ids, and per-batch planning and commit time. It prints them as
a table and a plot (PNG), with each series' slope per 1,000 batches over the last driver run in the second
half of the run, and its noise (the residual deviation of that fit): a series is flat when the growth the
slope implies over that span is within twice its noise (and a small floor per unit).

The verdict, by an oracle independent of the product (a read_committed view of each output against what the
feeder wrote): every input record exactly once in the exactly-once output, at least once in the at-least-once
output, the last count of each key equal to its records; no driver exited by itself; every series flat.

    python bench/soak.py [--minutes 30] [--rate 200] [--seed N] [--ci]

``--ci`` (the 3-minute run ``make test`` makes, tests/soak/test_soak.py): no scheduled faults, and only the
unmistakable growth fails it (descriptors or threads growing with batches); the oracle as always.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak_samples import (
    INFORMATIONAL,
    JVM_OPTS,
    JvmSample,
    Sampler,
    batch_timings,
    plot,
    report_heap,
    series_names,
    trend,
)
from sparkafka.client.core import admin_client, close_all
from sparkafka.local.kafka_broker import ApacheKafka
from sparkafka.local.procs import GroupProcess
from sparkafka.ops.committed_view import committed_view
from sparkafka.sink.intents import intent_topic
from sparkafka.sink.task import transactional_id

HERE = Path(__file__).resolve().parent

BROKER_CONFIG = {
    "producer.id.expiration.ms": "30000",  # 1 day: shorter than the quiet spells (60 s)
    "producer.id.expiration.check.interval.ms": "5000",  # 10 min: expiry is looked for every 5 s
    "transactional.id.expiration.ms": "60000",  # 7 days: unused ids are forgotten within the run
    "transaction.remove.expired.transaction.cleanup.interval.ms": "10000",  # 1 h
    "log.cleaner.backoff.ms": "1000",  # 15 s: the cleaner looks for dirty logs every second
    "log.retention.check.interval.ms": "10000",  # 5 min
    "log.segment.delete.delay.ms": "1000",  # 60 s: deleted segments leave the disk soon
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
}
INPUT_CONFIG = {"segment.ms": "60000", "segment.bytes": "1048576", "retention.ms": "600000"}
"""The input: a segment a minute (or a MB), ten minutes kept: retention deletes segments all run long."""
OUTPUT_CONFIG = {"retention.ms": "-1"}
"""The outputs keep everything: the oracle reads them whole."""
INTENT_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "30000",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "60000",
}
"""The intent logs (made here, before the sink would make them with hourly segments): compacted as soon as
a segment rolls, every 30 s."""

SPARK_CONF = {
    "spark.ui.retainedTasks": "2000",  # 100,000
    "spark.ui.retainedStages": "50",  # 1,000
    "spark.ui.retainedJobs": "50",  # 1,000
    "spark.sql.ui.retainedExecutions": "50",  # 1,000
}
"""The driver's status store (kept with the UI off) reaches its limits within minutes instead of an hour or
more: filling to Spark's defaults made the driver's heap grow all through a 30-minute run
(docs/benchmarks.md), which would hide a leak of sparkafka's. ``--spark-conf`` sets them back."""

RETRIABLE = {14, 15, 16, 51}
"""COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS."""
MAX_EPOCH = 32766
"""The last epoch InitProducerId hands out; the next one gives the id a new producer id at epoch 0."""
KEYS = 500
PARTITIONS = 6
ADDED_PARTITIONS = 2
QUIET = (4, 5)
"""Input partitions that fall quiet for QUIET_S every 2 x QUIET_S."""
QUIET_S = 60.0
SHUFFLE_PARTITIONS = 4
STALL_S = 180.0
"""A query fed all along that completes no batch this long has stopped (a driver restart takes ~30 s)."""


# -- raw Kafka requests (kafka-python's protocol classes) -------------------------------------------------


class RawKafka:
    """One blocking connection to a broker for requests librdkafka has no call for."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",", maxsplit=1)[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buf += chunk
        return bytes(buf)

    def send(self, request: Any, version: int, response: Any) -> Any:
        self.correlation += 1
        request.API_VERSION = version
        request.with_header(correlation_id=self.correlation, client_id="sparkafka-soak")
        self.sock.sendall(request.encode(header=True, framed=True))
        (size,) = struct.unpack(">i", self._read(4))
        return response.decode(self._read(size), version=version, header=True)


def bump_epoch(bootstrap: str, tid: str, target: int) -> tuple[int, int]:
    """Run InitProducerId on ``tid`` until its epoch reaches ``target``: (producer id, epoch) then. One
    broker here, so it is every id's coordinator; each call is sequential (concurrent ones are refused)."""
    from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
    from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

    raw = RawKafka(bootstrap)
    try:
        # FindCoordinator first: it makes the transaction log on a new cluster (InitProducerId alone is
        # answered NOT_COORDINATOR until then).
        while raw.send(FindCoordinatorRequest(key=tid, key_type=1), 1, FindCoordinatorResponse).error_code:
            time.sleep(0.1)
        while True:
            request = InitProducerIdRequest(
                transactional_id=tid, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
            )
            answer = raw.send(request, 2, InitProducerIdResponse)
            if answer.error_code in RETRIABLE:  # the transaction log is made on first use; its load
                time.sleep(0.1)
                continue
            if answer.error_code != 0:
                raise RuntimeError(f"InitProducerId for {tid}: error {answer.error_code}")
            if answer.producer_epoch >= target:
                return answer.producer_id, answer.producer_epoch
    finally:
        raw.close()


def broker_counts(bootstrap: str, partitions: Iterable[tuple[str, int]]) -> tuple[int, int]:
    """(transactional ids the broker holds: ListTransactions; producer states over ``partitions``:
    DescribeProducers)."""
    from kafka.protocol.admin import (
        DescribeProducersRequest,
        DescribeProducersResponse,
        ListTransactionsRequest,
        ListTransactionsResponse,
    )

    raw = RawKafka(bootstrap)
    try:
        listed = raw.send(
            ListTransactionsRequest(state_filters=[], producer_id_filters=[]), 0, ListTransactionsResponse
        )
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        topics = [
            DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps) for t, ps in by_topic.items()
        ]
        described = raw.send(DescribeProducersRequest(topics=topics), 0, DescribeProducersResponse)
        producers = sum(len(p.active_producers) for t in described.topics for p in t.partitions)
        return len(listed.transaction_states), producers
    finally:
        raw.close()


# -- the feeder ---------------------------------------------------------------------------------------


class Feeder(threading.Thread):
    """Writes ``c-<n>`` (key ``k-<n mod KEYS>``) at ``rate`` records/s over the input's partitions, but the
    quiet ones during their spells; one request in flight (no implicit ack can lose one of these)."""

    def __init__(self, conf: dict[str, str], topic: str, rate: int) -> None:
        super().__init__(daemon=True, name="feeder")
        self.conf, self.topic, self.rate = conf, topic, rate
        self.partitions = PARTITIONS
        self.halt = threading.Event()
        self.sent = 0
        self.failed: list[str] = []
        self.error: BaseException | None = None
        self.began = time.monotonic()

    def quiet(self, partition: int) -> bool:
        return partition in QUIET and int((time.monotonic() - self.began) / QUIET_S) % 2 == 1

    def run(self) -> None:
        from confluent_kafka import Producer

        try:
            producer = Producer(
                {
                    **self.conf,
                    "enable.idempotence": "true",
                    "max.in.flight.requests.per.connection": "1",
                    "linger.ms": "20",
                    "log_level": "0",
                }
            )
            slot = 0
            usable = PARTITIONS
            step = max(1, self.rate // 10)
            while not self.halt.is_set():
                if self.partitions > usable:  # partitions added: write to them once this producer knows them
                    meta = producer.list_topics(self.topic, timeout=5).topics.get(self.topic)
                    if meta is not None and len(meta.partitions) >= self.partitions:
                        usable = self.partitions
                for _ in range(step):
                    live = [p for p in range(usable) if not self.quiet(p)]
                    n = self.sent
                    producer.produce(
                        self.topic,
                        f"c-{n:09d}".encode(),
                        key=f"k-{n % KEYS}".encode(),
                        partition=live[slot % len(live)],
                        on_delivery=lambda e, _m: e is None or self.failed.append(str(e)),
                    )
                    slot += 1
                    self.sent += 1
                producer.poll(0)
                self.halt.wait(0.1)
            if producer.flush(120) != 0:
                self.error = RuntimeError("the feeder could not deliver everything in 120 s")
            elif self.failed:
                self.error = RuntimeError(f"{len(self.failed)} deliveries failed, e.g. {self.failed[0]}")
        except BaseException as e:  # noqa: BLE001 - reported by the controller
            self.error = e


# -- the run ----------------------------------------------------------------------------------------------


@dataclass
class Soak:
    args: argparse.Namespace
    work: Path
    kafka: ApacheKafka
    conf: dict[str, str]
    input: str
    outputs: dict[str, str]
    prefixes: dict[str, str]
    config_path: Path
    sampler: Sampler
    feeder: Feeder | None = None
    driver: GroupProcess | None = None
    runs: int = 0
    exits: list[str] = field(default_factory=list)
    faults: list[tuple[int, str]] = field(default_factory=list)
    rotations: dict[str, tuple[int, int]] = field(default_factory=dict)

    def progress(self) -> list[dict[str, Any]]:
        path = self.work / "progress.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def batches(self) -> int:
        return sum(1 for p in self.progress() if p["query"] == "eos")

    def start_driver(self, *extra: str) -> GroupProcess:
        self.runs += 1
        gc = self.work / f"gc-{self.runs}.log"
        env = {
            **os.environ,
            "SPARK_SUBMIT_OPTS": " ".join(
                filter(None, [os.environ.get("SPARK_SUBMIT_OPTS"), f"-Xlog:gc:file={gc}", JVM_OPTS])
            ),
        }
        cmd = [sys.executable, str(HERE / "soak_driver.py"), str(self.config_path), *extra]
        self.driver = GroupProcess(cmd, log_path=self.work / f"driver-{self.runs}.log", env=env)
        return self.driver

    def check_driver(self) -> None:
        """A driver that exited by itself is counted and started again (a run must not die)."""
        if self.driver is not None and not self.driver.alive():
            tail = self.driver.tail(15)
            self.exits.append(f"run {self.runs} exited {self.driver.returncode}: {tail.splitlines()[-1:]}")
            print(f"  driver run {self.runs} EXITED by itself:\n{tail}", flush=True)
            self.start_driver()

    def fault(self, what: str) -> None:
        batches = self.batches()
        self.faults.append((batches, what))
        print(f"  [{time.strftime('%H:%M:%S')}] fault at batch {batches}: {what}", flush=True)
        if what == "driver kill":
            assert self.driver is not None
            self.driver.kill()
            self.start_driver()
        elif what == "broker restart":
            self.kafka.kill(0)
            time.sleep(3)  # a broker down a few seconds: what a restart of its machine is, at least
            self.kafka.restart(0)
        elif what == "partitions added":
            from confluent_kafka.admin import NewPartitions

            admin = admin_client(self.conf)
            total = PARTITIONS + ADDED_PARTITIONS
            for future in admin.create_partitions([NewPartitions(self.input, total)]).values():
                future.result(30)
            assert self.feeder is not None
            self.feeder.partitions = total


def prepare(args: argparse.Namespace, work: Path, kafka: ApacheKafka) -> Soak:
    from confluent_kafka.admin import NewTopic

    conf = {"bootstrap.servers": kafka.bootstrap_servers}
    run_id = uuid.uuid4().hex[:6]
    source = f"soak-in-{run_id}"
    outputs = {name: f"soak-{name}-{run_id}" for name in ("eos", "agg", "alo")}
    prefixes = {"eos": f"soak-eos-{run_id}", "agg": f"soak-agg-{run_id}"}
    admin = admin_client(conf)
    specs = [NewTopic(source, PARTITIONS, 1, config=INPUT_CONFIG)]
    specs += [NewTopic(t, PARTITIONS, 1, config=OUTPUT_CONFIG) for t in outputs.values()]
    specs += [NewTopic(intent_topic(p), 1, 1, config=INTENT_CONFIG) for p in prefixes.values()]
    for future in admin.create_topics(specs).values():
        future.result(30)
    config = {
        "bootstrap": kafka.bootstrap_servers,
        "input": source,
        "outputs": outputs,
        "prefixes": prefixes,
        "group": f"soak-{run_id}",
        "work": str(work),
        "trigger": args.trigger,
        "max_per_batch": args.rate * 5,
        "out_partitions": PARTITIONS,
        "shuffle_partitions": SHUFFLE_PARTITIONS,
        "spark_conf": {**SPARK_CONF, **dict(kv.split("=", 1) for kv in args.spark_conf)},
    }
    config_path = work / "config.json"
    config_path.write_text(json.dumps(config, indent=2))
    watched = [(t, p) for t in outputs.values() for p in range(PARTITIONS)]
    watched += [(intent_topic(prefix), 0) for prefix in prefixes.values()]
    sampler = Sampler(work, kafka.data_dir, prefixes, lambda: broker_counts(kafka.bootstrap_servers, watched))
    return Soak(args, work, kafka, conf, source, outputs, prefixes, config_path, sampler)


def bump_all(soak: Soak, headroom: int) -> None:
    """Every transactional id the exactly-once sinks will use, ``headroom`` bumps short of the last epoch."""
    tasks = PARTITIONS if soak.args.ci else PARTITIONS + ADDED_PARTITIONS  # --ci adds no partitions
    tids = [transactional_id(soak.prefixes["eos"], t) for t in range(tasks)]
    tids += [transactional_id(soak.prefixes["agg"], t) for t in range(SHUFFLE_PARTITIONS)]
    began = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        done = list(
            pool.map(
                lambda tid: (tid, bump_epoch(soak.kafka.bootstrap_servers, tid, MAX_EPOCH - headroom)), tids
            )
        )
    soak.rotations = dict(done)
    print(
        f"epochs: {len(tids)} transactional ids taken to epoch {MAX_EPOCH - headroom} ({headroom} bumps "
        f"short of the last) in {time.monotonic() - began:.0f} s",
        flush=True,
    )


def schedule(args: argparse.Namespace, seconds: float) -> list[tuple[float, str]]:
    if args.ci:
        return []
    # Every fault in the first half, so that the second half, which the trends are judged on, is one
    # driver run that has had a tenth of the run to warm up (its JVM's threads and heap grow as it does).
    return sorted(
        [
            (0.1 * seconds, "driver kill"),
            (0.25 * seconds, "driver kill"),
            (0.3 * seconds, "broker restart"),
            (0.38 * seconds, "partitions added"),
            (0.4 * seconds, "driver kill"),
        ]
    )


@dataclass
class Verdict:
    lines: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def check(self, ok: bool, what: str) -> None:
        self.lines.append(f"  {'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            self.failed.append(what)


def oracle(soak: Soak, sent: int, verdict: Verdict) -> None:
    """Each output against what the feeder wrote, read_committed as any consumer would (the committed-view
    oracle applies the transactions' markers itself)."""
    expected = {f"c-{n:09d}".encode() for n in range(sent)}
    for name in ("eos", "alo"):
        got = Counter(
            r.value
            for records in committed_view(soak.conf, soak.outputs[name], settle_s=10).values()
            for r in records
        )
        lost = len(expected - set(got))
        extra = sum(1 for v in got if v not in expected)
        twice = sum(c - 1 for v, c in got.items() if c > 1)
        if name == "eos":
            verdict.check(
                lost == 0 and twice == 0 and extra == 0,
                f"exactly once: {sent:,} in, {sum(got.values()):,} out, {lost} lost, {twice} duplicated",
            )
        else:
            verdict.check(
                lost == 0 and extra == 0,
                f"at least once: {sent:,} in, {sum(got.values()):,} out ({twice:,} again), {lost} lost",
            )
    counts: dict[bytes, bytes] = {}
    for records in committed_view(soak.conf, soak.outputs["agg"], settle_s=10).values():
        for r in records:  # a key's records are in one partition, in order: its last count wins
            if r.key is not None and r.value is not None:
                counts[r.key] = r.value
    want = Counter(f"k-{n % KEYS}".encode() for n in range(sent))
    wrong = [k for k in want if counts.get(k) != str(want[k]).encode()]
    verdict.check(
        not wrong,
        f"update mode: the last count of each of {len(want)} keys equals its records ({len(wrong)} wrong)",
    )


def report(soak: Soak, verdict: Verdict) -> None:
    rows = soak.sampler.rows
    print("\nsamples (every row: one sample; columns: the series)")
    names = series_names(rows)
    for row in rows:
        cells = ", ".join(f"{n}={row[n]:.1f}" for n in names if n in row and isinstance(row[n], float | int))
        print(f"  batch {row['batches']:>6} run {row['run']}: {cells}")
    print(
        "\ntrends over the last driver run in the second half (growth per 1,000 batches; noise: the fit's "
        "residual deviation)"
    )
    print(f"  {'series':<40} {'first':>10} {'last':>10} {'/1000 b':>10} {'noise':>9} {'span':>6}  verdict")
    unmistakable = ("descriptors", "threads")
    for name in names:
        t = trend(rows, name)
        if t is None:
            continue
        print(
            f"  {name:<40} {t.first:>10.1f} {t.last:>10.1f} {t.slope:>10.2f} {t.noise:>9.2f} {t.span:>6}  "
            f"{'flat' if t.flat else 'GROWS'}"
        )
        if name in INFORMATIONAL:
            print(f"  {'':<40} (not judged: {INFORMATIONAL[name]})")
        elif soak.args.ci:
            # A leak of one per batch or so is unmistakable even in 3 minutes: one per 4 batches fails, a
            # JVM's pools growing as it warms up (measured: 9 threads over its second 93 batches) does not.
            if any(u in name for u in unmistakable):
                verdict.check(
                    t.growth <= max(4 * t.noise, 0.25 * t.span),
                    f"{name} does not grow with batches ({t.growth:+.1f} over {t.span} batches)",
                )
        else:
            verdict.check(t.flat, f"{name} flat ({t.growth:+.1f} over {t.span} batches, noise {t.noise:.1f})")


def run(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="sparkafka-soak-"))
    print(
        f"soak: {args.minutes:g} min, {args.rate} records/s, trigger {args.trigger}, work {work}", flush=True
    )
    seconds = args.minutes * 60
    verdict = Verdict()
    with ApacheKafka(data_dir=work / "kafka", config=BROKER_CONFIG) as kafka:
        soak = prepare(args, work, kafka)
        bump_all(soak, args.epoch_headroom)
        soak.feeder = Feeder(soak.conf, soak.input, args.rate)
        soak.feeder.start()
        soak.start_driver()
        began = time.monotonic()
        plan = schedule(args, seconds)
        last_sample = -args.sample_every
        snapshots: list[JvmSample | None] = []
        try:
            progressed, seen = time.monotonic(), 0
            while time.monotonic() - began < seconds:
                time.sleep(1)
                if soak.feeder.error is not None or not soak.feeder.is_alive():
                    raise RuntimeError(f"the feeder stopped: {soak.feeder.error}")
                soak.check_driver()
                elapsed = time.monotonic() - began
                while plan and plan[0][0] <= elapsed:
                    soak.fault(plan.pop(0)[1])
                batches = soak.batches()
                if batches > seen:
                    progressed, seen = time.monotonic(), batches
                elif time.monotonic() - progressed > STALL_S:  # fed all along: a query that stopped
                    verdict.check(False, f"the exactly-once query made no batch for {STALL_S:.0f} s")
                    break
                if batches - last_sample >= args.sample_every:
                    progress = [p for p in soak.progress() if p["at"] >= time.time() - 60]
                    soak.sampler.take(soak.driver, soak.runs, batches, batch_timings(progress))
                    last_sample = batches
                    if not snapshots and elapsed >= seconds / 2:  # the driver's JVM, for what grows
                        snapshots.append(soak.sampler.last_jvm)
            snapshots.append(soak.sampler.last_jvm)
            soak.feeder.halt.set()
            soak.feeder.join(180)
            if soak.feeder.error is not None:
                raise soak.feeder.error
            assert soak.driver is not None
            soak.driver.kill()  # the drain runs on the same checkpoints, to the end of the input
            with soak.start_driver("--available-now") as drain:
                drain.wait(600)
            verdict.check(drain.returncode == 0, f"the drain run ended well ({drain.returncode})")
            verdict.check(not soak.exits, f"no driver run exited by itself ({len(soak.exits)}: {soak.exits})")
            try:
                oracle(soak, soak.feeder.sent, verdict)
            except Exception as e:  # noqa: BLE001 - the run's samples are reported all the same
                verdict.check(False, f"the oracle could not read the outputs: {e}")
            rotated = rotated_ids(soak)
            verdict.check(bool(rotated), f"producer ids rotated at epoch exhaustion: {len(rotated)} ids")
        finally:
            if soak.driver is not None:
                soak.driver.kill()
            close_all()
        report(soak, verdict)
        batches = soak.batches()
        print(
            f"\nbatches of the exactly-once query: {batches:,}; driver runs {soak.runs}; faults: "
            + (", ".join(f"{w} at {b}" for b, w in soak.faults) or "none")
        )
        report_heap(snapshots)
        png = Path(args.plot or work / "soak.png")
        if soak.sampler.rows:
            plot(soak.sampler.rows, png, soak.faults)
            print(f"plot: {png}")
        (work / "samples.json").write_text(json.dumps(soak.sampler.rows))
    print("\nverdict")
    print("\n".join(verdict.lines))
    print(
        "SOAK " + ("PASSED" if not verdict.failed else f"FAILED: {len(verdict.failed)} check(s)"), flush=True
    )
    return 0 if not verdict.failed else 1


def rotated_ids(soak: Soak) -> list[str]:
    """The sinks' transactional ids now on another producer id than the one the run began with."""
    out = []
    for tid, (pid, _epoch) in soak.rotations.items():
        try:
            now, _ = bump_epoch_peek(soak.kafka.bootstrap_servers, tid)
        except RuntimeError:
            continue
        if now != pid:
            out.append(tid)
    return out


def bump_epoch_peek(bootstrap: str, tid: str) -> tuple[int, int]:
    """The producer id and epoch the coordinator holds for ``tid`` (DescribeTransactions: changes nothing)."""
    from kafka.protocol.admin import DescribeTransactionsRequest, DescribeTransactionsResponse

    raw = RawKafka(bootstrap)
    try:
        answer = raw.send(
            DescribeTransactionsRequest(transactional_ids=[tid]), 0, DescribeTransactionsResponse
        )
        (state,) = answer.transaction_states
        if state.error_code != 0:
            raise RuntimeError(f"DescribeTransactions {tid}: error {state.error_code}")
        return state.producer_id, state.producer_epoch
    finally:
        raw.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=int, default=200, help="records/s into the input")
    parser.add_argument("--trigger", default="200 milliseconds")
    parser.add_argument("--sample-every", type=int, default=50, help="batches of the exactly-once query")
    parser.add_argument("--epoch-headroom", type=int, default=300, help="bumps short of the last epoch")
    parser.add_argument("--plot", help="where the PNG goes (default: the run's work dir)")
    parser.add_argument(
        "--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="the driver's Spark settings"
    )
    parser.add_argument(
        "--ci", action="store_true", help="3 minutes, no faults, fails only on unmistakable growth"
    )
    args = parser.parse_args(argv)
    if args.ci:
        defaults = {"minutes": 30.0, "sample_every": 50, "epoch_headroom": 300}
        if args.minutes == defaults["minutes"]:
            args.minutes = 3.0
        if args.sample_every == defaults["sample_every"]:
            args.sample_every = 15
        if args.epoch_headroom == defaults["epoch_headroom"]:
            args.epoch_headroom = 40
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
