"""The docs site: it builds with --strict, its code blocks are checked, its references match the code.

Fast (no broker, no Spark): the site's build takes about 2 s. The Python blocks run against a broker and a
SparkSession in tests/integration/test_docs_examples.py.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import io
import os
import re
import subprocess
import sys
import tomllib
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from sparkafka.cli import build_parser
from sparkafka.errors import ConfigError
from sparkafka.options import Option
from sparkafka.pipeline.config import FIELDS, load_pipeline
from sparkafka.registry.client import REGISTRY_SETTINGS
from sparkafka.sink.options import SINK_KAFKA_SETTINGS, SINK_OPTIONS, SPARK_WRITE_OPTIONS, parse_sink_options
from sparkafka.source.options import SOURCE_KAFKA_SETTINGS, SOURCE_OPTIONS, parse_source_options
from tests.support.docs import (
    HOLE,
    ROOT,
    SHELLS,
    Block,
    all_blocks,
    error_sentences,
    output_commands,
    pages,
    shell_commands,
    sparkafka_argv,
    troubleshooting_entries,
)

BLOCKS = all_blocks()
LANGUAGES = {"python", "toml", "text", *SHELLS}


def _site_module() -> Any:
    spec = importlib.util.spec_from_file_location("docs_site", ROOT / "scripts" / "docs_site.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SITE = _site_module()


# -- the site ------------------------------------------------------------------------------------------------


def test_the_site_builds_with_strict(tmp_path: Path) -> None:
    """Broken links, anchors, nav entries and generated parts fail the build (mkdocs.yml: strict)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about its successor, on stderr
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    options = (tmp_path / "site" / "options" / "index.html").read_text()
    assert "generated:" not in options  # the markers were replaced
    for option in SOURCE_OPTIONS + SINK_OPTIONS:
        assert f"<code>{option.name}</code>" in options


def test_every_generated_part_is_used_and_every_marker_known() -> None:
    used = Counter(m for page in pages() for m in SITE.MARKER.findall(page.read_text()))
    assert set(used) == set(SITE.PARTS), "a marker names no part, or a part is on no page"
    for page in pages():
        SITE.expand(page.read_text(), str(page))  # every part generates


def test_a_declaration_without_a_description_fails_the_build() -> None:
    with pytest.raises(ValueError, match="option nameless has no description"):
        SITE.options_table([Option("nameless", "")])


def test_the_readme_is_short_and_links_the_site() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    linked = set(re.findall(r"\]\((docs/[\w./-]+\.md)(?:#[\w-]+)?\)", readme))
    assert {"docs/getting-started.md", "docs/migrating.md", "docs/troubleshooting.md"} <= linked
    for link in linked:
        assert (ROOT / link).is_file(), link
    assert "make demo" in readme
    assert "make test" in readme


# -- code blocks ---------------------------------------------------------------------------------------------


def _id(block: Block) -> str:
    return block.where


def test_every_block_names_a_language_the_tests_check() -> None:
    unknown = [f"{b.where}: {b.lang or '(none)'}" for b in BLOCKS if b.lang not in LANGUAGES]
    assert not unknown, f"blocks in languages no test checks (use one of {sorted(LANGUAGES)}): {unknown}"


def test_markers_name_a_reason_or_a_test_that_runs_the_block() -> None:
    for block in BLOCKS:
        if block.run_by is not None:
            test = ROOT / block.run_by
            assert test.is_file(), f"{block.where}: {block.run_by} does not exist"
            assert block.page in test.read_text(), f"{block.run_by} does not read {block.page}"
        if block.not_run is not None:
            assert len(block.not_run.split()) >= 3, f"{block.where}: say why it cannot run"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "python"], ids=_id)
def test_python_blocks_compile(block: Block) -> None:
    compile(block.code, block.where, "exec")


def _parses(argv: list[str], where: str) -> None:
    """``sparkafka ARGV`` is a command the CLI's parser takes (and ``--help`` for it prints help)."""
    parser = build_parser()
    with contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            args = parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"{where}: sparkafka {' '.join(argv)}: {err.getvalue().strip()}")
    assert callable(args.func)
    command = [a for a in argv if not a.startswith("-")][:2]
    with contextlib.redirect_stdout(io.StringIO()) as out, pytest.raises(SystemExit):
        build_parser().parse_args([*_subcommand(parser, command), "--help"])
    assert out.getvalue().startswith("usage: sparkafka")


def _subcommand(parser: argparse.ArgumentParser, words: list[str]) -> list[str]:
    """The leading words of ``words`` that are (sub)command names."""
    path: list[str] = []
    for word in words:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or word not in subs[0].choices:
            break
        path.append(word)
        parser = subs[0].choices[word]
    return path


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang in SHELLS], ids=_id)
def test_shell_blocks_are_sparkafka_commands_that_parse(block: Block) -> None:
    others = []
    for command in shell_commands(block.code):
        argv = sparkafka_argv(command)
        if argv is None:
            others.append(command)
        else:
            _parses(argv, block.where)
    if others:
        assert block.not_run or block.run_by, (
            f"{block.where} runs commands no test runs ({others[0]!r}): mark it "
            "<!-- not run: why --> or <!-- run by tests/...py -->"
        )
    if not block.not_run and not block.run_by and block.lang in SHELLS:
        assert any(sparkafka_argv(c) for c in shell_commands(block.code)), f"{block.where} has no command"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "text"], ids=_id)
def test_transcripts_show_commands_that_parse(block: Block) -> None:
    for command in output_commands(block.code):
        argv = sparkafka_argv(command)
        if argv is not None:
            _parses(argv, block.where)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "toml"], ids=_id)
def test_toml_blocks_are_pipeline_files_or_their_parts(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tomllib.loads(block.code)
    if "source" in data and "sink" in data and "checkpoint" in data:  # a whole file: it loads
        for name in set(re.findall(r"\$\{(\w+)\}", block.code)):
            monkeypatch.setenv(name, "127.0.0.1:9092" if name == "BOOTSTRAP" else "value")
        path = tmp_path / "pipeline.toml"
        path.write_text(block.code)
        load_pipeline(path)
        return
    for table, fields in data.items():  # a part of one: every field is one the file takes
        allowed = REGISTRY_SETTINGS if table == "schema_registry" else FIELDS[table]
        assert set(fields) <= {f.name for f in allowed}, f"{block.where}: [{table}] {sorted(fields)}"


def test_every_pipeline_example_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/*.toml, which the pages name, are pipeline files the code takes."""
    monkeypatch.setenv("BOOTSTRAP", "127.0.0.1:9092")
    monkeypatch.setenv("SPARKAFKA_STATE", "/tmp/state")
    monkeypatch.setenv("SCHEMA_REGISTRY_URL", "http://127.0.0.1:8081")
    examples = sorted((ROOT / "examples").glob("*.toml"))
    assert examples
    for example in examples:
        load_pipeline(example)


# -- the option declarations, against the parsers ------------------------------------------------------------

SOURCE_BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders"}
SINK_BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out"}


def _needs(name: str, value: str) -> dict[str, str]:
    """What an option's value needs besides the base options."""
    if name == "offsetCommitMode":
        return {"kafka.group.id": "g"}
    if (name, value) == ("deliveryGuarantee", "exactly_once"):
        return {"transactionalIdPrefix": "p"}
    return {}


SPARK_KAFKA_OPTIONS = (
    # KafkaSourceProvider.scala (spark-sql-kafka-0-10 4.2.0), its option keys, and the docs' option tables
    "assign",
    "subscribe",
    "subscribePattern",
    "startingOffsets",
    "endingOffsets",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestampStrategy",
    "failOnDataLoss",
    "minPartitions",
    "maxRecordsPerPartition",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "kafkaConsumer.pollTimeoutMs",
    "groupIdPrefix",
    "includeHeaders",
    "kafka.bootstrap.servers",
    "kafka.group.id",
    "topic",
)


def _parsers() -> list[tuple[tuple[Option, ...], Callable[[Mapping[str, str]], Any], dict[str, str]]]:
    streaming = tuple(o for o in SOURCE_OPTIONS if not o.description.startswith("Batch reads only"))
    return [
        (streaming + SOURCE_KAFKA_SETTINGS, parse_source_options, SOURCE_BASE),
        (SOURCE_OPTIONS + SOURCE_KAFKA_SETTINGS, lambda o: parse_source_options(o, batch=True), SOURCE_BASE),
        (SINK_OPTIONS + SPARK_WRITE_OPTIONS + SINK_KAFKA_SETTINGS, parse_sink_options, SINK_BASE),
    ]


def test_every_option_is_described() -> None:
    every = SOURCE_OPTIONS + SOURCE_KAFKA_SETTINGS + SINK_OPTIONS + SPARK_WRITE_OPTIONS + SINK_KAFKA_SETTINGS
    for option in every + REGISTRY_SETTINGS + tuple(f for fields in FIELDS.values() for f in fields):
        assert option.description.strip().endswith((".", ")")), option.name
        assert option.default is None or option.default_note is None, option.name
    names = [o.name.lower() for o in SOURCE_OPTIONS]
    assert len(names) == len(set(names))
    for option in SOURCE_OPTIONS + SINK_OPTIONS:
        if option.alias_of is not None:
            assert option.alias_of in {o.name for o in SOURCE_OPTIONS + SINK_OPTIONS}


def test_a_declared_default_means_the_same_as_leaving_the_option_out() -> None:
    checked = 0
    for options, parse, base in _parsers():
        for option in options:
            if option.default is None:
                continue
            needs = _needs(option.name, option.default)
            assert parse({**base, **needs, option.name: option.default}) == parse({**base, **needs}), (
                option.name
            )
            checked += 1
    assert checked > 20


def test_declared_allowed_values_are_what_the_parser_takes() -> None:
    for options, parse, base in _parsers():
        for option in options:
            for value in option.allowed:
                parse({**base, **_needs(option.name, value), option.name: value})
            if option.allowed:
                with pytest.raises(ConfigError, match=re.escape(option.name.removeprefix("kafka."))):
                    parse({**base, option.name: "no-such-value"})


def test_every_option_of_sparks_connector_is_declared_with_how_it_differs() -> None:
    spark = {
        o.name: o
        for o in SOURCE_OPTIONS + SOURCE_KAFKA_SETTINGS + SINK_OPTIONS + SINK_KAFKA_SETTINGS
        if o.spark is not None
    }
    assert set(SPARK_KAFKA_OPTIONS) <= set(spark)


def test_a_declared_pipeline_default_means_the_same_as_leaving_the_field_out(tmp_path: Path) -> None:
    base = {
        "": 'checkpoint = "ck"',
        "source": 'decode = "json"\nschema = "a STRING"\noptions = '
        '{ "kafka.bootstrap.servers" = "h:1", subscribe = "t" }',
        "sink": 'options = { "kafka.bootstrap.servers" = "h:1", topic = "o" }',
        "metrics": "port = 9464",
        "spark": "",
    }

    def load(extra: dict[str, str]) -> Any:
        text = base[""] + "\n" + extra.get("", "")
        for section in ("spark", "source", "sink", "metrics"):
            text += f"\n[{section}]\n{base[section]}\n{extra.get(section, '')}"
        path = tmp_path / f"p{len(list(tmp_path.iterdir()))}.toml"
        path.write_text(text)
        return dataclasses.replace(load_pipeline(path), path=Path("p.toml"), name="p")

    plain = load({})
    checked = 0
    for section, given in base.items():
        for field in FIELDS[section]:
            if field.default is not None and f"{field.name} =" not in given:
                assert load({section: f"{field.name} = {field.default}"}) == plain, f"{section}.{field.name}"
                checked += 1
    assert checked >= 8


# -- troubleshooting: every error sentence has its entry -----------------------------------------------------


def _entries() -> list[str]:
    return troubleshooting_entries()


def test_every_error_sentence_has_an_entry_in_troubleshooting() -> None:
    entries = set(_entries())
    missing: dict[str, str] = {}
    for sentence in error_sentences():
        if sentence.text not in entries:
            missing.setdefault(sentence.text, sentence.where)
    stub = "\n".join(f"- `{text}`    ({where})" for text, where in sorted(missing.items()))
    assert not missing, (
        f"{len(missing)} error sentence(s) have no entry in docs/troubleshooting.md; add each (with its "
        f"cause and fix) as a list item, {HOLE} for what the code fills in:\n{stub}"
    )


def test_every_troubleshooting_entry_is_a_sentence_the_code_has() -> None:
    code = {s.text for s in error_sentences()}
    stale = [e for e in _entries() if e not in code]
    assert not stale, f"entries no code prints any more (reword or remove them): {stale}"
    duplicated = [e for e, n in Counter(_entries()).items() if n > 1]
    assert not duplicated


def test_the_sentence_finder_finds_what_it_must() -> None:
    """Its kinds of message: an f-string, a name assigned one, a builder's return, a plan's refusal."""
    texts = {s.text for s in error_sentences()}
    assert "option …=… must be a whole number" in texts  # f-string
    assert any(t.startswith("unknown option(s) for the …: …") for t in texts)  # a name, then +=
    assert any(t.startswith("group … is committed to by a running sparkafka query") for t in texts)
    assert "… is done: nothing to resolve" in texts  # ResolvePlan(..., refusal)
    assert "…: source.schema is required with decode = json (a Spark DDL schema)" in texts  # .error()
