"""Spark's driver log, for failures that carry sparkafka's sentence: kept out, the exception says it once.

Runs in the user's driver process, installed by ``sparkafka.register`` (classic sessions), once per JVM.
When a streaming query fails, Spark logs ``ERROR MicroBatchExecution: Query ... terminated with error``
with the whole exception (the Python worker's report and 35-70 lines of JVM stack), then the same
exception reaches the user from ``awaitTermination`` (measured: a missing topic was 97 lines after
``start()``, sparkafka's sentence three times). The exception is the report a user acts on, and
``sparkafka.spark_errors`` makes it the sentence; so a filter on the driver's root logger drops, at ERROR
and above, each event whose message or exception (and its causes) names ``sparkafka.errors.``, while a
call that will raise it waits (``awaited``: ``awaitTermination`` and ``processAllAvailable`` for their
query, ``awaitAnyTermination`` for all): the query's end, and in local mode the task's ``Exception in
task``. A query nobody awaits (a notebook that looks at ``query.exception()`` or ``status``; a service
whose log is its record) keeps Spark's whole report. Nothing else is dropped: failures without a
sparkafka sentence (bugs, Spark's own) and every WARN (``Lost task``, which on a cluster is the only
trace of a task failure a retry healed) are logged as before. A failure logged before the call that
awaits it began (a query failing within its first moments, awaited later) is logged as Spark logs it.
It also drops the one WARN ``register`` itself causes (``The data source sparkafka replaced a statically
registered data source``, printed again for each query's session).

log4j 2 has no filter on an event's exception, and the driver has no class of ours, so the filter is
compiled in the JVM from the Java source below by Janino (``org.codehaus.janino.SimpleCompiler``, the
compiler Spark SQL's code generation uses, in every Spark 4.x distribution). If anything of that fails,
the log is left as Spark's (and a debug line says why). A configuration reloaded later (a changed
log4j2.properties) drops the filter; Spark's ``setLogLevel`` keeps it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["FILTER_CLASS", "awaited", "quiet_sentence_failures"]

log = logging.getLogger(__name__)

FILTER_CLASS = "SparkafkaSentenceFilter"

_L = "org.apache.logging.log4j"
FILTER_SOURCE = f"""
public class {FILTER_CLASS} extends {_L}.core.filter.AbstractFilter {{
  private final java.util.HashMap awaited = new java.util.HashMap();

  public synchronized void awaiting(String query, boolean on) {{
    Integer count = (Integer) awaited.get(query);
    int now = (count == null ? 0 : count.intValue()) + (on ? 1 : -1);
    if (now <= 0) awaited.remove(query); else awaited.put(query, Integer.valueOf(now));
  }}

  private synchronized boolean isAwaited(String message) {{
    if (awaited.containsKey("*")) return true;
    int at = message == null ? -1 : message.indexOf("[id = ");
    if (at < 0 || message.indexOf("terminated with error") < 0) return !awaited.isEmpty();
    int end = message.indexOf(",", at);
    return awaited.containsKey(message.substring(at + 6, end < 0 ? message.length() : end));
  }}

  private static boolean ours(String text) {{
    return text != null && text.indexOf("sparkafka.errors.") >= 0;
  }}

  public {_L}.core.Filter.Result filter({_L}.core.LogEvent event) {{
    {_L}.Level level = event.getLevel();
    String message = event.getMessage() == null ? null : event.getMessage().getFormattedMessage();
    if (level.isMoreSpecificThan({_L}.Level.ERROR)) {{
      boolean carries = ours(message);
      Throwable thrown = event.getThrown();
      for (int i = 0; !carries && thrown != null && i < 16; i++) {{
        carries = ours(thrown.getMessage());
        thrown = thrown.getCause();
      }}
      if (carries && isAwaited(message)) return {_L}.core.Filter.Result.DENY;
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
    global _filter  # noqa: PLW0603 - one filter per driver JVM, which lives as long as this process
    try:
        jvm = spark.sparkContext._jvm
        context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
        root = context.getConfiguration().getRootLogger()
        found = _find(root)
        if found is None:
            found = _new_filter(spark)
            root.addFilter(found)
            context.updateLoggers()
        _filter = found
    except Exception as e:  # noqa: BLE001 - Spark's log stays as it is: nothing else depends on this
        log.debug("Spark's log keeps its report of failures sparkafka explains: %s", e)
        return False
    return True


_filter: Any = None
"""The driver JVM's filter (a py4j proxy), once ``quiet_sentence_failures`` added or found it."""


@contextlib.contextmanager
def awaited(query: Callable[[], str]) -> Iterator[None]:
    """While the block runs, a failure of the query whose id ``query()`` gives (``*``: of any query) is
    awaited by a call that will raise it (``sparkafka.spark_errors``): Spark's ERROR report of it, if it
    carries a sparkafka sentence, is left out of the log. Does nothing where the filter is not installed."""
    current = _filter
    if current is None:
        yield
        return
    try:
        query_id = query()
        current.awaiting(query_id, True)
    except Exception as e:  # noqa: BLE001 - the JVM is gone or the filter with it: Spark's log stays whole
        log.debug("not told the log filter that a query is awaited: %s", e)
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            current.awaiting(query_id, False)


def _find(root: Any) -> Any:
    """The filter on the root logger's configuration (alone or in a composite filter), or None."""
    found = root.getFilter()
    if found is None:
        return None
    candidates = (
        list(found.getFiltersArray()) if "CompositeFilter" in str(found.getClass().getName()) else [found]
    )
    return next((f for f in candidates if str(f.getClass().getName()) == FILTER_CLASS), None)


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
