"""What each ``sparkafka`` command does once the parser (``cli.parser``) has chosen it.

One handler per command, ``_cmd_NAME(args) -> exit status``, with the helpers only handlers use: the
Kafka settings every tool that talks to a broker starts from (``_settings``: the first contact, within
``--timeout``), each lookup's bound (``_operation_s``) and ``version_text`` (``--version``, and
``doctor``'s last line).

Runs in the CLI's process, only the handler of the command given. Each imports what it needs when it runs,
never at the top of this module: the client layer and ``sparkafka.ops`` for the broker tools,
``sparkafka.pipeline`` (and with it PySpark) for ``run``, and ``sparkafka.local`` for the development
commands ``broker`` and ``demo`` only. So ``sparkafka --help``, which imports this module to bind the
handlers, loads none of them.

A command's error is one line on stderr, ``sparkafka COMMAND: <sentence>``, and exit status 1 (2 for a dry
run that would change something, and for the pipeline ``run`` refuses).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import signal
import sys
import threading
from typing import Any

__all__ = ["version_text"]


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
