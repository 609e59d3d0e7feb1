"""Chaos harness: an exactly-once Kafka -> Spark -> Kafka pipeline on a three-broker cluster under crashes.

The cluster is Apache Kafka itself, three KRaft nodes on 127.0.0.1 (``ApacheKafka(brokers=3)``), each a
broker and a controller voter. The pipeline's topics have three replicas with ``min.insync.replicas`` 2, and
so do the sink's commit-intent log (the sink creates it so on a cluster of three) and Kafka's internal
topics (the group offsets, the transaction log).

A feeder produces records with unique ids without pause. A controller, driven by a seeded random generator
(the seed is printed, so a failing schedule replays), mixes two faults:

- broker kills: SIGKILL one node (in turn: 1, 2, 3, 1, ...), wait until the partitions it led, the
  transaction coordinators of the sink's transactional ids and the group's coordinator have new leaders
  (the election), keep it down a little longer, restart it on its ports and data, wait until every
  partition is fully replicated again. The running driver must ride each one out: no failed batch, no
  exit, another batch completed after the restart.
- driver kills: SIGKILL the Spark driver (the ``sparkafka run`` process with its JVM and Python workers)
  at a random moment and restart it on the same checkpoint.

One sink task per driver run fails mid-write (retried by Spark). After each fault the group's committed
offsets are checked against the checkpoint: never past the last batch Spark committed. At the end the
feeder stops, the pipeline drains (availableNow), and the output is compared with the input twice, by the
committed-view oracle (which applies the transaction markers itself) and by a plain confluent-kafka
``read_committed`` consumer: the two must agree, every input record exactly once.

    python -m tests.chaos.harness --minutes 30 [--seed N]      # soak, for manual runs
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sparkafka.client.core import admin_client, close_all
from sparkafka.kafka import coordinator_partition
from sparkafka.local.kafka_broker import ApacheKafka
from sparkafka.local.procs import GroupProcess
from sparkafka.sink.intents import intent_topic
from sparkafka.sink.task import transactional_id
from tests.support.kafka import Kafka
from tests.support.queries import checkpoint_batches
from tests.support.wait import wait_until

BROKERS = 3
PARTITIONS = 3  # one per broker: every kill takes some partition's leader away
REPLICATION = 3
INTERNAL_PARTITIONS = 10  # offsets.topic.num.partitions, transaction.state.log.num.partitions (ApacheKafka)

CLUSTER_CONFIG = {
    # A killed node's partitions get new leaders once the controller fences it, after this long without
    # its heartbeat: at Kafka's 9 s each kill's election took 8-11 s (measured, 3 kills a run), spent
    # waiting. 4 s is still 4 heartbeats, so a busy machine's live broker is not fenced by mistake.
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "1000",
}

PIPELINE = """
name = "chaos"
checkpoint = "{checkpoint}"
trigger = "1 second"

[spark]
master = "local[2,4]"

[source]
decode = "raw"
[source.options]
"kafka.bootstrap.servers" = "{bootstrap}"
subscribe = "{src}"
startingOffsets = "earliest"
"kafka.group.id" = "{group}"
"kafka.session.timeout.ms" = "6000"
maxRecordsPerTrigger = "2000"

[sink]
key = "key"
value = "value"
[sink.options]
"kafka.bootstrap.servers" = "{bootstrap}"
topic = "{dst}"
deliveryGuarantee = "exactly_once"
transactionalIdPrefix = "{prefix}"
"""


@dataclass
class BrokerKill:
    """One broker kill as observed: what the node led, how fast Kafka and the driver got over it."""

    node: int
    """The killed node's id (1-based, as in the topics' metadata)."""
    led: list[str]
    """The watched partitions and coordinators the node led when killed."""
    moved: dict[str, str] = field(default_factory=dict)
    """Label -> ``old->new`` leader node for each watched leader that moved during the outage."""
    election_s: float = 0.0
    """From the kill to every watched partition having a live leader."""
    down_s: float = 0.0
    """From the kill to the restart."""
    resync_s: float = 0.0
    """From the restart to every partition of the cluster being fully replicated again."""
    batches_down: int = 0
    """Batches the driver completed while the node was down."""
    stall_s: float = 0.0
    """From the kill to the first batch the driver completed after the restart."""
    rode_out: bool = True
    """Whether the driver kept running (no failed batch, no exit) and completed a batch after the restart."""

    def render(self) -> str:
        moves = ", ".join(f"{k} {v}" for k, v in self.moved.items()) or "none"
        return (
            f"node {self.node}: led {len(self.led)} watched ({', '.join(self.led) or '-'}); "
            f"new leaders after {self.election_s:.1f} s; down {self.down_s:.1f} s; fully replicated "
            f"{self.resync_s:.1f} s after restart; {self.batches_down} batches while down, the next "
            f"{self.stall_s:.1f} s after the kill; "
            f"driver {'rode it out' if self.rode_out else 'EXITED'}; moved: {moves}"
        )


@dataclass
class ChaosReport:
    seed: int
    records_in: int = 0
    records_out: int = 0
    read_committed_out: int = 0
    driver_kills: int = 0
    broker_kills: list[BrokerKill] = field(default_factory=list)
    task_failures: int = 0
    task_errors: Counter[str] = field(default_factory=Counter)
    """Failed task attempts (Spark retried them) by their Python error, from the drivers' logs."""
    driver_restarts: int = 0
    driver_exits: list[str] = field(default_factory=list)
    """For each time the driver exited by itself: its log and the failure's last line."""
    recovery_s: list[float] = field(default_factory=list)
    offset_checks: int = 0
    group_commits: tuple[int, int] | None = None
    """Group offset commits (succeeded, failed), summed over the runs' last ``--log-json`` lines."""
    intent_log: str = ""
    duplicates: int = 0
    lost: int = 0
    views_agree: bool = False
    examples: list[str] = field(default_factory=list)

    @property
    def coordinator_moves(self) -> int:
        return sum(1 for k in self.broker_kills for label in k.moved if label.startswith("txn"))

    @property
    def leader_moves(self) -> int:
        return sum(len(k.moved) for k in self.broker_kills)

    def render(self) -> str:
        rec = self.recovery_s
        times = ", ".join(f"{t:.1f}" for t in rec)
        stalls = [k.stall_s for k in self.broker_kills]
        commits = self.group_commits
        lines = [
            f"chaos seed {self.seed} (replay: --seed {self.seed})",
            f"records in {self.records_in:,}; out (committed-view oracle) {self.records_out:,}; out (plain "
            f"read_committed consumer) {self.read_committed_out:,}; the two views "
            f"{'agree' if self.views_agree else 'DISAGREE'}",
            f"broker SIGKILLs {len(self.broker_kills)} on a {BROKERS}-node cluster (driver rode out "
            f"{sum(k.rode_out for k in self.broker_kills)}); driver SIGKILLs {self.driver_kills}; sink "
            f"task failures injected {self.task_failures}; driver restarts {self.driver_restarts} (after "
            f"the driver exited by itself: {len(self.driver_exits)})",
            f"leaders moved {self.leader_moves} (of which transaction coordinators {self.coordinator_moves})",
            "failed task attempts, retried by Spark: "
            + (", ".join(f"{k} {v}" for k, v in self.task_errors.most_common()) or "none"),
        ]
        lines += [f"  kill {i + 1}: {k.render()}" for i, k in enumerate(self.broker_kills)]
        lines += [f"  driver exit: {e}" for e in self.driver_exits]
        lines += [
            f"driver recovery s (start to first new batch) per run: [{times}]"
            + (f"; max {max(rec):.1f}, mean {sum(rec) / len(rec):.1f}" if rec else ""),
            "broker kill to next batch s: ["
            + ", ".join(f"{s:.1f}" for s in stalls)
            + "]"
            + (f"; max {max(stalls):.1f}" if stalls else ""),
            f"group offsets checked against the checkpoint after each fault: {self.offset_checks} times, "
            "never ahead"
            + (f"; group commits succeeded {commits[0]}, failed {commits[1]} (all runs)" if commits else ""),
            f"intent log: {self.intent_log}",
            f"duplicates {self.duplicates} (must be 0), lost {self.lost} (must be 0)"
            + (f"; e.g. {self.examples}" if self.examples else ""),
        ]
        return "\n".join(lines)


class Watched:
    """The leaders a fault should move: the pipeline's partitions and the coordinators it talks to.

    Labels: ``in-<p>``, ``out-<p>``, ``intents``, ``txn <id>`` (the ``__transaction_state`` partition that
    is the transaction coordinator of a sink transactional id) and ``group`` (the ``__consumer_offsets``
    partition that is the group's coordinator). Node ids are 1-based; -1 means no leader.
    """

    def __init__(self, conf: dict[str, str], src: str, dst: str, prefix: str, group: str) -> None:
        self.conf = conf
        self.places: dict[str, tuple[str, int]] = {}
        for p in range(PARTITIONS):
            self.places[f"in-{p}"] = (src, p)
            self.places[f"out-{p}"] = (dst, p)
        self.places["intents"] = (intent_topic(prefix), 0)
        for task in range(PARTITIONS):  # one sink task per input partition: ids <prefix>-0 .. -2
            tid = transactional_id(prefix, task)
            txn_partition = coordinator_partition(tid, INTERNAL_PARTITIONS)
            self.places[f"txn {tid}"] = ("__transaction_state", txn_partition)
        self.places["group"] = ("__consumer_offsets", coordinator_partition(group, INTERNAL_PARTITIONS))

    def leaders(self, timeout_s: float = 5.0) -> dict[str, int]:
        """Label -> leader node id, as the metadata of any live broker says now."""
        topics = admin_client(self.conf).list_topics(timeout=timeout_s).topics
        out = {}
        for label, (topic, p) in self.places.items():
            meta = topics.get(topic)
            part = meta.partitions.get(p) if meta is not None else None
            out[label] = part.leader if part is not None else -1
        return out

    def under_replicated(self, timeout_s: float = 5.0) -> list[str]:
        """Every partition of the cluster whose in-sync replicas are fewer than its replicas."""
        topics = admin_client(self.conf).list_topics(timeout=timeout_s).topics
        return [
            f"{name}-{p}"
            for name, meta in topics.items()
            for p, part in meta.partitions.items()
            if len(part.isrs) < len(part.replicas)
        ]


def _metadata(call: Any, default: Any) -> Any:
    """``call()``; ``default`` while the metadata cannot be had (a broker is down, a request timed out)."""
    try:
        return call()
    except Exception:  # noqa: BLE001 - KafkaException while the cluster is between leaders
        return default


class Feeder(threading.Thread):
    """Produces ``c-<n>`` ids round-robin over the partitions at about ``rate`` records/s until stopped.

    An idempotent producer with acks=all (librdkafka's defaults for it): a broker kill delays deliveries
    until new leaders are elected, it loses and duplicates none.
    """

    def __init__(self, conf: dict[str, str], topic: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.conf, self.topic, self.rate = conf, topic, rate
        self.halt = threading.Event()
        self.sent = 0
        self.failed: list[str] = []
        self.error: BaseException | None = None

    def _delivered(self, error: Any, _msg: Any) -> None:
        if error is not None:
            self.failed.append(str(error))

    def run(self) -> None:
        from confluent_kafka import Producer

        try:
            settings = {"enable.idempotence": "true", "linger.ms": "20", "log_level": "0"}
            producer = Producer({**self.conf, **settings})  # quiet: brokers refuse connections here
            step = max(1, self.rate // 10)
            while not self.halt.is_set():
                for _ in range(step):
                    n = self.sent
                    producer.produce(
                        self.topic,
                        f"c-{n:08d}".encode(),
                        key=str(n).encode(),
                        partition=n % PARTITIONS,
                        on_delivery=self._delivered,
                    )
                    self.sent += 1
                producer.poll(0)
                self.halt.wait(0.1)
            if producer.flush(120) != 0:
                self.error = RuntimeError("the feeder could not deliver everything in 120 s")
            elif self.failed:
                self.error = RuntimeError(f"{len(self.failed)} deliveries failed, e.g. {self.failed[0]}")
        except BaseException as e:  # noqa: BLE001 - any failure, reported by the controller
            self.error = e


class Driver:
    """``sparkafka run`` in its own session; one sink task per run fails mid-write."""

    def __init__(self, work: Path, pipeline: Path, log_json: Path) -> None:
        self.work, self.pipeline, self.log_json = work, pipeline, log_json
        self.proc: GroupProcess | None = None
        self.runs = 0
        self.started = 0.0
        self.batches_at_start = 0

    def batches(self) -> int:
        return len(self.log_json.read_text().splitlines()) if self.log_json.exists() else 0

    def start(self, *extra: str) -> None:
        self.runs += 1
        env = {
            **os.environ,
            "SPARKAFKA_TEST_FAULT": "task_mid_write:raise",
            "SPARKAFKA_TEST_FAULT_MARKER": str(self.work / f"task-fault-{self.runs}.marker"),
        }
        cmd = [
            sys.executable,
            "-m",
            "sparkafka.cli",
            "run",
            str(self.pipeline),
            "--log-json",
            str(self.log_json),
        ]
        self.batches_at_start = self.batches()
        self.started = time.monotonic()
        self.proc = GroupProcess([*cmd, *extra], log_path=self.log_path(), env=env)

    def log_path(self, run: int | None = None) -> Path:
        return self.work / f"driver-{run or self.runs}.log"

    @property
    def running(self) -> GroupProcess:
        assert self.proc is not None, "the driver was never started"
        return self.proc

    def wait_recovered(self, timeout_s: float) -> float:
        """Seconds from start to the first batch this run completed."""
        wait_until(
            lambda: self.batches() > self.batches_at_start,
            self.started + timeout_s - time.monotonic(),
            f"a first batch from driver run {self.runs}",
            process=self.running,
            interval_s=0.1,
        )
        return time.monotonic() - self.started

    def next_batch(self, after: int, timeout_s: float) -> bool:
        """True once this run has completed more than ``after`` batches, False if it exits first."""
        if self.running.wait_for(lambda: self.batches() > after, timeout_s, interval_s=0.1):
            return True
        if self.running.alive():
            raise RuntimeError(
                f"driver run {self.runs} neither progressed nor exited in {timeout_s:g} s: "
                f"{self.running.tail(30)}"
            )
        return False

    def exit_reason(self) -> str:
        """Where the driver's failure is, and its last line (the runner's one-sentence error)."""
        lines = [line for line in self.running.tail(200).splitlines() if line.strip()]
        said = [line for line in lines if line.startswith("sparkafka run:")]
        last = (said or lines or [""])[-1]
        return f"run {self.runs} exited {self.running.returncode} ({self.log_path()}): {last}"

    def interrupt(self, timeout_s: float) -> None:
        """Ctrl-C: SIGINT to the session's group; the runner stops after the running batch."""
        if self.proc is not None:
            with self.proc:
                self.proc.interrupt(signal.SIGINT, timeout_s)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()


def check_group_behind_checkpoint(kafka: Kafka, group: str, src: str, checkpoint: Path) -> None:
    """The group's committed offsets never pass the end of the last batch in Spark's commit log.

    The group is read before the checkpoint: a batch committed in between only makes the check looser.
    """
    committed = kafka.group_offsets(group, src, PARTITIONS)
    ends, commits = checkpoint_batches(str(checkpoint))
    done = ends[max(commits)] if commits else {}
    ahead = {tp: o for tp, o in committed.items() if o > done.get(tp, 0)}
    if ahead:
        raise AssertionError(f"group offsets ahead of the last committed batch: {ahead} > {done}")


def describe_intent_log(conf: dict[str, str], topic: str) -> tuple[int, str]:
    """The commit-intent log's replica count and its ``min.insync.replicas``, as the cluster describes it."""
    from confluent_kafka.admin import ConfigResource

    admin = admin_client(conf)
    meta = admin.list_topics(topic, timeout=30).topics[topic]
    replicas = min(len(p.replicas) for p in meta.partitions.values())
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(30)
    return replicas, configs["min.insync.replicas"].value


def kill_broker(
    cluster: ApacheKafka,
    index: int,
    watched: Watched,
    driver: Driver,
    rng: random.Random,
    out: TextIO,
) -> BrokerKill:
    """SIGKILL node ``index``, wait for the election, restart it, wait for full replication and a batch."""
    node = index + 1
    before = watched.leaders()
    kill = BrokerKill(node=node, led=[label for label, leader in before.items() if leader == node])
    batches = driver.batches()
    killed = time.monotonic()
    cluster.kill(index)

    def elected() -> bool:
        now = _metadata(watched.leaders, None)
        if now is None or any(leader in (node, -1) for leader in now.values()):
            return False
        kill.moved = {k: f"{before[k]}->{now[k]}" for k in now if now[k] != before[k]}
        return True

    wait_until(elected, 90, f"new leaders for what node {node} led", detail=lambda: repr(watched.leaders()))
    kill.election_s = time.monotonic() - killed
    time.sleep(rng.uniform(1.0, 3.0))  # down a little longer than the election: the chaos schedule
    kill.down_s = time.monotonic() - killed
    kill.batches_down = driver.batches() - batches
    restarted = time.monotonic()
    cluster.restart(index, wait=True)
    wait_until(
        lambda: _metadata(watched.under_replicated, ["?"]) == [],
        180,
        f"every partition fully replicated after node {node} restarted",
        detail=lambda: repr(_metadata(watched.under_replicated, "metadata unavailable")),
    )
    kill.resync_s = time.monotonic() - restarted
    after = max(batches, driver.batches())  # a batch completed after the restart, not one in flight
    kill.rode_out = driver.next_batch(after, 240)
    kill.stall_s = time.monotonic() - killed if kill.rode_out else 0.0
    print(f"  broker kill: {kill.render()}", file=out, flush=True)
    return kill


def schedule(rng: random.Random, driver_kills: int, broker_kills: int) -> list[str]:
    """The faults in a random order ("driver", "broker"), starting with a broker kill."""
    rest = ["driver"] * driver_kills + ["broker"] * max(0, broker_kills - 1)
    rng.shuffle(rest)
    return (["broker"] if broker_kills else []) + rest


def run_chaos(
    work: Path,
    seed: int,
    driver_kills: int = 3,
    broker_kills: int = 3,
    minutes: float = 0.0,
    rate: int = 300,
    out: TextIO | None = None,
) -> ChaosReport:
    """Run the chaos schedule; returns the figures (duplicates, lost, the driver's exits: the verdict)."""
    out = out or sys.stdout  # looked up now: pytest swaps sys.stdout while it captures
    rng = random.Random(seed)
    report = ChaosReport(seed=seed)
    print(f"chaos: seed {seed}, work dir {work}", file=out, flush=True)
    began = time.monotonic()
    cluster = ApacheKafka(brokers=BROKERS, data_dir=work / "kafka", config=CLUSTER_CONFIG)
    driver: Driver | None = None
    feeder: Feeder | None = None
    try:
        cluster.start()
        print(
            f"chaos: Apache Kafka {cluster.version}, {BROKERS} nodes at {cluster.bootstrap_servers}, pids "
            f"{cluster.pids}, ready in {cluster.started_in_s:.1f} s",
            file=out,
            flush=True,
        )
        conf = {"bootstrap.servers": cluster.bootstrap_servers}
        kafka = Kafka(conf)
        tag = uuid.uuid4().hex[:6]
        src, dst = f"chaos-in-{tag}", f"chaos-out-{tag}"
        kafka.create_topics([src, dst], PARTITIONS, {"min.insync.replicas": "2"}, replication=REPLICATION)
        group, checkpoint = f"chaos-{tag}", work / "checkpoint"
        pipeline = work / "pipeline.toml"
        pipeline.write_text(
            PIPELINE.format(
                checkpoint=checkpoint,
                bootstrap=cluster.bootstrap_servers,
                src=src,
                dst=dst,
                group=group,
                prefix=tag,
            )
        )
        watched = Watched(conf, src, dst, tag, group)
        feeder = Feeder(conf, src, rate)
        feeder.start()
        driver = Driver(work, pipeline, work / "batches.jsonl")
        driver.start()
        report.recovery_s.append(driver.wait_recovered(240))
        replicas, min_isr = describe_intent_log(conf, intent_topic(tag))
        report.intent_log = f"{intent_topic(tag)}: {replicas} replicas, min.insync.replicas {min_isr}"
        print(f"  first batch after {report.recovery_s[0]:.1f} s; {report.intent_log}", file=out, flush=True)
        faults = schedule(rng, driver_kills, broker_kills)
        end = time.monotonic() + minutes * 60
        step = 0
        while step < len(faults) or time.monotonic() < end:
            fault = faults[step] if step < len(faults) else rng.choice(["driver", "broker"])
            step += 1
            time.sleep(rng.uniform(0.5, 4.0))  # a random moment in the driver's life (chaos schedule)
            if fault == "broker":
                kill = kill_broker(cluster, len(report.broker_kills) % BROKERS, watched, driver, rng, out)
                report.broker_kills.append(kill)
                if not kill.rode_out:
                    report.driver_exits.append(driver.exit_reason())
                    print(f"  driver exited: {report.driver_exits[-1]}", file=out, flush=True)
            else:
                driver.kill()
                report.driver_kills += 1
            check_group_behind_checkpoint(kafka, group, src, checkpoint)
            report.offset_checks += 1
            if driver.running.alive():
                continue
            driver.start()
            report.driver_restarts += 1
            report.recovery_s.append(driver.wait_recovered(240))
            print(
                f"  step {step}: driver restarted, first batch after {report.recovery_s[-1]:.1f} s, "
                f"{feeder.sent:,} records fed so far",
                file=out,
                flush=True,
            )
            if feeder.error is not None:
                raise RuntimeError(f"feeder failed: {feeder.error}")
        feeder.halt.set()
        feeder.join(180)
        if feeder.error is not None:
            raise RuntimeError(f"feeder failed: {feeder.error}")
        # Drain: stop the last run as Ctrl-C does, then read everything fed (availableNow).
        driver.interrupt(timeout_s=180)
        driver.start("--available-now")
        code = driver.running.wait(timeout_s=600)
        if code != 0:
            raise RuntimeError(f"the draining run failed ({code}): {driver.running.tail(30)}")
        report.task_failures = len(list(work.glob("task-fault-*.marker")))
        check_group_behind_checkpoint(kafka, group, src, checkpoint)
        report.offset_checks += 1
        report.group_commits = group_commits(driver.log_json)
        report.task_errors = task_errors(work)
        fed = Counter(r.value for r in kafka.committed(src))
        got = Counter(r.value for r in kafka.committed(dst))
        plain = Counter(kafka.read_committed(dst))
        report.records_in = sum(fed.values())
        report.records_out = sum(got.values())
        report.read_committed_out = sum(plain.values())
        report.views_agree = plain == got
        report.duplicates = sum(max(0, got[k] - fed[k]) for k in got)
        report.lost = sum(max(0, fed[k] - got[k]) for k in fed)
        wrong = [_text(k) for k in fed if got[k] != fed[k]] + [_text(k) for k in got if k not in fed]
        report.examples = wrong[:5]
        if report.records_in != feeder.sent:
            raise AssertionError(f"{feeder.sent} records fed, {report.records_in} in {src}")
        committed = kafka.group_offsets(group, src, PARTITIONS)
        if sum(committed.values()) != report.records_in:
            raise AssertionError(f"group offsets {committed} do not cover the {report.records_in} records")
    finally:
        if driver is not None:
            driver.kill()
        if feeder is not None:
            feeder.halt.set()
            feeder.join(60)  # while the brokers still run, so its producer flushes and goes
        close_all()  # this process's cached clients go before the brokers do: none is left to log it
        cluster.stop()
    print(report.render(), file=out, flush=True)
    print(f"chaos: {time.monotonic() - began:.0f} s in all", file=out, flush=True)
    return report


def _text(value: bytes | None) -> str:
    return value.decode() if value is not None else "None"


def group_commits(log_json: Path) -> tuple[int, int] | None:
    """(succeeded, failed) group offset commits over every run, from the ``--log-json`` lines.

    Each run counts from 0 (its source metrics): a total that drops starts the next run.
    """
    runs: list[tuple[int, int]] = []
    for line in log_json.read_text().splitlines():
        data = json.loads(line)
        ok, failed = data.get("commits_succeeded_total"), data.get("commits_failed_total")
        if ok is None or failed is None:
            continue
        if not runs or ok < runs[-1][0] or failed < runs[-1][1]:
            runs.append((0, 0))
        runs[-1] = (int(ok), int(failed))
    return (sum(r[0] for r in runs), sum(r[1] for r in runs)) if runs else None


_TASK_FAILED = "ERROR org.apache.spark.executor.Executor: Exception in task"
_PYTHON_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.*)")


def task_errors(work: Path) -> Counter[str]:
    """Failed task attempts in the drivers' logs, by the Python error that ended them (Kafka's code too)."""
    errors: Counter[str] = Counter()
    for log in sorted(work.glob("driver-*.log")):
        lines = log.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines):
            if _TASK_FAILED not in line:
                continue
            for later in lines[i + 2 : i + 100]:  # past Spark's PythonException line, to the Python error
                found = _PYTHON_ERROR.match(later)
                if found:
                    code = re.search(r"code=(\w+)", found.group(2))
                    name = found.group(1).rsplit(".", 1)[-1]
                    errors[f"{name} {code.group(1)}" if code else name] += 1
                    break
    return errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=0.0, help="keep injecting faults for this long")
    parser.add_argument("--seed", type=int, default=None, help="replay a schedule (printed by every run)")
    parser.add_argument("--kills", type=int, default=3, help="at least this many driver SIGKILLs")
    parser.add_argument("--broker-kills", type=int, default=3, help="at least this many broker SIGKILLs")
    parser.add_argument("--rate", type=int, default=300, help="records per second fed")
    parser.add_argument("--work-dir", default=None)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    work = Path(args.work_dir or f"/tmp/sparkafka-chaos-{seed}")
    work.mkdir(parents=True, exist_ok=True)
    report = run_chaos(work, seed, args.kills, args.broker_kills, args.minutes, args.rate)
    ok = report.duplicates == 0 and report.lost == 0 and report.views_agree and not report.driver_exits
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
