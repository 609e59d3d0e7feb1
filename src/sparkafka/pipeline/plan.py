"""The query a pipeline file declares: the decoded source view, tables, SQL, the encoded output, the sink.

Runs in the driver, before the query starts (``build_query``, ``describe_plan`` for ``--dry-run``). Spark's
analysis errors, the registry's and our own are turned into one sentence naming the pipeline file and
field (``ConfigError``), so ``sparkafka run`` can exit 2 with it.

**Dead letters read the source once.** With ``on_malformed = "dead_letter"`` the sink gets two kinds of
rows: the SQL's output (from the decodable records) and the undecodable records themselves, for
``dead_letter_topic`` (the sink's per-row ``topic`` column), in the same Kafka transactions. Both come from
one ``readStream``, and Spark turns every occurrence of a stream in a plan into a scan of its own: the
plain union of the two (earlier versions) scanned each batch twice, so its progress counted every record
twice (measured on PySpark 4.3: 120 input rows for 60 JSON records, 82 for 41 Avro ones), it fetched the
topic twice per batch, and its offset log listed the source twice (which ``sparkafka offsets show``
refuses).

The SQL can be anything over the view ``source`` (filters, joins to tables, windowed aggregations with
state kept across batches), so the dead letters cannot ride along in one projection behind it; and
``foreachBatch`` would lose the SQL's streaming state (each batch aggregated alone) and the exactly-once
sink, whose two-phase commit is keyed by the streaming query's batch id (a batch write inside
``foreachBatch`` commits as a new job each time, so a replayed batch would be written twice). So the plan
stays one streaming query with one sink, and the decoded source becomes a common table expression that
both branches reference, made non-deterministic (``spark_partition_id()`` in its filter): Spark evaluates
such a CTE once (its optimizer rule ``InlineCTE`` keeps a non-deterministic CTE that is referenced twice,
``ReplaceCTERefWithRepartition`` plans it as one shuffle, and the second reference reuses that exchange).
The plan has one stream relation: one offset log entry, one scan, ``numInputRows`` = the records read. The
price is a round-robin shuffle of the decoded rows per batch (Spark sorts before a round-robin shuffle, so a
retried or replayed batch sends the same rows to the same tasks, as the exactly-once sink's partial-batch
recovery needs); measured with 100,000 JSON records on ``local[2]``, a batch took 1.8-2.0 s against
2.4-2.6 s for the two scans. ``read_once_sql`` writes the statement: the user's SQL and sink expressions
inside it, unchanged; what is not SQL (decoding, the ``sparkafka_malformed`` count) is below it, the
registry encoding above it.

A checkpoint written by the two-scan plan lists the source twice, and Spark refuses to resume a checkpoint
with another number of sources: such a pipeline keeps the two-scan plan, with a warning
(``two_scan_checkpoint``); a new checkpoint reads once.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from sparkafka.client.conf import mask_secrets
from sparkafka.errors import ConfigError
from sparkafka.ops.query_progress import MALFORMED_METRIC
from sparkafka.pipeline.config import FALLIBLE, PipelineConfig
from sparkafka.pipeline.session import describe_master
from sparkafka.registry.client import FORMATS, subject_name

__all__ = [
    "DEAD",
    "DEAD_LETTER_ERROR_CLASSES",
    "DECODED_VIEW",
    "HEADERS_TYPE",
    "RAW_KEY",
    "RAW_VALUE",
    "build_query",
    "dead_letter_headers",
    "dead_lettering",
    "describe_plan",
    "first_line",
    "interval_sql",
    "read_once_sql",
    "source_frame",
    "statement_text",
    "two_scan_checkpoint",
]

log = logging.getLogger(__name__)

KAFKA_COLUMNS = (
    "key AS _key",
    "topic AS _topic",
    "partition AS _partition",
    "offset AS _offset",
    "timestamp AS _timestamp",
)


def source_frame(spark: Any, cfg: PipelineConfig) -> Any:
    """The decoded source, as the view ``source`` shows it to the SQL.

    With ``includeHeaders`` among the source's options the record's headers are the column ``_headers``
    (beside ``_topic``, ``_partition``, ...); ``source.watermark.expression`` adds the event-time column
    it makes (before any filter, so the dead-letter statement's watermark sees it too).
    """
    frame = _decoded(spark, cfg)
    if cfg.watermark is not None and cfg.watermark_expression:
        with _field(cfg, "source.watermark.expression"):
            frame = frame.selectExpr("*", f"{cfg.watermark_expression} AS {_sql_name(cfg.watermark[0])}")
    return frame


def _decoded(spark: Any, cfg: PipelineConfig) -> Any:
    reader = spark.readStream.format("sparkafka")
    for key, value in cfg.source_options.items():
        reader = reader.option(key, value)
    if cfg.on_malformed == "dead_letter":  # a dead letter keeps the original record's headers
        reader = reader.option("includeHeaders", "true")
    raw = reader.load()
    headers = ["headers AS _headers"] if cfg.source.include_headers else []
    if cfg.decode == "raw":
        return raw
    if cfg.decode == "string":
        return raw.selectExpr(
            "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", *KAFKA_COLUMNS[1:], *headers
        )
    raw = _decode_key(raw, cfg)
    extra = ["headers AS _raw_headers"] if cfg.on_malformed == "dead_letter" else []
    extra += headers
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
        *(c.rpartition(" AS ")[2] for c in extra),
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


def dead_lettering(cfg: PipelineConfig) -> bool:
    """Whether ``cfg`` sends undecodable records to ``dead_letter_topic`` (only fallible decodings can)."""
    return cfg.on_malformed == "dead_letter" and (cfg.decode in FALLIBLE or cfg.key_decode in FORMATS)


def _malformed_count() -> Any:
    from pyspark.sql import functions as sf

    return sf.count(sf.when(sf.col("_malformed"), 1)).alias("n")


def _rows_for_sql(src: Any, cfg: PipelineConfig) -> Any:
    """The rows the SQL sees under ``source.on_malformed``; skip and fail count undecodable rows here
    (dead letters are counted where they are split off, once)."""
    if cfg.on_malformed == "flag" or (cfg.decode not in FALLIBLE and cfg.key_decode not in FORMATS):
        return src
    if cfg.on_malformed == "dead_letter":
        return src.where("NOT _malformed")
    counted = src.observe(MALFORMED_METRIC, _malformed_count())
    if cfg.on_malformed == "skip":
        return counted.where("NOT _malformed")
    # fail: the batch fails before anything is committed, naming the record (raise_error runs per row).
    return counted.where(
        "CASE WHEN _malformed THEN raise_error(concat('undecodable record at ', _topic, '-', "
        "_partition, ' offset ', _offset, ': ', _decode_error, ' (source.on_malformed = fail; use skip or "
        "dead_letter to go on)')) ELSE true END"
    )


DECODED_VIEW = "_sparkafka_decoded"
"""The temporary view of the decoded source (every record) that ``read_once_sql`` reads once."""
DEAD = "_sparkafka_dead"
"""The lane of a row in ``read_once_sql``'s output: true for a dead letter, false for the SQL's output."""
RAW_KEY, RAW_VALUE = "_sparkafka_raw_key", "_sparkafka_raw_value"
"""A dead letter's key and value in ``read_once_sql``'s output (the SQL's lane has them null)."""
_ONCE, _DECODABLE = "_sparkafka_records", "_sparkafka_decodable"
_INTERVAL_UNITS = ("year", "month", "week", "day", "hour", "minute", "second", "millisecond", "microsecond")
_INTERVAL_PART = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*([A-Za-z]+)")
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def interval_sql(delay: str) -> str | None:
    """A ``withWatermark`` delay (``"30 seconds"``, ``"1 minute 30 seconds"``) as a SQL interval literal.

    None when ``delay`` is not number-unit pairs (optionally after ``interval``), the form the SQL
    ``WATERMARK`` clause takes: ``interval_sql("1 minute 30 seconds")`` is
    ``"INTERVAL 1 MINUTES 30 SECONDS"``.
    """
    text = re.sub(r"(?i)^\s*interval\b", "", delay).strip()
    parts, at = [], 0
    while at < len(text):
        match = _INTERVAL_PART.match(text, at)
        if match is None:
            return None
        unit = match.group(2).lower().removesuffix("s")
        if unit not in _INTERVAL_UNITS:
            return None
        parts.append(f"{match.group(1)} {unit.upper()}S")
        at = match.end()
    return f"INTERVAL {' '.join(parts)}" if parts else None


def _sql_name(column: str) -> str:
    """``column`` as ``withWatermark`` reads it (dots reach into structs), written for SQL."""
    if _PLAIN_NAME.fullmatch(column):
        return column
    return "`" + column.replace("`", "``") + "`"


def read_once_sql(
    view: str,
    sql: str | None,
    *,
    key: str | None,
    value: str,
    dead_letter_topic: str,
    headers: str,
    watermark: tuple[str, str] | None = None,
) -> str:
    """The one statement behind a dead-letter pipeline: the SQL's output and the dead letters, one read.

    ``view`` holds every decoded record (``_malformed`` set for the undecodable ones). The CTE over it is
    non-deterministic, so Spark evaluates it once for both branches (see the module docstring); ``source``
    is its decodable rows, watermarked as ``withWatermark`` would (after the filter, so undecodable records
    never move the event-time statistics), and shadows the temporary view of that name for ``sql``, which
    goes in unchanged (up to its semicolon, ``statement_text``; each user fragment on lines of its own, so
    a trailing ``--`` comment cannot swallow what follows).

    Rows: ``_sparkafka_dead``; ``key`` (only with a ``key`` expression) and ``value`` as the sink
    expressions give them (null for dead letters); ``_sparkafka_raw_key`` / ``_sparkafka_raw_value``,
    ``topic``, ``timestamp`` and ``headers`` for dead letters (null for the SQL's rows: the sink's topic,
    the producer's time, no headers). ``watermark``: (column, delay) as ``source.watermark`` says.

    Raises:
        ValueError: ``watermark``'s delay is not number-unit pairs such as ``"30 seconds"``.
    """
    decodable = f"SELECT * FROM {_ONCE} WHERE NOT _malformed"
    ctes = [f"{_ONCE} AS (SELECT * FROM `{view}` WHERE spark_partition_id() >= 0)"]
    if watermark is None:
        ctes.append(f"source AS ({decodable})")
    else:
        column, delay = watermark
        interval = interval_sql(delay)
        if interval is None:
            raise ValueError(f"delay {delay!r}: use number-unit pairs such as '30 seconds'")
        ctes += [
            f"{_DECODABLE} AS ({decodable})",
            f"source AS (SELECT * FROM {_DECODABLE} WATERMARK {_sql_name(column)} DELAY OF {interval} "
            f"AS {_DECODABLE})",
        ]
    query = statement_text(sql) if sql else None
    transformed = f"(\n{query}\n) AS _sparkafka_transformed" if query else "source"
    keyed = key is not None
    output = [
        f"false AS {DEAD}",
        *([f"\n{key}\n AS key"] if keyed else []),
        f"\n{value}\n AS value",
        f"CAST(NULL AS BINARY) AS {RAW_KEY}",
        f"CAST(NULL AS BINARY) AS {RAW_VALUE}",
        "CAST(NULL AS STRING) AS topic",
        "CAST(NULL AS TIMESTAMP) AS timestamp",
        f"CAST(NULL AS {HEADERS_TYPE}) AS headers",
    ]
    dead = [
        f"true AS {DEAD}",
        *(["NULL AS key"] if keyed else []),
        "NULL AS value",
        f"_raw_key AS {RAW_KEY}",
        f"_raw_value AS {RAW_VALUE}",
        f"'{_quote(dead_letter_topic)}' AS topic",
        "_timestamp AS timestamp",
        f"{headers} AS headers",
    ]
    with_clause = ",\n".join(ctes)
    return (
        f"WITH {with_clause}\n"
        f"SELECT {', '.join(output)}\nFROM {transformed}\n"
        "UNION ALL\n"
        f"SELECT {', '.join(dead)}\nFROM {_ONCE} WHERE _malformed"
    )


def statement_text(sql: str) -> str:
    """``sql`` up to its first semicolon outside quotes and comments (what follows one statement can only be
    more semicolons, space and comments), so it can go inside parentheses.

    Quotes as Spark's SQL lexer reads them: single- and double-quoted strings with backslash escapes,
    backquoted identifiers, ``--`` line comments and ``/* */`` block comments, which nest. Example:
    ``statement_text("SELECT ';' AS s; -- done")`` is ``"SELECT ';' AS s"``.
    """
    at, depth = 0, 0  # depth: how many block comments are open at ``at``
    while at < len(sql):
        two = sql[at : at + 2]
        if depth:
            depth += (two == "/*") - (two == "*/")
            at += 2 if two in ("/*", "*/") else 1
        elif two == "/*":
            depth, at = 1, at + 2
        elif two == "--":
            newline = sql.find("\n", at)
            at = len(sql) if newline < 0 else newline
        elif sql[at] in "'\"`":
            at = _after_quoted(sql, at)
        elif sql[at] == ";":
            return sql[:at].rstrip()
        else:
            at += 1
    return sql.rstrip()


def _after_quoted(sql: str, start: int) -> int:
    """The index after the string or identifier opening at ``start`` (the text's end if it never closes)."""
    quote, at = sql[start], start + 1
    while at < len(sql):
        if sql[at] == "\\" and quote != "`":
            at += 2
        elif sql[at] == quote:
            if sql[at + 1 : at + 2] != quote:  # a doubled quote stands for itself
                return at + 1
            at += 2
        else:
            at += 1
    return at


def two_scan_checkpoint(checkpoint: str) -> bool:
    """Whether ``checkpoint``'s newest offset log entry lists one source twice, as the dead-letter plan of
    earlier sparkafka versions wrote it (a local checkpoint; False for any other, or none yet).

    Spark resumes a checkpoint only with the number of sources its offset log lists.
    """
    path = checkpoint.removeprefix("file://").removeprefix("file:")
    if "://" in path:
        return False
    offsets = Path(path) / "offsets"
    try:
        batches = [int(p.name) for p in offsets.iterdir() if p.name.isdigit()]
        if not batches:
            return False
        lines = (offsets / str(max(batches))).read_text().splitlines()
    except OSError:
        return False
    sources = [line for line in lines[2:] if line.strip()]  # "v1", the batch's metadata, then one per source
    return len(sources) == 2 and sources[0] == sources[1]


@contextlib.contextmanager
def _field(cfg: PipelineConfig, field: str) -> Iterator[None]:
    """Spark's analysis and parse errors, as one sentence naming the pipeline file and field."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - AnalysisException, ParseException and the like, from the JVM
        raise ConfigError(f"{cfg.path}: {field}: {first_line(str(e))}") from None


def first_line(text: str) -> str:
    """The sentence that matters in a Spark error: sparkafka's own error if one is inside, else line one."""
    from sparkafka.spark_errors import last_sentence

    ours = last_sentence(text)
    if ours is not None:
        return ours[1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else text


def _quote(text: str | None) -> str:
    """``text`` inside a single-quoted Spark SQL literal (which reads backslash escapes)."""
    return (text or "").replace("\\", "\\\\").replace("'", "\\'")


def _output(spark: Any, cfg: PipelineConfig, dry_run: bool = False, source: Any = None) -> Any:
    """The frame the sink writes; ``source``: the ``source_frame`` already built for ``cfg``, if any."""
    decoded = source if source is not None else source_frame(spark, cfg)
    src = _rows_for_sql(decoded, cfg)
    if cfg.watermark:
        with _field(cfg, "source.watermark"):
            src = src.withWatermark(*cfg.watermark)
    # The SQL and sink expressions are analysed here on their own, so errors name their field; a dead-letter
    # pipeline then writes them into the statement that reads the source once.
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
    if not dead_lettering(cfg):
        return _encode(out, cfg, dry_run)
    if two_scan_checkpoint(cfg.checkpoint):
        log.warning(
            "%s: checkpoint %s lists its source twice: it was written by the dead-letter plan of earlier "
            "sparkafka versions, which reads each record twice, and Spark cannot change the sources of a "
            "checkpoint, so this query keeps that plan. To read once, run the pipeline on a new checkpoint "
            "(docs/pipelines.md: records that do not decode)",
            cfg.path,
            cfg.checkpoint,
        )
        return _two_scan_output(decoded, _encode(out, cfg, dry_run), cfg)
    return _read_once_output(spark, cfg, decoded, dry_run)


def _read_once_output(spark: Any, cfg: PipelineConfig, decoded: Any, dry_run: bool) -> Any:
    """The SQL's output and the dead letters from one read of the source (``read_once_sql``)."""
    if spark.conf.get("spark.sql.exchange.reuse", "true").strip().lower() == "false":
        raise ConfigError(
            f"{cfg.path}: spark.config: spark.sql.exchange.reuse = false would make on_malformed = "
            "dead_letter read the source twice (its two outputs share one read through a reused "
            "exchange); remove the setting"
        )
    assert cfg.dead_letter_topic is not None  # load_pipeline requires it with dead_letter
    # Counted below the split, once per record (every record passes here, once).
    decoded.observe(MALFORMED_METRIC, _malformed_count()).createOrReplaceTempView(DECODED_VIEW)
    with _field(cfg, "source.watermark"):
        statement = read_once_sql(
            DECODED_VIEW,
            cfg.sql,
            key=cfg.key,
            value=cfg.value,
            dead_letter_topic=cfg.dead_letter_topic,
            headers=dead_letter_headers(cfg),
            watermark=cfg.watermark,
        )
    with _field(cfg, "transform.sql"):
        lanes = spark.sql(statement)
    lanes = _encode(lanes, cfg, dry_run)  # a dead letter's null key and value encode to null
    key = f"CASE WHEN {DEAD} THEN {RAW_KEY} ELSE CAST(key AS BINARY) END" if cfg.key else RAW_KEY
    return lanes.selectExpr(
        f"{key} AS key",
        f"CASE WHEN {DEAD} THEN {RAW_VALUE} ELSE CAST(value AS BINARY) END AS value",
        "topic",
        "timestamp",
        "headers",
    )


def _two_scan_output(decoded: Any, out: Any, cfg: PipelineConfig) -> Any:
    """The dead-letter plan of checkpoints written before ``read_once_sql``: the union of two branches of
    the source, which Spark scans twice per batch (kept only because such a checkpoint lists two sources)."""
    bad = decoded.where("_malformed").observe(MALFORMED_METRIC, _malformed_count())
    dead = bad.selectExpr(
        "_raw_key AS key",
        "_raw_value AS value",
        f"'{_quote(cfg.dead_letter_topic)}' AS topic",
        "_timestamp AS timestamp",
        f"{dead_letter_headers(cfg)} AS headers",
    )
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
    out = _output(spark, cfg)
    options = dict(cfg.sink_options)
    if "topic" in out.columns and cfg.sink.topic is not None:
        # The sink's topic option overrides a topic column (Spark's meaning): rows routed elsewhere (dead
        # letters) need the column alone, holding the sink's topic where the row names none.
        from pyspark.sql import functions as F  # noqa: N812 - PySpark's own idiom

        out = out.withColumn("topic", F.coalesce(F.col("topic"), F.lit(cfg.sink.topic)))
        options = {k: v for k, v in options.items() if k.lower() != "topic"}
    writer = out.writeStream.format("sparkafka").outputMode(cfg.output_mode).queryName(cfg.query_name)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer = writer.option("checkpointLocation", cfg.checkpoint)
    writer = writer.trigger(processingTime=cfg.trigger) if cfg.trigger else writer.trigger(availableNow=True)
    try:
        return writer.start()
    except ConfigError as e:  # update mode's checks of the sink's columns, before the query starts
        raise ConfigError(f"{cfg.path}: {e}") from None
    except Exception as e:  # noqa: BLE001 - AnalysisException of the whole query, from the JVM
        # A sentence now, while Spark can render its exception: once Spark has stopped, str() of a
        # PySpark exception fails (`sparkafka run` printed "AnalysisException: <exception str() failed>").
        text = first_line(str(e))
        if "output mode" not in text.lower():
            raise ConfigError(f"{cfg.path}: {text}") from None
        raise ConfigError(
            f"{cfg.path}: output_mode: {text} (output_mode = {cfg.output_mode!r}; allowed: append, update, "
            "complete)"
        ) from None


def describe_plan(spark: Any, cfg: PipelineConfig) -> str:
    """The resolved options (secrets masked) and the output schema, for ``--dry-run``."""
    source = source_frame(spark, cfg)  # once: with decode, it looks up the reader schema in the registry
    lines = [
        f"pipeline {cfg.name} ({cfg.path})",
        f"checkpoint: {cfg.checkpoint}",
        f"trigger: {cfg.trigger or 'availableNow'}, output mode: {cfg.output_mode}",
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
