"""A new user's first errors: one sentence, first, fast, naming the option and the fix.

The integration side (Spark's own wrapping, real broker, wall-clock and stderr line counts) is
tests/integration/test_first_errors.py.
"""

from __future__ import annotations

import io
import json
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from sparkafka.client import core as clients
from sparkafka.client import log as librdkafka_log
from sparkafka.client.conf import check_librdkafka_settings, close_librdkafka_property
from sparkafka.client.contact import first_contact
from sparkafka.errors import BrokerError, ConfigError
from sparkafka.pipeline.config import load_pipeline
from sparkafka.pipeline.preflight import check_prefix_owner
from sparkafka.sink.intents import IntentRecord, LogState
from sparkafka.sink.options import parse_sink_options
from sparkafka.source.options import parse_source_options
from sparkafka.spark_lines import HIDE_TRACEBACK_ENV, sentence_errors

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


# -- 1. sparkafka's errors reach the user without the worker's traceback -------------------------------


@sentence_errors
def _fails(error: BaseException) -> None:
    raise error


def _worker_report(error: BaseException) -> str:
    """What PySpark's worker sends the JVM for ``error`` raised through ``sentence_errors`` (Spark 4.3)."""
    return _report_of(lambda: _fails(error))


def _report_of(call: Any) -> str:
    """What PySpark's worker (and its streaming source runner) sends the JVM when ``call`` fails."""
    from pyspark.serializers import read_int
    from pyspark.util import handle_worker_exception

    out = io.BytesIO()
    try:
        call()
    except BaseException as e:  # noqa: BLE001 - the worker's own catch-all, reproduced
        handle_worker_exception(e, out)
    else:
        raise AssertionError("the call did not fail")
    out.seek(0)
    read_int(out)  # PYTHON_EXCEPTION_THROWN
    return out.read()[4:].decode()


@pytest.fixture(params=["4.2 and later", "4.0 and 4.1"])
def in_worker(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    if request.param == "4.2 and later":
        monkeypatch.setenv("SPARK_PYTHON_RUNTIME", "PYTHON_WORKER")  # as Spark's runners set it
    else:  # no SPARK_PYTHON_RUNTIME: the worker factory's variables say it (spark_lines.in_python_worker)
        monkeypatch.delenv("SPARK_PYTHON_RUNTIME", raising=False)
        monkeypatch.setenv("PYTHON_WORKER_FACTORY_SECRET", "s3cret")
    monkeypatch.delenv(HIDE_TRACEBACK_ENV, raising=False)


@pytest.mark.usefixtures("in_worker")
def test_a_sparkafka_error_is_reported_as_its_sentence_alone() -> None:
    report = _worker_report(ConfigError("option startingOffsets='nope' is not allowed; use group, earliest"))
    assert report == (
        "sparkafka.errors.ConfigError: option startingOffsets='nope' is not allowed; use group, earliest\n"
    )


@pytest.mark.usefixtures("in_worker")
def test_any_other_error_keeps_its_traceback() -> None:
    report = _worker_report(KeyError("a bug"))
    assert report.startswith("Traceback (most recent call last):")
    assert HIDE_TRACEBACK_ENV not in os.environ


def test_outside_a_spark_worker_nothing_is_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_PYTHON_RUNTIME", raising=False)
    for name in (
        "PYTHON_WORKER_FACTORY_SECRET",
        "PYTHON_WORKER_FACTORY_PORT",
        "PYTHON_WORKER_FACTORY_SOCK_PATH",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(HIDE_TRACEBACK_ENV, raising=False)
    with pytest.raises(ConfigError):
        _fails(ConfigError("x"))
    assert HIDE_TRACEBACK_ENV not in os.environ


def test_every_method_spark_calls_on_the_stream_reader_reports_the_sentence_alone() -> None:
    """The methods Spark's streaming source runner calls (one process per query, on the driver) and the
    batch reader's ``partitions`` (the planner): each through ``sentence_errors``. ``read`` is not: it runs
    in tasks and returns an iterator, whose failures come after it returned (``spark_errors`` words them)."""
    from pyspark.sql.datasource import DataSourceStreamReader

    from sparkafka.source.reader import KafkaBatchReader, KafkaStreamReader

    called = [n for n, f in vars(DataSourceStreamReader).items() if callable(f) and not n.startswith("_")]
    assert {"initialOffset", "latestOffset", "partitions", "commit", "stop"} <= set(called)
    spark_calls = [*called, "prepareForTriggerAvailableNow"]
    bare = [
        n for n in spark_calls if n != "read" and not hasattr(getattr(KafkaStreamReader, n), "__wrapped__")
    ]
    assert bare == []
    assert hasattr(KafkaBatchReader.partitions, "__wrapped__")


def test_the_wrapped_latest_offset_keeps_its_signature_for_admission_control() -> None:
    """PySpark 4.2's runner offers read limits to a ``latestOffset`` that takes parameters (by
    ``inspect.signature``, which follows ``functools.wraps``)."""
    import inspect

    from sparkafka.source.reader import KafkaStreamReader

    reader = KafkaStreamReader(parse_source_options({**BOOT, "subscribe": "t"}))
    assert list(inspect.signature(reader.latestOffset).parameters) == ["start", "limit"]


@pytest.mark.usefixtures("in_worker")
def test_a_stream_readers_sentence_reaches_the_runners_report_alone() -> None:
    """A query given ``.schema(...)`` (``load()`` asks nothing then) on a topic that does not exist: the
    first discovery, in ``initialOffset``, refuses it, and the source runner reports the sentence alone."""
    from sparkafka.source.planning import Discovery
    from sparkafka.source.reader import KafkaStreamReader

    class Empty:
        def discover(self, subscription: Any, *, topic_ids: bool = True) -> Discovery:
            return Discovery(set(), {})

        def require_source_access(self, options: Any, found: Any) -> None:
            pass

    reader = KafkaStreamReader(parse_source_options({**BOOT, "subscribe": "t"}))
    reader._planner._metadata = Empty()  # type: ignore[assignment]
    assert _report_of(reader.initialOffset) == (
        "sparkafka.errors.ConfigError: Unable to retrieve any partitions for topic(s) t (subscribe=t): they "
        "do not exist. Create them first, or check the names\n"
    )


# -- 2. a wrong address fails fast; librdkafka's lines are routed and rate-limited ----------------------


class _Admin:
    """An AdminClient that answers list_topics with ``error`` (or a cluster without topics)."""

    def __init__(self, error: KafkaException | None = None, clock: Any = None) -> None:
        self.error = error
        self.timeouts: list[float] = []
        self.clock = clock

    def list_topics(self, timeout: float) -> Any:
        self.timeouts.append(timeout)
        if self.error is not None:
            if self.clock is not None:
                self.clock.now += timeout
            raise self.error

        class Metadata:
            topics: dict[str, Any] = {}  # noqa: RUF012 - a fake's constant answer

        return Metadata()

    def poll(self, timeout: float) -> int:
        return 0


def test_first_contact_fails_in_one_sentence_naming_the_address() -> None:
    from sparkafka.client.contact import first_answer

    clock = _Clock()
    error = KafkaException(KafkaError(KafkaError._INVALID_ARG, "Failed to get metadata: nope"))
    admin = _Admin(error, clock)
    with pytest.raises(BrokerError) as raised:
        first_answer(
            {"bootstrap.servers": "10.0.0.1:1"},
            5.0,
            make_admin=lambda _settings: admin,
            clock=lambda: clock.now,
            sleep=lambda s: setattr(clock, "now", clock.now + s),
            probe_tls=lambda _conf: False,
        )
    assert str(raised.value) == (
        "listing topics failed against bootstrap servers 10.0.0.1:1 (option kafka.bootstrap.servers): no "
        "Kafka broker answered within 5 s; is it running, and is the address right? (librdkafka: Failed to "
        "get metadata: nope)"
    )
    assert sum(admin.timeouts) == pytest.approx(5.0)


@pytest.mark.parametrize(
    ("options", "metadata_timeout_ms", "bound_s"),
    [
        ({}, 30_000, 5.0),  # the default metadataTimeoutMs: the first contact gets 5 s
        ({}, 2_000, 2.0),
        ({"metadataTimeoutMs": "60000"}, 60_000, 60.0),  # set by the user: theirs
    ],
)
def test_first_contact_bound(
    options: dict[str, str], metadata_timeout_ms: int, bound_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sparkafka.client import contact

    bounds: list[float] = []
    monkeypatch.setattr(contact, "first_answer", lambda _conf, timeout_s, **_: bounds.append(timeout_s))
    first_contact({"bootstrap.servers": "b:1"}, options, metadata_timeout_ms)
    assert bounds == [bound_s]


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _record(message: str, level: int = logging.ERROR) -> logging.LogRecord:
    # confluent-kafka logs librdkafka's lines as logger.log(level, "%s [%s] %s", facility, client, text)
    return logging.LogRecord("sparkafka.librdkafka", level, "", 0, "%s [%s] %s", ("FAIL", "c", message), None)


REFUSED = (
    "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused (after {}ms in state X)"
)


def test_rate_limit_lets_three_of_a_kind_through_a_minute_and_counts_the_rest() -> None:
    clock = _Clock()
    limit = librdkafka_log.RateLimit(burst=3, window_s=60.0, clock=clock)
    shown = []
    for i in range(100):  # 20 a second for 5 s, timings varying as librdkafka's do
        details = f"{i % 3}ms in state X" if i % 2 else f"0ms in state X, {i} identical error(s) suppressed"
        record = _record(REFUSED.format(details))
        if limit.filter(record):
            shown.append(record.getMessage())
        clock.now += 0.05
    assert len(shown) == 3
    assert shown[2].endswith("(more like this are held back for 60 s)")
    assert limit.filter(_record("another kind of line"))  # kinds are counted apart
    clock.now = 61.0
    record = _record(REFUSED.format("7ms in state X"))
    assert limit.filter(record)
    assert record.getMessage().endswith("(97 more like this in the last 60 s were not shown)")


def test_a_window_that_opens_and_closes_a_burst_says_both() -> None:
    clock = _Clock()
    limit = librdkafka_log.RateLimit(burst=1, window_s=10.0, clock=clock)
    assert [limit.filter(_record("down")) for _ in range(3)] == [True, False, False]
    clock.now = 10.0
    record = _record("down")
    assert limit.filter(record)
    assert record.getMessage() == (
        "FAIL [c] down (2 more like this in the last 10 s were not shown) "
        "(more like this are held back for 10 s)"
    )


def test_rate_limit_never_holds_back_debug_lines() -> None:
    limit = librdkafka_log.RateLimit(burst=1, clock=_Clock())
    assert all(limit.filter(_record("Acquired PID", logging.DEBUG)) for _ in range(10))


class _Recorder:
    made: list[dict[str, Any]] = []  # noqa: RUF012 - shared by the stand-ins of one test

    def __init__(self, conf: dict[str, Any]) -> None:
        self.made.append(conf)
        self.polls = 0

    def poll(self, _timeout: float) -> int:
        self.polls += 1
        return 0


@pytest.fixture
def recorders(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    import confluent_kafka
    import confluent_kafka.admin

    _Recorder.made = []
    monkeypatch.setattr(clients, "_cache", {})
    monkeypatch.setattr(clients, "_closers", {})
    monkeypatch.setattr(clients, "_LOG_SERVE_INTERVAL_S", 0.01)
    for module, name in ((confluent_kafka, "Consumer"), (confluent_kafka, "Producer")):
        monkeypatch.setattr(module, name, _Recorder)
    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", _Recorder)
    return _Recorder.made


def test_every_client_logs_through_the_rate_limited_logger(recorders: list[dict[str, Any]]) -> None:
    settings = {"bootstrap.servers": "b:1"}
    clients.new_consumer({**settings, "group.id": "g"})
    clients.new_producer(settings)
    admin = clients.admin_client(settings)
    assert [conf["logger"] for conf in recorders] == [librdkafka_log.LIBRDKAFKA_LOG] * 3
    assert "logger" not in settings  # added at construction: parsed options stay picklable
    assert librdkafka_log.RATE_LIMIT in librdkafka_log.LIBRDKAFKA_LOG.filters
    deadline = time.monotonic() + 10
    while admin.polls == 0 and time.monotonic() < deadline:  # its log lines are served for it
        time.sleep(0.01)
    assert admin.polls > 0


def test_a_callers_own_logger_is_kept_and_rate_limited(recorders: list[dict[str, Any]]) -> None:
    own = logging.Logger(f"capture-{uuid.uuid4().hex}")  # as sink.identity reads debug lines
    clients.new_producer({"bootstrap.servers": "b:1", "logger": own})
    assert recorders[0]["logger"] is own
    assert own.filters == [librdkafka_log.RATE_LIMIT]
    assert own.parent is None  # its place, level and handlers are its own
    assert own.level == logging.NOTSET


# -- 3. a librdkafka property typo -----------------------------------------------------------------------


def test_a_kafka_property_typo_gets_did_you_mean_at_parse_time() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_source_options({**BOOT, "subscribe": "t", "kafka.fetch.max.byte": "1000"})
    assert (
        str(raised.value)
        == "option kafka.fetch.max.byte is not a librdkafka setting: did you mean kafka.fetch.max.bytes?"
    )
    with pytest.raises(
        ConfigError,
        match=r"^option kafka.linger.msec is not a librdkafka setting: did you mean kafka.linger.ms\?$",
    ):
        parse_sink_options({**BOOT, "topic": "t", "kafka.linger.msec": "5"})


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"subscribe": "t"}, "option kafka.subscribe is not a librdkafka setting: did you mean subscribe?"),
        ({"no.such.thing": "1"}, "option kafka.no.such.thing is not a librdkafka setting (see https://"),
        (
            {"sasl.jaas.config": "x"},
            "option kafka.sasl.jaas.config cannot be set as an option: librdkafka has no JAAS",
        ),
        (
            {"logger": "x"},
            "option kafka.logger cannot be set as an option: librdkafka's logs go to the Python logger",
        ),
        (
            {"error_cb": "x"},
            "option kafka.error_cb cannot be set as an option: confluent-kafka takes a Python",
        ),
        (
            {"fetch.max.bytes": "-5"},
            "option kafka.fetch.max.bytes='-5' is refused by librdkafka: "
            'Configuration property "fetch.max.bytes" value -5 is outside allowed range',
        ),
        (
            {"security.protocol": "tls"},
            "option kafka.security.protocol='tls' is refused by librdkafka: Invalid value \"tls\"",
        ),
    ],
)
def test_librdkafka_refusals_are_sentences(conf: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        check_librdkafka_settings(conf, ["subscribe"])
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_accepted_settings_pass_and_make_no_client() -> None:
    # The unit tests' guard (tests/unit/conftest.py) fails any client made: none is.
    check_librdkafka_settings({"bootstrap.servers": "b:1", "linger.ms": "5", "acks": "all", "log_level": "3"})
    check_librdkafka_settings({"sasl.password": "hunter2", "enable.auto.commit": "false"})


def test_a_refused_secret_value_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    # librdkafka takes any string for its secrets today; should it refuse one, it would quote the value.
    import sparkafka.client.conf

    monkeypatch.setattr(sparkafka.client.conf, "_offer", lambda k, v: f'Invalid value "{v}" for "{k}"')
    with pytest.raises(ConfigError) as raised:
        check_librdkafka_settings({"sasl.password": "hunter2-canary"})
    assert str(raised.value) == (
        "option kafka.sasl.password='********' is refused by librdkafka: "
        'Invalid value "********" for "sasl.password"'
    )


def test_values_are_checked_after_the_options_own_checks() -> None:
    # Our sentence for a setting we interpret wins over librdkafka's.
    with pytest.raises(ConfigError, match=r"kafka\.transaction\.timeout\.ms='x' must be a positive number"):
        parse_sink_options(
            {
                **BOOT,
                "topic": "t",
                "deliveryGuarantee": "exactly_once",
                "transactionalIdPrefix": "p",
                "kafka.transaction.timeout.ms": "x",
            }
        )
    with pytest.raises(
        ConfigError,
        match=r"kafka\.transaction\.timeout\.ms='500' is refused by librdkafka: .* value 500 is outside",
    ):
        parse_sink_options(
            {
                **BOOT,
                "topic": "t",
                "deliveryGuarantee": "exactly_once",
                "transactionalIdPrefix": "p",
                "kafka.transaction.timeout.ms": "500",
            }
        )


# -- 4. an option without its kafka. prefix, and other unknown options -------------------------------------


def test_a_kafka_setting_without_its_prefix_gets_the_prefixed_name() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_source_options({"bootstrap.servers": "b:1", "subscribe": "t"})
    assert str(raised.value) == (
        "unknown option(s) for the sparkafka source: bootstrap.servers "
        "(did you mean kafka.bootstrap.servers?)"
    )
    with pytest.raises(
        ConfigError, match=r"^unknown option\(s\) for the sparkafka sink: acks \(did you mean kafka.acks\?\)$"
    ):
        parse_sink_options({**BOOT, "topic": "t", "acks": "all"})


def test_close_names_get_a_suggestion_and_no_list() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_source_options({**BOOT, "subscribe": "t", "startingOfset": "earliest", "bootstrap.server": "x"})
    message = str(raised.value)
    assert "startingOfset (did you mean startingOffsets?)" in message
    assert "bootstrap.server (did you mean kafka.bootstrap.servers?)" in message
    assert "Valid options" not in message


def test_a_name_close_to_nothing_gets_the_list() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown option\(s\) for the sparkafka source: zzz\. Valid options: assign"
    ):
        parse_source_options({**BOOT, "subscribe": "t", "zzz": "1"})


def test_close_librdkafka_property() -> None:
    assert close_librdkafka_property("fetch.max.byte") == "fetch.max.bytes"
    assert close_librdkafka_property("acks") == "acks"
    assert close_librdkafka_property("subscribe") is None


# -- 5. a type Spark does not have in source.schema ---------------------------------------------------------

PIPELINE = """
name = "p"
checkpoint = "{checkpoint}"
trigger = "availableNow"
[source]
decode = "json"
schema = "{schema}"
options = {{ "kafka.bootstrap.servers" = "127.0.0.1:9092", subscribe = "in" }}
[sink]
value = "to_json(struct(*))"
options = {{ "kafka.bootstrap.servers" = "127.0.0.1:9092", topic = "out", {sink} }}
"""


def _pipeline(
    tmp_path: Path, schema: str = "id STRING", sink: str = 'deliveryGuarantee = "at_least_once"'
) -> Path:
    path = tmp_path / "pipeline.toml"
    path.write_text(PIPELINE.format(checkpoint=tmp_path / "ck", schema=schema, sink=sink))
    return path


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("id STRING, temp DUBBLE", "source.schema field temp: unknown type DUBBLE; did you mean DOUBLE?"),
        ("id TEXT", "source.schema field id: unknown type TEXT; did you mean STRING?"),
        (
            "s STRUCT<a: INT, b: ARRAY<STRUCT<c: LONGG>>>",
            "source.schema field s.b.c: unknown type LONGG; did you mean LONG?",
        ),
        (
            "`my col` zork",
            "source.schema field my col: unknown type zork (Spark's types include STRING, INT,",
        ),
    ],
)
def test_an_unknown_schema_type_is_named_with_its_field(tmp_path: Path, schema: str, message: str) -> None:
    path = _pipeline(tmp_path, schema)
    with pytest.raises(ConfigError) as raised:
        load_pipeline(path)
    assert str(raised.value).startswith(f"{path}: {message}")


@pytest.mark.parametrize(
    "schema",
    [
        "a DECIMAL(10, 2), b VARCHAR(3) NOT NULL COMMENT 'x, y', c TIMESTAMP WITHOUT TIME ZONE",
        "m MAP<STRING, ARRAY<BIGINT>>, s STRUCT<a: INT, `b c` STRING>, t TIMESTAMP_NTZ, v VARIANT",
        "x STRING COLLATE UTF8_LCASE, i INTERVAL DAY TO SECOND, g GEOGRAPHY(4326), t TIME(3)",
        "lower int, case string, mixed Double",
        "a INT,",  # a shape the check does not follow: left to Spark's parser
    ],
)
def test_valid_schemas_pass(tmp_path: Path, schema: str) -> None:
    assert load_pipeline(_pipeline(tmp_path, schema)).schema == schema


# -- 6. a copied pipeline whose transactionalIdPrefix another live query owns -------------------------------

EXACTLY_ONCE = 'deliveryGuarantee = "exactly_once", transactionalIdPrefix = "orders"'


class _Intents:
    """The commit-intent log as read: its owner wrote ``ago_s`` seconds ago."""

    def __init__(self, owner: str, ago_s: float) -> None:
        self.state = LogState(
            latest={owner: IntentRecord(owner, 41, "done", at_ms=int((time.time() - ago_s) * 1000))}
        )

    def read(self) -> LogState:
        return self.state

    def append(self, record: IntentRecord) -> None:
        raise AssertionError("the pre-flight writes nothing")

    def forget(self, query_id: str) -> None:
        raise AssertionError("the pre-flight writes nothing")


def _checkpoint_of(tmp_path: Path, query_id: str) -> None:
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "metadata").write_text(json.dumps({"id": query_id}))


def test_a_copied_pipeline_fails_preflight_in_one_line(tmp_path: Path) -> None:
    cfg = load_pipeline(_pipeline(tmp_path, sink=EXACTLY_ONCE))
    with pytest.raises(ConfigError) as raised:
        check_prefix_owner(cfg, {}, intents=_Intents("query-a", ago_s=12))
    message = str(raised.value)
    assert message.startswith(
        f"{cfg.path}: sink.options (checkpoint {tmp_path / 'ck'} is new: a copied pipeline?): "
    )
    assert "option transactionalIdPrefix='orders' belongs to streaming query query-a" in message
    assert "Use another transactionalIdPrefix" in message
    assert "takeOverTransactionalIdPrefix=true" in message
    assert "\n" not in message


def test_the_owners_own_checkpoint_passes(tmp_path: Path) -> None:
    _checkpoint_of(tmp_path, "query-a")
    cfg = load_pipeline(_pipeline(tmp_path, sink=EXACTLY_ONCE))
    check_prefix_owner(cfg, {}, intents=_Intents("query-a", ago_s=12))


def test_another_checkpoint_of_a_live_owner_fails(tmp_path: Path) -> None:
    _checkpoint_of(tmp_path, "query-b")
    cfg = load_pipeline(_pipeline(tmp_path, sink=EXACTLY_ONCE))
    with pytest.raises(ConfigError, match=r"sink\.options: option transactionalIdPrefix='orders' belongs to"):
        check_prefix_owner(cfg, {}, intents=_Intents("query-a", ago_s=12))


@pytest.mark.parametrize(
    ("sink", "ago_s"),
    [
        (EXACTLY_ONCE, 16 * 60),  # idle past transaction.timeout.ms (15 min): the sink takes over
        (EXACTLY_ONCE + ", takeOverTransactionalIdPrefix = true", 12),
        ('deliveryGuarantee = "at_least_once"', 12),
    ],
)
def test_no_conflict(tmp_path: Path, sink: str, ago_s: float) -> None:
    cfg = load_pipeline(_pipeline(tmp_path, sink=sink))
    check_prefix_owner(cfg, {}, intents=_Intents("query-a", ago_s=ago_s))


def test_a_prefix_without_an_intent_log_is_not_read(tmp_path: Path) -> None:
    cfg = load_pipeline(_pipeline(tmp_path, sink=EXACTLY_ONCE))
    check_prefix_owner(cfg, {"in": 1, "out": 1})  # no _sparkafka-intents-orders: no client is made


def test_a_setting_librdkafka_refuses_at_client_creation_is_one_sentence_at_load() -> None:
    from confluent_kafka import KafkaError, KafkaException

    from sparkafka.errors import ConfigError

    said = "Failed to create admin client: ssl.ca.location failed: error:05880020:x509 certificate routines"

    def refuse(_conf: object) -> None:  # what librdkafka answers for a CA file that is not there (measured)
        raise KafkaException(KafkaError(KafkaError._INVALID_ARG, said))

    kafka = {"bootstrap.servers": "127.0.0.1:9", "security.protocol": "SSL", "ssl.ca.location": "/no/ca.pem"}
    with pytest.raises(
        ConfigError, match=r"could not be made with these kafka\.\* settings: .*ssl\.ca\.location"
    ):
        first_contact(kafka, {}, 30_000, make_admin=refuse)
