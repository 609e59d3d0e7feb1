"""The pure planning of dead-letter pipelines: the read-once statement, its pieces, old checkpoints.

No Spark here: tests/integration/test_dead_letter.py runs these statements and counts what they read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sparkafka.pipeline.config import load_pipeline
from sparkafka.pipeline.plan import (
    DEAD,
    RAW_KEY,
    RAW_VALUE,
    dead_lettering,
    interval_sql,
    read_once_sql,
    statement_text,
    two_scan_checkpoint,
)


def statement(sql: str | None = "SELECT a FROM source", **kwargs: object) -> str:
    args: dict[str, object] = {
        "key": "k",
        "value": "v",
        "dead_letter_topic": "dlq",
        "headers": "H",
        **kwargs,
    }
    return read_once_sql("decoded", sql, **args)  # type: ignore[arg-type]


def test_the_decoded_source_is_one_non_deterministic_cte_that_both_branches_read() -> None:
    text = statement()
    assert text.startswith(
        "WITH _sparkafka_records AS (SELECT * FROM `decoded` WHERE spark_partition_id() >= 0),\n"
        "source AS (SELECT * FROM _sparkafka_records WHERE NOT _malformed)\n"
    )
    good, dead = text.split("\nUNION ALL\n")
    assert good.endswith("FROM (\nSELECT a FROM source\n) AS _sparkafka_transformed")
    assert dead.endswith("FROM _sparkafka_records WHERE _malformed")
    assert text.count("`decoded`") == 1  # the view is read in one place only


def test_both_lanes_have_the_same_columns_in_the_same_order() -> None:
    def columns(select: str) -> list[str]:
        return re.findall(r" AS (\w+)(?=, |$)", select.split("\nFROM ", maxsplit=1)[0])

    for key in ("k", None):
        good, dead = statement(key=key).split("\nUNION ALL\n")
        expected = [
            DEAD,
            *(["key"] if key else []),
            "value",
            RAW_KEY,
            RAW_VALUE,
            "topic",
            "timestamp",
            "headers",
        ]
        assert columns(good.split("\nSELECT ", 1)[1]) == expected
        assert columns(dead.removeprefix("SELECT ")) == expected
    good, dead = statement().split("\nUNION ALL\n")
    assert f"false AS {DEAD}" in good
    assert f"true AS {DEAD}" in dead
    assert "'dlq' AS topic" in dead
    assert "H AS headers" in dead
    assert "_raw_key AS _sparkafka_raw_key" in dead


def test_without_sql_the_sink_expressions_read_the_source_view() -> None:
    good = statement(None).split("\nUNION ALL\n")[0]
    assert good.endswith("\nFROM source")


def test_user_fragments_stand_on_lines_of_their_own() -> None:
    """A trailing ``--`` comment in the SQL or a sink expression ends at its line: nothing after is lost."""
    text = statement("SELECT a FROM source -- all of them", key="k -- the key", value="v -- the value")
    assert "\nk -- the key\n AS key" in text
    assert "\nv -- the value\n AS value" in text
    assert "\nSELECT a FROM source -- all of them\n) AS _sparkafka_transformed" in text


def test_the_topic_is_quoted_as_a_sql_literal() -> None:
    assert "'it\\'s' AS topic" in statement(dead_letter_topic="it's")


def test_the_watermark_follows_the_filter_so_dead_letters_never_reach_it() -> None:
    text = statement(watermark=("event_time", "1 minute 30 seconds"))
    assert (
        "_sparkafka_decodable AS (SELECT * FROM _sparkafka_records WHERE NOT _malformed),\n"
        "source AS (SELECT * FROM _sparkafka_decodable WATERMARK event_time DELAY OF "
        "INTERVAL 1 MINUTES 30 SECONDS AS _sparkafka_decodable)\n"
    ) in text
    assert "WATERMARK `odd name` DELAY" in statement(watermark=("odd name", "5 seconds"))
    assert "WATERMARK o.event_time DELAY" in statement(watermark=("o.event_time", "5 seconds"))
    with pytest.raises(ValueError, match="delay 'soon': use number-unit pairs such as '30 seconds'"):
        statement(watermark=("event_time", "soon"))


@pytest.mark.parametrize(
    ("delay", "sql"),
    [
        ("30 seconds", "INTERVAL 30 SECONDS"),
        ("1 minute", "INTERVAL 1 MINUTES"),
        ("interval 2 hours 5 minutes", "INTERVAL 2 HOURS 5 MINUTES"),
        ("1.5 SECONDS", "INTERVAL 1.5 SECONDS"),
        ("500 milliseconds", "INTERVAL 500 MILLISECONDS"),
        ("1day", "INTERVAL 1 DAYS"),
        ("30", None),
        ("30 s", None),
        ("thirty seconds", None),
        ("", None),
        ("interval", None),
        ("10 seconds; DROP", None),
    ],
)
def test_interval_sql(delay: str, sql: str | None) -> None:
    assert interval_sql(delay) == sql


@pytest.mark.parametrize(
    ("sql", "statement"),
    [
        ("SELECT 1", "SELECT 1"),
        ("SELECT 1;\n", "SELECT 1"),
        ("SELECT 1 ;; ", "SELECT 1"),
        ("SELECT 1; -- done", "SELECT 1"),
        ("SELECT ';' AS s; -- done", "SELECT ';' AS s"),
        ('SELECT "a\\";" AS s;', 'SELECT "a\\";" AS s'),
        ("SELECT `a;b` FROM t;", "SELECT `a;b` FROM t"),
        ("SELECT 'it''s;' ;", "SELECT 'it''s;'"),
        ("SELECT 1 -- a;b\n;", "SELECT 1 -- a;b"),
        ("SELECT /* ; /* ; */ ; */ 1 ; /* after */", "SELECT /* ; /* ; */ ; */ 1"),
        ("SELECT 'never closed;", "SELECT 'never closed;"),
    ],
)
def test_statement_text_ends_at_the_first_semicolon_outside_quotes_and_comments(
    sql: str, statement: str
) -> None:
    assert statement_text(sql) == statement


def write_offsets(checkpoint: Path, batch: int, *sources: str) -> None:
    offsets = checkpoint / "offsets"
    offsets.mkdir(parents=True, exist_ok=True)
    (offsets / str(batch)).write_text("\n".join(["v1", json.dumps({"batchWatermarkMs": 0}), *sources]))


def test_a_checkpoint_of_the_two_scan_plan_is_recognised_by_its_newest_offsets(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    assert not two_scan_checkpoint(str(ck))  # none yet
    (ck / "offsets").mkdir(parents=True)
    assert not two_scan_checkpoint(str(ck))  # no batch yet
    one, later = '{"t": {"0": 5}}', '{"t": {"0": 9}}'
    write_offsets(ck, 0, one, one)
    assert two_scan_checkpoint(str(ck))
    assert two_scan_checkpoint(f"file:{ck}")
    assert two_scan_checkpoint(f"file://{ck}")
    write_offsets(ck, 1, later)  # the newest entry decides
    assert not two_scan_checkpoint(str(ck))
    write_offsets(ck, 2, one, later)  # two different sources: not the dead-letter plan's
    assert not two_scan_checkpoint(str(ck))
    write_offsets(ck, 10, later, later)  # batch 10 is newer than 2 (numbers, not names, are compared)
    assert two_scan_checkpoint(str(ck))
    assert not two_scan_checkpoint("hdfs://namenode/ck")  # not readable here: Spark says what it finds


PIPELINE = """
checkpoint = "ck"
[source]
decode = "{decode}"
{schema}
on_malformed = "{policy}"
{dead_letter}
options = {{ "kafka.bootstrap.servers" = "b:9092", subscribe = "in" }}
[sink]
options = {{ "kafka.bootstrap.servers" = "b:9092", topic = "out" }}
"""


@pytest.mark.parametrize(
    ("decode", "policy", "expected"),
    [("json", "dead_letter", True), ("json", "skip", False), ("json", "flag", False)],
)
def test_dead_lettering(tmp_path: Path, decode: str, policy: str, expected: bool) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        PIPELINE.format(
            decode=decode,
            schema='schema = "a INT"',
            policy=policy,
            dead_letter='dead_letter_topic = "dlq"' if policy == "dead_letter" else "",
        )
    )
    assert dead_lettering(load_pipeline(path)) is expected
