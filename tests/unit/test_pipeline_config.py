"""Pipeline files are validated before Spark starts; errors name the file and the field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sparkafka.errors import ConfigError
from sparkafka.pipeline.config import load_pipeline

GOOD = """
name = "p"
checkpoint = "ck"
trigger = "{trigger}"
[source]
decode = "json"
schema = "a INT"
options = {{ "kafka.bootstrap.servers" = "${{BOOT}}", subscribe = "in", "kafka.group.id" = "g" }}
[[table]]
name = "rates"
path = "rates.csv"
[transform]
sql = "SELECT a FROM source"
[sink]
value = "to_json(struct(a))"
[sink.options]
"kafka.bootstrap.servers" = "${{BOOT}}"
topic = "out"
deliveryGuarantee = "exactly_once"
transactionalIdPrefix = "p"
"kafka.sasl.password" = "s3cret"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipeline.toml"
    path.write_text(text)
    return path


@pytest.fixture(autouse=True)
def boot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOOT", "127.0.0.1:9092")


@pytest.mark.parametrize(
    ("trigger", "want"),
    [
        ("availableNow", None),
        ("5 seconds", "5000 milliseconds"),
        ("250ms", "250 milliseconds"),
        ("2 minutes", "120000 milliseconds"),
    ],
)
def test_good_file_resolves(tmp_path: Path, trigger: str, want: str | None) -> None:
    cfg = load_pipeline(write(tmp_path, GOOD.format(trigger=trigger)))
    assert cfg.trigger == want
    assert cfg.checkpoint == str(tmp_path / "ck")
    assert cfg.source_options["kafka.bootstrap.servers"] == "127.0.0.1:9092"
    assert cfg.tables[0].path == str(tmp_path / "rates.csv")
    assert (cfg.source.group_id, cfg.sink.transactional_id_prefix) == ("g", "p")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ('name = "p"', 'name = "p"\nfoo = 1'),
            "foo is not a known field; allowed here: checkpoint, metrics, name",
        ),
        (('value = "to_json', 'valu = "x"\nvalue = "to_json'), "sink.valu is not a known field"),
        (('checkpoint = "ck"', ""), "checkpoint is required"),
        (
            ('decode = "json"', 'decode = "xml"'),
            "source.decode = 'xml': use raw, string, json, avro, protobuf, json_schema",
        ),
        (('schema = "a INT"', ""), "source.schema is required with decode = json"),
        (
            ('trigger = "5 seconds"', 'trigger = "often"'),
            "trigger = 'often': use \"availableNow\" or an interval",
        ),
        (('subscribe = "in"', 'subscrib = "in"'), "source.options: unknown option"),
        (('topic = "out"\n', ""), "sink.options.topic is required"),
        (
            ('"${BOOT}", subscribe', '"${NOPE_NOT_SET}", subscribe'),
            "uses ${NOPE_NOT_SET} but that environment",
        ),
        (('name = "rates"', 'name = "source"'), "table[0].name = 'source'"),
        (("[transform]", "[transform]\nsql = 3\n[other]"), "other is not a known field"),
        (
            ('schema = "a INT"', 'schema = "a INT"\non_malformed = "ignore"'),
            "source.on_malformed = 'ignore': use flag, skip, fail, dead_letter",
        ),
        (
            ('schema = "a INT"', 'schema = "a INT"\non_malformed = "dead_letter"'),
            "source.dead_letter_topic is required with on_malformed = dead_letter",
        ),
        (
            ('schema = "a INT"', 'schema = "a INT"\ndead_letter_topic = "dlq"'),
            "source.dead_letter_topic is required with on_malformed = dead_letter, and only then",
        ),
        (
            ('decode = "json"\nschema = "a INT"', 'decode = "string"\non_malformed = "skip"'),
            "source.on_malformed applies to decode = json, avro, protobuf, json_schema only",
        ),
    ],
)
def test_bad_files_name_the_file_and_field(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    text = GOOD.format(trigger="5 seconds")
    assert edit[0] in text
    path = write(tmp_path, text.replace(edit[0], edit[1], 1))
    with pytest.raises(ConfigError) as info:
        load_pipeline(path)
    assert str(path) in str(info.value)
    assert message in str(info.value)


def test_a_pipeline_files_delivery_guarantee_is_read_as_the_sinks_option(tmp_path: Path) -> None:
    """The pipeline's sink options go through the sink's own parser: the same spellings, the same refusal."""
    text = GOOD.format(trigger="5 seconds")
    flink = write(tmp_path, text.replace('"exactly_once"', '"exactly-once"'))
    assert load_pipeline(flink).sink.delivery == "exactly_once"
    typo = write(tmp_path, text.replace('"exactly_once"', '"exactly_one"'))
    with pytest.raises(ConfigError) as info:
        load_pipeline(typo)
    assert str(info.value).startswith(f"{typo}: sink.options: option deliveryGuarantee='exactly_one'")
    assert str(info.value).endswith("did you mean 'exactly_once'?")


def test_not_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_pipeline(write(tmp_path, "name = "))
    with pytest.raises(ConfigError, match="no such pipeline file"):
        load_pipeline(tmp_path / "absent.toml")


def test_examples_parse(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BOOTSTRAP", "127.0.0.1:9092")
    monkeypatch.setenv("SPARKAFKA_STATE", str(tmp_path))
    monkeypatch.setenv("SCHEMA_REGISTRY_URL", "http://127.0.0.1:8081")
    examples = sorted(Path(__file__).parents[2].joinpath("examples").glob("*.toml"))
    assert examples
    for example in examples:
        assert load_pipeline(example).sink_options["deliveryGuarantee"] == "exactly_once"


def test_transaction_timeout_shorter_than_trigger_plus_margin_warns(tmp_path: Path) -> None:
    text = GOOD.format(trigger="90 seconds")
    assert load_pipeline(write(tmp_path, text)).timeout_warning() is None  # 900 s default
    short = text.replace(
        'transactionalIdPrefix = "p"',
        'transactionalIdPrefix = "p"\n"kafka.transaction.timeout.ms" = "120000"',
    )
    warning = load_pipeline(write(tmp_path, short)).timeout_warning()
    assert warning is not None
    assert "transaction.timeout.ms=120000 is shorter than the trigger interval (90000 ms)" in warning
    assert load_pipeline(write(tmp_path, GOOD.format(trigger="availableNow"))).timeout_warning() is None


def test_malformed_policy_resolves(tmp_path: Path) -> None:
    text = GOOD.format(trigger="5 seconds").replace(
        'schema = "a INT"', 'schema = "a INT"\non_malformed = "dead_letter"\ndead_letter_topic = "dlq"'
    )
    cfg = load_pipeline(write(tmp_path, text))
    assert (cfg.on_malformed, cfg.dead_letter_topic) == ("dead_letter", "dlq")
    assert load_pipeline(write(tmp_path, GOOD.format(trigger="5 seconds"))).on_malformed == "flag"


def test_a_watermark_may_be_made_of_an_expression(tmp_path: Path) -> None:
    text = GOOD.format(trigger="5 seconds").replace(
        'schema = "a INT"',
        'schema = "a INT, ts BIGINT"\nwatermark = { column = "t", expression = "timestamp_millis(ts)", '
        'delay = "5 seconds" }',
    )
    cfg = load_pipeline(write(tmp_path, text))
    assert (cfg.watermark, cfg.watermark_expression) == (("t", "5 seconds"), "timestamp_millis(ts)")
    plain = load_pipeline(write(tmp_path, text.replace('expression = "timestamp_millis(ts)", ', "")))
    assert plain.watermark_expression is None
    with pytest.raises(ConfigError, match=r"source\.watermark\.expr is not a known field; allowed here"):
        load_pipeline(write(tmp_path, text.replace("expression =", "expr =")))


def test_metrics_table_sets_port_and_host(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.format(trigger="5 seconds") + '\n[metrics]\nport = 9464\nhost = "0.0.0.0"\n')
    cfg = load_pipeline(path)
    assert (cfg.metrics_port, cfg.metrics_host) == (9464, "0.0.0.0")
    assert load_pipeline(write(tmp_path, GOOD.format(trigger="5 seconds"))).metrics_port is None


@pytest.mark.parametrize("port", ['"9464"', "70000", "-1", "true"])
def test_metrics_port_must_be_a_port_number(tmp_path: Path, port: str) -> None:
    with pytest.raises(ConfigError, match=r"metrics\.port = .*: use a port number, 1 to 65535"):
        load_pipeline(write(tmp_path, GOOD.format(trigger="5 seconds") + f"\n[metrics]\nport = {port}\n"))


REGISTRY = """
checkpoint = "ck"
{registry}
[source]
decode = "avro"
{source}
options = {{ "kafka.bootstrap.servers" = "b:9092", subscribe = "{subscribe}" }}
[sink]
{sink}
options = {{ "kafka.bootstrap.servers" = "b:9092", topic = "out" }}
"""


def registry_pipeline(
    tmp_path: Path,
    source: str = "",
    sink: str = "",
    subscribe: str = "orders",
    registry: str = '[schema_registry]\nurl = "http://user:pw@sr:8081"',
) -> Path:
    text = REGISTRY.format(registry=registry, source=source, sink=sink, subscribe=subscribe)
    return write(tmp_path, text)


def test_registry_formats_default_to_the_topic_subject_and_the_latest_version(tmp_path: Path) -> None:
    cfg = load_pipeline(registry_pipeline(tmp_path, sink='encode = "protobuf"\nkey = "k"'))
    assert cfg.registry is not None
    assert cfg.registry.url == "http://user:pw@sr:8081"
    assert "pw" not in repr(cfg.registry)
    assert cfg.value_schema is not None
    assert (cfg.value_schema.subject, cfg.value_schema.version, cfg.value_schema.schema_id) == (
        "orders-value",
        None,
        None,
    )
    assert cfg.key_decode == "string"
    assert cfg.key_schema is None
    assert cfg.encode == "protobuf"
    assert cfg.value == "struct(*)"  # with encode the value defaults to every column of the SQL
    assert cfg.encoding.strategy == "topic"
    assert cfg.encoding.auto_register is True
    pinned = load_pipeline(
        registry_pipeline(
            tmp_path, 'schema_id = 7\nkey_decode = "avro"\nkey_subject = "k"\nkey_schema_version = 2'
        )
    )
    assert pinned.value_schema is not None
    assert pinned.value_schema.schema_id == 7
    assert pinned.key_schema is not None
    assert (pinned.key_schema.subject, pinned.key_schema.version) == ("k", 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"registry": ""}, "schema_registry is required by source.decode"),
        ({"registry": "[schema_registry]\nurl = 'sr:8081'"}, "schema_registry.url = 'sr:8081'"),
        (
            {"registry": "[schema_registry]\nurl = 'http://sr'\nuser = 'x'"},
            "schema_registry.user is not a known",
        ),
        (
            {"subscribe": "a,b"},
            "source.subject is required unless the source subscribes to exactly one topic",
        ),
        ({"source": 'schema = "a INT"'}, "source.schema applies to decode = json only"),
        ({"source": "schema_id = 3\nsubject = 'x'"}, "source.schema_id pins the schema"),
        ({"source": "schema_version = 0"}, "source.schema_version = 0: use a whole number >= 1"),
        ({"source": "message = 'Order'"}, "source.message applies to protobuf only"),
        ({"source": "key_subject = 'k'"}, "source.key_subject applies to registry formats only"),
        ({"source": "key_decode = 'xml'"}, "source.key_decode = 'xml': use string, raw, avro"),
        ({"sink": "encode = 'thrift'"}, "sink.encode = 'thrift': use avro, protobuf, json_schema"),
        ({"sink": "encode = 'avro'\nauto_register = 'yes'"}, "sink.auto_register = 'yes': use true or false"),
        ({"sink": "encode = 'avro'\nsubject_name_strategy = 'record'"}, "sink.record_name is required with"),
        ({"sink": "encode = 'avro'\nrecord_name = 'a-b'"}, "sink.record_name = 'a-b'"),
    ],
)
def test_registry_settings_are_checked_naming_the_field(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_pipeline(registry_pipeline(tmp_path, **kwargs))


def test_on_malformed_applies_to_registry_formats(tmp_path: Path) -> None:
    path = registry_pipeline(tmp_path, 'on_malformed = "dead_letter"\ndead_letter_topic = "dlq"')
    assert load_pipeline(path).on_malformed == "dead_letter"


def test_keys_decode_only_with_decoding_values_and_encode_only_under_topic_subjects(tmp_path: Path) -> None:
    raw = (
        registry_pipeline(tmp_path, 'key_decode = "avro"')
        .read_text()
        .replace('decode = "avro"\n', 'decode = "raw"\n', 1)
    )
    with pytest.raises(ConfigError, match=r"source\.key_decode applies with decode = json"):
        load_pipeline(write(tmp_path, raw))
    record = registry_pipeline(
        tmp_path,
        sink='encode = "avro"\nkey_encode = "avro"\nsubject_name_strategy = "record"\nrecord_name = "R"',
    )
    with pytest.raises(ConfigError, match=r"sink\.key_encode works with subject_name_strategy = topic only"):
        load_pipeline(record)


@pytest.mark.parametrize(
    ("line", "want"),
    [("", "append"), ('output_mode = "update"', "update"), ('output_mode = "complete"', "complete")],
)
def test_output_mode_is_spark_s_with_append_by_default(tmp_path: Path, line: str, want: str) -> None:
    text = GOOD.format(trigger="5 seconds").replace('name = "p"', f'name = "p"\n{line}', 1)
    assert load_pipeline(write(tmp_path, text)).output_mode == want


def test_an_unknown_output_mode_names_the_allowed_ones(tmp_path: Path) -> None:
    text = GOOD.format(trigger="5 seconds").replace('name = "p"', 'name = "p"\noutput_mode = "upsert"', 1)
    with pytest.raises(ConfigError, match="output_mode = 'upsert': use append, update, complete"):
        load_pipeline(write(tmp_path, text))


ALIGNED = """
checkpoint = "ck"
[source]
watermark = {{ column = "timestamp", delay = "{delay}" }}
{keys}
options = {{ "kafka.bootstrap.servers" = "b:9092", subscribe = "in"{options} }}
[sink]
options = {{ "kafka.bootstrap.servers" = "b:9092", topic = "out" }}
"""


def test_event_time_alignment_keys_are_the_source_options(tmp_path: Path) -> None:
    keys = 'max_event_time_drift = "10 minutes"\npartition_idle_timeout = "1m"'
    cfg = load_pipeline(write(tmp_path, ALIGNED.format(delay="10 minutes", keys=keys, options="")))
    assert cfg.source.max_event_time_drift_ms == 600_000
    assert cfg.source.partition_idle_timeout_ms == 60_000
    assert cfg.source_options["maxEventTimeDrift"] == "10 minutes"
    # Without a group or a metrics file of its own, the source gets the pipeline's, for the runner to read.
    assert cfg.source.metrics_file is not None
    assert cfg.source.metrics_file.endswith("source-pipeline-pipeline.json")
    assert cfg.alignment_warning() is None
    grouped = ALIGNED.format(
        delay="5 minutes", keys="", options=', maxEventTimeDrift = "10m", "kafka.group.id" = "g"'
    )
    cfg = load_pipeline(write(tmp_path, grouped))
    assert cfg.source.metrics_file is None  # the group's default metrics file
    assert "make the delay at least the drift" in (cfg.alignment_warning() or "")


def test_an_alignment_key_given_twice_is_an_error(tmp_path: Path) -> None:
    text = ALIGNED.format(
        delay="1m", keys='max_event_time_drift = "10 minutes"', options=', maxEventTimeDrift = "5m"'
    )
    with pytest.raises(
        ConfigError, match=r"source.max_event_time_drift and source.options.maxEventTimeDrift are one setting"
    ):
        load_pipeline(write(tmp_path, text))
    text = ALIGNED.format(
        delay="1m", keys='partition_idle_timeout = "soon"\nmax_event_time_drift = "1m"', options=""
    )
    with pytest.raises(ConfigError, match="partitionIdleTimeout='soon' is not a duration"):
        load_pipeline(write(tmp_path, text))
