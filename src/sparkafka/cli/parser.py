"""The ``sparkafka`` command line's parser: every command, its options and their help.

Built once per run by ``main``, and by what reads the help: ``scripts/docs_site.py`` puts every command's
help into the documentation site, ``tests/unit/test_docs.py`` parses the docs' commands with it. Each
command's parser carries its handler from ``cli.commands`` (``set_defaults(func=...)``). Building it
imports only those handlers, whose own imports wait until they run, and ``cli.acls`` for the operations
``--operation`` takes: neither the client layer nor PySpark.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sparkafka.cli.commands import (
    _cmd_acls,
    _cmd_broker,
    _cmd_demo,
    _cmd_doctor,
    _cmd_lag,
    _cmd_metrics,
    _cmd_offsets,
    _cmd_run,
    _cmd_topics,
    _cmd_txn,
    version_text,
)

__all__ = ["build_parser"]


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


class _Version(argparse.Action):
    """Prints ``version_text`` and exits, as argparse's own version action does with a fixed text."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, help: str = "") -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        sys.stdout.write(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:  # noqa: PLR0915 - one statement per command and option
    """The parser of ``sparkafka``'s command line; each command's ``func`` is its ``cli.commands`` handler."""
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
