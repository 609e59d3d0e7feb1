"""One version, three places that must agree; the lookup module PySpark finds; the registered check."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import sparkafka
from sparkafka.datasource import KafkaDataSource
from sparkafka.errors import ConfigError
from sparkafka.sink.at_start import REGISTER_FOR_EXACTLY_ONCE, check_registered
from sparkafka.sink.options import parse_sink_options

ROOT = Path(__file__).resolve().parents[2]


def test_the_native_wheel_and_the_native_extra_carry_sparkafkas_version() -> None:
    cargo = tomllib.loads((ROOT / "native" / "Cargo.toml").read_text())
    lock = tomllib.loads((ROOT / "native" / "Cargo.lock").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert cargo["package"]["version"] == sparkafka.__version__
    locked = [p["version"] for p in lock["package"] if p["name"] == "sparkafka-native"]
    assert locked == [sparkafka.__version__]  # make native builds --locked
    assert project["optional-dependencies"]["native"] == [f"sparkafka-native=={sparkafka.__version__}"]


def test_the_changelog_names_this_version() -> None:
    assert f"## {sparkafka.__version__} " in (ROOT / "CHANGELOG.md").read_text()


def test_pyspark_finds_the_data_source_by_its_module_name() -> None:
    """PySpark's lookup (``pyspark/sql/worker/lookup_data_sources.py``) finds ``pyspark_*`` modules."""
    from pyspark.sql.datasource import DataSource

    import pyspark_sparkafka

    source = pyspark_sparkafka.DefaultSource
    assert issubclass(source, DataSource)
    assert source.name() == "sparkafka"
    assert source.registered is False
    assert KafkaDataSource.registered is True


@pytest.mark.parametrize(("delivery", "registered"), [("exactly_once", True), ("at_least_once", False)])
def test_writes_that_need_no_register_start(delivery: str, registered: bool) -> None:
    extra = {"transactionalIdPrefix": "p"} if delivery == "exactly_once" else {}
    options = parse_sink_options(
        {"kafka.bootstrap.servers": "b:1", "topic": "t", "deliveryGuarantee": delivery, **extra}
    )
    check_registered(options, registered)


def test_exactly_once_found_without_register_is_one_sentence_saying_to_call_it() -> None:
    options = parse_sink_options(
        {
            "kafka.bootstrap.servers": "b:1",
            "topic": "t",
            "deliveryGuarantee": "exactly_once",
            "transactionalIdPrefix": "p",
        }
    )
    with pytest.raises(ConfigError) as raised:
        check_registered(options, registered=False)
    assert str(raised.value) == REGISTER_FOR_EXACTLY_ONCE
    assert "sparkafka.register(spark)" in str(raised.value)
    assert "\n" not in str(raised.value)
