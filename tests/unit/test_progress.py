"""Progress lines: per-batch and cumulative counters, batches that only write, plain output."""

from __future__ import annotations

from typing import Any

from sparkafka.ops.query_progress import ran_batch
from sparkafka.pipeline.progress import batch_line, plain_line, plain_summary


def progress(batch: int, rows: int, ran: bool = True) -> dict[str, Any]:
    duration = {"triggerExecution": 500, **({"addBatch": 300} if ran else {})}
    return {"batchId": batch, "numInputRows": rows, "durationMs": duration, "sources": [{}]}


def test_a_batch_that_reads_nothing_but_writes_is_a_batch() -> None:
    assert ran_batch(progress(3, 0))  # a window closing on the watermark
    assert not ran_batch(progress(3, 0, ran=False))  # an idle trigger


def test_per_batch_records_add_up_to_the_total() -> None:
    totals = [10, 10, 14, 36]  # the sink's committed records since the start, after each batch
    lines = []
    for i, total in enumerate(totals):
        lines.append(
            batch_line(progress(i, 5 if i < 2 else 0), None, {"records": total}, lines[-1] if lines else None)
        )
    assert [x.records_out for x in lines] == [10, 0, 4, 22]
    assert sum(x.records_out or 0 for x in lines) == lines[-1].records_out_total == 36
    assert lines[-1].out_per_s == 22 * 1000 / 500


def test_plain_lines_carry_everything_on_one_line() -> None:
    line = batch_line(progress(7, 1234), None, {"records": 99, "transactions": 3}, None)
    text = plain_line(line)
    assert "\n" not in text
    assert text.startswith("batch 7: in 1,234 rows")
    assert "since start: txns 3, records out 99" in text
    summary = plain_summary("p", [line])
    assert summary.startswith("summary: pipeline p: 1 batches, 1,234 input rows")
    assert "records out 99" in summary


def stamped(batch: int, second: int, ran: bool = True) -> dict[str, Any]:
    return {**progress(batch, 1), "timestamp": f"2026-11-23T10:00:{second:02d}.000Z"} | (
        {} if ran else {"durationMs": {"triggerExecution": 5}}
    )


def test_each_poll_hands_over_only_what_is_new_idle_triggers_to_the_exporter_only() -> None:
    from sparkafka.ops.query_progress import fresh_progress

    first = fresh_progress([stamped(0, 1), stamped(1, 2)])
    assert [p["batchId"] for p in first.batches] == [0, 1]
    assert len(first.to_export) == 2
    # Spark's recentProgress is a sliding window: the next poll repeats batch 1, then an idle trigger
    # (the same batch id, no addBatch) and batch 2.
    second = fresh_progress(
        [stamped(1, 2), stamped(1, 3, ran=False), stamped(2, 4)], first.seen, first.exported
    )
    assert [p["batchId"] for p in second.batches] == [2]
    assert [p["timestamp"][-7:-5] for p in second.to_export] == ["03", "04"]
    assert (second.seen, second.exported) == (2, "2026-11-23T10:00:04.000Z")
    idle = fresh_progress([stamped(2, 4)], second.seen, second.exported)
    assert (idle.batches, idle.to_export, idle.seen) == ([], [], 2)


def test_offsets_read_as_json_and_as_pyspark_4_0_s_repr_of_it() -> None:
    from sparkafka.ops.query_progress import behind_latest, offsets_of

    # PySpark 4.0 and 4.1 give a source's offsets in a progress as str() of the parsed JSON (measured, 4.0.5).
    pyspark_4_0 = "{'t': {'0': 10, '1': 10}, '@topicIds': {'t': 'Ff0x'}, '@plan': {'tasks': 2}}"
    assert offsets_of(pyspark_4_0) == {"t": {"0": 10, "1": 10}}
    assert offsets_of('{"t": {"0": 10}}') == {"t": {"0": 10}}
    assert offsets_of("not offsets") == {}
    assert offsets_of("__import__('os')") == {}
    source = {"latestOffset": "{'t': {'0': 25, '1': 30}}", "endOffset": '{"t": {"0": 20, "1": 30}}'}
    assert behind_latest(source) == 5
