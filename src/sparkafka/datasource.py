"""The ``sparkafka`` data source: the one class Spark sees; it hands off to the source and sink packages."""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from sparkafka.source.options import parse_source_options

__all__ = ["KafkaDataSource", "register", "source_schema"]


def source_schema(include_headers: bool) -> StructType:
    """The source's output schema, derived from the Arrow schema the readers yield (one definition)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from sparkafka.source.fetch import arrow_schema

    return from_arrow_schema(arrow_schema(include_headers))


class KafkaDataSource(DataSource):
    """``format("sparkafka")``: read from and write to Kafka with Flink's connector semantics."""

    @classmethod
    def name(cls) -> str:
        return "sparkafka"

    def schema(self) -> StructType:
        # Spark asks for the schema at load(): validating here reports bad options before a query starts.
        # (endingOffsets is checked again, for streams, when the stream reader is made.)
        options = parse_source_options(self.options, batch=True)
        return source_schema(options.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        from sparkafka.source.reader import KafkaBatchReader

        return KafkaBatchReader(parse_source_options(self.options, batch=True))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from sparkafka.source.reader import KafkaStreamReader

        return KafkaStreamReader(parse_source_options(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from sparkafka.sink.options import input_columns, parse_sink_options
        from sparkafka.sink.writer import KafkaStreamWriter

        options = parse_sink_options(self.options)
        return KafkaStreamWriter(options, input_columns(schema, options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from sparkafka.sink.options import input_columns, parse_sink_options
        from sparkafka.sink.writer import KafkaBatchWriter

        options = parse_sink_options(self.options)
        return KafkaBatchWriter(options, input_columns(schema, options))


def register(spark: Any) -> None:
    """Register every data source of this package with ``spark`` (``format("sparkafka")``)."""
    spark.dataSource.register(KafkaDataSource)
