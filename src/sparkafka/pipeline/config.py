"""The pipeline file, parsed and validated before Spark starts; every error names the file and the field.

    name = "orders"                      # optional, used in logs
    checkpoint = "/data/ck/orders"       # required
    trigger = "5 seconds"                # or "availableNow" (default "0 seconds": as fast as possible)

    [spark]                              # optional
    master = "local[2]"
    config = { "spark.sql.shuffle.partitions" = "4" }

    [source]
    decode = "json"                      # raw | string | json
    schema = "order_id STRING, amount DOUBLE"   # Spark DDL, required for json
    watermark = { column = "event_time", delay = "30 seconds" }   # optional, for windowed aggregations
    on_malformed = "flag"                # json values that do not parse: flag (the column _malformed for
                                         # the SQL) | skip | fail (the batch fails, naming the record) |
                                         # dead_letter (raw record to dead_letter_topic, same transaction)
    dead_letter_topic = "orders-dlq"     # required with on_malformed = "dead_letter"
    options = { "kafka.bootstrap.servers" = "${BOOTSTRAP}", subscribe = "orders" }

    [[table]]                            # optional static tables for joins
    name = "rates"
    path = "rates.csv"                   # relative to the pipeline file
    format = "csv"                       # csv (with header) | json | parquet

    [transform]                          # optional; without it the sink gets the decoded source
    sql = "SELECT ... FROM source"

    [sink]
    key = "customer"                     # optional SQL expression
    value = "to_json(struct(*))"         # SQL expression (default: the column value)
    options = { "kafka.bootstrap.servers" = "${BOOTSTRAP}", topic = "out", deliveryGuarantee = "exactly_once",
                transactionalIdPrefix = "orders" }

    [metrics]                            # optional: Prometheus metrics at http://host:port/metrics
    port = 9464                          # (sparkafka run --metrics-port overrides it)
    host = "127.0.0.1"                   # default; "0.0.0.0" serves every interface

``${NAME}`` in any string is replaced by the environment variable NAME (an error if it is unset).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sparkafka.errors import ConfigError

__all__ = ["PipelineConfig", "TableSpec", "load_pipeline"]

Decode = Literal["raw", "string", "json"]
OnMalformed = Literal["flag", "skip", "fail", "dead_letter"]

_TOP = {"name", "checkpoint", "trigger", "spark", "source", "table", "transform", "sink", "metrics"}
_SECTIONS = {
    "spark": {"master", "config"},
    "source": {"decode", "schema", "options", "watermark", "on_malformed", "dead_letter_topic"},
    "table": {"name", "path", "format"},
    "transform": {"sql"},
    "sink": {"key", "value", "options"},
    "metrics": {"port", "host"},
}
_TRIGGER = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|seconds?|m|minutes?)\s*", re.IGNORECASE)
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class TableSpec:
    name: str
    path: str
    format: str


@dataclass(frozen=True)
class PipelineConfig:
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
    watermark: tuple[str, str] | None = None
    """(event-time column, delay) for ``withWatermark`` on the source view."""
    on_malformed: OnMalformed = "flag"
    dead_letter_topic: str | None = None
    tables: tuple[TableSpec, ...] = ()
    sql: str | None = None
    key: str | None = None
    value: str = "value"
    sink_options: Mapping[str, str] = field(default_factory=dict)
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"

    @property
    def group_id(self) -> str | None:
        return {k.lower(): v for k, v in self.source_options.items()}.get("kafka.group.id")

    def timeout_warning(self, margin_ms: int = 60_000) -> str | None:
        """Flink's start-up check: exactly-once transactions must outlive a trigger interval plus recovery."""
        from sparkafka.sink.options import parse_sink_options

        sink = parse_sink_options(self.sink_options)
        if sink.delivery != "exactly_once" or self.trigger is None:
            return None
        interval_ms = int(self.trigger.split()[0])
        if interval_ms + margin_ms <= sink.transaction_timeout_ms:
            return None
        return (
            f"kafka.transaction.timeout.ms={sink.transaction_timeout_ms} is shorter than the trigger "
            f"interval ({interval_ms} ms) plus {margin_ms} ms for recovery: the broker may abort "
            "transactions that were about to be committed after a crash"
        )

    @property
    def transactional_id_prefix(self) -> str | None:
        return {k.lower(): v for k, v in self.sink_options.items()}.get("transactionalidprefix")


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
    """Parse and validate a pipeline file (options of the source and sink included)."""
    from sparkafka.sink.options import parse_sink_options
    from sparkafka.source.options import parse_source_options

    file = Path(path)
    try:
        data = tomllib.loads(file.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such pipeline file") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{file}: not valid TOML: {e}") from None
    top = _Fields(file, "", data, _TOP)
    trigger = _trigger(top)
    spark = _Fields(file, "spark", data.get("spark", {}), _SECTIONS["spark"])
    source = _Fields(file, "source", data.get("source", {}), _SECTIONS["source"])
    transform = _Fields(file, "transform", data.get("transform", {}), _SECTIONS["transform"])
    sink = _Fields(file, "sink", data.get("sink", {}), _SECTIONS["sink"])
    metrics = _Fields(file, "metrics", data.get("metrics", {}), _SECTIONS["metrics"])
    if "source" not in data:
        raise top.error("source", "is required (a [source] table with options)")
    if "sink" not in data:
        raise top.error("sink", "is required (a [sink] table with options)")

    decode = source.text("decode", "raw") or "raw"
    if decode not in ("raw", "string", "json"):
        raise source.error("source.decode", f"= {decode!r}: use raw, string or json")
    schema = source.text("schema")
    if decode == "json" and not schema:
        raise source.error("source.schema", "is required with decode = json (a Spark DDL schema)")

    on_malformed = source.text("on_malformed", "flag") or "flag"
    if on_malformed not in ("flag", "skip", "fail", "dead_letter"):
        raise source.error("source.on_malformed", f"= {on_malformed!r}: use flag, skip, fail or dead_letter")
    if on_malformed != "flag" and decode != "json":
        raise source.error(
            "source.on_malformed", "applies to decode = json only (other decodings never fail)"
        )
    dead_letter_topic = source.text("dead_letter_topic")
    if (on_malformed == "dead_letter") != bool(dead_letter_topic):
        raise source.error(
            "source.dead_letter_topic", "is required with on_malformed = dead_letter, and only then"
        )

    watermark = None
    if "watermark" in source.data:
        w = _Fields(file, "source.watermark", source.data["watermark"], {"column", "delay"})
        watermark = (w.text("column", required=True) or "", w.text("delay", required=True) or "")

    tables = []
    raw_tables = data.get("table", [])
    if not isinstance(raw_tables, list):
        raise top.error("table", "must be an array of tables ([[table]])")
    for i, raw in enumerate(raw_tables):
        t = _Fields(file, f"table[{i}]", raw, _SECTIONS["table"])
        fmt = t.text("format", "csv") or "csv"
        if fmt not in ("csv", "json", "parquet"):
            raise t.error(f"table[{i}].format", f"= {fmt!r}: use csv, json or parquet")
        table_path = Path(t.text("path", required=True) or "")
        if not table_path.is_absolute():
            table_path = file.parent / table_path
        name = t.text("name", required=True) or ""
        if name == "source" or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise t.error(f"table[{i}].name", f"= {name!r}: use a SQL identifier other than source")
        tables.append(TableSpec(name, str(table_path), fmt))

    source_options = source.options("options")
    sink_options = sink.options("options")
    for section, options, parse in (
        ("source.options", source_options, parse_source_options),
        ("sink.options", sink_options, parse_sink_options),
    ):
        try:
            parse(options)
        except ConfigError as e:
            raise ConfigError(f"{file}: {section}: {e}") from None

    if not any(k.lower() == "topic" for k in sink_options):
        raise sink.error("sink.options.topic", "is required (the pipeline writes key and value columns only)")
    checkpoint = top.text("checkpoint", required=True) or ""
    if not Path(checkpoint).is_absolute():
        checkpoint = str(file.parent / checkpoint)
    return PipelineConfig(
        path=file,
        name=top.text("name", file.stem) or file.stem,
        checkpoint=checkpoint,
        trigger=trigger,
        master=spark.text("master"),
        spark_config=spark.options("config"),
        decode=decode,  # type: ignore[arg-type]
        schema=schema,
        watermark=watermark,
        on_malformed=on_malformed,  # type: ignore[arg-type]
        dead_letter_topic=dead_letter_topic,
        source_options=source_options,
        tables=tuple(tables),
        sql=transform.text("sql"),
        key=sink.text("key"),
        value=sink.text("value", "value") or "value",
        sink_options=sink_options,
        metrics_port=metrics.port("port"),
        metrics_host=metrics.text("host", "127.0.0.1") or "127.0.0.1",
    )
