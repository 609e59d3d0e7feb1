"""Choosing a fetcher (native or confluent-kafka) and the read loop's decisions, over a fake fetcher."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError

from sparkafka.client.core import close_all
from sparkafka.errors import BrokerError, ConfigError, DataLossError
from sparkafka.source import fetch
from sparkafka.source.fetch import OffsetRange, read_ranges
from sparkafka.source.fetchers import Fetched, PythonFetcher, arrow_schema
from sparkafka.source.native_fetch import NativeFetcher, NativeUnavailableError, native_version
from sparkafka.source.options import parse_source_options
from sparkafka.structs import TopicPartition

SECURE = {
    "bootstrap.servers": "broker:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "etl",
    "sasl.password": "canary-password",
}
KERBEROS = {**SECURE, "sasl.mechanism": "GSSAPI"}
"""GSSAPI needs Cyrus SASL, which the native fetch is built without (confluent-kafka's wheels have it)."""
TP = TopicPartition("t", 0)


@pytest.fixture(autouse=True)
def _fresh_clients() -> Iterator[None]:
    close_all()
    yield
    close_all()


def test_the_native_extension_is_built_and_installed() -> None:
    assert native_version() is not None  # make builds it (make native); the fallback is tested below


def test_the_native_fetch_takes_tls_and_scram_and_refuses_gssapi_never_naming_the_password() -> None:
    NativeFetcher({**SECURE, "group.id": "g"}).close()  # built with OpenSSL: SASL_SSL, SCRAM, PLAIN
    with pytest.raises(NativeUnavailableError) as caught:
        NativeFetcher({**KERBEROS, "group.id": "g"})
    assert "GSSAPI" in str(caught.value)
    assert "canary" not in str(caught.value)


def test_the_native_fetch_has_openssl_built_in_and_finds_the_systems_ca_certificates() -> None:
    """OpenSSL built into the wheel looks for CA certificates where no distribution keeps them: the reader
    asks librdkafka to probe the standard locations (as confluent-kafka's wheels do) unless
    ``ssl.ca.location`` is given. (The TLS reads with a given CA: tests/integration/test_secure_paths.py.)"""
    import sparkafka_native

    assert sparkafka_native.openssl_linkage() == "built in"  # make native: feature vendored-openssl
    tls = {
        "bootstrap.servers": "127.0.0.1:1",
        "group.id": "g",
        "security.protocol": "ssl",
        "debug": "security",
    }
    reader = sparkafka_native.Reader(tls)  # the TLS context is made here, before any connection
    lines = [text for _level, _fac, text in reader.logs()[0]]
    reader.close()
    setting = re.compile(r'Setting default CA certificate location for kafka to "(.+)"')
    probed = [m.group(1) for t in lines if (m := setting.search(t))]
    assert probed, lines
    assert Path(probed[0]).exists()
    reader = sparkafka_native.Reader({**tls, "ssl.ca.location": probed[0]})
    lines = [text for _level, _fac, text in reader.logs()[0]]
    reader.close()
    assert not any("Setting default CA" in t for t in lines)
    assert any(f"Loading CA certificate(s) from file {probed[0]}" in t for t in lines), lines


def test_the_native_reader_refuses_a_nul_value_and_an_empty_group_naming_the_setting() -> None:
    import sparkafka_native

    with pytest.raises(ValueError, match="NUL") as caught:
        sparkafka_native.Reader({"client.id": "a\0b"})
    assert caught.value.args == ("client.id", "has a NUL character")
    with pytest.raises(ValueError, match="must not be empty") as caught:
        sparkafka_native.Reader({"bootstrap.servers": "127.0.0.1:1", "group.id": ""})
    assert caught.value.args == ("group.id", "must not be empty")


def test_a_reader_given_an_empty_group_id_reads_under_its_own() -> None:
    assert fetch._reader_settings({"group.id": ""})["group.id"] == "sparkafka-reader"
    assert fetch._reader_settings({"group.id": "etl"})["group.id"] == "etl"


class FakeConsumer:
    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings

    def close(self) -> None:
        return None


def test_auto_falls_back_to_confluent_kafka_and_native_fails_in_one_sentence(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(fetch, "new_consumer", FakeConsumer)
    with caplog.at_level("INFO", logger="sparkafka.source.fetch"):
        chosen = fetch._fetcher(KERBEROS, "auto")
    assert isinstance(chosen, PythonFetcher)
    assert chosen.consumer.settings["sasl.password"] == "canary-password"  # every setting reaches it
    assert "reading with confluent-kafka (option fetcher=auto)" in caplog.text
    assert "canary" not in caplog.text
    with pytest.raises(ConfigError, match=r"^option fetcher=native: .*GSSAPI"):
        fetch._fetcher(KERBEROS, "native")
    assert isinstance(fetch._fetcher(SECURE, "auto"), NativeFetcher)
    assert isinstance(fetch._fetcher({"bootstrap.servers": "b:9092"}, "python"), PythonFetcher)
    assert isinstance(fetch._fetcher({"bootstrap.servers": "b:9092"}, "auto"), NativeFetcher)


def test_without_the_extension_auto_reads_with_confluent_kafka(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sparkafka_native", None)  # import fails, as when not installed
    monkeypatch.setattr(fetch, "new_consumer", FakeConsumer)
    conf = {"bootstrap.servers": "b:9092"}
    assert isinstance(fetch._fetcher(conf, "auto"), PythonFetcher)
    with pytest.raises(ConfigError, match=r"not installed .*make native"):
        fetch._fetcher(conf, "native")


def test_the_option_takes_the_three_choices_and_names_them_otherwise() -> None:
    base = {"kafka.bootstrap.servers": "b:9092", "subscribe": "t"}
    assert parse_source_options(base).fetcher == "auto"
    assert parse_source_options({**base, "fetcher": "Python"}).fetcher == "python"
    with pytest.raises(
        ConfigError, match="option fetcher='rust' is not allowed; use one of: auto, native, python"
    ):
        parse_source_options({**base, "fetcher": "rust"})


class FakeFetcher:
    """A scripted ``Fetcher``: each ``fetch`` answers the next ``Fetched`` (then nothing).

    Its position follows a real fetcher's rule (tests/integration/test_fetch.py checks both against a
    broker): past every record returned, and past every event too when ``events_move`` (sparkafka_native)
    or not (confluent-kafka's ``consume`` leaves it at an end-of-partition event's offset).
    """

    def __init__(self, answers: list[Fetched], position: int = -1001, events_move: bool = True) -> None:
        self.answers = list(answers)  # popped: the parametrized list is shared by both rules
        self.at = position
        self.events_move = events_move
        self.assigned: list[tuple[TopicPartition, int]] = []

    def list_topics(self, topic: str, timeout: float) -> None:
        return None

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        return 0, 100

    def assign(self, tp: TopicPartition, offset: int) -> None:
        self.assigned.append((tp, offset))

    def unassign(self) -> None:
        return None

    def position(self, tp: TopicPartition) -> int:
        return self.at

    def fetch(
        self, tp: TopicPartition, end: int, max_rows: int, timeout_s: float, include_headers: bool
    ) -> Fetched:
        got = self.answers.pop(0) if self.answers else Fetched(None, None, False)
        # As rd_kafka_consume_batch_queue does: the position moves past every message returned (events too,
        # with sparkafka_native's librdkafka).
        moved = [got.last_offset] if got.last_offset is not None else []
        moved += [offset for *_, offset in got.events if offset >= 0 and self.events_move]
        self.at = max([self.at, *(o + 1 for o in moved)])
        return got

    def close(self) -> None:
        return None


def _rows(offsets: list[int]) -> pa.RecordBatch:
    n = len(offsets)
    return pa.RecordBatch.from_arrays(
        [
            pa.nulls(n, pa.binary()),
            pa.nulls(n, pa.binary()),
            pa.array(["t"] * n),
            pa.array([0] * n, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.nulls(n, pa.timestamp("us", tz="UTC")),
            pa.array([-1] * n, pa.int32()),
        ],
        schema=arrow_schema(False),
    )


def _read(
    fake: FakeFetcher, monkeypatch: pytest.MonkeyPatch, end: int = 10, poll_timeout_ms: int = 60_000
) -> list[int]:
    monkeypatch.setattr(fetch, "_fetcher", lambda conf, choice: fake)
    batches = read_ranges({}, [OffsetRange(TP, 0, end)], poll_timeout_ms=poll_timeout_ms)
    return [o for b in batches for o in b["offset"].to_pylist()]


def _eof(offset: int) -> tuple[Any, ...]:
    return (KafkaError(KafkaError._PARTITION_EOF), "t", 0, offset)


@pytest.mark.parametrize(
    ("answers", "position", "expected"),
    [
        # A record at end - 1 ends the range.
        ([Fetched(_rows([0, 1]), 1, False), Fetched(_rows([2, 9]), 9, True)], -1001, [0, 1, 2, 9]),
        # Records end before `end` (markers after them): the end-of-partition event at `end` ends it.
        ([Fetched(_rows([0, 1, 2]), 2, False, [_eof(10)])], -1001, [0, 1, 2]),
        # An end-of-partition event below `end` does not; the position past the end does.
        ([Fetched(_rows([0]), 0, False, [_eof(5)])], 12, [0]),
        # An end-of-partition event at end - 1 (a lagging high watermark) moves the position to `end`
        # in librdkafka, but the record at end - 1 is still to come: it is read, not skipped.
        (
            [
                Fetched(_rows([0, 8]), 8, False, [_eof(9)]),
                Fetched(None, None, False),
                Fetched(_rows([9]), 9, True),
            ],
            -1001,
            [0, 8, 9],
        ),
        # So does a leaderless answer reported at end - 1.
        (
            [
                Fetched(None, None, False, [(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION), "t", 0, 9)]),
                Fetched(None, None, False),
                Fetched(_rows([9]), 9, True),
            ],
            -1001,
            [9],
        ),
        # A leader change is ridden out.
        (
            [
                Fetched(None, None, False, [(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION), "t", 0, -1)]),
                Fetched(_rows([9]), 9, True),
            ],
            -1001,
            [9],
        ),
    ],
)
@pytest.mark.parametrize("events_move", [True, False], ids=["native", "python"])
def test_when_a_range_is_done(
    answers: list[Fetched],
    position: int,
    expected: list[int],
    events_move: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _read(FakeFetcher(answers, position, events_move), monkeypatch) == expected


@pytest.mark.parametrize("exact", [True, False], ids=["exact ends", "broker gap"])
def test_a_silent_partition_fails_after_the_poll_timeout_naming_it(
    monkeypatch: pytest.MonkeyPatch, exact: bool
) -> None:
    """The log reaches past the range's end (FakeFetcher: 0..99), or its end cannot be trusted: a broker
    problem, not data loss."""
    monkeypatch.setattr(fetch.broker_gaps, "latest_is_exact", lambda conf: exact)
    with pytest.raises(BrokerError, match="no records arrived for 0 ms while reading t-0 up to 10"):
        _read(FakeFetcher([Fetched(_rows([0]), 0, False)]), monkeypatch, poll_timeout_ms=0)


class _Event:
    """A consumer-level event as confluent-kafka gives it: no topic, partition or offset."""

    def error(self) -> KafkaError:
        return KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "FindCoordinator response error")

    def topic(self) -> None:
        return None

    def partition(self) -> None:
        return None

    def offset(self) -> None:
        return None


class _EventConsumer:
    def __init__(self) -> None:
        self.given = False

    def consume(self, _n: int, _timeout: float) -> list[Any]:
        if self.given:
            return []
        self.given = True
        return [_Event()]

    def poll(self, _timeout: float) -> None:
        return None


def test_an_event_without_partition_or_offset_reads_as_the_native_fetch_gives_it() -> None:
    got = PythonFetcher(_EventConsumer()).fetch(TP, 10, 100, 0.01, False)
    (event,) = got.events
    assert event[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert event[1:] == (None, -1, -1)
    assert fetch._read_events(got.events, TP) == (None, -1)  # a refused group lookup fails no read


def test_a_silent_partition_whose_log_ends_below_the_range_is_data_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Truncated(FakeFetcher):
        def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
            return 0, 1

    monkeypatch.setattr(fetch.broker_gaps, "latest_is_exact", lambda conf: True)
    with pytest.raises(
        DataLossError, match=r"t-0: offset 1 went out of range while reading up to 10"
    ) as lost:
        _read(Truncated([Fetched(_rows([0]), 0, False)]), monkeypatch, poll_timeout_ms=0)
    assert lost.value.condition == "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE"
