"""The consumer groups a streaming query's sparkafka sources commit to, for ``serve``'s group metrics.

Runs on the driver, in the user's process, from ``serve``'s StreamingQueryListener (``onQueryStarted``,
then at a query's first progress event when the exporter was added after it started). A source's group is
its option ``kafka.group.id`` (its metrics file: ``metricsFile``, else the group's default), fixed for a
run of the query. Spark's progress names a Python source only by its class, so the options are read from
the query's plan instead: each streaming source of Spark's analyzed plan (``StreamingRelationV2``, a plain
field of the query's ``StreamExecution`` on PySpark 4.0 to 4.3) keeps the format it was loaded with and its
options. That plan is a JVM object, reachable through py4j from a classic session's query; a Spark Connect
client has none, and there ``serve(groups=...)`` names the groups.

The decision (``source_groups``) is pure; ``plan_sources`` is the thin py4j reading of the plan.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["PlanSource", "SourceGroup", "plan_sources", "session_groups", "source_groups"]

log = logging.getLogger(__name__)

SOURCE_FORMAT = "sparkafka"
"""The format a sparkafka source is loaded with (``DataSource.name``), compared without case as Spark does."""

READ_OPTIONS = ("kafka.group.id", "metricsFile")
"""The only options read from a plan: nothing else (a password among them) is copied into Python."""


@dataclass(frozen=True)
class SourceGroup:
    """A consumer group a query's sparkafka source commits to, and where that source writes its metrics."""

    group: str
    """The source's ``kafka.group.id``."""
    metrics_file: str | None = None
    """The source's option ``metricsFile``; None: the group's default file (``default_metrics_file``)."""


@dataclass(frozen=True)
class PlanSource:
    """One streaming source of a query's plan."""

    format: str
    """The format it was loaded with, as written (``format("sparkafka")``)."""
    options: Mapping[str, str]
    """Its options among ``READ_OPTIONS`` that are set, keyed as ``READ_OPTIONS`` spells them."""


def source_groups(sources: Iterable[PlanSource]) -> tuple[SourceGroup, ...]:
    """The groups of the sparkafka sources among ``sources`` that have ``kafka.group.id``, in plan order,
    each once; pure.

    A source without a group commits nowhere (``offsetCommitMode`` needs one) and is left out; so are
    other formats (Spark's ``kafka`` included: it commits no offsets).
    """
    found: list[SourceGroup] = []
    for source in sources:
        if source.format.strip().lower() != SOURCE_FORMAT:
            continue
        group = source.options.get("kafka.group.id") or ""
        if not group:
            continue
        entry = SourceGroup(group, source.options.get("metricsFile") or None)
        if entry not in found:
            found.append(entry)
    return tuple(found)


def plan_sources(query: Any) -> list[PlanSource]:
    """The streaming sources of ``query`` (a running ``StreamingQuery`` of a classic session), from its
    analyzed plan through py4j.

    Raises:
        ValueError: a query without a JVM side here (Spark Connect's: its plan is on the server).
        Whatever py4j raises where Spark's classes differ from those the module docstring describes.
    """
    jsq = getattr(query, "_jsq", None)
    if jsq is None:
        raise ValueError("the query's plan is not in this process (Spark Connect)")
    leaves = jsq.streamingQuery().analyzedPlan().collectLeaves().iterator()
    found: list[PlanSource] = []
    while leaves.hasNext():
        leaf = leaves.next()
        if leaf.getClass().getSimpleName() != "StreamingRelationV2":
            continue
        options = leaf.extraOptions()  # a CaseInsensitiveStringMap: get() takes any case
        values = {key: options.get(key) for key in READ_OPTIONS}
        found.append(PlanSource(str(leaf.sourceName()), {k: str(v) for k, v in values.items() if v}))
    return found


def session_groups(spark: Any) -> Callable[[str], tuple[SourceGroup, ...]]:
    """``query id -> its sparkafka sources' groups`` over the active queries of ``spark``.

    () for a query that is no longer active, has no such source, or whose plan cannot be read (Spark
    Connect; a Spark whose plan classes differ: logged once at INFO, naming ``serve``'s ``groups=``).
    """
    warned: list[bool] = []

    def discover(query_id: str) -> tuple[SourceGroup, ...]:
        try:
            query = spark.streams.get(query_id)
            return source_groups(plan_sources(query)) if query is not None else ()
        except Exception as e:  # noqa: BLE001 - discovery is a convenience: no group metrics, never a failure
            if not warned:
                warned.append(True)
                log.info(
                    "cannot read the consumer groups of query %s from its plan (%s): pass serve(..., "
                    "groups={query name: group}) for its group-commit metrics",
                    query_id,
                    e,
                )
            return ()

    return discover
