"""``sparkafka txn``: an operator's view of an exactly-once prefix, and deliberate resolution.

Runs in the CLI's process, against the broker only (no Spark). ``prefix_status`` folds the prefix's
commit-intent log (each query's newest batch and its state) and, where the broker answers
DescribeTransactions (Apache Kafka 3.0+; not the embedded broker), shows the transactional ids' broker-side
state: the lingering-transaction view Flink users build by hand. ``resolve`` applies an operator's decision
through the same ``TwoPhaseCommitter`` that recovery uses, so it records outcomes the same way.

Nothing here creates the prefix's intent log: a prefix without one is an error naming it. A resolution is
decided once, by ``plan_resolve`` over the log as read: the dry run (``resolve`` without ``--yes``) shows
that decision and the real run acts on it, so the two never disagree (the committer checks the record
again when it acts, in case the log changed in between).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparkafka.client.core import new_kafka_python_admin
from sparkafka.errors import ConfigError
from sparkafka.sink.intents import IntentLog, IntentRecord, LogState, intent_topic
from sparkafka.sink.options import SinkOptions, parse_sink_options
from sparkafka.sink.task import transactional_id
from sparkafka.sink.twophase import ResolveAction, TwoPhaseCommitter
from sparkafka.sink.txn_control import TxnHandle

__all__ = [
    "BrokerTransaction",
    "PrefixStatus",
    "ResolvePlan",
    "describe_transactions",
    "plan_resolve",
    "prefix_status",
    "read_prefix",
    "resolve",
    "resolve_plan",
]

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


def _existing_log(conf: Mapping[str, str], prefix: str, timeout_s: float) -> IntentLog:
    """The prefix's intent log, looked up without creating it.

    Raises:
        ConfigError: the prefix has no intent log (no exactly-once sink ever wrote with it).
    """
    intents = IntentLog(conf, prefix, timeout_s, create=False)
    if not intents.exists():
        raise ConfigError(
            f"no such prefix: {prefix!r} has no commit-intent log ({intent_topic(prefix)}) on "
            f"{conf.get('bootstrap.servers')}: no exactly-once sink wrote with it (check --prefix, the "
            "sink's transactionalIdPrefix)"
        )
    return intents


def read_prefix(conf: Mapping[str, str], prefix: str, timeout_s: float = 30.0) -> LogState:
    """The prefix's intent log, folded; nothing is created.

    Raises:
        ConfigError: the prefix has no intent log.
    """
    return _existing_log(conf, prefix, timeout_s).read()


def prefix_status(conf: Mapping[str, str], prefix: str, timeout_s: float = 30.0) -> PrefixStatus:
    """Read the prefix's intent log and describe its transactional ids; nothing is changed or created.

    Raises:
        ConfigError: the prefix has no intent log.
    """
    topic = intent_topic(prefix)
    state = _existing_log(conf, prefix, timeout_s).read()
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


_ALLOWED: dict[str, tuple[ResolveAction, ...]] = {
    "intent": ("commit", "abort", "mark-done", "rewrite"),
    "partial": ("mark-done", "rewrite"),
    "abandoned": ("mark-done",),
}
"""The actions ``TwoPhaseCommitter.resolve`` takes for each state of a query's newest record."""


@dataclass(frozen=True)
class ResolvePlan:
    """What ``sparkafka txn resolve`` does with ``--yes``, and says it would do without it."""

    query_id: str
    action: ResolveAction
    record: IntentRecord | None
    """The query's newest record as read from the log; None when the log has none for the query."""
    effect: str
    """What resolving does, worded to follow "would" (empty when ``refusal`` is set)."""
    refusal: str | None = None
    """Why nothing is done (no such query, nothing to resolve, an action the state does not allow)."""


def _tasks(handles: Sequence[TxnHandle]) -> str:
    return ",".join(str(h.task) for h in sorted(handles, key=lambda h: h.task)) or "none"


def _txns(handles: Sequence[TxnHandle]) -> str:
    n = len(handles)
    ids = ", ".join(h.transactional_id for h in handles)
    return f"{n} transaction{'s' if n != 1 else ''} ({ids}; {sum(h.records for h in handles)} records)"


def plan_resolve(state: LogState, prefix: str, query_id: str, action: ResolveAction) -> ResolvePlan:
    """Decide ``action`` on the query's newest record in ``state`` (the prefix's log, folded); pure.

    The decision table is ``TwoPhaseCommitter.resolve``'s: a pending batch (``intent``) takes ``commit``
    or ``abort``, and ``mark-done`` or ``rewrite`` when the outcome of some of its transactions can be
    learned neither from the broker nor from their markers; a ``partial`` one ``mark-done`` or
    ``rewrite``, an ``abandoned`` one ``mark-done``; a ``done`` batch has nothing to resolve, and a query
    without a record is unknown to the prefix.

    Example: a pending batch 4 with two transactions and ``commit`` gives ``effect`` "commit batch 4 of
    query q: EndTxn(commit) for its 2 transactions (p-0, p-1; 300 records); ..." and no refusal.
    """
    record = state.latest.get(query_id)
    if record is None:
        names = sorted(state.latest)
        known = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "") or "none"
        return ResolvePlan(
            query_id,
            action,
            None,
            "",
            f"no such query: prefix {prefix!r} has no record of query {query_id} (its queries: {known}; "
            f"see `sparkafka txn list --prefix {prefix}`)",
        )
    batch = f"batch {record.batch_id} of query {query_id}"
    allowed = _ALLOWED.get(record.state, ())
    if record.state == "done":
        return ResolvePlan(query_id, action, record, "", f"{batch} is done: nothing to resolve")
    if action not in allowed:
        shown = STATE_NAMES[record.state]
        return ResolvePlan(
            query_id,
            action,
            record,
            "",
            f"cannot {action} {batch}: it is {shown} (allowed: {', '.join(allowed)})",
        )
    if action == "commit":
        effect = (
            f"commit {batch}: EndTxn(commit) for its {_txns(record.handles)}, then record the outcome "
            "(done; partial or abandoned if the broker has already aborted some of them)"
        )
    elif action == "abort":
        effect = (
            f"abort {batch}: EndTxn(abort) for its {_txns(record.handles)}, then record the outcome "
            "(abandoned, so Spark's replay writes the batch again; partial if some had been committed)"
        )
    elif record.state == "intent":
        counted = (
            "committed (its rows are taken to be in the output)"
            if action == "mark-done"
            else ("not committed (Spark's replay writes its rows)")
        )
        effect = (
            f"{'mark' if action == 'mark-done' else 'rewrite'} pending {batch}: EndTxn(commit) for its "
            f"{_txns(record.handles)}, each outcome learned from the broker's answer or the transaction's "
            f"markers, and a transaction that neither can speak for counted {counted}"
        )
    elif record.state == "partial" and action == "mark-done":
        effect = (
            f"mark {batch} done: the rows of tasks {_tasks(record.committed)} stay visible and those of "
            f"tasks {_tasks(record.handles)} are never written (the replay writes nothing)"
        )
    elif action == "mark-done":
        effect = (
            f"mark {batch} done: nothing of it is visible and its rows are never written (the replay "
            "writes nothing)"
        )
    else:
        effect = (
            f"mark {batch} abandoned: Spark's replay writes the whole batch again, so the visible rows of "
            f"tasks {_tasks(record.committed)} appear twice"
        )
    return ResolvePlan(query_id, action, record, effect)


def resolve_plan(
    conf: Mapping[str, str], prefix: str, query_id: str, action: ResolveAction, timeout_s: float = 30.0
) -> ResolvePlan:
    """Read the prefix's intent log (creating nothing) and decide ``action`` (``plan_resolve``).

    Raises:
        ConfigError: the prefix has no intent log.
    """
    return plan_resolve(_existing_log(conf, prefix, timeout_s).read(), prefix, query_id, action)


def resolve(conf: Mapping[str, str], prefix: str, query_id: str, action: ResolveAction) -> IntentRecord:
    """Apply an operator's decision to the query's unfinished batch (see ``TwoPhaseCommitter.resolve``).

    Decided by ``resolve_plan``, as the dry run is; the committer then acts on its own fresh read.

    Raises:
        ConfigError: no such prefix or query, nothing to resolve, or an action the batch's state does not
            take (``ResolvePlan.refusal``).
    """
    plan = resolve_plan(conf, prefix, query_id, action)
    if plan.refusal is not None:
        raise ConfigError(plan.refusal)
    committer = TwoPhaseCommitter.for_options(_options(conf, prefix))
    return committer.resolve(query_id, action)
