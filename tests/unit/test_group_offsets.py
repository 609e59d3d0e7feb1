"""``sparkafka offsets``: parsing --to, the reset decision table, reading a Spark checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkafka.errors import ConfigError
from sparkafka.ops.group_offsets import ResetTarget, parse_target, plan_reset, read_checkpoint
from sparkafka.structs import TopicPartition

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def write_checkpoint(root: Path, batches: dict[int, dict[str, dict[str, int]]], committed: list[int]) -> Path:
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    for batch, offsets in batches.items():
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {}}
        (root / "offsets" / str(batch)).write_text(f"v1\n{json.dumps(meta)}\n{json.dumps(offsets)}")
    for batch in committed:
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return root


def test_the_checkpoint_position_is_the_end_of_the_last_committed_batch(tmp_path: Path) -> None:
    # Batch 2 is planned but not committed: a restart replays it, so its offsets are not the position.
    root = write_checkpoint(
        tmp_path / "ck", {0: {"a": {"0": 5}}, 1: {"a": {"0": 9, "1": 3}}, 2: {"a": {"0": 20, "1": 8}}}, [0, 1]
    )
    position = read_checkpoint(root)
    assert position.batch == 1
    assert position.offsets == {A0: 9, A1: 3}


def test_a_checkpoint_without_commits_has_no_position(tmp_path: Path) -> None:
    assert read_checkpoint(write_checkpoint(tmp_path / "ck", {0: {"a": {"0": 5}}}, [])).batch is None


def test_not_a_checkpoint_is_an_error_naming_the_option(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--checkpoint .*: not a Spark checkpoint"):
        read_checkpoint(tmp_path)


def test_a_checkpoint_of_two_sources_is_refused(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "ck", {0: {"a": {"0": 5}}}, [0])
    path = root / "offsets" / "0"
    path.write_text(path.read_text() + '\n{"b": {"0": 1}}')
    with pytest.raises(ConfigError, match="has 2 sources"):
        read_checkpoint(root)


@pytest.mark.parametrize(
    ("text", "kind", "stamp"),
    [("earliest", "earliest", None), ("latest", "latest", None), ("timestamp:1700", "timestamp", 1700)],
)
def test_simple_targets(text: str, kind: str, stamp: int | None) -> None:
    target = parse_target(text)
    assert (target.kind, target.timestamp_ms) == (kind, stamp)


def test_json_and_checkpoint_targets_carry_their_offsets(tmp_path: Path) -> None:
    assert parse_target('json:{"a": {"1": 7}}').offsets == {A1: 7}
    root = write_checkpoint(tmp_path / "ck", {0: {"a": {"0": 4, "1": 2}}}, [0])
    assert parse_target(f"checkpoint:{root}").offsets == {A0: 4, A1: 2}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("first", "--to 'first': use earliest, latest, timestamp:MS"),
        ("timestamp:yesterday", "--to 'timestamp:yesterday': use earliest"),
        ("json:{bad", "not offsets as JSON"),
        ('json:{"a": {"0": -3}}', "offsets of 0 or more"),
        ("json:{}", "name at least one partition"),
    ],
)
def test_bad_targets_say_what_is_allowed(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("{", r"\{")):
        parse_target(text)


def test_a_checkpoint_target_needs_a_committed_batch(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "ck", {0: {"a": {"0": 4}}}, [])
    with pytest.raises(ConfigError, match="no committed batch"):
        parse_target(f"checkpoint:{root}")


EARLIEST = {A0: 10, A1: 0}
LATEST = {A0: 50, A1: 30}


@pytest.mark.parametrize(
    ("target", "by_time", "expected"),
    [
        (ResetTarget("earliest"), None, {A0: 10, A1: 0}),
        (ResetTarget("latest"), None, {A0: 50, A1: 30}),
        # No record at or after the time in A1: its end, as Kafka's tool does.
        (ResetTarget("timestamp", timestamp_ms=5), {A0: 20, A1: -1}, {A0: 20, A1: 30}),
        # Outside the log: clamped to the nearer end (retention removed 0..9 of A0; A1 ends at 30).
        (ResetTarget("json", offsets={A0: 3, A1: 99}), None, {A0: 10, A1: 30}),
        (ResetTarget("checkpoint", offsets={A0: 25, A1: 7}), None, {A0: 25, A1: 7}),
    ],
)
def test_reset_decision_table(
    target: ResetTarget, by_time: dict[TopicPartition, int] | None, expected: dict[TopicPartition, int]
) -> None:
    assert plan_reset(target, [A1, A0], EARLIEST, LATEST, by_time) == expected
