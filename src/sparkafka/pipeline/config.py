"""The pipeline file, parsed and validated before Spark starts; every error names the file and the field.

Its fields are declared once, in ``FIELDS`` (the docs' pipeline reference, docs/pipelines.md, is made from
them when the site is built); ``${NAME}`` in any string is replaced by the environment variable NAME (an
error if it is unset).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from sparkafka.errors import ConfigError
from sparkafka.metrics_files import default_metrics_path
from sparkafka.options import L, Option, names
from sparkafka.pipeline.schema_types import unknown_type
from sparkafka.registry.client import (
    FORMATS,
    STRATEGIES,
    Format,
    RegistryConfig,
    SubjectStrategy,
    parse_registry,
    subject_name,
)
from sparkafka.sink.modes import OUTPUT_MODES, OutputMode

if TYPE_CHECKING:
    from sparkafka.sink.options import SinkOptions
    from sparkafka.source.options import SourceOptions

P = TypeVar("P")

__all__ = ["FIELDS", "PipelineConfig", "SchemaChoice", "SinkEncoding", "TableSpec", "load_pipeline"]

Decode = Literal["raw", "string", "json", "avro", "protobuf", "json_schema"]
KeyDecode = Literal["string", "raw", "avro", "protobuf", "json_schema"]
OnMalformed = Literal["flag", "skip", "fail", "dead_letter"]
DECODES: tuple[Decode, ...] = get_args(Decode)
KEY_DECODES: tuple[KeyDecode, ...] = get_args(KeyDecode)
ON_MALFORMED: tuple[OnMalformed, ...] = get_args(OnMalformed)
FALLIBLE: tuple[Decode, ...] = ("json", *FORMATS)
"""Decodings whose records can be undecodable, so ``on_malformed`` applies."""

TABLE_FORMATS = ("csv", "json", "parquet")
_SCHEMA_CHOICE = ("subject", "schema_version", "schema_id", "message")
_SCHEMA_FIELDS = (
    Option(
        "subject",
        "Registry formats: the reader schema's subject.",
        default_note="`<topic>-value` when the source subscribes to one topic",
    ),
    Option("schema_version", "The subject's version to read with.", default_note="latest", kind="integer"),
    Option("schema_id", "A schema id instead of subject and version.", kind="integer"),
    Option("message", "Protobuf: the message to read as.", default_note="the schema's first"),
)

FIELDS: dict[str, tuple[Option, ...]] = {
    "": (
        Option(
            "name",
            "The pipeline's name, in logs and as the streaming query's name (dashes become underscores); "
            "metrics are labelled by it.",
            default_note="the file's name without `.toml`",
        ),
        Option("checkpoint", "Spark's checkpoint directory (relative to the file). Required."),
        Option(
            "trigger",
            'A processing-time interval such as `"5 seconds"` (`ms`, `s`, `m`), or `"availableNow"`: '
            "process what is there, then stop.",
            default='"0 seconds"',
        ),
        Option(
            "output_mode",
            "Spark's `outputMode`; `update` runs as `foreachBatch`, exactly once as the streaming sink.",
            default='"append"',
            allowed=OUTPUT_MODES,
        ),
        Option("spark", "Spark's master and settings.", kind="table"),
        Option("schema_registry", "The Schema Registry the registry formats use.", kind="table"),
        Option("source", "What to read and how to decode it. Required.", kind="table"),
        Option("table", "Static tables the SQL can join (repeatable).", kind="array of tables"),
        Option("transform", "The SQL; without it the sink gets the decoded source.", kind="table"),
        Option("sink", "What to write and how. Required.", kind="table"),
        Option("metrics", "Prometheus metrics while the pipeline runs.", kind="table"),
    ),
    "spark": (
        Option(
            "master",
            "Spark's master for `sparkafka run`; ignored, with a warning, under spark-submit.",
            default_note='`"local[2]"` for `sparkafka run`',
        ),
        Option(
            "config",
            'Spark settings (`{ "spark.sql.shuffle.partitions" = "4" }`); they override sparkafka\'s own '
            "defaults.",
            kind="table",
        ),
    ),
    "source": (
        Option(
            "decode",
            "How values become columns: `raw` and `string` keep Kafka's columns; `json` parses the value "
            "with `schema`; `avro`, `protobuf`, `json_schema` read Confluent's wire format, the reader "
            "schema's fields becoming columns.",
            default='"raw"',
            allowed=DECODES,
        ),
        Option("schema", "A Spark DDL schema (`order_id STRING, amount DOUBLE`): required with `json`."),
        Option(
            "options",
            "The source's options, as `.option()` takes them (see the option reference).",
            kind="table",
        ),
        Option(
            "watermark",
            'Spark\'s `withWatermark` on the source view: `{ column = "event_time", delay = "30 seconds" }`.',
            kind="table",
        ),
        Option(
            "on_malformed",
            "Records that do not decode: `flag` (they reach the SQL with `_malformed = true`), `skip`, "
            "`fail` (the batch fails naming the record) or `dead_letter` (to `dead_letter_topic`, in the "
            "batch's transactions).",
            default='"flag"',
            allowed=ON_MALFORMED,
        ),
        Option("dead_letter_topic", "Where `on_malformed = dead_letter` writes; required with it."),
        Option(
            "key_decode",
            "How the key becomes `_key`, with a registry format's `key_subject`, `key_schema_version`, "
            "`key_schema_id`, `key_message` as for the value.",
            default='"string"',
            allowed=KEY_DECODES,
        ),
        Option(
            "max_event_time_drift",
            'Event-time alignment: the source\'s `maxEventTimeDrift` (a duration such as `"30 seconds"`).',
        ),
        Option(
            "partition_idle_timeout",
            "With `max_event_time_drift`: the source's `partitionIdleTimeout` (a duration).",
        ),
        *_SCHEMA_FIELDS,
        *(Option(f"key_{f.name}", f"As `{f.name}`, for the key.", kind=f.kind) for f in _SCHEMA_FIELDS),
    ),
    "source.watermark": (
        Option("column", "The event-time column (a timestamp of the decoded source)."),
        Option("delay", 'How late a record may be, as Spark writes it (`"30 seconds"`).'),
        Option(
            "expression",
            "A SQL expression `column` is made of first, from the decoded source's fields "
            '(`"timestamp_millis(ts)"` for an epoch-milliseconds number); the dead-letter statement sees '
            "it too.",
            default_note="`column` is a field of the decoded source",
        ),
    ),
    "table": (
        Option("name", "The view's name in the SQL (not `source`)."),
        Option("path", "The file (relative to the pipeline file)."),
        Option(
            "format", "`csv` (with a header), `json` or `parquet`.", default='"csv"', allowed=TABLE_FORMATS
        ),
    ),
    "transform": (Option("sql", "Spark SQL over the view `source` and the tables."),),
    "sink": (
        Option("key", "A SQL expression for the record key.", default_note="no key"),
        Option(
            "value",
            "A SQL expression for the record value.",
            default_note='`"value"`; `"struct(*)"` with `encode`',
        ),
        Option(
            "options",
            "The sink's options, as `.option()` takes them (see the option reference); `topic` is required.",
            kind="table",
        ),
        Option("encode", "Write the value in a registry format (the value a struct).", allowed=FORMATS),
        Option("key_encode", "The same for the key.", allowed=FORMATS),
        Option(
            "subject_name_strategy",
            "`topic` (`<topic>-value`), `record` (`<namespace>.<record_name>`) or `topic_record`.",
            default='"topic"',
            allowed=STRATEGIES,
        ),
        Option("record_name", "The schema's record or message name.", default='"topLevelRecord"'),
        Option("record_namespace", "Its namespace or package.", default='""'),
        Option(
            "auto_register",
            "Register the schema derived from the SQL's type.",
            default="true",
            kind="boolean",
        ),
        Option(
            "use_latest_version",
            "Write with the subject's latest schema instead.",
            default="false",
            kind="boolean",
        ),
    ),
    "metrics": (
        Option(
            "port",
            "Serve Prometheus metrics on `http://host:port/metrics` (`sparkafka run --metrics-port` "
            "overrides it; 0: a free port).",
            kind="integer",
        ),
        Option("host", 'The address to serve on; `"0.0.0.0"` serves every interface.', default='"127.0.0.1"'),
    ),
}
"""Every field of a pipeline file, by table (``""``: the top level); ``[schema_registry]`` takes
``registry.client.REGISTRY_SETTINGS``. Unknown fields are refused, naming the ones allowed."""
_TOP = set(names(FIELDS[""]))
_SECTIONS = {section: set(names(fields)) for section, fields in FIELDS.items() if section}


@dataclass(frozen=True)
class SchemaChoice:
    """Which registered schema the source reads with: by id, or a subject's version (None: latest)."""

    subject: str | None
    version: int | None = None
    schema_id: int | None = None
    message: str | None = None
    """Protobuf: the message to read as (default the schema's first)."""


@dataclass(frozen=True)
class SinkEncoding:
    """How ``[sink] encode`` / ``key_encode`` write: subject naming, the schema's name, registration."""

    strategy: SubjectStrategy = "topic"
    record_name: str = "topLevelRecord"
    record_namespace: str = ""
    auto_register: bool = True
    use_latest_version: bool = False

    @property
    def full_name(self) -> str:
        """The schema's full name: ``record_namespace.record_name``, or the name alone without namespace."""
        return f"{self.record_namespace}.{self.record_name}" if self.record_namespace else self.record_name


_TRIGGER = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|seconds?|m|minutes?)\s*", re.IGNORECASE)
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class TableSpec:
    """A ``[[table]]``: a file the SQL can join, read as view ``name`` when the query is planned."""

    name: str
    path: str
    format: str


@dataclass(frozen=True)
class PipelineConfig:
    """A pipeline file, parsed and checked by ``load_pipeline``."""

    path: Path
    name: str
    checkpoint: str
    trigger: str | None
    """A processing-time interval such as "5 seconds", or None for Trigger.AvailableNow."""
    master: str | None
    """``[spark] master``; None means local[2] for ``sparkafka run``, spark-submit's choice under it."""
    spark_config: Mapping[str, str]
    decode: Decode
    schema: str | None
    source_options: Mapping[str, str]
    """``[source] options`` as written (Spark's ``.option`` takes them); ``source`` is them parsed."""
    source: SourceOptions
    sink_options: Mapping[str, str]
    """``[sink] options`` as written; ``sink`` is them parsed."""
    sink: SinkOptions
    output_mode: OutputMode = "append"
    """Spark's ``outputMode`` for the query: update runs as foreachBatch (``sparkafka.sink.modes``)."""
    watermark: tuple[str, str] | None = None
    """(event-time column, delay) for ``withWatermark`` on the source view."""
    watermark_expression: str | None = None
    """``source.watermark.expression``: the SQL expression the event-time column is made of, when the
    record has no timestamp column of its own (``timestamp_millis(ts)`` for an epoch-ms field)."""
    on_malformed: OnMalformed = "flag"
    dead_letter_topic: str | None = None
    tables: tuple[TableSpec, ...] = ()
    sql: str | None = None
    key: str | None = None
    value: str = "value"
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    registry: RegistryConfig | None = None
    """``[schema_registry]``: required by the registry formats."""
    value_schema: SchemaChoice | None = None
    """The reader schema of a registry-format value."""
    key_decode: KeyDecode = "string"
    key_schema: SchemaChoice | None = None
    encode: Format | None = None
    key_encode: Format | None = None
    encoding: SinkEncoding = field(default_factory=SinkEncoding)

    @property
    def query_name(self) -> str:
        """The streaming query's name (Spark's query names take no dashes); metrics are labelled by it."""
        return self.name.replace("-", "_")

    def alignment_warning(self) -> str | None:
        """A watermark delay below ``maxEventTimeDrift``: a catch-up may drop records as late."""
        from sparkafka.source.options import duration_ms

        drift = self.source.max_event_time_drift_ms
        if drift is None or self.watermark is None:
            return None
        delay = duration_ms(self.watermark[1])
        if delay is None or delay >= drift:
            return None
        return (
            f"source.watermark delay {self.watermark[1]!r} is shorter than the source's maxEventTimeDrift "
            f"({drift} ms): a catch-up may drop records as late; make the delay at least the drift"
        )

    def timeout_warning(self, margin_ms: int = 60_000) -> str | None:
        """Flink's start-up check: exactly-once transactions must outlive a trigger interval plus recovery."""
        if self.sink.delivery != "exactly_once" or self.trigger is None:
            return None
        interval_ms = int(self.trigger.split()[0])
        if interval_ms + margin_ms <= self.sink.transaction_timeout_ms:
            return None
        return (
            f"kafka.transaction.timeout.ms={self.sink.transaction_timeout_ms} is shorter than the trigger "
            f"interval ({interval_ms} ms) plus {margin_ms} ms for recovery: the broker may abort "
            "transactions that were about to be committed after a crash"
        )


class _Fields:
    """Typed access to one TOML table, with errors naming the file and the dotted field."""

    def __init__(self, path: Path, where: str, data: Any, allowed: set[str]) -> None:
        self.path, self.where = path, where
        if not isinstance(data, dict):
            raise self.error(where, f"must be a table, not {type(data).__name__}")
        self.data = data
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise self.error(
                f"{where}.{unknown[0]}" if where else unknown[0],
                f"is not a known field; allowed here: {', '.join(sorted(allowed))}",
            )

    def error(self, name: str, message: str) -> ConfigError:
        return ConfigError(f"{self.path}: {name} {message}")

    def dotted(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def text(self, key: str, default: str | None = None, required: bool = False) -> str | None:
        value = self.data.get(key, default)
        if value is None:
            if required:
                raise self.error(self.dotted(key), "is required")
            return None
        if not isinstance(value, str):
            raise self.error(self.dotted(key), f"must be a string, not {type(value).__name__}")
        return _expand(value, self, self.dotted(key))

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise self.error(self.dotted(key), f"= {value!r}: use true or false")
        return value

    def number(self, key: str) -> int | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.error(self.dotted(key), f"= {value!r}: use a whole number >= 1")
        return value

    def optional_choice(self, key: str, allowed: tuple[L, ...]) -> L | None:
        """One of ``allowed`` (typed as the Literal they come from), or None if the field is absent."""
        value = self.text(key)
        if value is None:
            return None
        found = next((a for a in allowed if a == value), None)
        if found is None:
            raise self.error(self.dotted(key), f"= {value!r}: use {', '.join(allowed)}")
        return found

    def choice(self, key: str, allowed: tuple[L, ...], default: L) -> L:
        found = self.optional_choice(key, allowed)
        return default if found is None else found

    def parsed(self, key: str, options: Mapping[str, str], parse: Callable[[Mapping[str, str]], P]) -> P:
        """``options`` through the source's or sink's own parser, its error prefixed with the file."""
        try:
            return parse(options)
        except ConfigError as e:
            raise ConfigError(f"{self.path}: {key}: {e}") from None

    def port(self, key: str) -> int | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
            raise self.error(
                self.dotted(key), f"= {value!r}: use a port number, 1 to 65535 (0: any free port)"
            )
        return value

    def options(self, key: str) -> dict[str, str]:
        value = self.data.get(key, {})
        if not isinstance(value, dict):
            raise self.error(self.dotted(key), "must be a table of option = value")
        out = {}
        for k, v in value.items():
            if not isinstance(v, str | int | float):
                raise self.error(f"{self.dotted(key)}.{k}", "must be a string, number or boolean")
            text = str(v).lower() if isinstance(v, bool) else str(v)
            out[str(k)] = _expand(text, self, f"{self.dotted(key)}.{k}")
        return out


def _expand(text: str, fields: _Fields, name: str) -> str:
    def replace(match: re.Match[str]) -> str:
        value = os.environ.get(match.group(1))
        if value is None:
            raise fields.error(name, f"uses ${{{match.group(1)}}} but that environment variable is not set")
        return value

    return _ENV.sub(replace, text)


def _trigger(fields: _Fields) -> str | None:
    text = fields.text("trigger", "0 seconds")
    assert text is not None
    if text.replace("_", "").lower() in ("availablenow", "available now"):
        return None
    match = _TRIGGER.fullmatch(text)
    if not match:
        raise fields.error("trigger", f'= {text!r}: use "availableNow" or an interval such as "5 seconds"')
    number, unit = float(match.group(1)), match.group(2).lower()
    scale = 1 if unit.startswith(("ms", "milli")) else 1000 if unit.startswith("s") else 60_000
    return f"{int(number * scale)} milliseconds"


def load_pipeline(path: str | os.PathLike[str]) -> PipelineConfig:
    """Parse and validate a pipeline file (options of the source and sink included), each part once."""
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such pipeline file") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{file}: not valid TOML: {e}") from None
    top = _Fields(file, "", data, _TOP)
    trigger = _trigger(top)
    for required in ("source", "sink"):
        if required not in data:
            raise top.error(required, f"is required (a [{required}] table with options)")
    spark = _Fields(file, "spark", data.get("spark", {}), _SECTIONS["spark"])
    transform = _Fields(file, "transform", data.get("transform", {}), _SECTIONS["transform"])
    metrics = _Fields(file, "metrics", data.get("metrics", {}), _SECTIONS["metrics"])
    name = top.text("name", file.stem) or file.stem
    source = _source(_Fields(file, "source", data["source"], _SECTIONS["source"]), name)
    sink = _sink(_Fields(file, "sink", data["sink"], _SECTIONS["sink"]))
    registry = _registry(top, data)
    uses_registry = [
        name
        for name, fmt in (
            ("source.decode", source["decode"]),
            ("source.key_decode", source["key_decode"]),
            ("sink.encode", sink["encode"]),
            ("sink.key_encode", sink["key_encode"]),
        )
        if fmt in FORMATS
    ]
    if uses_registry and registry is None:
        raise top.error("schema_registry", f"is required by {uses_registry[0]} (a table with url = ...)")
    checkpoint = top.text("checkpoint", required=True) or ""
    if not Path(checkpoint).is_absolute():
        checkpoint = str(file.parent / checkpoint)
    return PipelineConfig(
        path=file,
        name=name,
        checkpoint=checkpoint,
        trigger=trigger,
        output_mode=top.choice("output_mode", OUTPUT_MODES, "append"),
        master=spark.text("master"),
        spark_config=spark.options("config"),
        tables=_tables(top, data),
        sql=transform.text("sql"),
        metrics_port=metrics.port("port"),
        metrics_host=metrics.text("host", "127.0.0.1") or "127.0.0.1",
        registry=registry,
        **source,
        **sink,
    )


def _source(source: _Fields, name: str) -> dict[str, Any]:
    """The ``[source]`` table's fields of PipelineConfig (its options parsed by the source's parser)."""
    from sparkafka.source.options import parse_source_options

    decode = source.choice("decode", DECODES, "raw")
    schema = source.text("schema")
    if decode == "json" and not schema:
        raise source.error("source.schema", "is required with decode = json (a Spark DDL schema)")
    if schema and decode != "json":
        raise source.error("source.schema", f"applies to decode = json only (decode = {decode} needs none)")
    if schema:
        problem = unknown_type(schema)
        if problem is not None:
            raise source.error("source.schema", problem)
    on_malformed = source.choice("on_malformed", ON_MALFORMED, "flag")
    key_decode = source.choice("key_decode", KEY_DECODES, "string")
    if "key_decode" in source.data and decode not in FALLIBLE:
        raise source.error(
            "source.key_decode",
            f"applies with decode = {', '.join(FALLIBLE)} (with {decode} the key is as read)",
        )
    if on_malformed != "flag" and decode not in FALLIBLE:
        raise source.error(
            "source.on_malformed",
            f"applies to decode = {', '.join(FALLIBLE)} only (other decodings never fail)",
        )
    dead_letter_topic = source.text("dead_letter_topic")
    if (on_malformed == "dead_letter") != bool(dead_letter_topic):
        raise source.error(
            "source.dead_letter_topic", "is required with on_malformed = dead_letter, and only then"
        )
    watermark = watermark_expression = None
    if "watermark" in source.data:
        w = _Fields(source.path, "source.watermark", source.data["watermark"], _SECTIONS["source.watermark"])
        watermark = (w.text("column", required=True) or "", w.text("delay", required=True) or "")
        watermark_expression = w.text("expression")
    options = _alignment_options(source, source.options("options"), name)
    parsed = source.parsed("source.options", options, parse_source_options)
    return {
        "decode": decode,
        "schema": schema,
        "on_malformed": on_malformed,
        "dead_letter_topic": dead_letter_topic,
        "watermark": watermark,
        "watermark_expression": watermark_expression,
        "source_options": options,
        "source": parsed,
        "key_decode": key_decode,
        "value_schema": _schema_choice(source, "", decode, parsed),
        "key_schema": _schema_choice(source, "key_", key_decode, parsed),
    }


def _alignment_options(source: _Fields, options: dict[str, str], name: str) -> dict[str, str]:
    """``max_event_time_drift`` and ``partition_idle_timeout`` as the source's options of those names.

    With alignment and neither ``kafka.group.id`` nor ``metricsFile``, the source gets a metrics file of
    the pipeline's own, so that the runner can show what alignment holds back.
    """
    given = {k.lower() for k in options}
    for key, option in (
        ("max_event_time_drift", "maxEventTimeDrift"),
        ("partition_idle_timeout", "partitionIdleTimeout"),
    ):
        value = source.text(key)
        if value is None:
            continue
        if option.lower() in given:
            raise source.error(f"source.{key}", f"and source.options.{option} are one setting: give it once")
        options[option] = value
    aligned = "maxeventtimedrift" in {k.lower() for k in options}
    if aligned and not given & {"kafka.group.id", "metricsfile"}:
        options["metricsFile"] = str(default_metrics_path("source", f"pipeline-{name}"))
    return options


def _sink(sink: _Fields) -> dict[str, Any]:
    """The ``[sink]`` table's fields of PipelineConfig (its options parsed by the sink's parser)."""
    from sparkafka.sink.options import parse_sink_options

    options = sink.options("options")
    parsed = sink.parsed("sink.options", options, parse_sink_options)
    if parsed.topic is None:
        raise sink.error("sink.options.topic", "is required (the pipeline writes key and value columns only)")
    encode = sink.optional_choice("encode", FORMATS)
    key_encode = sink.optional_choice("key_encode", FORMATS)
    encoding = SinkEncoding(
        strategy=sink.choice("subject_name_strategy", STRATEGIES, "topic"),
        record_name=sink.text("record_name", "topLevelRecord") or "topLevelRecord",
        record_namespace=sink.text("record_namespace", "") or "",
        auto_register=sink.flag("auto_register", True),
        use_latest_version=sink.flag("use_latest_version", False),
    )
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", encoding.record_name):
        raise sink.error(
            "sink.record_name", f"= {encoding.record_name!r}: use a name of letters, digits and _"
        )
    if encoding.strategy != "topic" and "record_name" not in sink.data:
        raise sink.error("sink.record_name", f"is required with subject_name_strategy = {encoding.strategy}")
    if encoding.strategy != "topic" and key_encode:
        raise sink.error(
            "sink.key_encode",
            f"works with subject_name_strategy = topic only ({encoding.strategy} would register the key's "
            "and the value's schemas under one subject, record_name)",
        )
    return {
        "key": sink.text("key"),
        "value": sink.text("value", "struct(*)" if encode else "value") or "value",
        "sink_options": options,
        "sink": parsed,
        "encode": encode,
        "key_encode": key_encode,
        "encoding": encoding,
    }


def _registry(top: _Fields, data: Mapping[str, Any]) -> RegistryConfig | None:
    if "schema_registry" not in data:
        return None
    table = data["schema_registry"]
    if not isinstance(table, dict):
        raise top.error("schema_registry", "must be a table ([schema_registry] with url = ...)")
    expanded = {
        k: _expand(v, top, f"schema_registry.{k}") if isinstance(v, str) else v for k, v in table.items()
    }
    try:
        return parse_registry(expanded)
    except ConfigError as e:
        raise ConfigError(f"{top.path}: {e}") from None


def _tables(top: _Fields, data: Mapping[str, Any]) -> tuple[TableSpec, ...]:
    raw_tables = data.get("table", [])
    if not isinstance(raw_tables, list):
        raise top.error("table", "must be an array of tables ([[table]])")
    tables = []
    for i, raw in enumerate(raw_tables):
        t = _Fields(top.path, f"table[{i}]", raw, _SECTIONS["table"])
        fmt = t.text("format", "csv") or "csv"
        if fmt not in TABLE_FORMATS:
            raise t.error(f"table[{i}].format", f"= {fmt!r}: use csv, json or parquet")
        table_path = Path(t.text("path", required=True) or "")
        if not table_path.is_absolute():
            table_path = top.path.parent / table_path
        name = t.text("name", required=True) or ""
        if name == "source" or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise t.error(f"table[{i}].name", f"= {name!r}: use a SQL identifier other than source")
        tables.append(TableSpec(name, str(table_path), fmt))
    return tuple(tables)


def _schema_choice(source: _Fields, prefix: str, decode: str, parsed: SourceOptions) -> SchemaChoice | None:
    """The reader schema a registry-format key or value is decoded with.

    The subject defaults to ``<topic>-value`` / ``<topic>-key`` (TopicNameStrategy) when the source reads
    one named topic.
    """
    names = [f"{prefix}{k}" for k in _SCHEMA_CHOICE]
    if decode not in FORMATS:
        given = [n for n in names if n in source.data]
        if given:
            raise source.error(
                f"source.{given[0]}", f"applies to registry formats only ({', '.join(FORMATS)})"
            )
        return None
    subject = source.text(names[0])
    version, schema_id = source.number(names[1]), source.number(names[2])
    if schema_id is not None and (subject or version):
        raise source.error(f"source.{names[2]}", f"pins the schema: it excludes {names[0]} and {names[1]}")
    if subject is None and schema_id is None:
        topics = parsed.subscription.topics
        if len(topics) != 1:
            raise source.error(
                f"source.{names[0]}", "is required unless the source subscribes to exactly one topic"
            )
        subject = subject_name("topic", topics[0], "", "key" if prefix else "value")
    message = source.text(names[3])
    if message is not None and decode != "protobuf":
        raise source.error(f"source.{names[3]}", "applies to protobuf only")
    return SchemaChoice(subject, version, schema_id, message)
