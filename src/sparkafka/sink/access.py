"""The ACLs a sink needs, checked on the driver before any task writes (on clusters that know the user).

Runs where the writer is made (a Python worker on the driver), until every check could be made, once per
process and settings after that: Spark makes a streaming writer every micro-batch. What is checked: WRITE
on the ``topic`` option's topic (a ``topic`` column's topics are known only to the tasks), and for
``exactly_once`` READ and WRITE on the prefix's commit-intent log. The writer asks before the exactly-once
recovery and again after it: a log that did not exist the first time (it cannot be asked about then) has
been created by the recovery, which needed CREATE and says so when refused. Measured: with WRITE but not
READ on a log made that way, the tasks wrote their transactions and only the commit was refused. WRITE on
the transactional ids ``<prefix>-*`` cannot be asked about (Kafka says nothing of the kind for
transactional ids): a missing grant fails each task's first transaction, worded the same
(``client.security.denied``), before it writes anything.
"""

from __future__ import annotations

from sparkafka.client.metadata import AdminMetadata
from sparkafka.client.security import Access, authenticated
from sparkafka.sink.intents import intent_topic
from sparkafka.sink.options import SinkOptions

__all__ = ["require_sink_access", "sink_access"]

_checked: set[tuple[tuple[str, str], ...]] = set()


def sink_access(options: SinkOptions) -> list[Access]:
    """WRITE on the sink's topic; READ and WRITE on the commit-intent log under exactly-once."""
    needed = [Access("WRITE", "topic", options.topic)] if options.topic else []
    if options.delivery == "exactly_once" and options.transactional_id_prefix:
        log = intent_topic(options.transactional_id_prefix)
        needed += [Access("READ", "topic", log), Access("WRITE", "topic", log)]
    return needed


def require_sink_access(options: SinkOptions) -> None:
    """Raise ``AuthorizationError`` for the first ACL ``sink_access`` lacks (``AdminMetadata.require``)."""
    if not authenticated(options.kafka):
        return
    needed = sink_access(options)
    key = tuple(sorted({**options.kafka, "#": ",".join(map(str, needed))}.items()))
    if key in _checked or not needed:
        return
    if not AdminMetadata(options.kafka, options.metadata_timeout_ms / 1000).require(needed):
        _checked.add(key)
