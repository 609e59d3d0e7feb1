"""Avro decoding speed: sparkafka's registry path against fastavro alone on the same bytes, in one run.

1,000,000 Avro orders (6 fields: strings, a double, an int, a timestamp-millis), written with fastavro and
framed in Confluent's wire format under a schema registered in the test Schema Registry (tests/support).

  fastavro   fastavro.schemaless_reader over the payloads in a loop, one core (its default reading:
             timestamps become datetimes, records dicts)
  codec      sparkafka.registry.codec.decode_array on the framed bytes in Arrow batches of 10,000, one core:
             what each Python worker runs per Arrow batch (framing, the schema cache by id, decoding,
             building the Arrow struct column)
  spark      from_registry on local[2] over the same framed bytes (a parquet file), into Spark's noop sink;
             records/s divided by the 2 cores for the per-core figure

    python bench/avro_decode.py [--records N] [--no-spark]

Target (issue 19): codec and spark per core >= 0.7 x fastavro.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests.support: the test registry

from tests.support.schema_registry import TestSchemaRegistry

from sparkafka.registry.client import parse_registry, register_or_lookup
from sparkafka.registry.codec import decode_array
from sparkafka.registry.spark import decode_spec

SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "currency", "type": "string"},
        {"name": "quantity", "type": "int"},
        {"name": "event_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
BATCH = 10_000


def payloads(n: int) -> list[bytes]:
    parsed = fastavro.parse_schema(SCHEMA)
    base = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
    out = []
    for i in range(n):
        buf = io.BytesIO()
        order = {
            "order_id": f"order-{i:09d}",
            "customer": f"customer-{i % 1000}",
            "amount": 10.0 + (i % 500) * 0.25,
            "currency": ("EUR", "USD", "GBP")[i % 3],
            "quantity": i % 9,
            "event_time": base + dt.timedelta(milliseconds=i),
        }
        fastavro.schemaless_writer(buf, parsed, order)
        out.append(buf.getvalue())
    return out


def fastavro_rate(data: list[bytes]) -> float:
    parsed = fastavro.parse_schema(SCHEMA)
    reader = fastavro.schemaless_reader
    start = time.perf_counter()
    for p in data:
        reader(io.BytesIO(p), parsed, None)
    return len(data) / (time.perf_counter() - start)


def codec_rate(spec: object, framed: list[bytes]) -> float:
    batches = [pa.array(framed[i : i + BATCH], pa.binary()) for i in range(0, len(framed), BATCH)]
    start = time.perf_counter()
    for batch in batches:
        out = decode_array(spec, batch)  # type: ignore[arg-type]
        assert out.field("error").null_count == len(batch)
    return len(framed) / (time.perf_counter() - start)


def spark_rate(url: str, framed: list[bytes], scratch: str) -> float:
    from sparkafka.local.spark import local_spark, stop_spark
    from sparkafka.registry import from_registry

    path = f"{scratch}/framed"
    half = len(framed) // 2  # two files: two read tasks, one per core, and no shuffle
    for i, part in enumerate((framed[:half], framed[half:])):
        Path(path).mkdir(exist_ok=True)
        pq.write_table(pa.table({"value": pa.array(part, pa.binary())}), f"{path}/part-{i}.parquet")
    spark = local_spark(master="local[2]", scratch=f"{scratch}/spark")
    try:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH))
        df = spark.read.parquet(path)
        assert df.rdd.getNumPartitions() == 2
        decoded = df.select(from_registry("value", url, "avro", subject="bench-value").alias("o")).select(
            "o.*"
        )
        decoded.write.format("noop").mode("overwrite").save()  # warm-up: Python workers, caches
        start = time.perf_counter()
        decoded.write.format("noop").mode("overwrite").save()
        return len(framed) / (time.perf_counter() - start)
    finally:
        stop_spark(spark)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--no-spark", action="store_true")
    args = parser.parse_args()
    data = payloads(args.records)
    with TestSchemaRegistry() as registry, tempfile.TemporaryDirectory() as scratch:
        cfg = parse_registry({"url": registry.url})
        schema_id = register_or_lookup(cfg, "avro", "bench-value", json.dumps(SCHEMA), True).schema_id
        framed = [b"\x00" + schema_id.to_bytes(4, "big") + p for p in data]
        spec = decode_spec(cfg, "avro", "bench-value")
        alone = fastavro_rate(data)
        ours = codec_rate(spec, framed)
        print(f"{args.records:,} Avro records of {sum(map(len, framed)) / len(framed):.0f} B (framed)")
        print(f"fastavro alone, 1 core:         {alone:12,.0f} records/s")
        print(f"sparkafka codec, 1 core:        {ours:12,.0f} records/s   {ours / alone:.2f} x fastavro")
        if not args.no_spark:
            spark = spark_rate(registry.url, framed, scratch)
            print(
                f"from_registry on local[2]:      {spark:12,.0f} records/s   "
                f"{spark / 2:,.0f} per core = {spark / 2 / alone:.2f} x fastavro"
            )


if __name__ == "__main__":
    main()
