"""The native ``Fetcher``: sparkafka's own librdkafka extension (``native/``) reads straight into Arrow.

Runs inside Spark's Python workers, under ``source.fetch.read_ranges``. The extension (``sparkafka_native``,
Rust over librdkafka 2.12 built from source by ``make``) copies records from librdkafka's buffers into
column buffers, handed over as one ``bytes`` per column, that become Arrow arrays here without another
copy: no ``Message`` object, no ``bytes`` per key and value. Everything else (when a range is done,
stalls, events, retries) stays in ``read_ranges``, shared with ``fetchers.PythonFetcher``.

It is built with TLS (OpenSSL built into the wheel), so SASL PLAIN and SCRAM, mutual TLS and every
``kafka.ssl.*`` setting reach it as they reach confluent-kafka (the same librdkafka names; nothing to map;
without ``ssl.ca.location`` it probes the system's standard CA locations, as confluent-kafka's wheels do).
A read whose settings it cannot take (``sasl.mechanism=GSSAPI``, which needs Cyrus SASL; a setting unknown
to its librdkafka) uses ``PythonFetcher`` under option ``fetcher=auto``, and fails with ``fetcher=native``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from sparkafka.client.conf import consumer_settings
from sparkafka.client.log import LIBRDKAFKA_LOG
from sparkafka.errors import ConfigError
from sparkafka.source.fetchers import Fetched, arrow_schema
from sparkafka.structs import TopicPartition

__all__ = ["NativeFetcher", "NativeUnavailableError", "native_version"]

log = logging.getLogger(__name__)

MAX_BATCH_BYTES = 64 * 1024 * 1024
"""A chunk stops taking records once its keys, values and headers reach this size (Arrow's 32-bit offsets
bound a column at 2 GiB; a smaller batch also bounds a worker's memory)."""

# librdkafka's syslog levels as Python's, as confluent-kafka maps them for its ``logger``.
_LEVELS = (50, 50, 50, 40, 30, 20, 20, 10)


class NativeUnavailableError(ConfigError):
    """The native extension is not installed, or cannot take these settings (the reason is in the text)."""


def native_version() -> str | None:
    """The librdkafka version of the installed extension, or None when it is not installed."""
    try:
        import sparkafka_native
    except ImportError:
        return None
    return str(sparkafka_native.librdkafka_version())


class NativeFetcher:
    """A ``fetchers.Fetcher`` over ``sparkafka_native.Reader``; made once per worker and settings (cached).

    Each assigned partition is read from its own librdkafka queue (``overlaps``), so ``read_ranges`` can
    assign the partitions it reads next beside the one it reads now.

    Raises:
        NativeUnavailableError: the extension is not installed or refuses a setting (named, never its value).
    """

    overlaps = True

    def __init__(self, settings: Mapping[str, str]) -> None:
        try:
            import sparkafka_native
        except ImportError as e:
            raise NativeUnavailableError(
                "the native fetch is not installed (pip install 'sparkafka[native]', or make native)"
            ) from e
        self._native = sparkafka_native
        try:
            conf = consumer_settings(settings)  # as every consumer: no producer-only setting (CONFWARN)
            self._reader = sparkafka_native.Reader({k: str(v) for k, v in conf.items()})
        except ValueError as e:
            key, reason = e.args if len(e.args) == 2 else ("", str(e))  # (setting, reason) from the extension
            where = f"setting kafka.{key}" if key else "its settings"
            raise NativeUnavailableError(f"the native fetch cannot take {where}: {reason}") from None
        self._schemas = {flag: arrow_schema(flag) for flag in (False, True)}

    def _as_confluent(self, e: Exception) -> Exception:
        """The extension's KafkaError as confluent-kafka's KafkaException, for ``client.core``."""
        from confluent_kafka import KafkaError, KafkaException

        code, text = e.args
        error: Exception = KafkaException(KafkaError(code, text))
        return error

    def list_topics(self, topic: str, timeout: float) -> None:
        """See ``Fetcher.list_topics``."""
        try:
            self._reader.learn_topic(topic, int(timeout * 1000))
        except self._native.KafkaError as e:
            raise self._as_confluent(e) from None
        finally:
            self._forward_logs()

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        """See ``Fetcher.get_watermark_offsets``."""
        try:
            low, high = self._reader.watermarks(tp.topic, tp.partition, max(int(timeout * 1000), 1))
        except self._native.KafkaError as e:
            raise self._as_confluent(e) from None
        return int(low), int(high)

    def assign(self, tp: TopicPartition, offset: int) -> None:
        """See ``Fetcher.assign``."""
        self._reader.assign(tp.topic, tp.partition, offset)

    def release(self, tp: TopicPartition) -> None:
        """See ``Fetcher.release``."""
        self._reader.release(tp.topic, tp.partition)

    def unassign(self) -> None:
        """See ``Fetcher.unassign``."""
        self._reader.unassign()

    def position(self, tp: TopicPartition) -> int:
        """See ``Fetcher.position``."""
        return int(self._reader.position(tp.topic, tp.partition))

    def fetch(
        self, tp: TopicPartition, end: int, max_rows: int, timeout_s: float, include_headers: bool
    ) -> Fetched:
        """See ``Fetcher.fetch``."""
        rows, last, reached_end, raw_events, columns = self._reader.fetch(
            tp.topic, tp.partition, end, max_rows, MAX_BATCH_BYTES, int(timeout_s * 1000), include_headers
        )
        self._forward_logs()
        events = [_event(*e) for e in raw_events]
        batch = _batch(rows, tp, columns, self._schemas[include_headers]) if rows else None
        return Fetched(batch, last if last >= 0 else None, reached_end, events)

    def close(self) -> None:
        """See ``Fetcher.close``."""
        self._reader.close()

    def _forward_logs(self) -> None:
        """Forward librdkafka's log lines since the last call, to ``LIBRDKAFKA_LOG`` (rate-limited there)."""
        lines, dropped = self._reader.logs()
        for level, facility, text in lines:
            LIBRDKAFKA_LOG.log(_LEVELS[min(max(level, 0), 7)], "%s [sparkafka-native] %s", facility, text)
        if dropped:
            LIBRDKAFKA_LOG.warning("%d more librdkafka log lines were dropped (native fetch)", dropped)


def _event(code: int, text: str, topic: str | None, partition: int, offset: int) -> tuple[Any, ...]:
    from confluent_kafka import KafkaError

    return (KafkaError(code, text), topic, partition, offset)


def _var(kind: pa.DataType, rows: int, parts: tuple[bytes | None, bytes, bytes]) -> pa.Array:
    valid, offsets, data = parts
    buffers = [None if valid is None else pa.py_buffer(valid), pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(kind, rows, buffers)


def _batch(rows: int, tp: TopicPartition, columns: tuple[Any, ...], schema: pa.Schema) -> pa.RecordBatch:
    """The extension's buffers as an Arrow batch of ``schema`` (no copy)."""
    keys, values, offsets, (stamp_valid, stamps), types, headers = columns
    arrays = [
        _var(pa.binary(), rows, keys),
        _var(pa.binary(), rows, values),
        pa.repeat(pa.scalar(tp.topic, pa.string()), rows),
        pa.repeat(pa.scalar(tp.partition, pa.int32()), rows),
        pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(offsets)]),
        pa.Array.from_buffers(
            schema.field("timestamp").type,
            rows,
            [None if stamp_valid is None else pa.py_buffer(stamp_valid), pa.py_buffer(stamps)],
        ),
        pa.Array.from_buffers(pa.int32(), rows, [None, pa.py_buffer(types)]),
    ]
    if schema.get_field_index("headers") >= 0:
        list_valid, list_offsets, header_keys, header_values = headers
        count = (len(list_offsets) // 4) and int.from_bytes(list_offsets[-4:], "little", signed=True)
        entry = schema.field("headers").type.value_type
        entries = pa.StructArray.from_arrays(
            [_var(pa.string(), count, header_keys), _var(pa.binary(), count, header_values)],
            fields=list(entry),
        )
        buffers = [None if list_valid is None else pa.py_buffer(list_valid), pa.py_buffer(list_offsets)]
        arrays.append(pa.Array.from_buffers(schema.field("headers").type, rows, buffers, children=[entries]))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
