"""The query a pipeline file declares: the decoded source view, tables, SQL, the encoded output, the sink.

Runs in the driver, before the query starts (``build_query``, ``describe_plan`` for ``--dry-run``). Spark's
analysis errors, the registry's and our own are turned into one sentence naming the pipeline file and
field (``ConfigError``), so ``sparkafka run`` can exit 2 with it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

from sparkafka.clientconf import mask_secrets
from sparkafka.errors import ConfigError
from sparkafka.pipeline.config import FALLIBLE, PipelineConfig
from sparkafka.pipeline.progress import MALFORMED_METRIC
from sparkafka.pipeline.session import describe_master
from sparkafka.registry.client import FORMATS, subject_name

__all__ = [
    "DEAD_LETTER_ERROR_CLASSES",
    "HEADERS_TYPE",
    "build_query",
    "dead_letter_headers",
    "describe_plan",
    "first_line",
    "source_frame",
]

KAFKA_COLUMNS = (
    "key AS _key",
    "topic AS _topic",
    "partition AS _partition",
    "offset AS _offset",
    "timestamp AS _timestamp",
)


def source_frame(spark: Any, cfg: PipelineConfig) -> Any:
    """The decoded source, as the view ``source`` shows it to the SQL."""
    reader = spark.readStream.format("sparkafka")
    for key, value in cfg.source_options.items():
        reader = reader.option(key, value)
    if cfg.on_malformed == "dead_letter":  # a dead letter keeps the original record's headers
        reader = reader.option("includeHeaders", "true")
    raw = reader.load()
    if cfg.decode == "raw":
        return raw
    if cfg.decode == "string":
        return raw.selectExpr(
            "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", *KAFKA_COLUMNS[1:]
        )
    raw = _decode_key(raw, cfg)
    extra = ["headers AS _raw_headers"] if cfg.on_malformed == "dead_letter" else []
    if cfg.decode in FORMATS:
        return _registry_frame(raw, cfg, extra)
    schema = f"{cfg.schema}, _corrupt STRING"
    with _field(cfg, "source.schema"):
        parsed = raw.selectExpr(
            f"from_json(CAST(value AS STRING), '{_quote(schema)}', "
            "map('columnNameOfCorruptRecord', '_corrupt', 'mode', 'PERMISSIVE')) AS _data",
            "_key",
            "_key_error",
            "key AS _raw_key",
            "value AS _raw_value",
            *KAFKA_COLUMNS[1:],
            *extra,
        )
    return parsed.selectExpr(
        "_data.*",
        "_data._corrupt IS NOT NULL OR _key_error IS NOT NULL AS _malformed",
        "coalesce(_key_error, CASE WHEN _data._corrupt IS NOT NULL THEN "
        f"'{_quote(_json_reason(cfg))}' END) AS _decode_error",
        "_key",
        "_topic",
        "_partition",
        "_offset",
        "_timestamp",
        "_raw_key",
        "_raw_value",
        *(["_raw_headers"] if extra else []),
    ).drop("_corrupt")


def _json_reason(cfg: PipelineConfig) -> str:
    return f"the value is not JSON of source.schema ({cfg.schema})"


def _decode_key(raw: Any, cfg: PipelineConfig) -> Any:
    """``raw`` with ``_key`` (the key as ``source.key_decode`` says) and ``_key_error`` (why not, or null)."""
    from pyspark.sql import functions as sf

    if cfg.key_decode not in FORMATS:
        key = sf.col("key") if cfg.key_decode == "raw" else sf.col("key").cast("string")
        return raw.withColumn("_key", key).withColumn("_key_error", sf.lit(None).cast("string"))
    from sparkafka.registry.spark import decode_column

    decoded = decode_column(sf.col("key"), _decode_spec(cfg, "key"), "column")
    return (
        raw.withColumn("_kdec", decoded)
        .withColumn("_key", sf.col("_kdec.value"))
        .withColumn("_key_error", sf.col("_kdec.error"))
        .drop("_kdec")
    )


def _decode_spec(cfg: PipelineConfig, what: str) -> Any:
    """The reader schema of the key or value, from the registry now (driver, plan time)."""
    from sparkafka.registry.spark import decode_spec

    fmt = cfg.key_decode if what == "key" else cfg.decode
    choice = cfg.key_schema if what == "key" else cfg.value_schema
    assert cfg.registry is not None  # load_pipeline requires it
    assert choice is not None
    field = f"source.{'key_' if what == 'key' else ''}subject"
    with _field(cfg, field):
        return decode_spec(
            cfg.registry,
            fmt,
            choice.subject,
            choice.version,
            choice.schema_id,
            what=what,
            message=choice.message,
        )


def _registry_frame(raw: Any, cfg: PipelineConfig, extra: list[str]) -> Any:
    """The source view of a registry-format value: the reader schema's fields as columns.

    A value of a primitive schema becomes the column ``value``; ``_malformed`` and ``_decode_error`` are
    there for on_malformed.
    """
    from pyspark.sql import functions as sf

    from sparkafka.registry.spark import decode_column

    spec = _decode_spec(cfg, "value")
    framed = raw.withColumn("_dec", decode_column(sf.col("value"), spec, "column"))
    is_struct = framed.schema["_dec"].dataType["value"].dataType.typeName() == "struct"
    return framed.selectExpr(
        "_dec.value.*" if is_struct else "_dec.value AS value",
        "_dec.error IS NOT NULL OR _key_error IS NOT NULL AS _malformed",
        "coalesce(_key_error, _dec.error) AS _decode_error",
        "_key",
        *KAFKA_COLUMNS[1:],
        "key AS _raw_key",
        "value AS _raw_value",
        *extra,
    )


HEADERS_TYPE = "array<struct<key: string, value: binary>>"
DEAD_LETTER_ERROR_CLASSES = {
    "json": "UndecodableJson",
    "avro": "UndecodableAvro",
    "protobuf": "UndecodableProtobuf",
    "json_schema": "UndecodableJsonSchema",
}


def dead_letter_headers(cfg: PipelineConfig) -> str:
    """The SQL for a dead letter's headers: the original record's, then where it came from and why.

    Names follow Kafka Connect's ``__connect.errors.*`` context headers, under ``sparkafka.error.``; values
    are UTF-8 text (partition and offset in decimal), so any consumer can read them.
    """
    context = {
        "sparkafka.error.topic": "_topic",
        "sparkafka.error.partition": "CAST(_partition AS STRING)",
        "sparkafka.error.offset": "CAST(_offset AS STRING)",
        "sparkafka.error.class": f"'{DEAD_LETTER_ERROR_CLASSES.get(cfg.decode, 'UndecodableKey')}'",
        "sparkafka.error.message": "_decode_error",
        "sparkafka.error.pipeline": f"'{_quote(cfg.name)}'",
    }
    added = ", ".join(
        f"named_struct('key', '{name}', 'value', CAST({expr} AS BINARY))" for name, expr in context.items()
    )
    return f"concat(coalesce(_raw_headers, CAST(array() AS {HEADERS_TYPE})), array({added}))"


def _split_malformed(src: Any, cfg: PipelineConfig) -> tuple[Any, Any | None]:
    """(rows for the SQL, dead-letter rows or None) under ``source.on_malformed``; counts undecodable rows."""
    from pyspark.sql import functions as sf

    if cfg.on_malformed == "flag" or (cfg.decode not in FALLIBLE and cfg.key_decode not in FORMATS):
        return src, None
    count = sf.count(sf.when(sf.col("_malformed"), 1)).alias("n")
    if cfg.on_malformed == "dead_letter":
        bad = src.where("_malformed").observe(MALFORMED_METRIC, count)
        dead = bad.selectExpr(
            "_raw_key AS key",
            "_raw_value AS value",
            f"'{_quote(cfg.dead_letter_topic)}' AS topic",
            "_timestamp AS timestamp",
            f"{dead_letter_headers(cfg)} AS headers",
        )
        return src.where("NOT _malformed"), dead
    counted = src.observe(MALFORMED_METRIC, count)
    if cfg.on_malformed == "skip":
        return counted.where("NOT _malformed"), None
    # fail: the batch fails before anything is committed, naming the record (raise_error runs per row).
    return counted.where(
        "CASE WHEN _malformed THEN raise_error(concat('undecodable record at ', _topic, '-', "
        "_partition, ' offset ', _offset, ': ', _decode_error, ' (source.on_malformed = fail; use skip or "
        "dead_letter to go on)')) ELSE true END"
    ), None


@contextlib.contextmanager
def _field(cfg: PipelineConfig, field: str) -> Iterator[None]:
    """Spark's analysis and parse errors, as one sentence naming the pipeline file and field."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - AnalysisException, ParseException and the like, from the JVM
        raise ConfigError(f"{cfg.path}: {field}: {first_line(str(e))}") from None


def first_line(text: str) -> str:
    """The sentence that matters in a Spark error: sparkafka's own error if one is inside, else line one."""
    ours = re.findall(r"sparkafka\.errors\.\w+: (.+)", text)
    if ours:
        return str(ours[-1]).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else text


def _quote(text: str | None) -> str:
    """``text`` inside a single-quoted Spark SQL literal (which reads backslash escapes)."""
    return (text or "").replace("\\", "\\\\").replace("'", "\\'")


def _output(spark: Any, cfg: PipelineConfig, dry_run: bool = False, source: Any = None) -> Any:
    """The frame the sink writes; ``source``: the ``source_frame`` already built for ``cfg``, if any."""
    src, dead = _split_malformed(source if source is not None else source_frame(spark, cfg), cfg)
    if cfg.watermark:
        src = src.withWatermark(*cfg.watermark)
    src.createOrReplaceTempView("source")
    for i, table in enumerate(cfg.tables):
        reader = spark.read.format(table.format)
        if table.format == "csv":
            reader = reader.option("header", "true").option("inferSchema", "true")
        with _field(cfg, f"table[{i}]"):
            reader.load(table.path).createOrReplaceTempView(table.name)
    with _field(cfg, "transform.sql"):
        df = spark.sql(cfg.sql) if cfg.sql else src
    with _field(cfg, "sink.value"):
        out = df.selectExpr(f"{cfg.value} AS value")
    if cfg.key:
        with _field(cfg, "sink.key"):
            out = df.selectExpr(f"{cfg.key} AS key", f"{cfg.value} AS value")
    out = _encode(out, cfg, dry_run)
    if dead is None:
        return out
    # Dead letters go through the same sink, so into the same Kafka transactions as the batch's output.
    key = "CAST(key AS BINARY) AS key" if cfg.key else "CAST(NULL AS BINARY) AS key"
    good = out.selectExpr(
        key,
        "CAST(value AS BINARY) AS value",
        "CAST(NULL AS STRING) AS topic",
        "CAST(NULL AS TIMESTAMP) AS timestamp",  # the producer's time, as without dead letters
        f"CAST(NULL AS {HEADERS_TYPE}) AS headers",
    )
    return good.unionByName(dead)


def _encode(out: Any, cfg: PipelineConfig, dry_run: bool = False) -> Any:
    """``out`` with its value (and key) encoded as ``sink.encode`` (``key_encode``) says.

    The schema is derived from the SQL's type and registered, or looked up, now (driver, when the query
    is planned). ``dry_run`` (``--dry-run``) registers nothing.
    """
    from sparkafka.registry.spark import encode_column, encode_spec

    for column, fmt in (("value", cfg.encode), ("key", cfg.key_encode)):
        if fmt is None:
            continue
        field = "sink.encode" if column == "value" else "sink.key_encode"
        if column not in out.columns:
            raise ConfigError(f"{cfg.path}: {field}: there is no {column} to encode (set sink.{column})")
        assert cfg.registry is not None  # load_pipeline requires it
        enc = cfg.encoding
        subject = subject_name(enc.strategy, cfg.sink.topic, enc.full_name, column)
        with _field(cfg, field):
            spec = encode_spec(
                cfg.registry,
                fmt,
                subject,
                out.schema[column].dataType,
                auto_register=enc.auto_register,
                use_latest_version=enc.use_latest_version,
                record_name=enc.record_name,
                namespace=enc.record_namespace,
                what=column,
                dry_run=dry_run,
            )
        out = out.withColumn(column, encode_column(column, spec))
    return out


def build_query(spark: Any, cfg: PipelineConfig) -> Any:
    """Start the streaming query the pipeline file declares."""
    writer = _output(spark, cfg).writeStream.format("sparkafka").queryName(cfg.query_name)
    for key, value in cfg.sink_options.items():
        writer = writer.option(key, value)
    writer = writer.option("checkpointLocation", cfg.checkpoint)
    writer = writer.trigger(processingTime=cfg.trigger) if cfg.trigger else writer.trigger(availableNow=True)
    return writer.start()


def describe_plan(spark: Any, cfg: PipelineConfig) -> str:
    """The resolved options (secrets masked) and the output schema, for ``--dry-run``."""
    source = source_frame(spark, cfg)  # once: with decode, it looks up the reader schema in the registry
    lines = [
        f"pipeline {cfg.name} ({cfg.path})",
        f"checkpoint: {cfg.checkpoint}",
        f"trigger: {cfg.trigger or 'availableNow'}",
        f"spark: master {describe_master(spark)}, config in effect {_effective(spark, cfg.spark_config)}",
        f"source ({cfg.decode}): {mask_secrets(cfg.source_options)}",
        f"view source: {source.schema.simpleString()}",
    ]
    lines += [f"table {t.name}: {t.format} {t.path}" for t in cfg.tables]
    lines.append(f"output: {_output(spark, cfg, dry_run=True, source=source).schema.simpleString()}")
    lines.append(f"sink: {mask_secrets(cfg.sink_options)}")
    return "\n".join(lines)


def _effective(spark: Any, wanted: Mapping[str, str]) -> dict[str, str | None]:
    """What the running Spark has for each ``[spark.config]`` key (it must be what the file says)."""
    conf = spark.sparkContext.getConf()
    return {key: conf.get(key) for key in wanted}
