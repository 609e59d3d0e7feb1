"""Local SparkSessions for tests, the demo and benchmarks: the product's own builder, under its old name.

The builder lives in ``sparkafka.pipeline.session`` (``sparkafka run`` uses it); this module only keeps the
name the tests and the demo use.
"""

from __future__ import annotations

from sparkafka.pipeline.session import local_session as local_spark
from sparkafka.pipeline.session import stop_spark

__all__ = ["local_spark", "stop_spark"]
