"""The sink's options and input schema: declared once (``SINK_OPTIONS``, the docs' reference is made from
it), validated once."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from sparkafka.client.conf import (
    check_kafka_python_config,
    check_librdkafka_settings,
    idempotence_conflicts,
)
from sparkafka.errors import ConfigError
from sparkafka.options import DEFAULT_METADATA_TIMEOUT_MS, Option, OptionReader, names
from sparkafka.sink.delivery import check_in_flight
from sparkafka.sink.identity import check_transaction_protocol

__all__ = [
    "SINK_KAFKA_SETTINGS",
    "SINK_OPTIONS",
    "SPARK_WRITE_OPTIONS",
    "DeliveryGuarantee",
    "InputColumns",
    "Partitioner",
    "SinkOptions",
    "input_columns",
    "parse_sink_options",
]

log = logging.getLogger(__name__)

DeliveryGuarantee = Literal["at_least_once", "exactly_once", "none"]
Partitioner = Literal["default", "fixed", "roundrobin"]
DELIVERIES: tuple[DeliveryGuarantee, ...] = get_args(DeliveryGuarantee)
PARTITIONERS: tuple[Partitioner, ...] = get_args(Partitioner)
_DELIVERY_HINTS: Mapping[str, DeliveryGuarantee] = {"at_most_once": "none"}
"""Names of a guarantee that are not close to its value's spelling, for the refusal's "did you mean"."""

SINK_OPTIONS: tuple[Option, ...] = (
    Option(
        "topic",
        "The topic to write to. It overrides a `topic` column; without it every row needs a `topic` "
        "column that is not null.",
        spark="",
    ),
    Option(
        "deliveryGuarantee",
        "`at_least_once`: every task flushes before it reports success (a retried task may write twice); "
        "`exactly_once`: two-phase commit over Kafka transactions; `none`: no flush, fire and forget. "
        "Flink's spellings are the same values: `exactly-once`, `at-least-once` (its "
        "`sink.delivery-guarantee`) and `EXACTLY_ONCE`, `AT_LEAST_ONCE`, `NONE` (its `DeliveryGuarantee`); "
        'any other value is refused, with a "did you mean" when one is close.',
        default="at_least_once",
        allowed=DELIVERIES,
    ),
    Option(
        "transactionalIdPrefix",
        "Required with `exactly_once`: letters, digits, `.`, `_`, `-`, stable across restarts and unique "
        "to this sink. The transactional ids are `<prefix>-<task>`; one query owns a prefix.",
    ),
    Option(
        "takeOverTransactionalIdPrefix",
        "With `exactly_once`: write under a prefix another query wrote within the transaction timeout "
        "(that query is stopped for good).",
        default="false",
    ),
    Option(
        "partitioner",
        "For rows without a `partition`: `default` (keyed rows on Java's murmur2 partition, unkeyed rows "
        "sticky, KIP-794), `fixed` (writer task i to partition i mod n, Flink's FlinkFixedPartitioner) or "
        "`roundrobin`. librdkafka's CRC32 partitioner is never used.",
        default="default",
        allowed=PARTITIONERS,
    ),
    Option(
        "metadataTimeoutMs",
        "The bound on each topic lookup and commit-intent read or write: an unreachable broker fails the "
        "write within it, naming the bootstrap servers. When no broker answers at all, a batch write "
        "fails within 5 s, or within this option when it is set.",
        default=str(DEFAULT_METADATA_TIMEOUT_MS),
    ),
    Option(
        "includeHeaders",
        "Accepted and ignored, as Spark's sink ignores it: a `headers` column is always written.",
        default="false",
        spark="",
    ),
)
"""Every option of the sink (Spark's Kafka sink has only ``topic`` and ``kafka.*``)."""

SPARK_WRITE_OPTIONS: tuple[Option, ...] = (
    Option(
        "checkpointLocation",
        "Spark's own writer option, passed to the sink: it identifies the streaming query (the "
        "exactly-once sink's prefix owner check).",
        spark="",
    ),
    Option("path", "Spark's own writer option; accepted and ignored.", spark=""),
    Option("queryName", "Spark's own writer option; accepted and ignored.", spark=""),
)
"""Spark passes its own writer options through to the data source."""

SINK_KAFKA_SETTINGS: tuple[Option, ...] = (
    Option("kafka.bootstrap.servers", "The brokers, `host:port[,host:port...]`. Required.", spark=""),
    Option(
        "kafka.transaction.timeout.ms",
        "With `exactly_once`: how long a task's transaction may stay open, from its first record until the "
        "driver commits it after the whole batch. At most the broker's `transaction.max.timeout.ms`.",
        default_note="900000 with `exactly_once`",
    ),
    Option(
        "kafka.transactional.id",
        "Managed by sparkafka (`transactionalIdPrefix`): refused.",
    ),
    Option(
        "kafka.partitioner",
        "Managed by sparkafka (option `partitioner`): refused.",
        spark="Spark takes the Java client's `kafka.partitioner.class`; use `partitioner` here.",
    ),
    Option(
        "kafka.allow.auto.create.topics",
        "The sink creates no topic: its producers never ask the broker to (a `topic` column's misspelt "
        "value would otherwise create a topic with the broker's defaults, on a broker with "
        "`auto.create.topics.enable=true`). `true` is refused: create the topics first "
        "(`sparkafka topics create`).",
        default_note="`false`, always",
        spark="Spark's Java producer lets the broker create a missing topic where it allows it; sparkafka "
        "does not.",
    ),
)
"""The ``kafka.*`` settings the sink interprets; every other one goes to librdkafka as given."""

DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000
_TXN_ID = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True)
class SinkOptions:
    """The sink's options, parsed and checked once by ``parse_sink_options``."""

    kafka: Mapping[str, str]
    """Settings for librdkafka (``kafka.*`` without the prefix)."""
    topic: str | None
    delivery: DeliveryGuarantee
    transactional_id_prefix: str | None
    partitioner: Partitioner
    metadata_timeout_ms: int = DEFAULT_METADATA_TIMEOUT_MS
    """Bound on each metadata lookup and each commit-intent read or write, in milliseconds."""
    take_over_prefix: bool = False
    """``takeOverTransactionalIdPrefix``: write under a prefix another live query owns."""
    checkpoint_location: str | None = None
    """Spark's ``checkpointLocation`` writer option, when given: where the streaming query's id is kept."""

    @property
    def transaction_timeout_ms(self) -> int:
        """The producers' ``transaction.timeout.ms``: ``kafka.transaction.timeout.ms``, default 15 minutes."""
        return int(self.kafka.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS))


def _check_idempotence(kafka: dict[str, str], delivery: DeliveryGuarantee) -> None:
    """Producer settings that idempotence refuses, refused at start (``client.conf.idempotence_conflicts``).

    Exactly once writes in transactions, which need idempotence: such settings are refused, naming each.
    Otherwise the sink's producers are idempotent by default (``sink.task``); where the user's settings
    conflict and ``kafka.enable.idempotence`` is not set, idempotence is left off, as Java's producer does
    (a ``format("kafka")`` job with ``kafka.acks=1`` runs unchanged); set to true, it is refused.
    """
    conflicts = idempotence_conflicts(kafka)
    idempotence = kafka.get("enable.idempotence", "").strip().lower()
    if delivery == "exactly_once":
        if idempotence == "false":
            conflicts.insert(0, "kafka.enable.idempotence=false (needs true)")
        if conflicts:
            raise ConfigError(
                "deliveryGuarantee=exactly_once writes in Kafka transactions, which need an idempotent "
                f"producer: remove or change {', '.join(conflicts)}"
            )
    elif conflicts and idempotence == "true":
        raise ConfigError(
            f"option kafka.enable.idempotence=true conflicts with {', '.join(conflicts)}: remove one side"
        )
    elif conflicts and not idempotence:
        kafka["enable.idempotence"] = "false"


def _check_no_topic_creation(kafka: Mapping[str, str]) -> None:
    """Refuse ``kafka.allow.auto.create.topics`` set to what librdkafka reads as true (``true``, ``t``,
    ``1``, any case): the sink creates no topic (``sink.delivery.NO_TOPIC_CREATION``), and a user asking
    for it would otherwise be silently overridden. false is accepted; other values librdkafka refuses."""
    value = kafka.get("allow.auto.create.topics")
    if value is not None and value.lower() in ("true", "t", "1"):
        servers = kafka.get("bootstrap.servers")
        raise ConfigError(
            f"option kafka.allow.auto.create.topics={value} is not allowed: the sink does not create topics "
            "(a topic column's misspelt value would create one, with the broker's defaults); create each "
            f"topic first, e.g. sparkafka topics create TOPIC --bootstrap-servers {servers}"
        )


def parse_sink_options(options: Mapping[str, Any]) -> SinkOptions:
    """Validate the sink's options; raise ConfigError naming the option and what is allowed."""
    reader = OptionReader(
        options, names(SINK_OPTIONS + SPARK_WRITE_OPTIONS), "sparkafka sink", client="producer"
    )
    kafka = reader.kafka()
    if not kafka.get("bootstrap.servers"):
        raise ConfigError("option kafka.bootstrap.servers is required (host:port[,host:port...])")
    for key in ("transactional.id", "partitioner"):
        if key in kafka:
            raise ConfigError(
                f"option kafka.{key} is managed by sparkafka: use transactionalIdPrefix / partitioner instead"
            )
    _check_no_topic_creation(kafka)
    delivery = reader.choice("deliveryGuarantee", DELIVERIES, "at_least_once", _DELIVERY_HINTS)
    prefix = reader.get_str("transactionalIdPrefix")
    if delivery == "exactly_once":
        if prefix is None:
            raise ConfigError(
                "deliveryGuarantee=exactly_once needs option transactionalIdPrefix: a name that is stable "
                "across restarts and unique to this sink (letters, digits, '.', '_', '-')"
            )
        if not _TXN_ID.fullmatch(prefix):
            raise ConfigError(
                f"option transactionalIdPrefix={prefix!r} may only hold letters, digits, '.', '_' and '-'"
            )
        refusal = check_transaction_protocol()
        if refusal is not None:
            raise ConfigError(refusal)
        check_kafka_python_config(kafka)  # the driver commits through kafka-python: same security settings
        timeout = kafka.setdefault("transaction.timeout.ms", str(DEFAULT_TRANSACTION_TIMEOUT_MS))
        if not timeout.isdigit() or int(timeout) <= 0:
            raise ConfigError(
                f"option kafka.transaction.timeout.ms={timeout!r} must be a positive number of milliseconds"
            )
    elif prefix is not None:
        raise ConfigError("option transactionalIdPrefix is only used with deliveryGuarantee=exactly_once")
    _check_idempotence(kafka, delivery)
    check_in_flight(kafka, delivery == "exactly_once")
    take_over = reader.get_bool("takeOverTransactionalIdPrefix", False)
    if take_over and delivery != "exactly_once":
        raise ConfigError(
            "option takeOverTransactionalIdPrefix is only used with deliveryGuarantee=exactly_once"
        )
    partitioner = reader.choice("partitioner", PARTITIONERS, "default")
    # Spark's docs list includeHeaders for the sink too, where it changes nothing (a headers column is
    # always written): checked and accepted, so a format("kafka") writer runs unchanged.
    reader.get_bool("includeHeaders", False)
    check_librdkafka_settings(kafka)  # the values, after our own checks of those we interpret
    return SinkOptions(
        kafka=kafka,
        topic=reader.get_str("topic"),
        delivery=delivery,
        transactional_id_prefix=prefix,
        partitioner=partitioner,
        metadata_timeout_ms=reader.get_int("metadataTimeoutMs", DEFAULT_METADATA_TIMEOUT_MS, minimum=1),
        take_over_prefix=take_over,
        checkpoint_location=reader.get_str("checkpointLocation"),
    )


@dataclass(frozen=True)
class InputColumns:
    """Which of the optional input columns the query provides (``value`` always does)."""

    key: bool = False
    topic: bool = False
    partition: bool = False
    headers: bool = False
    timestamp: bool = False


def input_columns(schema: Any, options: SinkOptions) -> InputColumns:
    """Check the input schema (a Spark StructType) as Spark's KafkaWriter does; errors name the column and
    the expected type. Runs on the driver when the write starts.

    Column names are matched exactly, case and all (a column ``Key`` is not the key; the first of two
    columns with one name is used), and only the columns Spark reads are checked: not ``topic`` when the
    ``topic`` option overrides it. ``timestamp``, which Spark 4.2 never reads, is sparkafka's addition: a
    ``timestamp``-typed column gives the records' timestamps; one of another type is ignored, as Spark
    ignores it, with a warning.
    """
    from pyspark.sql import types as T  # noqa: N812 - PySpark's own idiom

    fields: dict[str, Any] = {}
    for f in schema.fields:
        fields.setdefault(f.name, f.dataType)
    header = T.ArrayType(
        T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())])
    )
    expected: dict[str, tuple[str, tuple[Any, ...]]] = {
        "value": ("binary or string", (T.BinaryType(), T.StringType())),
        "key": ("binary or string", (T.BinaryType(), T.StringType())),
        "partition": ("int", (T.IntegerType(),)),
        "headers": ("array<struct<key: string, value: binary>>", (header,)),
    }
    if options.topic is None:
        expected["topic"] = ("string", (T.StringType(),))
    if "value" not in fields:
        raise ConfigError(
            "the sparkafka sink needs a column named value (binary or string); "
            f"the input has: {', '.join(f.name for f in schema.fields) or 'no columns'}"
        )
    for name, (label, types) in expected.items():
        if name in fields and not _type_ok(fields[name], types):
            raise ConfigError(
                f"column {name} of the sparkafka sink's input must be {label}, "
                f"not {fields[name].simpleString()}"
            )
    if "topic" not in fields and options.topic is None:
        raise ConfigError("the sparkafka sink needs option topic, or a string column named topic")
    timestamp = "timestamp" in fields and _type_ok(fields["timestamp"], (T.TimestampType(),))
    if "timestamp" in fields and not timestamp:
        log.warning(
            "column timestamp (%s) is not written as the records' timestamps: only a timestamp column is "
            "(Spark's connector ignores the column whatever its type)",
            fields["timestamp"].simpleString(),
        )
    return InputColumns(
        key="key" in fields,
        # As in Spark's Kafka sink, the topic option overrides a topic column (KafkaWriter.scala).
        topic="topic" in fields and options.topic is None,
        partition="partition" in fields,
        headers="headers" in fields,
        timestamp=timestamp,
    )


def _type_ok(actual: Any, allowed: tuple[Any, ...]) -> bool:
    from pyspark.sql import types as T  # noqa: N812 - PySpark's own idiom

    for want in allowed:
        if isinstance(want, T.ArrayType) and isinstance(actual, T.ArrayType):
            element = actual.elementType
            if isinstance(element, T.StructType) and [f.name for f in element.fields] == ["key", "value"]:
                key_t, value_t = (f.dataType for f in element.fields)
                if isinstance(key_t, T.StringType) and isinstance(value_t, (T.BinaryType, T.StringType)):
                    return True
        elif type(actual) is type(want):
            return True
    return False
