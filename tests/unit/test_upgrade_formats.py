"""What docs/upgrading.md promises, on the records themselves: the new version reads what
older ones wrote (checkpoint offsets, commit intents, group offset commits), and older readers' way of
reading (named fields only) takes the intent records the new one writes (not its tasks' witness records, nor
the topic ids beside a checkpoint's offsets: the page says going back is then not possible)."""

from __future__ import annotations

import json

from sparkafka.sink.intents import IntentRecord
from sparkafka.sink.txn_control import MarkerProbe, TxnHandle
from sparkafka.source.commits import CommitMark
from sparkafka.source.planning import offsets_from_json, offsets_to_json
from sparkafka.structs import TopicPartition

# Written by 0.3.0 (commit f1c5a71): IntentRecord.to_json without "old", handles without "probe".
V030_INTENT = (
    b'{"at": 1764000000000, "batch": 7, "committed": [], "query": "q-1", "state": "intent", '
    b'"streaming": true, "tids": 2, "txns": [{"epoch": 3, "n": 10, "pid": 41, "task": 0, "tid": "p-0"}, '
    b'{"epoch": 1, "n": 5, "pid": 42, "task": 1, "tid": "p-1"}]}'
)
# Written by 0.1.0: handles without "task" either.
V010_ABANDONED = (
    b'{"at": 1763800000000, "batch": 2, "committed": [], "query": "q-0", "state": "abandoned", '
    b'"streaming": false, "tids": 1, "txns": [{"epoch": 0, "n": 3, "pid": 40, "tid": "p-0"}]}'
)


def test_the_new_version_reads_older_intent_records() -> None:
    intent = IntentRecord.from_json(V030_INTENT)
    assert (intent.query_id, intent.batch_id, intent.state, intent.tids_in_use) == ("q-1", 7, "intent", 2)
    assert [(h.transactional_id, h.task, h.records, h.probe) for h in intent.handles] == [
        ("p-0", 0, 10, None),
        ("p-1", 1, 5, None),
    ]
    abandoned = IntentRecord.from_json(V010_ABANDONED)
    assert abandoned.handles[0].task == 0  # from the id's suffix
    assert abandoned.too_old is None
    assert abandoned.streaming is False


def test_the_fields_the_new_version_adds_are_read_back_and_older_readers_ignore_them() -> None:
    handle = TxnHandle("p-0", 41, 3, records=10, task=0, probe=MarkerProbe("out", 2, 1234))
    record = IntentRecord("q-1", 7, "abandoned", handles=(handle,), tids_in_use=1, too_old=(900_000, 60_000))
    data = json.loads(record.to_json())
    assert data["txns"][0]["probe"] == ["out", 2, 1234]
    assert data["old"] == [900_000, 60_000]
    assert IntentRecord.from_json(record.to_json()) == record
    assert IntentRecord.from_json(record.to_json()).handles[0].probe == MarkerProbe("out", 2, 1234)
    # 0.3.0's from_json reads named fields only: everything it knew is still there, under the same names.
    old_fields = {"at", "batch", "committed", "query", "state", "streaming", "tids", "txns"}
    assert old_fields <= set(data)
    assert {"epoch", "n", "pid", "task", "tid"} <= set(data["txns"][0])


def test_checkpoint_offsets_keep_their_shape() -> None:
    written_by_010 = {"orders": {"0": 23, "1": 0}, "refunds": {"0": 5}}
    offsets = offsets_from_json(written_by_010)
    assert offsets == {
        TopicPartition("orders", 0): 23,
        TopicPartition("orders", 1): 0,
        TopicPartition("refunds", 0): 5,
    }
    assert offsets_to_json(offsets) == written_by_010


def test_group_commits_without_a_mark_read_as_unmarked() -> None:
    assert CommitMark.from_metadata("") is None  # 0.3.0 and earlier committed with no metadata
    assert CommitMark.from_metadata(None) is None
    mark = CommitMark("run-1", "host", 12, 1764000000000)
    assert CommitMark.from_metadata(mark.to_metadata()) == mark
