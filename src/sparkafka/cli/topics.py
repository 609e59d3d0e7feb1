"""``sparkafka topics``: list, create and describe topics, beside ``lag`` and ``offsets``.

Runs in the CLI's process, against the brokers only, through the client layer (``client.core.admin_client``
and ``with_retries``: retriable answers are retried within the timeout). Every lookup asks for the
metadata of all topics, never of one by name: a Metadata request naming a topic creates it on a broker
with ``auto.create.topics.enable=true`` (Apache Kafka's default), and a ``describe`` of a misspelt name
must not create it.

Errors are one sentence each (``ConfigError`` for what the user can fix: a topic that exists or does not,
more replicas than brokers, a config the broker refuses; the broker being unreachable), and the admin
client logs nothing (its "Connection refused" lines, one per retry, are what the sentence replaces).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sparkafka.client.core import admin_client, error_code, is_retriable, with_retries
from sparkafka.client.metadata import AdminMetadata
from sparkafka.errors import BrokerError, ConfigError
from sparkafka.structs import INTERNAL_TOPIC_PREFIX, KAFKA_INTERNAL_TOPICS, TopicPartition

__all__ = [
    "PartitionInfo",
    "TopicDetail",
    "TopicInfo",
    "create_topic",
    "describe_topic",
    "is_internal",
    "list_topics",
    "parse_configs",
    "render_created",
    "render_describe",
    "render_list",
]

TOPIC_ALREADY_EXISTS = 36
_REFUSALS = {
    17: "an invalid topic name",  # INVALID_TOPIC_EXCEPTION
    36: "the topic already exists",  # TOPIC_ALREADY_EXISTS
    37: "an invalid partition count",  # INVALID_PARTITIONS
    38: "an invalid replication factor",  # INVALID_REPLICATION_FACTOR
    40: "an invalid config",  # INVALID_CONFIG
    29: "not authorized",  # TOPIC_AUTHORIZATION_FAILED
    31: "not authorized",  # CLUSTER_AUTHORIZATION_FAILED
    44: "the cluster's create-topic policy",  # POLICY_VIOLATION
}
"""Kafka error codes a CreateTopics answer refuses with: the user's to fix, so worded as ConfigError."""


def is_internal(topic: str) -> bool:
    """Kafka's own topics (``__consumer_offsets``, ``__transaction_state``, ...) and sparkafka's
    (``_sparkafka-intents-<prefix>``, probe topics): hidden by ``sparkafka topics list`` unless ``--all``."""
    return topic in KAFKA_INTERNAL_TOPICS or topic.startswith(INTERNAL_TOPIC_PREFIX)


@dataclass(frozen=True)
class TopicInfo:
    """One topic as ``sparkafka topics list`` shows it."""

    name: str
    partitions: int
    replication: int
    """The smallest replica count of its partitions (they normally all have the same)."""
    internal: bool


@dataclass(frozen=True)
class PartitionInfo:
    """One partition as ``sparkafka topics describe`` shows it."""

    partition: int
    leader: int
    """The leader's broker id; -1 while it has none (a leader election)."""
    replicas: tuple[int, ...]
    in_sync: tuple[int, ...]
    earliest: int
    """The first offset still in the log."""
    latest: int
    """The log end (the next offset to be written), as read_uncommitted consumers see it."""


@dataclass(frozen=True)
class TopicDetail:
    """``sparkafka topics describe``: the topic, each partition, and the configs set on the topic."""

    topic: TopicInfo
    partitions: tuple[PartitionInfo, ...]
    configs: dict[str, str] | None
    """Configs set on this topic (not broker defaults), secrets masked; None when the broker did not say."""
    configs_note: str = ""
    """Why ``configs`` is None."""


def parse_configs(pairs: Iterable[str]) -> dict[str, str]:
    """``--config KEY=VALUE`` arguments as a dict.

    Raises:
        ConfigError: an argument without ``=``, or one key given two values.
    """
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--config {pair}: write KEY=VALUE, e.g. --config retention.ms=86400000")
        if key in out and out[key] != value:
            raise ConfigError(f"--config {key}: given twice ({out[key]!r} and {value!r}); give it once")
        out[key] = value
    return out


def _quiet(conf: Mapping[str, str]) -> dict[str, str]:
    return {**conf, "log_level": "0"}  # a separate, silent client: the error sentence says it all


def _metadata(conf: Mapping[str, str], timeout_s: float) -> Any:
    """Every topic's metadata (never one topic's by name: see the module docstring)."""
    admin = admin_client(conf)
    try:
        return with_retries("listing topics", conf, lambda left: admin.list_topics(timeout=left), timeout_s)
    except BrokerError as e:
        if e.__cause__ is not None and is_retriable(e.__cause__):
            raise ConfigError(
                f"no Kafka broker answered at {conf.get('bootstrap.servers')} within {timeout_s:g} s (is it "
                "running, and is --bootstrap-servers right?)"
            ) from None
        raise


def _info(name: str, topic: Any) -> TopicInfo:
    replication = min((len(p.replicas) for p in topic.partitions.values()), default=0)
    return TopicInfo(name, len(topic.partitions), replication, is_internal(name))


def _topics(metadata: Any) -> dict[str, TopicInfo]:
    return {name: _info(name, t) for name, t in metadata.topics.items() if t.error is None}


def list_topics(conf: Mapping[str, str], timeout_s: float = 30.0) -> list[TopicInfo]:
    """Every topic of the cluster, internal ones (``is_internal``) included, by name.

    Raises:
        ConfigError: no broker answered within ``timeout_s``.
    """
    return sorted(_topics(_metadata(_quiet(conf), timeout_s)).values(), key=lambda t: t.name)


def create_topic(
    conf: Mapping[str, str],
    name: str,
    *,
    partitions: int,
    replication: int | None = None,
    configs: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> TopicInfo:
    """Create topic ``name``, then wait (within ``timeout_s``) until the metadata shows it.

    ``replication`` None takes the broker's ``default.replication.factor``. A create whose first attempt
    timed out and whose retry finds the topic counts as done (the first attempt created it).

    Raises:
        ConfigError: no broker answered; the topic exists; more replicas than brokers; or the broker
            refused the name, partition count, replication factor or a config (its words, one line).
    """
    from confluent_kafka.admin import NewTopic

    quiet = _quiet(conf)
    metadata = _metadata(quiet, timeout_s)
    existing = _topics(metadata)
    if name in existing:
        t = existing[name]
        raise ConfigError(
            f"topic {name!r} already exists ({t.partitions} partitions, replication factor {t.replication}): "
            f"`sparkafka topics describe {name}` shows it"
        )
    if partitions < 1:
        raise ConfigError(f"--partitions {partitions}: a topic needs at least 1 partition")
    brokers = len(metadata.brokers)
    if replication is not None and not 1 <= replication <= brokers:
        raise ConfigError(
            f"--replication {replication}: the cluster at {conf.get('bootstrap.servers')} has {brokers} "
            f"broker(s), and each replica needs its own: use at most {brokers}"
        )
    admin = admin_client(quiet)
    spec = NewTopic(name, partitions, -1 if replication is None else replication, config=dict(configs or {}))
    attempts = [0]

    def create(left: float) -> None:
        attempts[0] += 1
        future = admin.create_topics([spec], request_timeout=left)[name]
        try:
            future.result(left)
        except Exception as e:  # confluent-kafka's KafkaException: classified by the retry policy
            if attempts[0] > 1 and error_code(e) == TOPIC_ALREADY_EXISTS:
                return  # the attempt that timed out created it
            raise

    try:
        with_retries(f"creating topic {name}", quiet, create, timeout_s)
    except BrokerError as e:
        code = error_code(e.__cause__) if e.__cause__ is not None else None
        if code in _REFUSALS:
            inner = getattr(e.__cause__, "args", [None])[0]
            words = inner.str() if callable(getattr(inner, "str", None)) else str(e.__cause__)
            raise ConfigError(f"creating topic {name!r} refused ({_REFUSALS[code]}): {words}") from None
        raise
    try:
        return _await_topic(quiet, name, timeout_s)
    except BrokerError:
        raise BrokerError(
            f"topic {name} was created, but not every partition had a leader within {timeout_s:g} s "
            f"(`sparkafka topics describe {name}` shows them)"
        ) from None


def _await_topic(conf: Mapping[str, str], name: str, timeout_s: float) -> TopicInfo:
    """The new topic as the metadata shows it, once every partition has a leader."""

    def visible(left: float) -> TopicInfo:
        topic = admin_client(conf).list_topics(timeout=left).topics.get(name)
        if topic is None or topic.error is not None or any(p.leader < 0 for p in topic.partitions.values()):
            raise TimeoutError(f"topic {name} not in the metadata yet")  # retriable: asked again
        return _info(name, topic)

    return with_retries(f"waiting for topic {name} to appear", conf, visible, timeout_s)


def describe_topic(conf: Mapping[str, str], name: str, timeout_s: float = 30.0) -> TopicDetail:
    """Topic ``name``'s partitions (leader, replicas, in-sync replicas, first and end offsets) and the
    configs set on it.

    Raises:
        ConfigError: no broker answered, or the topic does not exist (nothing is created).
    """
    quiet = _quiet(conf)
    topic = _metadata(quiet, timeout_s).topics.get(name)
    if topic is None or topic.error is not None:
        raise ConfigError(
            f"topic {name!r} does not exist on {conf.get('bootstrap.servers')} (`sparkafka topics list` "
            "shows the topics, `--all` the internal ones too)"
        )
    # The log end as Kafka's own tools show it (read uncommitted).
    meta = AdminMetadata({**quiet, "isolation.level": "read_uncommitted"}, timeout_s)
    tps = [TopicPartition(name, p) for p in sorted(topic.partitions)]
    earliest, latest = meta.earliest(tps), meta.latest(tps)
    partitions = tuple(
        PartitionInfo(
            p.id,
            p.leader,
            tuple(p.replicas),
            tuple(p.isrs),
            earliest[TopicPartition(name, p.id)],
            latest[TopicPartition(name, p.id)],
        )
        for p in sorted(topic.partitions.values(), key=lambda p: p.id)
    )
    configs, note = _topic_configs(quiet, name, timeout_s)
    return TopicDetail(_info(name, topic), partitions, configs, note)


def _topic_configs(conf: Mapping[str, str], name: str, timeout_s: float) -> tuple[dict[str, str] | None, str]:
    """The configs set on the topic itself (DescribeConfigs), or None and why not."""
    from confluent_kafka.admin import ConfigSource

    from sparkafka.client.conf import is_secret_key

    try:
        entries = AdminMetadata(conf, timeout_s).topic_config(name)
    except BrokerError as e:
        return None, f"the broker did not answer DescribeConfigs ({e.__cause__ or e})"
    own = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    return {
        key: "********" if entry.is_sensitive or is_secret_key(key) else str(entry.value)
        for key, entry in sorted(entries.items())
        if getattr(entry.source, "value", entry.source) == own
    }, ""


def render_list(topics: list[TopicInfo], show_internal: bool = False) -> str:
    """``list_topics``'s answer as a table and a count; internal topics only with ``show_internal``."""
    shown = [t for t in topics if show_internal or not t.internal]
    hidden = len(topics) - len(shown)
    width = max([30, *(len(t.name) for t in shown)])
    lines = [f"{'topic':<{width}} {'partitions':>10} {'replication':>11}"]
    for t in shown:
        mark = "  (internal)" if t.internal else ""
        lines.append(f"{t.name:<{width}} {t.partitions:>10} {t.replication:>11}{mark}")
    summary = f"{len(shown)} topic{'s' if len(shown) != 1 else ''}"
    if hidden:
        many = hidden != 1
        summary += (
            f"; {hidden} internal topic{'s' if many else ''} hidden (--all shows {'them' if many else 'it'})"
        )
    lines.append(summary)
    return "\n".join(lines)


def render_created(topic: TopicInfo, configs: Mapping[str, str]) -> str:
    """The line ``sparkafka topics create`` prints."""
    settings = ", ".join(f"{k}={v}" for k, v in sorted(configs.items()))
    return (
        f"created topic {topic.name}: {topic.partitions} partition{'s' if topic.partitions != 1 else ''}, "
        f"replication factor {topic.replication}" + (f"; {settings}" if settings else "")
    )


def render_describe(detail: TopicDetail) -> str:
    """``describe_topic``'s answer: a header, one row per partition, then the topic's own configs."""
    t = detail.topic
    lines = [
        f"topic {t.name}: {t.partitions} partitions, replication factor {t.replication}"
        + (" (internal)" if t.internal else ""),
        f"{'partition':>9} {'leader':>6}  {'replicas':<12} {'in sync':<12} {'earliest':>11} {'latest':>11}",
    ]
    for p in detail.partitions:
        replicas, isr = (",".join(map(str, ids)) or "-" for ids in (p.replicas, p.in_sync))
        leader = str(p.leader) if p.leader >= 0 else "none"
        lines.append(
            f"{p.partition:>9} {leader:>6}  {replicas:<12} {isr:<12} {p.earliest:>11} {p.latest:>11}"
        )
    if detail.configs is None:
        lines.append(f"configs: not available: {detail.configs_note}")
    elif detail.configs:
        lines.append("configs set on the topic: " + ", ".join(f"{k}={v}" for k, v in detail.configs.items()))
    else:
        lines.append("configs set on the topic: none (the broker's defaults apply)")
    return "\n".join(lines)
