"""The documentation site's generated parts, and the MkDocs hook that puts them into the pages.

A page asks for a part with a line ``<!-- generated: NAME -->``; when MkDocs builds the site (``make docs``,
and ``tests/unit/test_docs.py`` with ``--strict``) the hook replaces the line with the part, made from the
declarations in the code: the options of the source and the sink (``SOURCE_OPTIONS``, ``SINK_OPTIONS``), the
fields of a pipeline file (``pipeline.config.FIELDS``), the command line (``cli.build_parser``), the
Prometheus metrics (``ops.prometheus.Exporter``). So a new option, field, command or metric reaches the docs
without anyone editing them, and a declaration without a description is refused here, failing the build.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sparkafka.options import Option

MARKER = re.compile(r"^<!-- generated: ([a-z0-9-]+) -->$", re.M)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(value: str) -> str:
    return f"`{value}`"


def options_table(options: Sequence[Option], *, fields: bool = False) -> str:
    """A Markdown table of ``options`` (or of a pipeline file's ``fields``, with their TOML types)."""
    head = (
        ["field", "type", "default", "allowed", "what it does"]
        if fields
        else ["option", "default", "allowed", "what it does"]
    )
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for o in options:
        if not o.description.strip():
            raise ValueError(f"option {o.name} has no description: add one where it is declared")
        default = _code(o.default) if o.default is not None else (o.default_note or "")
        allowed = ", ".join(_code(a) for a in o.allowed)
        what = o.description + (f" Another name for `{o.alias_of}`." if o.alias_of else "")
        cells = [_code(o.name), *([o.kind] if fields else []), default, allowed, what]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows)


def source_options() -> str:
    """The source's options and the ``kafka.*`` settings it interprets."""
    from sparkafka.source.options import SOURCE_KAFKA_SETTINGS, SOURCE_OPTIONS

    return (
        options_table(SOURCE_OPTIONS)
        + "\n\nThe `kafka.*` settings the source interprets (every other `kafka.*` option goes to librdkafka "
        "as given):\n\n" + options_table(SOURCE_KAFKA_SETTINGS)
    )


def sink_options() -> str:
    """The sink's options, the ``kafka.*`` settings it interprets, and Spark's writer options."""
    from sparkafka.sink.options import SINK_KAFKA_SETTINGS, SINK_OPTIONS, SPARK_WRITE_OPTIONS

    return (
        options_table(SINK_OPTIONS)
        + "\n\nThe `kafka.*` settings the sink interprets (every other `kafka.*` option goes to librdkafka "
        "as given):\n\n"
        + options_table(SINK_KAFKA_SETTINGS)
        + "\n\nSpark's own writer options, which Spark passes to every sink:\n\n"
        + options_table(SPARK_WRITE_OPTIONS)
    )


def spark_options() -> str:
    """Every option of Spark's Kafka source and sink that sparkafka has, and what differs."""
    from sparkafka.sink.options import SINK_KAFKA_SETTINGS, SINK_OPTIONS
    from sparkafka.source.options import SOURCE_KAFKA_SETTINGS, SOURCE_OPTIONS

    rows = ["| Spark's option | where | in sparkafka |", "|---|---|---|"]
    for where, options in (
        ("source", SOURCE_OPTIONS + SOURCE_KAFKA_SETTINGS),
        ("sink", SINK_OPTIONS + SINK_KAFKA_SETTINGS),
    ):
        for o in options:
            if o.spark is None:
                continue
            alias = f"another name for `{o.alias_of}`; " if o.alias_of else ""
            said = o.spark or "the same meaning."
            rows.append(f"| {_code(o.name)} | {where} | {_cell(alias + said)} |")
    return "\n".join(rows)


def java_names() -> str:
    """The Java client settings a ``format("kafka")`` job may carry: what each becomes, or what to do."""
    from sparkafka.client.java_settings import JAVA_SETTINGS

    clients = {"consumer": " (on a source; a sink's producer takes it as it is)", "producer": " (on a sink)"}
    rows = ["| Java client setting | in sparkafka |", "|---|---|"]
    for java, setting in sorted(JAVA_SETTINGS.items()):
        if setting.instead is not None:
            what = f"refused: {setting.instead}"
        elif setting.name is None:
            what = "not needed by librdkafka: dropped"
        else:
            what = f"`kafka.{setting.name}`" + (", its value converted" if setting.value is not None else "")
        rows.append(f"| `kafka.{java}` | {what}{clients[setting.client] if setting.client else ''} |")
    rows.append(
        "| `kafka.sasl.jaas.config` | PLAIN and SCRAM logins become `kafka.sasl.username` and "
        "`kafka.sasl.password`, a Kerberos key tab `kafka.sasl.kerberos.keytab` and "
        "`kafka.sasl.kerberos.principal`; other login modules are refused |"
    )
    return "\n".join(rows)


def pipeline_fields() -> str:
    """One table per table of a pipeline file."""
    from sparkafka.pipeline.config import FIELDS
    from sparkafka.registry.client import REGISTRY_SETTINGS

    parts = []
    titles = {"": "The top level", "table": "[[table]]", "source.watermark": "source.watermark"}
    sections: Iterable[tuple[str, Sequence[Option]]] = [
        *FIELDS.items(),
        ("schema_registry", REGISTRY_SETTINGS),
    ]
    for section, fields in sections:
        title = titles.get(section, f"[{section}]")
        parts.append(f"### {title}\n\n" + options_table(fields, fields=True))
    return "\n\n".join(parts)


def _help(parser: argparse.ArgumentParser) -> str:
    return parser.format_help().rstrip()


def cli_reference() -> str:
    """``sparkafka --help`` and every command's and subcommand's help, as the command prints them."""
    from sparkafka.cli import build_parser

    width = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "110"  # argparse wraps at the terminal's width: the same text on every machine
    try:
        parser = build_parser()
        parts = [f"### sparkafka\n\n```text\n{_help(parser)}\n```"]
        parts += [_command_help(name, sub) for name, sub in _subcommands(parser)]
    finally:
        if width is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = width
    return "\n\n".join(parts)


def _subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((f"{prefix}{name}", sub))
                found += _subcommands(sub, f"{prefix}{name} ")
    return found


def _command_help(name: str, parser: argparse.ArgumentParser) -> str:
    return f"### sparkafka {name}\n\n```text\n{_help(parser)}\n```"


def metrics_table() -> str:
    """Every Prometheus metric the exporter serves: name as scraped, type, labels, help."""
    from sparkafka.ops.prometheus import Exporter

    exporter = Exporter()
    rows = ["| metric | type | labels | what |", "|---|---|---|---|"]
    for collector in sorted(exporter.registry._collector_to_names, key=lambda c: c._name):
        name, kind = collector._name, collector._type
        shown = f"{name}_total" if kind == "counter" else name
        labels = ", ".join(_code(label) for label in collector._labelnames)
        rows.append(f"| `{shown}` | {kind} | {labels} | {_cell(collector._documentation)} |")
    return "\n".join(rows)


PARTS: dict[str, Callable[[], str]] = {
    "source-options": source_options,
    "sink-options": sink_options,
    "spark-options": spark_options,
    "java-names": java_names,
    "pipeline-fields": pipeline_fields,
    "cli-reference": cli_reference,
    "metrics": metrics_table,
}


def expand(markdown: str, page: str = "page") -> str:
    """``markdown`` with each ``<!-- generated: NAME -->`` line replaced by the part NAME."""

    def part(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in PARTS:
            raise ValueError(f"{page}: no generated part {name!r}; known: {', '.join(sorted(PARTS))}")
        return PARTS[name]()

    return MARKER.sub(part, markdown)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """MkDocs' hook: runs for each page while the site is built."""
    return expand(markdown, page.file.src_uri)
