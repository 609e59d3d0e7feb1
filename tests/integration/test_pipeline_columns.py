"""Pipelines: a watermark on an expression (an epoch-ms field made the event-time column) and the record's
headers visible to the SQL when the source's includeHeaders is set."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_dead_letter import run
from tests.support.kafka import Kafka

pytestmark = pytest.mark.integration

PIPELINE = """
name = "columns-{tag}"
checkpoint = "{checkpoint}"
trigger = "availableNow"

[source]
decode = "json"
schema = "id STRING, ts BIGINT"
watermark = {{ column = "event_time", expression = "timestamp_millis(ts)", delay = "10 seconds" }}

[source.options]
"kafka.bootstrap.servers" = "{bootstrap}"
subscribe = "{src}"
startingOffsets = "earliest"
includeHeaders = "true"

[transform]
sql = '''
SELECT id, CAST(element_at(_headers, 1).value AS STRING) AS origin, window.start AS minute, count(*) AS n
FROM source GROUP BY id, CAST(element_at(_headers, 1).value AS STRING), window(event_time, '1 minute')
'''

[sink]
value = "to_json(struct(id, origin, CAST(unix_millis(minute) AS BIGINT) AS minute, n))"
options = {{ "kafka.bootstrap.servers" = "{bootstrap}", topic = "{dst}" }}
"""


def test_an_epoch_ms_field_is_the_watermark_and_headers_reach_the_sql(
    spark: Any, kafka: Kafka, tmp_path: Path
) -> None:
    src, dst = kafka.topic(partitions=1), kafka.topic(partitions=1)
    base = 1_700_000_040_000 - 1_700_000_040_000 % 60_000  # a minute's start
    # Two records in each of minutes 0..3 and one at 4:30: the watermark ends at 4:20, so minutes 0..3
    # are final (emitted in append mode) and minute 4 is not.
    times = [base + m * 60_000 + s * 1000 for m in range(4) for s in (5, 50)] + [base + 4 * 60_000 + 30_000]
    kafka.produce(src, [json.dumps({"id": "a", "ts": t}) for t in times], headers=[("origin", b"web")])
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        PIPELINE.format(
            tag=uuid.uuid4().hex[:6],
            checkpoint=tmp_path / "ck",
            bootstrap=kafka.conf["bootstrap.servers"],
            src=src,
            dst=dst,
        )
    )
    run(spark, pipeline)
    rows = sorted((json.loads(v or b"{}") for v in kafka.read_committed(dst)), key=lambda r: r["minute"])
    assert rows == [{"id": "a", "origin": "web", "minute": base + m * 60_000, "n": 2} for m in range(4)]
