"""The driver's facts as an option (``sparkafka.driver_facts``, PySpark 4.0's found data source): added by
the wrapped readers and writers for format("sparkafka") only, taken out of the options by the data source
and into its process's environment, never seen by the option parsers. No JVM: fakes record the calls."""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace
from typing import Any

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from sparkafka import driver_facts, stream_writer
from sparkafka.datasource import KafkaDataSource
from sparkafka.driver_facts import FACTS_OPTION, split_facts
from sparkafka.errors import ConfigError
from sparkafka.sink.writer import SPECULATION_ENV
from sparkafka.source.assignment import CORES_ENV
from sparkafka.source.driver_process import APP_ID_ENV, APP_NAME_ENV, DRIVER_PID_ENV
from sparkafka.source.options import NETWORK_TIMEOUT_ENV
from tests.unit.test_stream_writer import SINK, PySparkLikeWriter

FACTS = {
    SPECULATION_ENV: "false",
    CORES_ENV: "3",
    NETWORK_TIMEOUT_ENV: "90s",
    DRIVER_PID_ENV: str(os.getpid()),  # the driver's Python: this process
    APP_NAME_ENV: "orders-etl",
    APP_ID_ENV: "local-1764000000000",
}


def fake_spark(speculation: str = "False") -> Any:
    conf = {"spark.speculation": speculation, "spark.network.timeout": "90s"}
    context = SimpleNamespace(
        getConf=lambda: SimpleNamespace(get=conf.get),
        defaultParallelism=3,
        appName="orders-etl",
        applicationId="local-1764000000000",
    )
    return SimpleNamespace(sparkContext=context)


class Reader:
    """PySpark's DataFrameReader as far as the wrapper uses it."""

    def __init__(self) -> None:
        self._spark = fake_spark()
        self.sent: dict[str, str] = {}
        self.loaded: list[Any] = []

    def format(self, source: str) -> Reader:
        return self

    def option(self, key: str, value: Any) -> Reader:
        self.sent[key] = str(value)
        return self

    def load(self, path: str | None = None, format: str | None = None, **options: Any) -> str:
        self.loaded.append((path, format, options))
        return "df"


driver_facts.wrap(Reader, "load")
driver_facts.wrap(Reader, "load")  # idempotent


def test_a_sparkafka_read_carries_the_driver_s_facts() -> None:
    reader = Reader()
    assert reader.format("sparkafka").load() == "df"
    assert json.loads(reader.sent[FACTS_OPTION]) == FACTS
    assert reader.loaded == [(None, None, {})]


@pytest.mark.parametrize("how", ["keyword", "format then keyword"])
def test_the_format_given_to_load_decides(how: str) -> None:
    reader = Reader()
    if how == "keyword":
        reader.load(format="SparKafka")
        assert FACTS_OPTION in reader.sent
    else:
        reader.format("sparkafka").load(format="parquet")
        assert FACTS_OPTION not in reader.sent


def test_every_other_format_is_untouched() -> None:
    reader = Reader()
    reader.format("kafka").load()
    Reader().load(path="/x")
    assert reader.sent == {}


class Both(PySparkLikeWriter):
    pass


@pytest.mark.parametrize("facts_first", [True, False])
def test_update_mode_s_options_never_hold_the_facts_whichever_wraps_first(facts_first: bool) -> None:
    cls = type("Writer", (Both,), {})
    if facts_first:
        driver_facts.wrap(cls, "start")
        stream_writer.wrap(cls)
    else:
        stream_writer.wrap(cls)
        driver_facts.wrap(cls, "start")
    writer = cls()
    writer._spark = fake_spark()
    writer.format("sparkafka").outputMode("update").options(**SINK).start()
    assert writer.batch_function._options == SINK
    sent = [c for c in writer._jwrite.calls if c[:2] == ("option", FACTS_OPTION)]
    assert [json.loads(c[2]) for c in sent] == [FACTS]


def test_split_facts_takes_the_option_out_whatever_its_case() -> None:
    given = CaseInsensitiveDict({"topic": "t", FACTS_OPTION: json.dumps(FACTS)})
    rest, facts = split_facts(given)
    assert facts == FACTS
    assert dict(rest) == {"topic": "t"}
    assert isinstance(rest, CaseInsensitiveDict)
    assert "TOPIC" in rest
    assert FACTS_OPTION in given  # the caller's map is left as it was
    assert split_facts({"topic": "t"}) == ({"topic": "t"}, None)


@pytest.mark.parametrize("value", ["", "[1]", '{"a": 1}', "not json"])
def test_a_facts_option_set_by_hand_is_one_sentence(value: str) -> None:
    with pytest.raises(ConfigError, match=f"option {FACTS_OPTION} is sparkafka's own"):
        split_facts({FACTS_OPTION: value})


def test_the_data_source_adopts_the_facts_in_the_process_that_uses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in FACTS:  # set first, so that teardown removes what adopt puts
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)

    class Found(KafkaDataSource):
        registered = False

    told = Found(CaseInsensitiveDict({"topic": "t", FACTS_OPTION: json.dumps(FACTS)}))
    assert dict(told.options) == {"topic": "t"}
    assert told._told
    assert not Found(CaseInsensitiveDict({"topic": "t"}))._told
    assert all(name not in os.environ for name in FACTS)  # made in the planner: nothing yet
    told._options()
    assert {name: os.environ[name] for name in FACTS} == FACTS


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str) -> str | None:
        return self.values.get(key)


class _Context:
    def __init__(self, master: str, conf: dict[str, str]) -> None:
        self.master, self.conf, self.pythonExec = master, conf, "python3"

    def getConf(self) -> _Conf:
        return _Conf(self.conf)


class _Session:
    def __init__(self, master: str, conf: dict[str, str] | None = None) -> None:
        self.sparkContext = _Context(master, conf or {})


@pytest.mark.parametrize(
    ("master", "conf", "env", "expected"),
    [
        ("local[2]", {}, None, sys.executable),  # a venv's python run without activating it
        ("local[2]", {"spark.pyspark.python": "/opt/py/bin/python"}, None, "/opt/py/bin/python"),
        ("local[2]", {}, "/env/python", "python3"),  # PySpark's own choice stands
        ("local[2]", {"spark.pyspark.python": "/opt/venv/bin/python"}, "python3", "/opt/venv/bin/python"),
        ("spark://host:7077", {}, None, "python3"),  # executors elsewhere
    ],
)
def test_local_workers_run_the_python_the_user_chose_or_this_one(
    monkeypatch: pytest.MonkeyPatch, master: str, conf: dict[str, str], env: str | None, expected: str
) -> None:
    from sparkafka.datasource import _workers_on_this_interpreter

    if env is None:
        monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    else:
        monkeypatch.setenv("PYSPARK_PYTHON", env)
    session = _Session(master, conf)
    _workers_on_this_interpreter(session)
    assert session.sparkContext.pythonExec == expected


def test_a_connect_server_that_found_pyspark_sparkafka_gets_an_empty_set_of_facts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PySpark 4.0's Connect server keeps the ``pyspark_sparkafka`` its lookup found and refuses
    ``register`` (DATA_SOURCE_ALREADY_EXISTS): the client's readers and writers then carry an empty set of
    facts (the server's are not the client's to read), which tells the data source ``register`` ran."""
    from pyspark.errors import AnalysisException

    from sparkafka import datasource

    installed: list[bool] = []
    monkeypatch.setattr(datasource, "install_driver_facts", lambda connect=False: installed.append(connect))

    class Registry:
        def register(self, cls: type) -> None:
            raise AnalysisException("[DATA_SOURCE_ALREADY_EXISTS] Data source 'sparkafka' already exists.")

    connect_session = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})()
    connect_session.dataSource = Registry()
    datasource.register(connect_session)
    assert installed == [True]
    connect_session.dataSource = SimpleNamespace(
        register=lambda cls: (_ for _ in ()).throw(AnalysisException("[OTHER] no"))
    )
    with pytest.raises(AnalysisException):
        datasource.register(connect_session)


def test_a_connect_client_s_query_carries_an_empty_set_of_facts() -> None:
    """What ``install(connect=True)`` wraps with: the facts a Connect client sends (none of the server's)."""

    class ConnectReader:
        def __init__(self) -> None:
            self.sent: dict[str, str] = {}

        def format(self, source: str) -> ConnectReader:
            return self

        def option(self, key: str, value: Any) -> ConnectReader:
            self.sent[key] = str(value)
            return self

        def load(self, path: str | None = None, format: str | None = None, **options: Any) -> str:
            return "df"

    driver_facts.wrap(ConnectReader, "load", lambda _reader: {})
    reader = ConnectReader()
    reader.format("sparkafka").load()
    assert json.loads(reader.sent[FACTS_OPTION]) == {}
    _, facts = split_facts({FACTS_OPTION: reader.sent[FACTS_OPTION]})
    assert facts == {}  # told (not None), with nothing to adopt
