"""``sparkafka demo``: the revenue pipeline on a local Apache Kafka, a driver crash midway, a check.

1. Start Apache Kafka (``kafka_broker.ApacheKafka``; tansu with ``--tansu``); produce shop orders (JSON
   keyed by customer, on the partition Java's murmur2 partitioner picks; a few malformed) into ``orders``.
2. Run the bundled pipeline (``revenue.toml``) with ``sparkafka run``, showing its progress.
3. Midway, SIGKILL the pipeline's driver, produce the rest of the orders, and start it again on the same
   checkpoint: it resumes.
4. Verify with the committed-view oracle that every valid order is counted exactly once in the per-minute
   revenue windows written to ``revenue`` (nothing lost, nothing twice), check that a plain
   ``read_committed`` consumer sees exactly the committed view, and print the consumer lag.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TextIO

from sparkafka.kafka import partition_for_key
from sparkafka.local.procs import GroupProcess
from sparkafka.local.tansu_workarounds import exact_latest_producer_conf

__all__ = ["Order", "expected_windows", "make_orders", "run_demo", "verify_windows"]

RATES = {"EUR": 1.0, "USD": 0.92, "GBP": 1.17}
START_MS = 1_767_225_600_000  # 2026-01-01 00:00 UTC: fixed event times give the same windows every run
FLUSH_CUSTOMER = "zz-watermark"
"""One order far ahead in event time: moves the watermark past every real window so they are written."""


@dataclass(frozen=True)
class Order:
    order_id: int
    customer: str
    amount: float
    currency: str
    event_time_ms: int
    malformed: bool = False

    def key(self) -> bytes:
        return self.customer.encode()

    def value(self) -> bytes:
        if self.malformed:
            return b'{"order_id": ' + str(self.order_id).encode() + b', "customer": '  # cut short
        event_time = datetime.fromtimestamp(self.event_time_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        data = {
            "order_id": self.order_id,
            "customer": self.customer,
            "amount": self.amount,
            "currency": self.currency,
            "event_time": event_time,
        }
        return json.dumps(data).encode()

    def minute(self) -> str:
        return datetime.fromtimestamp(self.event_time_ms // 60_000 * 60, UTC).strftime("%Y-%m-%d %H:%M")


def make_orders(count: int, minutes: int, seed: int = 7, customers: int = 12) -> list[Order]:
    """``count`` orders spread over ``minutes`` of event time, about 3% malformed."""
    rng = random.Random(seed)
    step = minutes * 60_000 / max(count, 1)
    return [
        Order(
            order_id=i,
            customer=f"customer-{rng.randrange(customers):02d}",
            amount=round(rng.uniform(1, 300), 2),
            currency=rng.choice(tuple(RATES)),
            event_time_ms=START_MS + int(i * step),
            malformed=rng.random() < 0.03,
        )
        for i in range(count)
    ]


def expected_windows(orders: Iterable[Order]) -> dict[tuple[str, str], tuple[int, float]]:
    """(customer, minute) -> (orders, revenue in EUR) for the valid orders."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    revenue: dict[tuple[str, str], float] = defaultdict(float)
    for o in orders:
        if o.malformed or o.customer == FLUSH_CUSTOMER:
            continue
        counts[(o.customer, o.minute())] += 1
        revenue[(o.customer, o.minute())] += o.amount * RATES[o.currency]
    return {k: (counts[k], revenue[k]) for k in counts}


def verify_windows(
    expected: dict[tuple[str, str], tuple[int, float]], output: Sequence[bytes | None]
) -> list[str]:
    """Problems with the output (empty when every valid order is counted exactly once)."""
    problems: list[str] = []
    seen: dict[tuple[str, str], tuple[int, float]] = {}
    for raw in output:
        try:
            row = json.loads(raw or b"")
            window = (str(row["customer"]), str(row["minute"]))
            value = (int(row["orders"]), float(row["revenue_eur"]))
        except (ValueError, KeyError, TypeError) as e:
            problems.append(f"unreadable output record {raw!r}: {e}")
            continue
        if window[0] == FLUSH_CUSTOMER:
            continue
        if window in seen:
            problems.append(f"window {window} written twice")
        seen[window] = value
    for window, (count, revenue) in sorted(expected.items()):
        if window not in seen:
            problems.append(f"window {window} missing ({count} orders lost)")
            continue
        got_count, got_revenue = seen[window]
        if got_count != count:
            problems.append(f"window {window} counts {got_count} orders, expected {count}")
        if abs(got_revenue - revenue) > 0.011:
            problems.append(f"window {window} has revenue {got_revenue:.2f}, expected {revenue:.2f}")
    problems += [f"unexpected window {w}" for w in sorted(set(seen) - set(expected))]
    return problems


def _orders_counted(output: Sequence[bytes | None]) -> int:
    """Orders the pipeline counted in its (non-flush) windows, as read from its output."""
    total = 0
    for raw in output:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            row = json.loads(raw or b"")
            if row["customer"] != FLUSH_CUSTOMER:
                total += int(row["orders"])
    return total


def _produce(conf: dict[str, str], orders: Sequence[Order], partitions: int) -> None:
    from confluent_kafka import Producer

    # tansu's ListOffsets(latest) is exact only with one record per batch (see tansu_workarounds).
    producer = Producer(exact_latest_producer_conf(conf))
    for o in orders:
        # Java-compatible placement: librdkafka's own default would hash keys with CRC32.
        producer.produce("orders", o.value(), key=o.key(), partition=partition_for_key(o.key(), partitions))
    producer.flush(60)


class _Pipeline:
    """``sparkafka run revenue.toml``, each run a child process group (signalled whole, never by name)."""

    def __init__(self, toml: Path, bootstrap: str, state: Path) -> None:
        self.toml, self.state = toml, state
        self.log = state / "batches.jsonl"
        self.env = {**os.environ, "BOOTSTRAP": bootstrap, "SPARKAFKA_STATE": str(state)}

    @property
    def crash_marker(self) -> Path:
        """Written by the driver when it reaches the crash point (``sink.faults``), holding its pid."""
        return self.state / "crash.marker"

    def start(self, crash: bool = False) -> GroupProcess:
        """Start a run; with ``crash`` its driver stops dead right after the first commit intent of a batch
        that wrote records, before that batch's transactions are committed, for the demo to SIGKILL."""
        env = dict(self.env)
        if crash:
            env["SPARKAFKA_TEST_FAULT"] = "after_intent_with_records:pause"
            env["SPARKAFKA_TEST_FAULT_MARKER"] = str(self.crash_marker)
        return GroupProcess(
            [sys.executable, "-m", "sparkafka.cli", "run", str(self.toml), "--log-json", str(self.log)],
            env=env,
            stderr=subprocess.DEVNULL,
        )

    def batches(self) -> int:
        try:
            return len(self.log.read_text().splitlines())
        except FileNotFoundError:
            return 0


PREFIX = "demo-revenue"
"""The demo pipeline's transactionalIdPrefix and consumer group (revenue.toml)."""


def _batch_ids(directory: Path) -> list[int]:
    """Batch ids Spark wrote to a checkpoint's ``offsets`` or ``commits`` directory."""
    try:
        return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())
    except FileNotFoundError:
        return []


def in_flight(checkpoint: Path, conf: dict[str, str]) -> str:
    """What a crash left: Spark's planned and committed batches, and the sink's newest commit intent."""
    from sparkafka.sink.intents import IntentLog
    from sparkafka.sink.txn_tool import STATE_NAMES

    planned, committed = _batch_ids(checkpoint / "offsets"), _batch_ids(checkpoint / "commits")
    last_planned = planned[-1] if planned else None
    last_committed = committed[-1] if committed else None
    spark_side = f"Spark had planned batches up to {last_planned} and committed up to {last_committed}"
    if last_planned is not None and last_planned != last_committed:
        spark_side += f", so batch {last_planned} was in flight and will be replayed"
    intents = IntentLog(conf, PREFIX, create=False)
    newest = (
        max(intents.read().latest.values(), key=lambda r: r.at_ms, default=None) if intents.exists() else None
    )
    if newest is None:
        return spark_side + "; the sink had recorded no commit intent yet"
    state = STATE_NAMES.get(newest.state, newest.state)
    return f"{spark_side}; the sink's newest commit intent is batch {newest.batch_id}, {state}"


def plain_read_committed(conf: dict[str, str], topic: str) -> list[bytes | None]:
    """Every value a plain confluent-kafka consumer with ``isolation.level=read_committed`` reads from
    ``topic``, from the beginning to the end (the log end offsets, read first), partition by partition."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTopicPartition

    consumer = Consumer(
        {
            **conf,
            "group.id": "sparkafka-demo-check",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(CTopicPartition(topic, p), timeout=30)[1] for p in partitions
        }
        values: dict[int, list[bytes | None]] = {p: [] for p in partitions}
        todo = {p for p, end in ends.items() if end > 0}
        consumer.assign([CTopicPartition(topic, p, 0) for p in todo])
        while todo:
            for msg in consumer.consume(1000, timeout=5.0):
                if msg.error() is None:
                    values[msg.partition()].append(msg.value())
                # read_committed reads up to the last stable offset: the end once every transaction ended
                position = consumer.position([CTopicPartition(topic, msg.partition())])[0].offset
                if position >= ends[msg.partition()]:
                    todo.discard(msg.partition())
        return [v for p in sorted(values) for v in values[p]]
    finally:
        consumer.close()


def run_demo(  # noqa: PLR0915 - one narrated scenario, step by step
    out: TextIO,
    orders: int = 3000,
    minutes: int = 4,
    partitions: int = 4,
    seed: int = 7,
    *,
    tansu: bool = False,
) -> int:
    """The whole demo; returns 0 only if the verification holds."""
    from confluent_kafka.admin import NewTopic

    import sparkafka
    from sparkafka.client.core import admin_client, close_all
    from sparkafka.local.broker import EmbeddedBroker
    from sparkafka.local.kafka_broker import ApacheKafka
    from sparkafka.ops.committed_view import committed_view
    from sparkafka.ops.lag import fetch_group_lag

    def say(text: str) -> None:
        print(f"\n== {text}", file=out, flush=True)

    state = Path(tempfile.mkdtemp(prefix="sparkafka-demo-"))
    bundled = resources.files("sparkafka.local.demo")
    for name in ("revenue.toml", "rates.csv"):
        (state / name).write_bytes(bundled.joinpath(name).read_bytes())
    all_orders = make_orders(orders, minutes, seed)
    last = all_orders[-1]
    flush = Order(orders, FLUSH_CUSTOMER, 1.0, "EUR", last.event_time_ms + 5 * 60_000)
    first, rest = all_orders[: orders * 6 // 10], [*all_orders[orders * 6 // 10 :], flush]
    driver: GroupProcess | None = None
    try:
        with EmbeddedBroker() if tansu else ApacheKafka() as broker:
            conf = {"bootstrap.servers": broker.bootstrap_servers}
            if isinstance(broker, ApacheKafka):
                say(
                    f"Apache Kafka {broker.version} (KRaft, one broker, pid {broker.pid}) at "
                    f"{broker.bootstrap_servers}, ready in {broker.started_in_s:.1f} s"
                )
            else:
                say(
                    f"tansu, the pip-only broker (pid {broker.pid}) at {broker.bootstrap_servers}: "
                    "not Apache Kafka"
                )
            for future in (
                admin_client(conf)
                .create_topics([NewTopic("orders", partitions, 1), NewTopic("revenue", 2, 1)])
                .values()
            ):
                future.result(30)
            malformed = sum(o.malformed for o in all_orders)
            _produce(conf, first, partitions)
            say(
                f"produced {len(first)} of {orders} orders ({minutes} minutes of event time, {malformed} "
                f"malformed in all) to 'orders', {partitions} partitions, keyed by customer with Java's "
                "murmur2 placement"
            )
            pipeline = _Pipeline(state / "revenue.toml", broker.bootstrap_servers, state)
            say(f"sparkafka run {state / 'revenue.toml'}  (the bundled pipeline; state in {state})")
            driver = pipeline.start(crash=True)
            if not driver.wait_for(pipeline.crash_marker.exists, 240, interval_s=0.2):
                say("the pipeline did not reach its first commit with records: FAILED")
                return 1
            say(
                "killing the Spark driver with SIGKILL at the worst moment: a batch's commit intent is "
                "written, its transactions are not yet committed (a test hook held the driver there)"
            )
            driver.kill()
            print(f"  at the kill: {in_flight(state / 'checkpoint', conf)}", file=out, flush=True)
            _produce(conf, rest, partitions)
            say(
                f"produced the remaining {len(rest) - 1} orders, and one order minutes later that closes "
                "the last windows"
            )
            say("starting the pipeline again on the same checkpoint: it resumes")
            driver = pipeline.start()
            expected = expected_windows(all_orders)

            def output() -> list[bytes | None]:
                return [r.value for rs in committed_view(conf, "revenue").values() for r in rs]

            driver.wait_for(lambda: not verify_windows(expected, output()), 240, interval_s=0.5)
            code = driver.stop(signal.SIGINT, timeout_s=120)
            say(f"stopped the pipeline with Ctrl-C (exit status {code})")
            written = output()
            problems = verify_windows(expected, written)
            valid = sum(n for n, _ in expected.values())
            counted = _orders_counted(written)
            lag = fetch_group_lag(conf, PREFIX, "orders")
            say("what recovery did, from the sink's counters for this query")
            query_id = json.loads((state / "checkpoint" / "metadata").read_text())["id"]
            sink = sparkafka.sink_metrics(PREFIX, query_id)
            print(
                f"  {sink['recovered']} batch(es) rolled forward: the restarted driver found the crashed "
                "batch's commit intent and committed its transactions; "
                f"{sink['replays']} replayed batch(es) skipped: Spark ran the crashed batch again and the "
                "sink, seeing it committed, aborted the replay's transactions instead of writing it twice; "
                f"{sink['abandoned']} abandoned and {sink['partial']} partial (written again by the replay)",
                file=out,
            )
            if sink["recovered"] < 1 or sink["replays"] < 1:
                problems.append("the crash left no batch to roll forward and no replay to skip")
            say("verification with the committed-view oracle (what a read_committed reader sees)")
            print(
                f"  {len(expected)} customer-minute windows expected, covering {valid} valid orders; the "
                f"pipeline counted {counted} of the {orders} produced, so it dropped {orders - counted} as "
                f"malformed ({malformed} were generated malformed)",
                file=out,
            )
            print(
                f"  the sink committed {sink['records']} records in {sink['transactions']} transactions over "
                f"both runs; 'revenue' holds {len(written)} records: "
                + ("they match" if sink["records"] == len(written) else "MISMATCH"),
                file=out,
            )
            if sink["records"] != len(written):
                problems.append(f"sink counted {sink['records']} records, the topic has {len(written)}")
            for problem in problems[:20]:
                print(f"  PROBLEM: {problem}", file=out)
            plain = plain_read_committed(conf, "revenue")
            same = sorted(plain, key=lambda v: v or b"") == sorted(written, key=lambda v: v or b"")
            print(
                f"  a plain read_committed consumer (confluent-kafka, isolation.level=read_committed) reads "
                f"{len(plain)} records from 'revenue': "
                + ("exactly what the committed view shows" if same else "NOT what the committed view shows"),
                file=out,
            )
            if not same and not tansu:
                problems.append("a plain read_committed consumer disagrees with the committed view")
            elif not same:
                print("  (tansu returns aborted records to read_committed readers: a known gap)", file=out)
            print(f"  consumer group demo-revenue: lag {lag.total_lag} on 'orders'", file=out)
            ok = not problems and code == 0
            # Every client goes before the broker does, so none is left to log its lost connection.
            close_all()
            gc.collect()
        print(
            "  every valid order is counted exactly once: "
            + ("OK" if ok else f"FAILED ({len(problems)} problems)"),
            file=out,
            flush=True,
        )
        return 0 if ok else 1
    finally:
        if driver is not None:
            driver.kill()
        shutil.rmtree(state, ignore_errors=True)
