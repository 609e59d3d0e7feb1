"""The raw log reader's marker search against a scripted broker: stale high watermarks, a leader that goes
away, offsets no longer in the log (review findings F2 and F6)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.errors import KafkaConnectionError
from kafka.record.default_records import DefaultRecordBatchBuilder

from sparkafka.client import raw_log
from sparkafka.client.raw_log import LogRangeGoneError, Marker, find_marker
from sparkafka.errors import AuthorizationError, BrokerError
from sparkafka.structs import TopicPartition

TP = TopicPartition("t", 0)


class _ControlBuilder(DefaultRecordBatchBuilder):
    def _get_attributes(self, include_compression_type: bool = True) -> int:
        return super()._get_attributes(include_compression_type) | self.CONTROL_MASK


def batch(base: int, pid: int, epoch: int, records: int = 1, control: bool | None = None) -> bytes:
    """A transactional batch at ``base``: ``records`` data records, or a COMMIT (True) / ABORT marker."""
    builder_type = DefaultRecordBatchBuilder if control is None else _ControlBuilder
    builder = builder_type(2, 0, 1, pid, epoch, 0, 1 << 20)
    if control is None:
        for i in range(records):
            builder.append(i, 1_700_000_000_000, None, b"v", [])
    else:
        builder.append(0, 1_700_000_000_000, struct.pack(">hh", 0, int(control)), b"\x00\x00\x00\x00", [])
    raw = bytearray(builder.build())
    raw[0:8] = struct.pack(">q", base)  # the base offset is not under the CRC
    return bytes(raw)


def fetch_answer(hwm: int, records: bytes = b"", error: int = 0) -> Any:
    part = SimpleNamespace(error_code=error, high_watermark=hwm, records=records)
    return SimpleNamespace(responses=[SimpleNamespace(partitions=[part])])


class Broker:
    """A kafka-python client whose Fetch answers come from a script (an answer, or an exception)."""

    def __init__(self, fetches: list[Any], log_start: int = 0, topic_error: int = 0) -> None:
        self.fetches: Iterator[Any] = iter(fetches)
        self.topic_error = topic_error
        self.log_start = log_start
        self.refreshed = 0
        self.client_settings: dict[str, Any] = {}
        self.cluster = SimpleNamespace(
            leader_for_partition=lambda _tp: 1,
            update_metadata=lambda _response: None,
            partitions_for_topic=lambda _t: {0},
        )

    def least_loaded_node(self) -> int:
        return 1

    def check_version(self, timeout_ms: int) -> None:
        pass

    def close(self) -> None:
        pass

    def send_and_receive(self, node: int, request: Any, timeout_ms: int) -> Any:
        name = type(request).__name__
        if name.startswith("Metadata"):
            self.refreshed += 1
            return SimpleNamespace(topics=[SimpleNamespace(name=TP.topic, error_code=self.topic_error)])
        if name.startswith("ListOffsets"):
            part = SimpleNamespace(error_code=0, offset=self.log_start)
            return SimpleNamespace(topics=[SimpleNamespace(partitions=[part])])
        answer = next(self.fetches)
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(fetches: list[Any], log_start: int = 0, topic_error: int = 0) -> Broker:
        fake = Broker(fetches, log_start, topic_error)

        def new_client(_conf: Any, **settings: Any) -> Broker:
            fake.client_settings = settings
            return fake

        monkeypatch.setattr(raw_log, "new_kafka_python_client", new_client)
        return fake

    return install


def test_a_stale_high_watermark_does_not_end_the_search_before_the_end_known_beforehand(broker: Any) -> None:
    """A leader answering a high watermark below the end ListOffsets gave before the search (a new leader
    catching up, a deposed one) would make "no marker" look proven; the search asks again instead."""
    fake = broker(
        [
            fetch_answer(3, batch(2, 7, 3, records=1)),  # stale: the COMMIT at 4 is above its watermark
            fetch_answer(5, batch(2, 7, 3, records=2) + batch(4, 7, 3, control=True)),
        ]
    )
    assert find_marker({}, TP, 7, (2, 5), timeout_s=10) == Marker(4, True, 3)
    assert fake.refreshed >= 2  # once at the start, again before asking anew


def test_a_stale_high_watermark_that_never_catches_up_is_an_error_not_an_answer(broker: Any) -> None:
    broker([fetch_answer(3) for _ in range(100)])
    with pytest.raises(BrokerError, match="answered a high watermark of 3, below the 5"):
        find_marker({}, TP, 7, (2, 5), timeout_s=0.5)


def test_a_leader_that_goes_away_is_asked_again_through_fresh_metadata(broker: Any) -> None:
    broker([KafkaConnectionError("broker down"), fetch_answer(5, batch(4, 7, 3, control=False))])
    assert find_marker({}, TP, 7, (4, 5), timeout_s=10) == Marker(4, False, 3)


def test_no_marker_of_the_producer_up_to_the_end_is_none(broker: Any) -> None:
    broker([fetch_answer(6, batch(2, 8, 1, control=True) + batch(3, 7, 3, records=3))])
    assert find_marker({}, TP, 7, (2, 6), timeout_s=10) is None


def test_an_offset_no_longer_in_the_log_says_where_the_log_starts(broker: Any) -> None:
    broker([fetch_answer(-1, error=1)], log_start=40)
    with pytest.raises(
        LogRangeGoneError, match="no longer holds offset 2 \\(its log starts at 40\\)"
    ) as gone:
        find_marker({}, TP, 7, (2, 5), timeout_s=10)
    assert gone.value.log_start == 40


SASL = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "etl"}


def test_a_fetch_refused_by_acl_is_one_sentence_naming_the_user_and_the_grant(broker: Any) -> None:
    """The driver reads the intent log raw when an EndTxn answer cannot say what became of a transaction;
    a missing READ there is the sentence every other refusal is, not "error 29" (the authorization code)."""
    broker([fetch_answer(-1, error=29)])
    with pytest.raises(AuthorizationError) as refused:
        find_marker(SASL, TP, 7, (2, 5), timeout_s=10)
    assert str(refused.value) == (
        "user etl may not READ topic t (fetching t-0 for its raw log): grant it with sparkafka acls grant "
        "--principal User:etl --operation read --topic t --command-config ADMIN_CONFIG (ADMIN_CONFIG: a file "
        "of an administrator's settings), or with Kafka's kafka-acls.sh --add --allow-principal User:etl "
        "--operation Read --topic t"
    )


def test_a_topic_the_user_may_not_describe_is_one_sentence_at_once(broker: Any) -> None:
    fake = broker([], topic_error=29)
    with pytest.raises(AuthorizationError, match=r"^user etl may not DESCRIBE topic t \(looking it up"):
        find_marker(SASL, TP, 7, (2, 5), timeout_s=10)
    assert fake.refreshed == 1  # not asked again until a timeout


def test_the_marker_search_does_not_take_a_refusal_for_a_broker_to_ask_again(
    broker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused read leaves the batch pending with the ACL's sentence, not "the next writer tries again"."""
    from sparkafka.sink import outcomes
    from sparkafka.sink.txn_control import MarkerProbe, TxnHandle

    class Ends:
        def __init__(self, *_: Any) -> None:
            pass

        def latest(self, tps: Any) -> dict[TopicPartition, int]:
            return dict.fromkeys(tps, 5)

    monkeypatch.setattr(outcomes, "AdminMetadata", Ends)
    broker([fetch_answer(-1, error=29)])
    handle = TxnHandle("eos-0", 7, 3, probe=MarkerProbe("t", 0, 2))
    with pytest.raises(AuthorizationError, match=r"^user etl may not READ topic t "):
        outcomes.KafkaEvidence(SASL, 10).find(handle, 0, 0)


def test_the_client_takes_answers_larger_than_a_fetch_asks_for(broker: Any) -> None:
    fake = broker([fetch_answer(6, batch(2, 8, 1, control=True) + batch(3, 7, 3, records=3))])
    find_marker({}, TP, 7, (2, 6), timeout_s=10)
    # kafka-python's default (1 MB) refused a partition's 2.4 MB answer; a fetch asks for up to 8 MB.
    assert fake.client_settings["receive_message_max_bytes"] > raw_log._FETCH_MAX_BYTES
