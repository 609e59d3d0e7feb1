"""What the driver tells the data source's Python processes: ``spark.speculation``, Spark's cores,
``spark.network.timeout``, and the driver's pid and the application's name and id (which name a running
query in ``sparkafka offsets reset``'s refusal, ``source.driver_process``), which a Python worker cannot ask
Spark for.

``sparkafka.register`` passes them through the context's worker environment (``SparkContext.environment``),
which reaches every Python process of the data source it registers. On PySpark 4.0 that is not the data
source Spark uses when ``pyspark_sparkafka`` is installed where Spark's lookup worker runs: Spark found it
first, refuses to register another under its name (``DATA_SOURCE_ALREADY_EXISTS``; 4.1 and later let the
registered one replace it), and starts its processes with no environment from the context (measured on
4.0.5). There ``register`` calls ``install``: the calls that start a read or a write with
``format("sparkafka")`` (``DataFrameReader.load``, ``DataStreamReader.load``, ``DataFrameWriter.save``,
``DataStreamWriter.start``) add the facts as one internal option (``FACTS_OPTION``), and the data source
takes them out of its options and into its own process's environment (``split_facts``, ``adopt``) wherever
it is made or unpickled: Spark's planner, its stream source runner, the process that makes the writer.

Functions here run in the user's driver process (``facts_of``, ``install``) and in those Python processes
(``split_facts``, ``adopt``).
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from sparkafka.errors import ConfigError

__all__ = ["FACTS_OPTION", "adopt", "facts_of", "install", "split_facts"]

FACTS_OPTION = "_sparkafka.driverFacts"
"""Internal option: the driver's facts as JSON, named by the environment variables they travel as else."""

_FORMAT = "sparkafka"
_RECORDED = "_sparkafka_format"
_WRAPPED = "_sparkafka_facts_wrapped"
_WRAPPING = threading.Lock()


def facts_of(spark: Any) -> dict[str, str]:
    """The facts of ``spark``'s context, by the environment variable each is read from (driver)."""
    from sparkafka.sink.writer import SPECULATION_ENV
    from sparkafka.source.assignment import CORES_ENV
    from sparkafka.source.driver_process import APP_ID_ENV, APP_NAME_ENV, DRIVER_PID_ENV
    from sparkafka.source.options import NETWORK_TIMEOUT_ENV

    sc = spark.sparkContext
    conf = sc.getConf()
    return {
        SPECULATION_ENV: str(conf.get("spark.speculation", "false")).strip().lower(),
        CORES_ENV: str(sc.defaultParallelism),
        # The source's pollTimeoutMs defaults to spark.network.timeout, as in Spark's connector.
        NETWORK_TIMEOUT_ENV: str(conf.get("spark.network.timeout", "120s")),
        DRIVER_PID_ENV: str(os.getpid()),
        APP_NAME_ENV: str(sc.appName),
        APP_ID_ENV: str(sc.applicationId),
    }


def split_facts(options: Mapping[str, Any]) -> tuple[Any, dict[str, str] | None]:
    """``options`` without ``FACTS_OPTION``, and the facts it carried (None: not given, as with a data source
    that ``register`` registered, whose processes have them in their environment).

    Raises:
        ConfigError: the option is not what ``install`` writes (set by hand).
    """
    rest: Any = options.copy() if hasattr(options, "copy") else dict(options)  # case-insensitive stays so
    facts: dict[str, str] | None = None
    for key in [k for k in rest if str(k).lower() == FACTS_OPTION.lower()]:
        value = rest.pop(key)
        try:
            given = json.loads(str(value))
        except ValueError:
            given = None
        if not isinstance(given, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in given.items()
        ):
            raise ConfigError(f"option {FACTS_OPTION} is sparkafka's own: remove it from the query's options")
        facts = given
    return rest, facts


def adopt(facts: Mapping[str, str] | None) -> None:
    """Put ``facts`` into this process's environment, where the source and the sink read them."""
    if facts:
        os.environ.update(facts)


def install(connect: bool = False) -> None:
    """Wrap PySpark's classic readers and writers once per process (see the module docstring), or with
    ``connect`` those of a Spark Connect client: there the facts are the server's, which a client cannot
    read, so its queries carry an empty set (what ``register`` told; CONNECT_NOTE in ``datasource`` says
    what the server then needs)."""
    if connect:
        from pyspark.sql.connect.readwriter import DataFrameReader, DataFrameWriter
        from pyspark.sql.connect.streaming.readwriter import DataStreamReader, DataStreamWriter
    else:
        from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter  # type: ignore[assignment]
        from pyspark.sql.streaming.readwriter import (  # type: ignore[assignment]
            DataStreamReader,
            DataStreamWriter,
        )

    for cls, run in (
        (DataFrameReader, "load"),
        (DataStreamReader, "load"),
        (DataFrameWriter, "save"),
        (DataStreamWriter, "start"),
    ):
        wrap(cls, run, (lambda _writer: {}) if connect else _classic_facts)


def _classic_facts(writer: Any) -> dict[str, str]:
    return facts_of(writer._spark)


def wrap(cls: Any, run: str, facts: Callable[[Any], dict[str, str]] = _classic_facts) -> None:
    """Wrap ``cls.format`` to record the format, and ``cls.<run>`` to add the facts for sparkafka. The
    option goes to the JVM by the class's own ``option`` as it was when wrapped, so no wrapper of
    ``option`` (``sparkafka.stream_writer``) records it among the user's options. Idempotent."""
    with _WRAPPING:
        if vars(cls).get(_WRAPPED):
            return
        # The class's own option, under any recording wrapper (sparkafka.stream_writer's).
        fmt, start, option = cls.format, getattr(cls, run), inspect.unwrap(cls.option)
        signature = inspect.signature(start)

        @functools.wraps(fmt)
        def format_(self: Any, source: str) -> Any:
            result = fmt(self, source)
            setattr(self, _RECORDED, source)
            return result

        def facts_added(original: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(original)
            def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
                given = signature.bind(self, *args, **kwargs).arguments.get("format")
                chosen = given if given is not None else vars(self).get(_RECORDED)
                if str(chosen).strip().lower() == _FORMAT:
                    option(self, FACTS_OPTION, json.dumps(facts(self), sort_keys=True))
                return original(self, *args, **kwargs)

            return wrapper

        cls.format = format_
        setattr(cls, run, facts_added(start))
        setattr(cls, _WRAPPED, True)
