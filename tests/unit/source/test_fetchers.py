"""Choosing a fetcher (native or confluent-kafka) and the read loop's decisions, over a fake fetcher."""

from __future__ import annotations

import itertools
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

    overlaps = False

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

    def release(self, tp: TopicPartition) -> None:
        return None

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


class QueuedFetcher:
    """A fetcher with a queue per assigned partition, as sparkafka_native's (``overlaps``), or with one
    queue, as confluent-kafka's (``assign`` replaces the assignment): each partition's log is
    ``[0, log_end)``, and ``fetch(tp)`` gives the next ``chunk`` records of ``tp`` from where it was
    assigned, then its end-of-partition event. It logs what is asked of it, and fails a fetch of a
    partition that is not assigned."""

    def __init__(self, log_end: int, overlaps: bool, chunk: int = 3) -> None:
        self.overlaps = overlaps
        self.log_end = log_end
        self.chunk = chunk
        self.at: dict[TopicPartition, int] = {}
        """The assigned partitions and their positions."""
        self.calls: list[tuple[str, TopicPartition]] = []
        self.most_assigned = 0

    def list_topics(self, topic: str, timeout: float) -> None:
        return None

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        return 0, self.log_end

    def assign(self, tp: TopicPartition, offset: int) -> None:
        if not self.overlaps:
            self.at.clear()
        self.at[tp] = offset
        self.most_assigned = max(self.most_assigned, len(self.at))
        self.calls.append(("assign", tp))

    def release(self, tp: TopicPartition) -> None:
        if self.overlaps:
            self.at.pop(tp, None)
        else:
            self.at.clear()
        self.calls.append(("release", tp))

    def unassign(self) -> None:
        self.at.clear()

    def position(self, tp: TopicPartition) -> int:
        return self.at[tp]

    def fetch(
        self, tp: TopicPartition, end: int, max_rows: int, timeout_s: float, include_headers: bool
    ) -> Fetched:
        assert tp in self.at, f"{tp} fetched but not assigned"
        self.calls.append(("fetch", tp))
        at = self.at[tp]
        offsets = list(range(at, min(at + self.chunk, self.log_end)))
        if not offsets:
            return Fetched(
                None, None, False, [(KafkaError(KafkaError._PARTITION_EOF), tp.topic, tp.partition, at)]
            )
        self.at[tp] = offsets[-1] + 1
        kept = [o for o in offsets if o < end]
        batch = _rows_of(tp, kept) if kept else None
        return Fetched(batch, offsets[-1], offsets[-1] >= end - 1)

    def close(self) -> None:
        return None


def _rows_of(tp: TopicPartition, offsets: list[int]) -> pa.RecordBatch:
    batch = _rows(offsets)
    return batch.set_column(2, "topic", pa.array([tp.topic] * len(offsets))).set_column(
        3, "partition", pa.array([tp.partition] * len(offsets), pa.int32())
    )


def _queued_read(
    fake: QueuedFetcher, ranges: list[OffsetRange], monkeypatch: pytest.MonkeyPatch
) -> list[Any]:
    monkeypatch.setattr(fetch, "_fetcher", lambda conf, choice: fake)
    batches = list(read_ranges({}, ranges))
    for b in batches:  # one partition a batch
        assert (
            len({(t, p) for t, p in zip(b["topic"].to_pylist(), b["partition"].to_pylist(), strict=True)})
            == 1
        )
    return [
        (t, p, o)
        for b in batches
        for t, p, o in zip(
            b["topic"].to_pylist(), b["partition"].to_pylist(), b["offset"].to_pylist(), strict=True
        )
    ]


# Ranges of 14 partitions of two topics, given out of order: lengths 1 to 10 (1 to 4 chunks of 3), starting
# at 0 or further in, one empty (never assigned), one ending at the log's end (ended by its event).
_TPS = [TopicPartition(t, p) for t in ("b", "a") for p in (6, 0, 3, 1, 5, 2, 4)]
_RANGES = [OffsetRange(tp, i % 3, i % 3 + (i % 10) + 1) for i, tp in enumerate(_TPS)]
_RANGES[4] = OffsetRange(_TPS[4], 5, 5)
_RANGES[7] = OffsetRange(_TPS[7], 10, 20)


def _expected(ranges: list[OffsetRange]) -> list[tuple[str, int, int]]:
    return [
        (r.tp.topic, r.tp.partition, o)
        for r in sorted(ranges, key=lambda r: r.tp)
        for o in range(r.start, r.end)
    ]


def test_the_partitions_read_next_are_assigned_beside_the_one_read_each_still_read_alone_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a queue per partition (sparkafka_native), the next ``PREFETCH_PARTITIONS`` partitions are
    assigned while one is read, so their first fetch is not a fresh wait (bench/PARTITIONS.md); the rows are
    the same as one at a time: each range exactly, in offset order, partitions in (topic, partition) order;
    no more partitions assigned than the window; a partition released once read; nothing left assigned."""
    fake = QueuedFetcher(log_end=20, overlaps=True)
    assert _queued_read(fake, _RANGES, monkeypatch) == _expected(_RANGES)
    order = sorted((r.tp for r in _RANGES if r.end > r.start), key=lambda tp: tp)
    assigned = [tp for what, tp in fake.calls if what == "assign"]
    assert assigned == order  # each once, in reading order, the empty range never
    for now, after in itertools.pairwise(order):
        first_fetch = fake.calls.index(("fetch", now))
        last_fetch = len(fake.calls) - 1 - fake.calls[::-1].index(("fetch", now))
        assert fake.calls.index(("assign", after)) < first_fetch  # assigned before its turn: overlapped
        assert fake.calls.index(("release", now)) > last_fetch
    assert fake.most_assigned == 1 + min(fetch.PREFETCH_PARTITIONS, len(order) - 1)
    assert fake.at == {}


@pytest.mark.parametrize("ahead", [0, 1, 3])
def test_the_window_of_partitions_assigned_ahead_is_bounded(
    ahead: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window bounds the partitions assigned at once (librdkafka's queue bound holds per partition):
    never more than 1 + ``PREFETCH_PARTITIONS``; the rows the same whatever the window."""
    monkeypatch.setattr(fetch, "PREFETCH_PARTITIONS", ahead)
    fake = QueuedFetcher(log_end=20, overlaps=True)
    assert _queued_read(fake, _RANGES, monkeypatch) == _expected(_RANGES)
    assert fake.most_assigned == 1 + ahead


def test_a_fetcher_with_one_queue_reads_one_partition_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """confluent-kafka's (``overlaps`` False): every assigned partition's records share one queue, so
    nothing is assigned beside the partition read."""
    fake = QueuedFetcher(log_end=20, overlaps=False)
    assert _queued_read(fake, _RANGES, monkeypatch) == _expected(_RANGES)
    assert fake.most_assigned == 1
    for now, after in itertools.pairwise(fake.calls):
        if after[0] == "assign":
            assert now[0] == "release"


def test_the_prefetch_bounds_are_divided_among_the_partitions_assigned_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a queue per partition librdkafka's bounds hold per partition: the native fetch's settings
    divide them, so a worker's prefetch stays what it was with one queue; one at a time keeps them."""
    settings = fetch._reader_settings({"bootstrap.servers": "b:9092"})
    monkeypatch.setattr(fetch, "PREFETCH_PARTITIONS", 3)
    own = fetch._per_partition_queues(settings)
    assert int(own["queued.max.messages.kbytes"]) * 4 == int(settings["queued.max.messages.kbytes"])
    assert int(own["queued.min.messages"]) * 4 == int(settings["queued.min.messages"])
    assert {k: v for k, v in own.items() if not k.startswith("queued.")} == {
        k: v for k, v in settings.items() if not k.startswith("queued.")
    }
    given = fetch._per_partition_queues({**settings, "queued.max.messages.kbytes": "lots"})
    assert given["queued.max.messages.kbytes"] == "lots"  # librdkafka refuses it, naming it
    monkeypatch.setattr(fetch, "PREFETCH_PARTITIONS", 0)
    assert fetch._per_partition_queues(settings) == settings


def test_a_users_small_prefetch_bound_is_divided_too_not_raised() -> None:
    """queued.max.messages.kbytes=100 over 9 queues: about 11 KB each, not a floor of 1 MB each."""
    settings = {
        **fetch._reader_settings({"bootstrap.servers": "b:9092"}),
        "queued.max.messages.kbytes": "100",
    }
    own = fetch._per_partition_queues(settings)
    window = 1 + fetch.PREFETCH_PARTITIONS
    assert int(own["queued.max.messages.kbytes"]) * window <= 100
    assert int(own["queued.min.messages"]) * window <= int(settings["queued.min.messages"])


def test_two_ranges_of_one_partition_in_one_read_are_refused() -> None:
    """Reading is keyed by partition: a second range of one would be skipped or read twice."""
    tp = TopicPartition("t", 0)
    with pytest.raises(ValueError, match=r"one range per partition"):
        list(
            fetch.read_ranges({"bootstrap.servers": "b:9092"}, [OffsetRange(tp, 0, 3), OffsetRange(tp, 5, 8)])
        )
