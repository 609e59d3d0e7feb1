"""Spark's driver log, for failures that carry sparkafka's sentence: kept out, the exception says it once.

Runs in the user's driver process, installed by ``sparkafka.register`` (classic sessions), once per JVM.
When a streaming query fails, Spark logs ``ERROR MicroBatchExecution: Query ... terminated with error``
with the whole exception (the Python worker's report and 35-70 lines of JVM stack), then the same
exception reaches the user from ``awaitTermination`` (measured: a missing topic was 97 lines after
``start()``, sparkafka's sentence three times). The exception is the report a user acts on, and
``sparkafka.spark_errors`` makes it the sentence; so a filter on the driver's root logger drops, at ERROR
and above, each event whose message or exception (and its causes) names ``sparkafka.errors.``: the
query's end, and in local mode the task's ``Exception in task``. Nothing else is dropped: failures without
a sparkafka sentence (bugs, Spark's own) and every WARN (``Lost task``, which on a cluster is the only
trace of a task failure a retry healed) are logged as before. It also drops the one WARN ``register`` itself
causes (``The data source sparkafka replaced a statically registered data source``, printed again for each
query's session).

log4j 2 has no filter on an event's exception, and the driver has no class of ours, so the filter is
compiled in the JVM from the Java source below by Janino (``org.codehaus.janino.SimpleCompiler``, the
compiler Spark SQL's code generation uses, in every Spark 4.x distribution). If anything of that fails,
the log is left as Spark's (and a debug line says why). A configuration reloaded later (a changed
log4j2.properties) drops the filter; Spark's ``setLogLevel`` keeps it.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["FILTER_CLASS", "quiet_sentence_failures"]

log = logging.getLogger(__name__)

FILTER_CLASS = "SparkafkaSentenceFilter"

_L = "org.apache.logging.log4j"
FILTER_SOURCE = f"""
public class {FILTER_CLASS} extends {_L}.core.filter.AbstractFilter {{
  private static boolean ours(String text) {{
    return text != null && text.indexOf("sparkafka.errors.") >= 0;
  }}
  public {_L}.core.Filter.Result filter({_L}.core.LogEvent event) {{
    {_L}.Level level = event.getLevel();
    String message = event.getMessage() == null ? null : event.getMessage().getFormattedMessage();
    if (level.isMoreSpecificThan({_L}.Level.ERROR)) {{
      if (ours(message)) return {_L}.core.Filter.Result.DENY;
      Throwable thrown = event.getThrown();
      for (int i = 0; thrown != null && i < 16; i++) {{
        if (ours(thrown.getMessage())) return {_L}.core.Filter.Result.DENY;
        thrown = thrown.getCause();
      }}
    }} else if (level == {_L}.Level.WARN && message != null
        && message.startsWith("The data source sparkafka replaced a statically registered data source")) {{
      return {_L}.core.Filter.Result.DENY;
    }}
    return {_L}.core.Filter.Result.NEUTRAL;
  }}
}}
"""


def quiet_sentence_failures(spark: Any) -> bool:
    """Add the filter (see the module) to the driver JVM's root logger, unless it has it; whether it has."""
    try:
        jvm = spark.sparkContext._jvm
        context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
        root = context.getConfiguration().getRootLogger()
        if _has_filter(root):
            return True
        root.addFilter(_new_filter(spark))
        context.updateLoggers()
    except Exception as e:  # noqa: BLE001 - Spark's log stays as it is: nothing else depends on this
        log.debug("Spark's log keeps its report of failures sparkafka explains: %s", e)
        return False
    return True


def _has_filter(logger_config: Any) -> bool:
    found = logger_config.getFilter()
    return found is not None and FILTER_CLASS in str(found.toString())


def _new_filter(spark: Any) -> Any:
    """An instance of the filter class, compiled by Janino into a class loader of its own."""
    jvm = spark.sparkContext._jvm
    gateway = spark.sparkContext._gateway
    compiler = jvm.org.codehaus.janino.SimpleCompiler()
    compiler.setParentClassLoader(jvm.java.lang.Thread.currentThread().getContextClassLoader())
    compiler.cook(FILTER_SOURCE)
    cls = compiler.getClassLoader().loadClass(FILTER_CLASS)
    no_types = gateway.new_array(jvm.java.lang.Class, 0)
    no_args = gateway.new_array(jvm.java.lang.Object, 0)
    return cls.getDeclaredConstructor(no_types).newInstance(no_args)
