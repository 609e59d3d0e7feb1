"""What a sink checks on the driver before any task writes: options, columns, brokers, topic, ACLs.

Runs on the driver, before Spark starts a task: in the user's process when ``start()`` is called on a
``writeStream.format("sparkafka")`` (``sparkafka.stream_writer``, after ``register``), so a mistake is one
sentence from ``start()`` itself; and in Spark's Python planner process where the writer is made (every
micro-batch of a streaming query, once for a batch write), which is all a session without ``register``
gets. A second run in one process asks the brokers nothing it already asked (``once``): a broker
restarting under a running query is ridden out by the retries, not failed within 5 s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkafka.client.contact import first_contact
from sparkafka.errors import ConfigError
from sparkafka.sink.access import require_sink_access
from sparkafka.sink.options import InputColumns, SinkOptions, input_columns, parse_sink_options

__all__ = ["REGISTER_FOR_EXACTLY_ONCE", "check_registered", "check_sink", "check_sink_topic"]


def check_sink(
    raw: Mapping[str, Any], schema: Any, registered: bool, *, once: bool
) -> tuple[SinkOptions, InputColumns]:
    """Every check a write gets before its tasks, in order; the parsed options and the input columns.

    ``raw``: the options as the user set them; ``schema``: the query's columns (a Spark ``StructType``);
    ``registered``: whether ``register`` ran in the driver; ``once`` as for ``first_contact``.
    """
    options = parse_sink_options(raw)
    columns = input_columns(schema, options)
    check_registered(options, registered)
    first_contact(options.kafka, raw, options.metadata_timeout_ms, once=once)
    check_sink_topic(options, once=once)
    require_sink_access(options)
    return options, columns


_topics_found: set[tuple[tuple[tuple[str, str], ...], str]] = set()


def check_sink_topic(options: SinkOptions, *, admin: Any = None, once: bool = False) -> None:
    """Refuse, in one sentence, a sink whose ``topic`` option names a topic the brokers do not have.

    Runs on the driver right after the first contact, before any task: the sink does not create topics,
    and its tasks found the topic missing only after the delivery timeout (measured: 6 s at least once,
    16 s exactly once, the sentence repeated by each task). Topics named by a ``topic`` column are known
    only row by row: their tasks report a missing one. ``admin`` and ``once`` as for ``first_contact``.
    """
    if options.topic is None:
        return
    key = (tuple(sorted((str(k), str(v)) for k, v in options.kafka.items())), options.topic)
    if once and key in _topics_found:
        return
    from sparkafka.client.metadata import AdminMetadata

    topics = AdminMetadata(options.kafka, options.metadata_timeout_ms / 1000, admin=admin).topics()
    secured = str(options.kafka.get("security.protocol", "PLAINTEXT")).upper() != "PLAINTEXT"
    if options.topic not in topics and not secured:  # with ACLs, hidden may mean denied: the ACL check says
        servers = options.kafka.get("bootstrap.servers")
        raise ConfigError(
            f"option topic={options.topic}: no such topic on {servers} (the sink does not create topics: "
            f"create it first, e.g. sparkafka topics create {options.topic} --bootstrap-servers {servers})"
        )
    _topics_found.add(key)


REGISTER_FOR_EXACTLY_ONCE = (
    "deliveryGuarantee=exactly_once needs `import sparkafka; sparkafka.register(spark)` in the driver before "
    "the write starts: it tells the sink whether spark.speculation is on (two attempts of one task would "
    'abort each other\'s transactions), which format("sparkafka") found without it cannot see'
)


def check_registered(options: SinkOptions, registered: bool) -> None:
    """Refuse an exactly-once write by a data source that ``register`` did not register, in one sentence.

    Runs on the driver (the Python worker that makes the writer), before recovery or any task. PySpark's
    lookup (``pyspark_sparkafka``) finds the data source in a plain session; only ``register`` passes
    ``spark.speculation`` to the workers (``sparkafka.sink.writer.check_no_speculation``).
    """
    if options.delivery == "exactly_once" and not registered:
        raise ConfigError(REGISTER_FOR_EXACTLY_ONCE)
