"""ApacheKafka's command line: the JVM options an environment variable adds (the tests' C1-only brokers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkafka.local.kafka_broker import JAVA_OPTIONS_ENV, ApacheKafka


def java_command(tmp_path: Path) -> list[str]:
    kafka = ApacheKafka(data_dir=tmp_path)
    kafka._libs = tmp_path / "libs"  # as start() sets it after installing the jars
    return kafka._java("kafka.Kafka", "server.properties")


def test_the_environments_options_come_after_the_defaults_and_before_the_class_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(JAVA_OPTIONS_ENV, "-XX:TieredStopAtLevel=1  -Dx=y")
    command = java_command(tmp_path)
    cp = command.index("-cp")
    assert command[cp - 2 : cp] == ["-XX:TieredStopAtLevel=1", "-Dx=y"]
    assert command.index("-XX:+UseG1GC") < cp - 2  # a later option wins over a default
    assert command[-2:] == ["kafka.Kafka", "server.properties"]


def test_without_the_variable_the_command_has_only_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(JAVA_OPTIONS_ENV, raising=False)
    command = java_command(tmp_path)
    assert not [o for o in command if o.startswith("-XX:Tiered")]
    assert command[command.index("-cp") - 1].startswith("-Dlog4j2.configurationFile=")
