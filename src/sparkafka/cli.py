"""The ``sparkafka`` command line."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import signal
import sys
import threading
from collections.abc import Sequence

__all__ = ["main"]


def _cmd_broker(args: argparse.Namespace) -> int:
    from sparkafka.local.broker import EmbeddedBroker

    stop = threading.Event()
    # Both set explicitly: a process started in the background by a non-interactive shell inherits SIGINT
    # ignored, and Python then installs no KeyboardInterrupt handler (measured: Ctrl-C did nothing).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with EmbeddedBroker(port=args.port, storage=args.storage) as broker:
        print(f"bootstrap servers: {broker.bootstrap_servers}  (pid {broker.pid}, log {broker.log_path})")
        print("Ctrl-C to stop", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    print("broker stopped")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from sparkafka.local.demo import run_demo

    return run_demo(sys.stdout, orders=args.orders, minutes=args.minutes, partitions=args.partitions)


def _cmd_lag(args: argparse.Namespace) -> int:
    from sparkafka.errors import SparkafkaError
    from sparkafka.lag import fetch_group_lag, plot_lag, watch_lag

    conf = {"bootstrap.servers": args.bootstrap_servers}
    try:
        first = fetch_group_lag(conf, args.group, args.topic)
        if not first.has_commits:
            where = f" on topic {args.topic}" if args.topic else ""
            print(
                f"group {args.group!r} has no committed offsets{where} "
                "(nothing committed yet, or a different group id)",
                file=sys.stderr,
            )
            return 1
        history = watch_lag(
            first,
            lambda: fetch_group_lag(conf, args.group, args.topic),
            sys.stdout,
            interval_s=args.watch,
            count=args.count,
        )
        if args.plot:
            plot_lag(history, args.group, args.plot)
            print(f"wrote {args.plot} ({len(history)} readings)")
    except SparkafkaError as e:
        print(f"sparkafka lag: {e}", file=sys.stderr)
        return 1
    return 0


def _cmd_doctor(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from sparkafka.local.capabilities import IMPACT, PROBES, probe_broker

    conf = {"bootstrap.servers": args.bootstrap_servers}
    console = Console()
    table = Table(title=f"sparkafka doctor: {args.bootstrap_servers}")
    for name in ("check", "result", "observed", "what fails without it"):
        table.add_column(name, overflow="fold")
    passed = failed = 0
    with console.status("probing...") as status:
        for name in PROBES:
            status.update(f"probing {name}...")
            result = probe_broker(conf, name)
            passed += result.ok
            failed += not result.ok
            verdict = "[green]PASS[/green]" if result.ok else "[red]FAIL[/red]"
            table.add_row(name, verdict, escape(result.detail), "" if result.ok else IMPACT[name])
            if name == "api_versions" and not result.ok:
                break  # nothing else can work
    console.print(table)
    console.print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def _cmd_run(args: argparse.Namespace) -> int:
    from sparkafka.errors import ConfigError
    from sparkafka.pipeline.config import load_pipeline

    try:
        cfg = load_pipeline(args.pipeline)
    except ConfigError as e:
        print(f"sparkafka run: {e}", file=sys.stderr)
        return 2
    if args.available_now:
        cfg = dataclasses.replace(cfg, trigger=None)
    if args.dry_run:
        from sparkafka.local.spark import stop_spark
        from sparkafka.pipeline.runner import describe_plan
        from sparkafka.pipeline.session import pipeline_spark

        spark = pipeline_spark(cfg)
        try:
            print(describe_plan(spark, cfg))
        except Exception as e:  # the SQL or the decoding is wrong: say so without a JVM stack trace
            print(f"sparkafka run: {args.pipeline}: {str(e).splitlines()[0]}", file=sys.stderr)
            return 2
        finally:
            stop_spark(spark)
        return 0
    from sparkafka.pipeline.runner import run_pipeline

    return run_pipeline(cfg, sys.stdout, args.log_json)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sparkafka", description="Kafka for Spark, with Flink's semantics")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    sub = parser.add_subparsers(dest="command", required=True)

    broker = sub.add_parser("broker", help="run an embedded Kafka-compatible broker until Ctrl-C")
    broker.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    broker.add_argument("--storage", default="memory://tansu/", help="tansu storage engine URL")
    broker.set_defaults(func=_cmd_broker)

    demo = sub.add_parser("demo", help="run the demo on an embedded broker")
    demo.add_argument("--orders", type=int, default=3000, help="orders to generate (default 3000)")
    demo.add_argument("--minutes", type=int, default=4, help="minutes of event time they span (default 4)")
    demo.add_argument("--partitions", type=int, default=4, help="partitions of the input topic")
    demo.set_defaults(func=_cmd_demo)

    lag = sub.add_parser("lag", help="committed offset, log end and lag of a consumer group, per partition")
    lag.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT")
    lag.add_argument("--group", required=True, help="consumer group id")
    lag.add_argument("--topic", help="only this topic (default: every topic the group committed)")
    lag.add_argument(
        "--watch", type=float, metavar="SECONDS", help="refresh in place every SECONDS until Ctrl-C"
    )
    lag.add_argument("--count", type=int, help="with --watch: stop after this many readings")
    lag.add_argument("--plot", metavar="PNG", help="write a PNG of total lag over the watched period")
    lag.set_defaults(func=_cmd_lag)

    run = sub.add_parser("run", help="run a Kafka-to-Kafka pipeline declared in a TOML file")
    run.add_argument("pipeline", help="the pipeline file (see sparkafka.pipeline.config)")
    run.add_argument("--dry-run", action="store_true", help="print the resolved plan and schema, run nothing")
    run.add_argument("--log-json", metavar="FILE", help="append one JSON line per micro-batch to FILE")
    run.add_argument(
        "--available-now",
        action="store_true",
        help="process what the source has now, then stop (Trigger.AvailableNow), whatever the file's trigger",
    )
    run.set_defaults(func=_cmd_run)

    doctor = sub.add_parser("doctor", help="probe a broker for what sparkafka relies on")
    doctor.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT")
    doctor.set_defaults(func=_cmd_doctor)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
