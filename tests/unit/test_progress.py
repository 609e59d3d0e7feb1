"""Progress lines: per-batch and cumulative counters, batches that only write, plain output."""

from __future__ import annotations

from typing import Any

from sparkafka.pipeline.progress import batch_line, plain_line, plain_summary, ran_batch


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
