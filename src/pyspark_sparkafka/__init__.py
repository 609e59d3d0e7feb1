"""``format("sparkafka")`` in any SparkSession, found by PySpark itself: no ``sparkafka.register(spark)``.

PySpark 4 registers every installed top-level module named ``pyspark_<something>`` that has a
``DefaultSource`` (a ``DataSource``), under that class's ``name()``: the first time a session resolves a
Python data source, the JVM starts a Python worker that imports each such module
(``pyspark/sql/worker/lookup_data_sources.py``) and registers what it finds. This module is that entry for
sparkafka: it ships in the ``sparkafka`` wheel and in the editable install beside the package.

``sparkafka.register(spark)`` still adds what a worker cannot do for the driver (``sparkafka.datasource
.register``): update mode, the local interpreter for the Python workers, and the ``spark.speculation``
check of the exactly-once sink. A data source found here knows that it was (``registered`` is False): an
exactly-once write refuses to start without that check, in one sentence that says to call ``register``.
Imported in that lookup worker and wherever a planner or task unpickles the class; imports nothing heavy.
"""

from __future__ import annotations

from sparkafka.datasource import KafkaDataSource

__all__ = ["DefaultSource"]


class DefaultSource(KafkaDataSource):
    """``format("sparkafka")`` as PySpark's lookup registers it (see the module docstring)."""

    registered = False
