"""``sparkafka txn``: an operator's view of an exactly-once prefix, and deliberate resolution.

Runs in the CLI's process, against the broker only (no Spark). ``prefix_status`` folds the prefix's
commit-intent log (each query's newest batch and its state) and, where the broker answers
DescribeTransactions (Apache Kafka 3.0+; not the embedded broker), shows the transactional ids' broker-side
state: the lingering-transaction view Flink users build by hand. ``resolve`` applies an operator's decision
through the same ``TwoPhaseCommitter`` that recovery uses, so it records outcomes the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparkafka.clients import new_kafka_python_admin
from sparkafka.errors import ConfigError
from sparkafka.sink.intents import IntentLog, IntentRecord, intent_topic
from sparkafka.sink.options import SinkOptions, parse_sink_options
from sparkafka.sink.task import transactional_id
from sparkafka.sink.twophase import ResolveAction, TwoPhaseCommitter

__all__ = ["BrokerTransaction", "PrefixStatus", "describe_transactions", "prefix_status", "resolve"]

log = logging.getLogger(__name__)

STATE_NAMES = {"intent": "pending", "done": "done", "abandoned": "abandoned", "partial": "partial"}
"""How ``sparkafka txn list`` names record states: an ``intent`` without outcome is pending."""


@dataclass(frozen=True)
class BrokerTransaction:
    """One transactional id as the broker's coordinator describes it."""

    transactional_id: str
    state: str
    producer_id: int
    epoch: int
    start_ms: int
    timeout_ms: int


@dataclass(frozen=True)
class PrefixStatus:
    """What ``sparkafka txn list`` shows of a prefix: its intent log and the broker's transactions."""

    prefix: str
    topic: str
    records: tuple[IntentRecord, ...]
    """Each query's newest record, newest first."""
    tids_in_use: int
    transactions: tuple[BrokerTransaction, ...] | None
    """None when the broker does not answer DescribeTransactions (``transactions_note`` says why)."""
    transactions_note: str = ""


def _options(conf: Mapping[str, str], prefix: str) -> SinkOptions:
    kafka = {f"kafka.{k}": v for k, v in conf.items()}
    return parse_sink_options(
        {**kafka, "deliveryGuarantee": "exactly_once", "transactionalIdPrefix": prefix, "topic": "-"}
    )


def prefix_status(conf: Mapping[str, str], prefix: str, timeout_s: float = 30.0) -> PrefixStatus:
    """Read the prefix's intent log and describe its transactional ids; nothing is changed."""
    topic = intent_topic(prefix)
    intents = IntentLog(conf, prefix, timeout_s, create=False)
    if not intents.exists():
        raise ConfigError(
            f"prefix {prefix!r} has no commit-intent log ({topic}): nothing was written with it"
        )
    state = intents.read()
    records = tuple(sorted(state.latest.values(), key=lambda r: r.at_ms, reverse=True))
    tids = [transactional_id(prefix, t) for t in range(max(state.tids_in_use, 1))]
    transactions, note = describe_transactions(conf, tids, timeout_s)
    return PrefixStatus(prefix, topic, records, state.tids_in_use, transactions, note)


def describe_transactions(
    conf: Mapping[str, str], transactional_ids: Sequence[str], timeout_s: float = 30.0
) -> tuple[tuple[BrokerTransaction, ...] | None, str]:
    """The coordinator's view of each id (kafka-python's DescribeTransactions), or None and the reason."""
    try:
        admin = new_kafka_python_admin(conf, timeout_s)
    except Exception as e:  # noqa: BLE001 - kafka-python raises many types; the tool reports and goes on
        return None, f"could not connect an admin client: {e}"
    try:
        described = admin.describe_transactions(list(transactional_ids))
    except Exception as e:  # noqa: BLE001 - UnsupportedVersion on brokers without KIP-664, unknown ids, timeouts
        return None, f"the broker did not answer DescribeTransactions ({type(e).__name__}: {e})"
    finally:
        admin.close()
    found = tuple(
        BrokerTransaction(
            tid,
            str(getattr(d.state, "value", d.state)),
            int(d.producer_id),
            int(d.producer_epoch),
            int(d.transaction_start_time_ms),
            int(d.transaction_timeout_ms),
        )
        for tid, d in sorted(described.items())
    )
    return found, ""


def resolve(conf: Mapping[str, str], prefix: str, query_id: str, action: ResolveAction) -> IntentRecord:
    """Apply an operator's decision to the query's unfinished batch (see ``TwoPhaseCommitter.resolve``)."""
    if not IntentLog(conf, prefix, create=False).exists():
        raise ConfigError(f"prefix {prefix!r} has no commit-intent log ({intent_topic(prefix)})")
    committer = TwoPhaseCommitter.for_options(_options(conf, prefix))
    return committer.resolve(query_id, action)
