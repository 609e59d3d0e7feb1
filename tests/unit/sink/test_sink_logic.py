"""Pure parts of the sink: options, schema checks, partition routing, intents, pid parsing."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import types as T  # noqa: N812

from sparkafka.errors import ConfigError
from sparkafka.kafka import partition_for_key
from sparkafka.sink.identity import parse_acquired_pid
from sparkafka.sink.intents import IntentRecord, fold, intent_topic, topic_settings
from sparkafka.sink.options import input_columns, parse_sink_options
from sparkafka.sink.routing import Router
from sparkafka.sink.txn_control import TxnHandle

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out"}
BASE_NO_TOPIC = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def parse(**extra: Any) -> Any:
    return parse_sink_options({**BASE, **extra})


def test_defaults_and_exactly_once_options() -> None:
    o = parse()
    assert (o.delivery, o.partitioner, o.topic) == ("at_least_once", "default", "out")
    eos = parse(deliveryGuarantee="EXACTLY_ONCE", transactionalIdPrefix="orders-sink")
    assert eos.transaction_timeout_ms == 900_000
    assert eos.kafka["transaction.timeout.ms"] == "900000"
    assert (
        parse(
            deliveryGuarantee="exactly_once",
            transactionalIdPrefix="p",
            **{"kafka.transaction.timeout.ms": "60000"},
        ).transaction_timeout_ms
        == 60_000
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"deliveryGuarantee": "exactly_once"}, "needs option transactionalIdPrefix"),
        (
            {"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": "a b"},
            "transactionalIdPrefix='a b'",
        ),
        ({"transactionalIdPrefix": "p"}, "only used with deliveryGuarantee=exactly_once"),
        (
            {"deliveryGuarantee": "twice"},
            "deliveryGuarantee='twice' is not allowed; use one of: at_least_once",
        ),
        (
            {"partitioner": "crc32"},
            "partitioner='crc32' is not allowed; use one of: default, fixed, roundrobin",
        ),
        ({"kafka.transactional.id": "x"}, "kafka.transactional.id is managed by sparkafka"),
        ({"topc": "x"}, "unknown option"),
        (
            {
                "deliveryGuarantee": "exactly_once",
                "transactionalIdPrefix": "p",
                "kafka.transaction.timeout.ms": "x",
            },
            "transaction.timeout.ms='x' must be a positive",
        ),
    ],
)
def test_bad_options_name_the_option(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(**extra)


@pytest.mark.parametrize(
    ("given", "want"),
    [
        ("exactly_once", "exactly_once"),
        ("exactly-once", "exactly_once"),  # Flink's sink.delivery-guarantee
        ("EXACTLY_ONCE", "exactly_once"),  # Flink's DeliveryGuarantee enum constant
        ("Exactly-Once", "exactly_once"),
        (" exactly_once ", "exactly_once"),
        ("at_least_once", "at_least_once"),
        ("at-least-once", "at_least_once"),
        ("AT_LEAST_ONCE", "at_least_once"),
        ("none", "none"),
        ("NONE", "none"),
    ],
)
def test_delivery_guarantee_takes_sparkafkas_and_flinks_spellings(given: str, want: str) -> None:
    prefix = {"transactionalIdPrefix": "p"} if want == "exactly_once" else {}
    assert parse(deliveryGuarantee=given, **prefix).delivery == want


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        ("exactly_one", "exactly_once"),
        ("exactlyonce", "exactly_once"),
        ("exactly once", "exactly_once"),
        ("EXACTLY.ONCE", "exactly_once"),
        ("at-least-one", "at_least_once"),
        ("at_most_once", "none"),  # Kafka's name for what none gives
        ("At-Most-Once", "none"),
        ("twice", None),
        ("transactional", None),
    ],
)
def test_any_other_delivery_guarantee_is_refused_in_one_sentence(given: str, hint: str | None) -> None:
    with pytest.raises(ConfigError) as raised:
        parse(deliveryGuarantee=given, transactionalIdPrefix="p")
    allowed = "use one of: at_least_once, exactly_once, none (in any case, with - or _)"
    did_you_mean = "" if hint is None else f"; did you mean {hint!r}?"
    assert str(raised.value) == f"option deliveryGuarantee={given!r} is not allowed; {allowed}{did_you_mean}"


def schema(**cols: Any) -> T.StructType:
    return T.StructType([T.StructField(n, t) for n, t in cols.items()])


def test_input_columns_accepts_the_documented_types() -> None:
    headers = T.ArrayType(
        T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())])
    )
    cols = input_columns(
        schema(
            key=T.StringType(),
            value=T.BinaryType(),
            topic=T.StringType(),
            partition=T.IntegerType(),
            headers=headers,
            timestamp=T.TimestampType(),
            extra=T.LongType(),
        ),
        parse_sink_options({"kafka.bootstrap.servers": BASE["kafka.bootstrap.servers"]}),
    )
    assert (cols.key, cols.topic, cols.partition, cols.headers, cols.timestamp) == (True,) * 5


def test_the_topic_option_overrides_a_topic_column_as_in_spark() -> None:
    both = schema(value=T.BinaryType(), topic=T.StringType())
    assert not input_columns(both, parse()).topic
    assert input_columns(both, parse_sink_options({"kafka.bootstrap.servers": "h:1"})).topic


def test_spark_sink_option_include_headers_is_accepted_and_checked() -> None:
    parse(includeHeaders="true")
    with pytest.raises(ConfigError, match="includeHeaders"):
        parse(includeHeaders="maybe")
    assert not input_columns(schema(value=T.StringType()), parse()).key


@pytest.mark.parametrize(
    ("cols", "message"),
    [
        ({"key": T.StringType()}, "needs a column named value"),
        (
            {"value": T.LongType()},
            "column value of the sparkafka sink's input must be binary or string, not bigint",
        ),
        ({"value": T.StringType(), "partition": T.LongType()}, "column partition .* must be int, not bigint"),
        ({"value": T.StringType(), "headers": T.StringType()}, "column headers .* must be array<struct"),
    ],
)
def test_input_column_errors(cols: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        input_columns(schema(**cols), parse())


def test_column_names_are_matched_exactly_as_in_spark() -> None:
    upper = schema(value=T.StringType(), Key=T.StringType(), Topic=T.LongType(), Partition=T.StringType())
    cols = input_columns(upper, parse())  # the wrong types do not matter: Spark never reads those columns
    assert (cols.key, cols.topic, cols.partition) == (False, False, False)
    with pytest.raises(ConfigError, match="needs a column named value"):
        input_columns(schema(Value=T.StringType()), parse())
    with pytest.raises(ConfigError, match="needs option topic, or a string column named topic"):
        input_columns(schema(value=T.StringType(), Topic=T.StringType()), parse_sink_options(BASE_NO_TOPIC))


def test_columns_spark_ignores_are_not_type_checked(caplog: pytest.LogCaptureFixture) -> None:
    # The topic option overrides the column, so its type does not matter (Spark never looks at it).
    assert not input_columns(schema(value=T.StringType(), topic=T.LongType()), parse()).topic
    with pytest.raises(ConfigError, match=r"column topic .* must be string, not bigint"):
        input_columns(schema(value=T.StringType(), topic=T.LongType()), parse_sink_options(BASE_NO_TOPIC))
    # Spark 4.2 ignores a timestamp column; sparkafka writes one of type timestamp, and ignores the others.
    for other in (T.StringType(), T.LongType(), T.TimestampNTZType()):
        with caplog.at_level(logging.WARNING, "sparkafka.sink.options"):
            assert not input_columns(schema(value=T.StringType(), timestamp=other), parse()).timestamp
        assert f"column timestamp ({other.simpleString()}) is not written" in caplog.text
    assert input_columns(schema(value=T.StringType(), timestamp=T.TimestampType()), parse()).timestamp


def test_topic_column_or_option_is_required() -> None:
    no_topic = parse_sink_options({"kafka.bootstrap.servers": "h:1"})
    with pytest.raises(ConfigError, match="needs option topic, or a string column named topic"):
        input_columns(schema(value=T.StringType()), no_topic)
    assert input_columns(schema(value=T.StringType(), topic=T.StringType()), no_topic).topic


@given(st.lists(st.binary(min_size=0, max_size=20), min_size=1, max_size=50), st.integers(1, 12))
def test_default_router_puts_keys_where_java_would(keys: list[bytes], n: int) -> None:
    router = Router("default", 0, lambda _t: n)
    assert [router.partition("t", k, 10) for k in keys] == [partition_for_key(k, n) for k in keys]


def test_fixed_and_roundrobin_and_sticky_routing() -> None:
    assert {Router("fixed", 7, lambda _t: 3).partition("t", b"k", 1) for _ in range(5)} == {1}
    rr = Router("roundrobin", 0, lambda _t: 3)
    assert [rr.partition("t", None, 1) for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    sticky = Router("default", 0, lambda _t: 4)
    first = [sticky.partition("t", None, 100) for _ in range(100)]  # 10 kB: under one 16 kB batch
    assert len(set(first)) == 1


def test_parse_acquired_pid_takes_the_last_report() -> None:
    lines = [
        "TXNSTATE [rdkafka#producer-3] [thrd:main]: Transaction state change Init -> WaitPID",
        "IDEMPSTATE [rdkafka#producer-3] [thrd:main]: Acquired PID{Id:17,Epoch:0}",
        "IDEMPSTATE [rdkafka#producer-3] [thrd:main]: Acquired PID{Id:17,Epoch:3}",
    ]
    assert parse_acquired_pid(lines) == (17, 3)
    assert parse_acquired_pid(["nothing here"]) is None


H1 = TxnHandle("p-0", 5, 1, 10, 0)
H2 = TxnHandle("p-1", 6, 2, 20, 1)


def keyed(records: list[IntentRecord]) -> list[tuple[int, bytes | None, IntentRecord | None]]:
    return [(i, r.key(), r) for i, r in enumerate(records)]


def test_fold_keeps_each_querys_newest_record_and_the_ids_in_use() -> None:
    state = fold(
        keyed(
            [
                IntentRecord("q", 0, "intent", (H1,), 2),
                IntentRecord("q", 0, "done", (), 2),
                IntentRecord("q", 1, "intent", (H1, H2), 3),
            ]
        )
    )
    assert state.is_done("q", 0)
    assert not state.is_done("q", 1)
    assert not state.is_done("other", 0)
    assert [r.batch_id for r in state.pending] == [1]
    record = state.record_for("q", 1)
    assert record is not None
    assert record.handles == (H1, H2)
    assert state.record_for("q", 0) is None  # overwritten: one record per query
    assert state.tids_in_use == 3
    records = [IntentRecord("q", b, s, (), 1) for b in range(3) for s in ("intent", "done")]
    assert fold(keyed(records)).pending == []  # type: ignore[arg-type]


def test_fold_takes_a_record_only_while_it_continues_its_querys_state_and_marks_a_late_one() -> None:
    """A record names the offset of the query's state it was decided on (``base``): one that continues
    anything else (it landed late, or its writer read an old log) is ignored, its ids in use too, and the
    query marked shadowed until a record continuing its state follows. Records without a base (an older
    version's) are taken in log order, as then."""
    intent = IntentRecord("q", 1, "intent", (H2,), 2, base=-1)  # offset 0
    done = IntentRecord("q", 1, "done", (), 2, base=0)  # offset 1
    late = [
        IntentRecord("q", 1, "intent", (H1,), 5, base=-1),  # decided when the query had no state
        IntentRecord("q", 1, "partial", (H1,), 5, (H2,), base=0),  # an outcome of the same intent, again
    ]
    for stale in late:
        state = fold(keyed([intent, done, stale]))
        assert state.latest["q"] == done
        assert state.offsets["q"] == 1
        assert state.tids_in_use == 2
        assert state.shadowed == {"q"}
        again = replace(done, base=1)
        assert fold(keyed([intent, done, stale, again])).shadowed == set()
    assert (
        fold(keyed([intent, done, IntentRecord("q", 2, "intent", (H1,), 3, base=1)])).latest["q"].batch_id
        == 2
    )
    old = [IntentRecord("q", 1, "intent", (H1,), 2), IntentRecord("q", 0, "done", (), 2)]
    assert fold(keyed(old)).latest["q"].batch_id == 0  # without a base: the last one, as before


def test_a_fold_made_before_compaction_takes_the_records_that_survived_it() -> None:
    """A process folds the log incrementally (``IntentLog``). When compaction removed records of a query
    after the process's last read (it keeps the last of a key in what it cleaned), the next record the
    process reads continues one it never saw: its base lies beyond the state's offset. It is taken (in the
    soak every later record of the query was ignored, and a replay was written twice), while a record
    decided on an older state than the one folded is not."""
    state = fold([(0, b"q", IntentRecord("q", 0, "done", (), 1, base=-1))])
    survivor = IntentRecord("q", 40, "done", (), 1, base=244)  # intent 40 at 244 and all before it: gone
    fold([(247, b"q", survivor)], state)
    assert (state.latest["q"], state.offsets["q"], state.shadowed) == (survivor, 247, set())
    fold([(250, b"q", IntentRecord("q", 41, "intent", (H1,), 1, base=100))], state)  # decided long ago
    assert (state.latest["q"], state.shadowed) == (survivor, {"q"})


def test_a_base_survives_the_logs_json() -> None:
    record = IntentRecord("q", 1, "intent", (H1,), 2, at_ms=5, base=9)
    assert IntentRecord.from_json(record.to_json()) == record
    assert IntentRecord.from_json(replace(record, base=None).to_json()).base is None
    assert IntentRecord.from_json(replace(record, base=-1).to_json()).base == -1


def test_partial_and_abandoned_batches_are_not_done_and_not_pending() -> None:
    for state in ("partial", "abandoned"):
        folded = fold(keyed([IntentRecord("q", 4, state, (H2,), 2, (H1,))]))  # type: ignore[arg-type]
        assert not folded.is_done("q", 4)
        assert folded.is_done("q", 3)
        assert folded.pending == []


def test_tombstones_delete_a_finished_batch_write() -> None:
    job = IntentRecord("batch-x", 0, "intent", (H1,), 1, streaming=False)
    assert fold([(0, job.key(), job), (1, b"batch-x", None)]).latest == {}


def test_owner_is_the_newest_streaming_writer() -> None:
    records = [
        IntentRecord("q1", 3, "done", at_ms=10),
        IntentRecord("q2", 0, "done", at_ms=20),
        IntentRecord("batch-y", 0, "partial", streaming=False, at_ms=30),
    ]
    owner = fold(keyed(records)).owner()
    assert owner is not None
    assert owner.query_id == "q2"


def test_intent_record_round_trips() -> None:
    record = IntentRecord("q-1", 42, "partial", (H2,), 4, (H1,), streaming=False, at_ms=123)
    assert IntentRecord.from_json(record.to_json()) == record
    assert record.key() == b"q-1"
    assert IntentRecord("", -1, "claim", (), 3).key() == b"#claim"


def test_records_written_before_tasks_were_stored_still_read() -> None:
    old = (
        b'{"batch": 1, "query": "q", "state": "intent", "tids": 2,'
        b' "txns": [{"epoch": 1, "n": 3, "pid": 7, "tid": "p-1"}]}'
    )
    record = IntentRecord.from_json(old)
    assert record.handles == (TxnHandle("p-1", 7, 1, 3, 1),)
    with pytest.raises(ValueError, match="unknown intent state"):
        IntentRecord.from_json(b'{"batch": 1, "query": "q", "state": "maybe"}')


def test_claims_raise_the_ids_in_use_until_a_commit_fences_them() -> None:
    records = [
        IntentRecord("q", 0, "done", (), 1),
        IntentRecord("", -1, "claim", (), 3),
        IntentRecord("", -1, "claim", (), 2),  # a concurrent task's smaller claim does not lower it
    ]
    assert fold(keyed(records)).tids_in_use == 3
    assert fold(keyed([*records, IntentRecord("q", 1, "done", (), 2)])).tids_in_use == 2


def test_intent_topic_is_durable_where_the_cluster_allows() -> None:
    assert topic_settings(1) == (
        1,
        {"cleanup.policy": "compact", "min.insync.replicas": "1", "segment.ms": "3600000"},
    )
    rf, config = topic_settings(5)
    assert (rf, config["min.insync.replicas"]) == (3, "2")
    assert topic_settings(2)[0] == 2
    assert topic_settings(2)[1]["min.insync.replicas"] == "2"


def test_patterns_never_match_internal_topics() -> None:
    from sparkafka.source.options import Subscription

    sub = Subscription(pattern=".*")
    assert sub.matches("orders")
    assert not sub.matches(intent_topic("orders-sink"))
    assert not Subscription(pattern="_sparkafka.*").matches("_sparkafka-intents-x")


def test_broker_rejecting_a_record_as_too_large_fails_the_flush_with_the_fix() -> None:
    from confluent_kafka import KafkaError

    from sparkafka.errors import BrokerError
    from sparkafka.sink.delivery import Deliveries
    from sparkafka.sink.task import _flush

    class Message:
        def topic(self) -> str:
            return "orders"

        def partition(self) -> int:
            return 3

    class Producer:  # what librdkafka does: flush() serves the delivery callbacks
        def __init__(self, delivery: Deliveries) -> None:
            self.delivery = delivery

        def flush(self, _timeout: float) -> int:
            # The records purged once the transaction failed can be reported first (measured: the
            # witness record's _PURGE_QUEUE came before the cause), and must not hide it.
            self.delivery(KafkaError(KafkaError._PURGE_QUEUE), Message())
            self.delivery(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), Message())
            return 0

        def poll(self, _timeout: float) -> int:
            return 0

    delivery = Deliveries({})
    with pytest.raises(
        BrokerError, match=r"e\.g\. orders-3: .*MSG_SIZE_TOO_LARGE.*topic's max\.message\.bytes"
    ):
        _flush(Producer(delivery), delivery)


def test_short_timeout_warning_once_per_prefix_not_per_batch() -> None:
    from sparkafka.sink.writer import warn_if_short_timeout

    short = parse(
        deliveryGuarantee="exactly_once",
        transactionalIdPrefix="warn-once",
        **{"kafka.transaction.timeout.ms": "10000"},
    )
    assert warn_if_short_timeout(short)
    assert not warn_if_short_timeout(short)  # the next batch's writer: quiet
    assert not warn_if_short_timeout(parse(deliveryGuarantee="exactly_once", transactionalIdPrefix="ok"))


def test_speculation_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from sparkafka.sink.writer import SPECULATION_ENV, check_no_speculation

    monkeypatch.setenv(SPECULATION_ENV, "false")
    check_no_speculation()
    monkeypatch.setenv(SPECULATION_ENV, "true")
    with pytest.raises(ConfigError, match=r"cannot run with spark\.speculation=true"):
        check_no_speculation()


def test_sink_counters_are_kept_per_query_and_per_prefix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    import sparkafka
    from sparkafka.sink.commit_parts import MetricsCounter

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    count = MetricsCounter("per-query")
    count("q1", records=5, transactions=1)
    count("q2", records=7, transactions=2)
    count("q1", replays=1, records=0)
    assert sparkafka.sink_metrics("per-query", "q1")["records"] == 5
    assert sparkafka.sink_metrics("per-query", "q2")["transactions"] == 2
    total = sparkafka.sink_metrics("per-query")
    assert (total["records"], total["transactions"], total["replays"]) == (12, 3, 1)
    assert sparkafka.sink_metrics("per-query", "never")["records"] == 0
