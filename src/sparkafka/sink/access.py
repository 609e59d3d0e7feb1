"""The ACLs a sink needs, checked on the driver before any task writes (on clusters that know the user).

Runs on the driver: at ``start()`` in the user's process (``sink.at_start``, after ``register``) and where
the writer is made (a Python worker on the driver), until every check could be made, once per process and
settings after that: Spark makes a streaming writer every micro-batch. What is checked: WRITE
on the ``topic`` option's topic (a ``topic`` column's topics are known only to the tasks), and for
``exactly_once`` READ and WRITE on the prefix's commit-intent log. The writer asks before the exactly-once
recovery and again after it: a log that did not exist the first time (it cannot be asked about then) has
been created by the recovery, which needed CREATE and says so when refused. Measured: with WRITE but not
READ on a log made that way, the tasks wrote their transactions and only the commit was refused. CREATE on
a log that is not there yet is asked with a validate-only CreateTopics (``_creation_denied``). For the
transactional ids ``<prefix>-*`` Kafka has no authorized-operations answer; FindCoordinator for
``<prefix>-0`` is refused unless the user may at least DESCRIBE them (``TxnController.find_coordinator``:
it fences nothing, though on a fresh cluster it has the broker create ``__transaction_state``, as the
first transaction would), which finds a missing grant (measured: the tasks' first transactions were
refused, 8 times over, 8 s after start); a DESCRIBE-only grant still fails the first transaction, worded
the same. Every lacking grant is named in one sentence (``security.denied_all``).
"""

from __future__ import annotations

import logging

from sparkafka.client.metadata import AdminMetadata
from sparkafka.client.security import Access, authenticated
from sparkafka.errors import AuthorizationError
from sparkafka.sink.intents import intent_topic
from sparkafka.sink.options import SinkOptions

__all__ = ["require_sink_access", "sink_access"]

log = logging.getLogger(__name__)

_TOPIC_AUTHORIZATION_FAILED = 29

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
    missing = _transactional_ids_denied(options)
    metadata = AdminMetadata(options.kafka, options.metadata_timeout_ms / 1000)
    if options.delivery == "exactly_once" and options.transactional_id_prefix:
        log_topic = intent_topic(options.transactional_id_prefix)
        if log_topic not in metadata.topics():  # the first write of a prefix creates it
            missing += _creation_denied(options, log_topic)
    if not metadata.require(needed, missing):
        _checked.add(key)


def _creation_denied(options: SinkOptions, topic: str) -> list[Access]:
    """``[CREATE topic <topic>]`` if the brokers refuse the user to create ``topic`` and it does not exist.

    Asked with CreateTopics in validate-only mode, which creates nothing; only for a topic the user cannot
    see (Kafka checks the ACL before whether the topic exists, and a log that is there needs no CREATE).
    Any answer but TOPIC_AUTHORIZATION_FAILED (a policy, a broker that cannot say) leaves it to the
    recovery, which reports a refusal in the same words.
    """
    from confluent_kafka.admin import NewTopic

    from sparkafka.client.core import admin_client, error_code

    timeout_s = options.metadata_timeout_ms / 1000
    try:
        futures = admin_client(options.kafka).create_topics(
            [NewTopic(topic, 1, -1)], validate_only=True, request_timeout=timeout_s
        )
        futures[topic].result(timeout_s)
    except Exception as e:  # noqa: BLE001 - only a refusal by ACL is for us
        if error_code(e) == _TOPIC_AUTHORIZATION_FAILED:
            return [Access("CREATE", "topic", topic)]
        log.debug("creating %s not asked about: %s", topic, e)
    return []


def _transactional_ids_denied(options: SinkOptions) -> list[Access]:
    """``[WRITE transactional id <prefix>*]`` if the brokers refuse the user the exactly-once sink's ids."""
    prefix = options.transactional_id_prefix
    if options.delivery != "exactly_once" or not prefix:
        return []
    from sparkafka.sink.task import transactional_id
    from sparkafka.sink.txn_control import TxnController

    try:
        with TxnController(options.kafka, options.metadata_timeout_ms / 1000) as controller:
            controller.find_coordinator(transactional_id(prefix, 0))
    except AuthorizationError:
        return [Access("WRITE", "transactional id", prefix, prefixed=True)]
    except Exception as e:  # noqa: BLE001 - cannot say now: the first transaction reports a refusal
        log.debug("transactional ids %s* not asked about: %s", prefix, e)
    return []
