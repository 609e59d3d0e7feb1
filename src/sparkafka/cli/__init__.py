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
from typing import Any

__all__ = ["main"]


def _cmd_broker(args: argparse.Namespace) -> int:
    from sparkafka.errors import BrokerError

    stop = threading.Event()
    # Both set explicitly: a process started in the background by a non-interactive shell inherits SIGINT
    # ignored, and Python then installs no KeyboardInterrupt handler (measured: Ctrl-C did nothing).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        broker = _start_broker(args)
    except BrokerError as e:
        print(f"sparkafka broker: {e}", file=sys.stderr)
        return 1
    try:
        print(f"bootstrap servers: {broker.bootstrap_servers}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    finally:
        broker.stop()
    print("broker stopped")
    return 0


def _start_broker(args: argparse.Namespace) -> Any:
    """The broker ``sparkafka broker`` asked for, started, its description printed."""
    from sparkafka.errors import BrokerError

    if args.tansu and args.secure:
        raise BrokerError("option --secure is for Apache Kafka, not --tansu")
    if args.client_config and not args.secure:
        raise BrokerError(
            "option --client-config needs --secure (a plaintext broker has no settings to write)"
        )
    if args.tansu:
        from sparkafka.local.broker import KNOWN_GAPS, EmbeddedBroker

        tansu = EmbeddedBroker(port=args.port, storage=args.storage).start()
        print(
            f"tansu, the pip-only Kafka-compatible broker (pid {tansu.pid}, log {tansu.log_path}): not "
            "Apache Kafka. Known gaps:"
        )
        for gap in KNOWN_GAPS:
            print(f"  - {gap}")
        print(f"`sparkafka doctor --bootstrap-servers {tansu.bootstrap_servers}` checks each. Ctrl-C to stop")
        return tansu
    from sparkafka.local.kafka_broker import ApacheKafka
    from sparkafka.local.secure_kafka import SecureKafka

    kind = SecureKafka if args.secure else ApacheKafka
    kafka = kind(brokers=args.brokers, port=args.port, data_dir=args.data_dir, heap=args.heap).start()
    nodes = (
        "1 broker, also the controller" if args.brokers == 1 else f"{args.brokers} brokers, each a controller"
    )
    print(
        f"Apache Kafka {kafka.version} (KRaft, {nodes}; heap {args.heap} each) "
        f"ready in {kafka.started_in_s:.1f} s; pids {', '.join(str(p) for p in kafka.pids)}; data and logs "
        f"in {kafka.data_dir}" + ("" if args.data_dir else " (removed at exit)") + ". Ctrl-C to stop"
    )
    if isinstance(kafka, SecureKafka):
        from sparkafka.local.secure_kafka import describe_settings

        written = kafka.write_client_config(args.client_config or kafka.data_dir / "client.json")
        print(describe_settings(kafka, written))
    return kafka


def _cmd_demo(args: argparse.Namespace) -> int:
    from sparkafka.local.demo import run_demo

    return run_demo(
        sys.stdout, orders=args.orders, minutes=args.minutes, partitions=args.partitions, tansu=args.tansu
    )


def _cmd_lag(args: argparse.Namespace) -> int:
    from sparkafka.cli.lag_view import plot_lag, watch_lag
    from sparkafka.errors import ConfigError, SparkafkaError
    from sparkafka.ops.lag import fetch_group_lag

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt  # SIGTERM ends a watch like Ctrl-C: the readings so far are kept and plotted

    signal.signal(signal.SIGTERM, interrupt)
    try:
        conf = _settings(args)
        first = fetch_group_lag(conf, args.group, args.topic, metrics_file=args.metrics_file)
        if not first.has_commits:
            where = f" on topic {args.topic}" if args.topic else ""
            raise ConfigError(
                f"group {args.group!r} has no committed offsets{where} "
                "(nothing committed yet, or a different group id)"
            )
        history = watch_lag(
            first,
            lambda: fetch_group_lag(conf, args.group, args.topic, metrics_file=args.metrics_file),
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

    from sparkafka.errors import SparkafkaError
    from sparkafka.ops.probes import IMPACT, PROBES, probe_broker

    try:
        conf = _settings(args)
    except SparkafkaError as e:
        print(f"sparkafka doctor: {e}", file=sys.stderr)
        return 1
    console = Console()
    table = Table(title=f"sparkafka doctor: {conf['bootstrap.servers']}")
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
    console.print(escape(version_text().rstrip()))
    return 1 if failed else 0


def _cmd_txn(args: argparse.Namespace) -> int:
    from sparkafka.errors import ConfigError, SparkafkaError
    from sparkafka.sink.txn_tool import STATE_NAMES, prefix_status, resolve, resolve_plan

    try:
        conf = _settings(args)
        if args.txn_command == "retire":
            return _retire_prefix(args, conf)
        if args.txn_command == "list":
            status = prefix_status(conf, args.prefix)
            print(
                f"prefix {status.prefix}: intent log {status.topic}; transactional ids in use: "
                f"{status.tids_in_use} ({args.prefix}-0 .. {args.prefix}-{max(status.tids_in_use - 1, 0)})"
            )
            header = f"{'query':<40} {'batch':>6}  {'state':<9} {'txns':>4} {'records':>8}"
            print(f"{header}  visible tasks  written at")
            for r in status.records:
                txns = r.handles if r.state == "intent" else r.committed
                when = _utc(r.at_ms)
                visible = ",".join(str(h.task) for h in r.committed) or "-"
                print(
                    f"{r.query_id:<40} {r.batch_id:>6}  {STATE_NAMES[r.state]:<9} {len(txns):>4} "
                    f"{sum(h.records for h in txns):>8}  {visible:<13}  {when}"
                )
            if status.transactions is None:
                print(f"broker-side transactions: not available: {status.transactions_note}")
            else:
                print("broker-side transactions (DescribeTransactions):")
                for t in status.transactions:
                    print(
                        f"  {t.transactional_id}  {t.state}  producer id {t.producer_id} epoch {t.epoch}"
                        f"  started {_utc(t.start_ms) if t.start_ms > 0 else '-'}  timeout {t.timeout_ms} ms"
                    )
            return 0
        if not args.yes:  # the dry run: the decision the real run makes, from the same read of the log
            plan = resolve_plan(conf, args.prefix, args.query, args.action)
            if plan.refusal is not None:
                raise ConfigError(plan.refusal)
            print(f"would {plan.effect}; add --yes to do it", file=sys.stderr)
            return 2
        record = resolve(conf, args.prefix, args.query, args.action)
        print(f"query {record.query_id} batch {record.batch_id}: {STATE_NAMES[record.state]}")
    except SparkafkaError as e:
        print(f"sparkafka txn: {e}", file=sys.stderr)
        return 1
    return 0


def _retire_prefix(args: argparse.Namespace, conf: dict[str, str]) -> int:
    from sparkafka.errors import ConfigError
    from sparkafka.ops.retire import plan_prefix, retire

    plan = plan_prefix(conf, args.prefix, force=args.force)
    if plan.refusal is not None:
        raise ConfigError(plan.refusal)
    if not args.yes:
        print(f"would {plan.effect}; add --yes to do it", file=sys.stderr)
        return 2
    retire(plan, conf)
    print(f"retired prefix {args.prefix}: deleted {plan.topic} and {len(plan.files)} metrics file(s)")
    return 0


def _cmd_metrics(args: argparse.Namespace) -> int:
    from sparkafka.errors import SparkafkaError
    from sparkafka.ops.retire import plan_metrics, retire

    try:
        plan = plan_metrics(args.older_than * 86400)
        if not args.yes:
            print(f"would {plan.effect}\nadd --yes to do it", file=sys.stderr)
            return 2
        retire(plan)
    except SparkafkaError as e:
        print(f"sparkafka metrics: {e}", file=sys.stderr)
        return 1
    print(f"removed {len(plan.files)} metrics file(s)")
    return 0


def _cmd_offsets(args: argparse.Namespace) -> int:
    from sparkafka.errors import SparkafkaError
    from sparkafka.ops.group_offsets import (
        parse_target,
        render_reset,
        render_show,
        reset_group,
        show_positions,
    )

    try:
        conf = _settings(args)
        if args.offsets_command == "show":
            position, rows = show_positions(conf, args.checkpoint, args.group)
            print(render_show(position, rows, args.group))
            return 0
        if args.offsets_command == "replan":
            return _replan(args, conf)
        plan = reset_group(
            conf,
            args.group,
            parse_target(args.to),
            topics=args.topic or (),
            execute=args.execute,
            force=args.force,
        )
        print(render_reset(plan))
    except SparkafkaError as e:
        print(f"sparkafka offsets: {e}", file=sys.stderr)
        return 1
    return 0


def _replan(args: argparse.Namespace, conf: dict[str, str]) -> int:
    from sparkafka.errors import ConfigError
    from sparkafka.ops.replan import replan
    from sparkafka.sink.txn_tool import read_prefix

    plan = replan(args.checkpoint, read_prefix(conf, args.prefix), args.prefix, execute=args.execute)
    if plan.refusal is not None:
        raise ConfigError(plan.refusal)
    if not args.execute:
        print(f"would {plan.effect}; add --execute to do it", file=sys.stderr)
        return 2
    print(f"{plan.effect[0].upper()}{plan.effect[1:]}: done; restart the query")
    return 0


def _cmd_topics(args: argparse.Namespace) -> int:
    from sparkafka.cli.topics import (
        create_topic,
        describe_topic,
        list_topics,
        parse_configs,
        render_created,
        render_describe,
        render_list,
    )
    from sparkafka.errors import SparkafkaError

    try:
        conf = _settings(args)
        if args.topics_command == "list":
            print(render_list(list_topics(conf, _operation_s(args)), show_internal=args.all))
        elif args.topics_command == "create":
            configs = parse_configs(args.config or ())
            created = create_topic(
                conf,
                args.name,
                partitions=args.partitions,
                replication=args.replication,
                configs=configs,
                timeout_s=_operation_s(args),
            )
            print(render_created(created, configs))
        else:
            print(render_describe(describe_topic(conf, args.name, _operation_s(args))))
    except SparkafkaError as e:
        print(f"sparkafka topics: {e}", file=sys.stderr)
        return 1
    return 0


def _cmd_acls(args: argparse.Namespace) -> int:
    from sparkafka.cli.acls import (
        Selectors,
        delete_acls,
        describe_acls,
        list_filters,
        render_list,
        wanted,
        write_acls,
    )
    from sparkafka.errors import SparkafkaError

    try:
        selectors = Selectors.from_args(args)
        if args.acls_command == "list":
            filters = list_filters(selectors)
            print(render_list(describe_acls(_settings(args), filters, _operation_s(args))))
            return 0
        acls = wanted(selectors)
        conf = _settings(args)
        if args.acls_command == "grant":
            write_acls(conf, [acl for acl, _ in acls], _operation_s(args))
            for acl, why in acls:
                print(f"granted {acl}" + (f" ({why})" if why else ""))
            return 0
        deleted = delete_acls(conf, [acl for acl, _ in acls], _operation_s(args))
        for acl in deleted:
            print(f"revoked {acl}")
        if not deleted:
            print("no such ACL: nothing revoked (`sparkafka acls list` shows the ACLs)")
    except SparkafkaError as e:
        print(f"sparkafka acls: {e}", file=sys.stderr)
        return 1
    return 0


def _utc(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


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
    if args.metrics_port is not None:
        cfg = dataclasses.replace(cfg, metrics_port=args.metrics_port)
    if args.dry_run:
        from sparkafka.pipeline.plan import describe_plan
        from sparkafka.pipeline.session import pipeline_spark, stop_spark

        spark = pipeline_spark(cfg)
        try:
            print(describe_plan(spark, cfg))
        except ConfigError as e:  # the SQL, schema or columns are wrong: named by file and field
            print(f"sparkafka run: {e}", file=sys.stderr)
            return 2
        except Exception as e:  # noqa: BLE001 - anything else Spark says: its first line, without a JVM stack trace
            print(f"sparkafka run: {args.pipeline}: {str(e).splitlines()[0]}", file=sys.stderr)
            return 2
        finally:
            stop_spark(spark)
        return 0
    from sparkafka.pipeline.preflight import preflight
    from sparkafka.pipeline.runner import run_pipeline

    try:
        preflight(cfg)  # seconds, before Spark starts: broker, topics, tables
    except ConfigError as e:
        print(f"sparkafka run: {e}", file=sys.stderr)
        return 2
    return run_pipeline(cfg, sys.stdout, args.log_json)


def _connection_args(parser: argparse.ArgumentParser, operations: bool = False) -> None:
    """``--bootstrap-servers``, ``--command-config`` and ``--timeout``, the same for every tool that talks to
    Kafka."""
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="the brokers (or --command-config)")
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="librdkafka settings (TLS, SASL): key=value lines, or JSON (FILE.json#NAME: one object of "
        "several, as `sparkafka broker --secure --client-config` writes); ${VAR} from the environment",
    )
    what = "; also each operation's bound (default 30 s)" if operations else ""
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"how long to wait for the brokers' first answer (default 5 s){what}",
    )


def _settings(args: argparse.Namespace) -> dict[str, str]:
    """The tool's librdkafka settings, once a broker answered: else one sentence within ``--timeout``.

    The same first contact as ``load()`` and the sinks (``client.contact``): 5 s unless ``--timeout``.
    """
    from sparkafka.cli.connection import client_settings
    from sparkafka.client.contact import FIRST_CONTACT_S

    return client_settings(args.bootstrap_servers, args.command_config, args.timeout or FIRST_CONTACT_S)


def _operation_s(args: argparse.Namespace) -> float:
    """The bound on each of a tool's lookups after the first answer: ``--timeout``, else 30 s."""
    from sparkafka.client.core import DEFAULT_TIMEOUT_S

    return float(args.timeout or DEFAULT_TIMEOUT_S)


def version_text() -> str:
    """``sparkafka --version``: the version, the PySpark it runs on and what that line gives sparkafka
    (``spark_lines.features``; imports PySpark, so only when asked)."""
    from sparkafka import __version__
    from sparkafka.spark_lines import PYSPARK_VERSION, features

    lines = [f"sparkafka {__version__} on PySpark {PYSPARK_VERSION}"]
    lines += [f"  {'yes' if given else 'no ':<4}{what}" for what, given in features().items()]
    return "\n".join(lines) + "\n"


class _Version(argparse.Action):
    """Prints ``version_text`` and exits, as argparse's own version action does with a fixed text."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, help: str = "") -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        sys.stdout.write(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:  # noqa: PLR0915 - one statement per command and option
    from sparkafka.cli.acls import OPERATIONS

    parser = argparse.ArgumentParser(prog="sparkafka", description="Kafka for Spark, with Flink's semantics")
    parser.add_argument(
        "--version", action=_Version, help="sparkafka's version, and what this PySpark gives it"
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log at INFO, librdkafka's own log lines included"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    broker = sub.add_parser(
        "broker",
        help="run Apache Kafka (KRaft) on 127.0.0.1 until Ctrl-C (--tansu: the pip-only broker)",
        description="Apache Kafka from the project's pinned jars (installed once from Maven Central), in "
        "KRaft mode on loopback, on free ports. See docs/development.md, 'A local broker'.",
    )
    broker.add_argument(
        "--port", type=int, default=None, help="client port on 127.0.0.1 (default: a free one)"
    )
    broker.add_argument(
        "--brokers", type=int, default=1, choices=range(1, 10), metavar="N", help="brokers (default 1)"
    )
    broker.add_argument("--heap", default="512m", help="JVM heap per broker (default 512m)")
    broker.add_argument("--data-dir", default=None, help="keep data and logs here (default: a temporary dir)")
    broker.add_argument(
        "--secure",
        action="store_true",
        help="TLS only: SASL_SSL (SCRAM-SHA-512, PLAIN) and mutual TLS, ACLs on; a super user and an "
        "application user without ACLs (docs/security.md)",
    )
    broker.add_argument(
        "--client-config",
        metavar="FILE",
        help="with --secure: where to write the logins' kafka.* settings, passwords included (JSON, mode "
        "0600; default: client.json in the data dir)",
    )
    broker.add_argument("--tansu", action="store_true", help="the pip-only tansu broker instead (known gaps)")
    broker.add_argument("--storage", default="memory://tansu/", help="with --tansu: its storage engine URL")
    broker.set_defaults(func=_cmd_broker)

    demo = sub.add_parser("demo", help="run the demo pipeline on a local Apache Kafka (--tansu: on tansu)")
    demo.add_argument("--orders", type=int, default=3000, help="orders to generate (default 3000)")
    demo.add_argument("--minutes", type=int, default=4, help="minutes of event time they span (default 4)")
    demo.add_argument("--partitions", type=int, default=4, help="partitions of the input topic")
    demo.add_argument("--tansu", action="store_true", help="on the pip-only tansu broker (no Maven Central)")
    demo.set_defaults(func=_cmd_demo)

    lag = sub.add_parser("lag", help="committed offset, log end and lag of a consumer group, per partition")
    _connection_args(lag)
    lag.add_argument("--group", required=True, help="consumer group id")
    lag.add_argument("--topic", help="only this topic (default: every topic the group committed)")
    lag.add_argument(
        "--watch", type=float, metavar="SECONDS", help="refresh in place every SECONDS until Ctrl-C"
    )
    lag.add_argument("--count", type=int, help="with --watch: stop after this many readings")
    lag.add_argument("--plot", metavar="PNG", help="write a PNG of total lag over the watched period")
    lag.add_argument(
        "--metrics-file",
        metavar="PATH",
        help="the source's metricsFile option, if set: its event-time alignment is shown per partition "
        "(default: the group's metrics file on this host, when the source aligns by event time)",
    )
    lag.set_defaults(func=_cmd_lag)

    run = sub.add_parser(
        "run",
        help="run a Kafka-to-Kafka pipeline declared in a TOML file",
        description="Run a pipeline file: docs/pipelines.md documents every table and field, and "
        "examples/*.toml are runnable ones.",
    )
    run.add_argument("pipeline", help="the pipeline file (format: docs/pipelines.md)")
    run.add_argument("--dry-run", action="store_true", help="print the resolved plan and schema, run nothing")
    run.add_argument("--log-json", metavar="FILE", help="append one JSON line per micro-batch to FILE")
    run.add_argument(
        "--available-now",
        action="store_true",
        help="process what the source has now, then stop (Trigger.AvailableNow), whatever the file's trigger",
    )
    run.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics on http://127.0.0.1:PORT/metrics while it runs (file: [metrics])",
    )
    run.set_defaults(func=_cmd_run)

    txn = sub.add_parser(
        "txn", help="the exactly-once sink's commit intents and transactions for a transactionalIdPrefix"
    )
    txn_sub = txn.add_subparsers(dest="txn_command", required=True)
    txn_list = txn_sub.add_parser("list", help="each query's newest batch, its state, and open transactions")
    txn_resolve = txn_sub.add_parser("resolve", help="decide a query's unfinished batch by hand")
    for p in (txn_list, txn_resolve):
        _connection_args(p)
        p.add_argument("--prefix", required=True, help="the sink's transactionalIdPrefix")
    txn_resolve.add_argument("--query", required=True, help="the query id (see `sparkafka txn list`)")
    txn_resolve.add_argument(
        "action",
        choices=["commit", "abort", "mark-done", "rewrite"],
        help="pending: commit or abort its transactions, or, when their outcome can be learned neither "
        "from the broker nor from their markers, mark-done (count them committed) or rewrite (count them "
        "not committed: the replay writes them); partial: mark-done (the rest is not written) or rewrite "
        "(the replay writes the whole batch again); abandoned: mark-done",
    )
    txn_resolve.add_argument("--yes", action="store_true", help="do it (without: say what would be done)")
    txn_retire = txn_sub.add_parser(
        "retire",
        help="delete a prefix's commit-intent topic and counters files once no query uses it (a dry run "
        "unless --yes)",
    )
    _connection_args(txn_retire)
    txn_retire.add_argument("--prefix", required=True, help="the sink's transactionalIdPrefix")
    txn_retire.add_argument("--yes", action="store_true", help="do it (without: say what would be done)")
    txn_retire.add_argument(
        "--force", action="store_true", help="even if a query wrote to its log in the last 10 minutes"
    )
    txn.set_defaults(func=_cmd_txn)

    metrics = sub.add_parser("metrics", help="the metrics files sparkafka writes on this host")
    metrics_sub = metrics.add_subparsers(dest="metrics_command", required=True)
    metrics_retire = metrics_sub.add_parser(
        "retire", help="remove metrics files not written for a while (a dry run unless --yes)"
    )
    metrics_retire.add_argument(
        "--older-than", type=float, default=7.0, metavar="DAYS", help="not written for this long (default 7)"
    )
    metrics_retire.add_argument("--yes", action="store_true", help="do it (without: list what would go)")
    metrics.set_defaults(func=_cmd_metrics)

    offsets = sub.add_parser(
        "offsets",
        help="a query's checkpoint, its group's and the log's offsets; reset a group's offsets",
        description="See docs/operations.md, 'Offsets: where a query is, and moving it'.",
    )
    offsets_sub = offsets.add_subparsers(dest="offsets_command", required=True)
    show = offsets_sub.add_parser(
        "show", help="per partition: checkpoint, group, earliest and latest offsets"
    )
    reset = offsets_sub.add_parser(
        "reset", help="move a consumer group's committed offsets (a dry run unless --execute)"
    )
    for p in (show, reset):
        _connection_args(p)
    show.add_argument("--checkpoint", required=True, metavar="DIR", help="the query's checkpoint directory")
    show.add_argument("--group", help="the source's kafka.group.id, to show its committed offsets")
    reset.add_argument("--group", required=True, help="the consumer group (kafka.group.id)")
    reset.add_argument(
        "--to",
        required=True,
        metavar="TARGET",
        help='earliest | latest | timestamp:MS (epoch ms) | checkpoint:DIR | json:{"topic": {"0": 42}}',
    )
    reset.add_argument(
        "--topic",
        action="append",
        help="every partition of this topic (repeatable; default: the partitions the group has committed)",
    )
    reset.add_argument("--execute", action="store_true", help="apply it (without: show what would be set)")
    replan = offsets_sub.add_parser(
        "replan",
        help="plan a query's unfinished last batch again under its current options (a dry run unless "
        "--execute); for a batch the exactly-once sink refused as too old to commit",
    )
    _connection_args(replan)
    replan.add_argument("--checkpoint", required=True, metavar="DIR", help="the query's checkpoint directory")
    replan.add_argument("--prefix", required=True, help="the exactly-once sink's transactionalIdPrefix")
    replan.add_argument("--execute", action="store_true", help="do it (without: say what would be done)")
    reset.add_argument(
        "--force",
        action="store_true",
        help="with --execute: reset although a sparkafka query committed to the group in the last 10 "
        "minutes (only when that query is known to be stopped)",
    )
    offsets.set_defaults(func=_cmd_offsets)

    topics = sub.add_parser(
        "topics",
        help="list, create and describe topics",
        description="See docs/operations.md, 'Topics'.",
    )
    topics_sub = topics.add_subparsers(dest="topics_command", required=True)
    topics_list = topics_sub.add_parser("list", help="topics with their partitions and replication factor")
    topics_create = topics_sub.add_parser("create", help="create a topic")
    topics_describe = topics_sub.add_parser(
        "describe", help="per partition: leader, replicas, in-sync replicas, offsets; the topic's configs"
    )
    for p in (topics_list, topics_create, topics_describe):
        _connection_args(p, operations=True)
    topics_list.add_argument(
        "--all", action="store_true", help="internal topics too (__consumer_offsets, _sparkafka-intents-*)"
    )
    for p in (topics_create, topics_describe):
        p.add_argument("name", help="the topic")
    topics_create.add_argument(
        "--partitions", type=int, default=1, metavar="N", help="partitions (default 1)"
    )
    topics_create.add_argument(
        "--replication",
        type=int,
        metavar="R",
        help="replicas of each partition, at most the number of brokers (default: the broker's "
        "default.replication.factor)",
    )
    topics_create.add_argument(
        "--config",
        action="append",
        metavar="KEY=VALUE",
        help="a topic config, e.g. cleanup.policy=compact or retention.ms=86400000 (repeatable)",
    )
    topics.set_defaults(func=_cmd_topics)

    acls = sub.add_parser(
        "acls",
        help="list, grant and revoke ACLs (Kafka's Admin API; run as an administrator)",
        description="ACLs on topics, groups and transactional ids, through Kafka's Admin API: no Kafka tools "
        "needed. Granting and revoking need ALTER on the cluster, listing DESCRIBE: connect with an "
        "administrator's settings (--command-config). See docs/security.md, 'Least privilege'.",
    )
    acls_sub = acls.add_subparsers(dest="acls_command", required=True)
    acls_list = acls_sub.add_parser(
        "list", help="the ACLs that apply to the resources given (all without any), or to a principal"
    )
    acls_grant = acls_sub.add_parser(
        "grant", help="grant each --operation on each resource, or with --for-query what a query needs"
    )
    acls_revoke = acls_sub.add_parser(
        "revoke", help="revoke the ACLs `grant` with the same options grants (exactly those)"
    )
    for p in (acls_list, acls_grant, acls_revoke):
        _connection_args(p, operations=True)
        p.add_argument(
            "--principal",
            metavar="TYPE:NAME",
            help="the user, e.g. User:alice (SASL user name; over mutual TLS what the brokers map the "
            "certificate's subject to)" + ("; default: every principal" if p is acls_list else ""),
        )
        p.add_argument("--topic", dest="topics", action="append", metavar="NAME", help="a topic (repeatable)")
        p.add_argument("--group", dest="groups", action="append", metavar="NAME", help="a group (repeatable)")
        p.add_argument(
            "--transactional-id",
            dest="transactional_ids",
            action="append",
            metavar="ID",
            help="a transactional id, or with --prefixed a prefix (repeatable)",
        )
        p.add_argument(
            "--prefixed",
            action="store_true",
            help="the names given are prefixes (Kafka's PREFIXED pattern: every name that starts with one)",
        )
    for p in (acls_grant, acls_revoke):
        p.add_argument(
            "--operation",
            dest="operations",
            action="append",
            choices=OPERATIONS,
            help="the operation (repeatable); read, write and delete include describe",
        )
        p.add_argument("--host", default="*", help="the client host it applies to (default: any, *)")
        p.add_argument("--deny", action="store_true", help="a DENY ACL (it wins over every ALLOW)")
        p.add_argument(
            "--for-query",
            action="store_true",
            help="what a sparkafka query needs (docs/security.md's least privilege), from --source-topic, "
            "--sink-topic, --group (the source's kafka.group.id) and --transactional-id-prefix",
        )
        p.add_argument(
            "--source-topic",
            dest="source_topics",
            action="append",
            metavar="NAME",
            help="with --for-query: a topic the query reads (READ; repeatable)",
        )
        p.add_argument(
            "--sink-topic",
            dest="sink_topics",
            action="append",
            metavar="NAME",
            help="with --for-query: a topic the query writes (WRITE; repeatable)",
        )
        p.add_argument(
            "--transactional-id-prefix",
            metavar="PREFIX",
            help="with --for-query: the exactly-once sink's transactionalIdPrefix (WRITE on its "
            "transactional ids; READ, WRITE and CREATE on its commit-intent log)",
        )
    acls.set_defaults(func=_cmd_acls)

    doctor = sub.add_parser("doctor", help="probe a broker for what sparkafka relies on")
    _connection_args(doctor)
    doctor.set_defaults(func=_cmd_doctor)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``sparkafka`` command: parse ``argv`` (default ``sys.argv[1:]``) and return the exit status."""
    from sparkafka.client.log import librdkafka_lines

    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    with librdkafka_lines(shown=args.verbose):  # a command's own sentence says what failed
        return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
