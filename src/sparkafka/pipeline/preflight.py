"""``sparkafka run``'s pre-flight: what would fail a pipeline, checked in seconds before Spark starts.

Runs in the CLI's process, before the SparkSession (which takes several seconds to start, after which a
wrong address surfaced only after the source's metadata timeout, buried in a Java stack trace). Checks: the
source's and sink's brokers answer, the subscribed topics (or pattern, or assigned partitions) exist, the
sink's topic and dead-letter topic exist (the sink does not create topics), table files exist, and an
exactly-once sink's ``transactionalIdPrefix`` is not owned by another live query (a copied pipeline with a
new checkpoint: measured 12-24 s and 78-88 lines, mostly a Java stack, before this check). Each failure
is one sentence naming the pipeline file and field. The clients here log nothing (librdkafka's
"Connection refused" lines, hundreds of them, are what the sentence replaces). Nothing is written: the
commit-intent log is only read, and only if it exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sparkafka.client.contact import first_answer
from sparkafka.client.metadata import AdminMetadata
from sparkafka.errors import AuthenticationError, BrokerError, ConfigError
from sparkafka.pipeline.config import PipelineConfig

__all__ = ["PREFLIGHT_TIMEOUT_S", "check_prefix_owner", "preflight"]

PREFLIGHT_TIMEOUT_S = 5.0


def _topics(cfg: PipelineConfig, section: str, kafka: Mapping[str, str], timeout_s: float) -> dict[str, int]:
    servers = kafka.get("bootstrap.servers")
    quiet = {**kafka, "log_level": "0"}  # a separate, silent client: the sentence below says it all
    try:
        first_answer(kafka, timeout_s)  # a refused login or TLS handshake is its own sentence, at once
        return AdminMetadata(quiet, timeout_s).topics()
    except (AuthenticationError, ConfigError) as e:
        raise ConfigError(f"{cfg.path}: {section}: {e}") from None
    except BrokerError as e:
        raise ConfigError(
            f"{cfg.path}: {section} kafka.bootstrap.servers = {servers}: no Kafka broker answered within "
            f"{timeout_s:.0f} s (is it running, and is the address right?): {e}"
        ) from None


def preflight(cfg: PipelineConfig, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> None:
    """Raise ConfigError, one sentence naming file and field, for the first thing that would fail."""
    for i, table in enumerate(cfg.tables):
        if not Path(table.path).exists():
            raise ConfigError(f"{cfg.path}: table[{i}].path = {table.path}: no such file")
    source = cfg.source
    topics = _topics(cfg, "source.options", source.kafka, timeout_s)
    sub = source.subscription
    where = source.kafka.get("bootstrap.servers")
    missing = [t for t in sub.topics if t not in topics]
    missing += sorted({tp.topic for tp in sub.partitions if tp.partition >= topics.get(tp.topic, 0)})
    if missing:
        raise ConfigError(
            f"{cfg.path}: source.options {sub.describe()}: {', '.join(missing)} not on {where} "
            "(create the topics or partitions first, or check the names)"
        )
    if sub.pattern is not None and not any(sub.matches(t) for t in topics):
        raise ConfigError(
            f"{cfg.path}: source.options {sub.describe()}: no topic on {where} matches (create one first)"
        )
    sink = cfg.sink
    sink_topics = topics if sink.kafka.get("bootstrap.servers") == where else None
    if sink_topics is None:
        sink_topics = _topics(cfg, "sink.options", sink.kafka, timeout_s)
    written = (("sink.options topic", sink.topic), ("source.dead_letter_topic", cfg.dead_letter_topic))
    for field, topic in written:
        if topic is not None and topic not in sink_topics:
            raise ConfigError(
                f"{cfg.path}: {field} = {topic}: no such topic on {sink.kafka.get('bootstrap.servers')} "
                "(the sink does not create topics: create it first)"
            )
    check_prefix_owner(cfg, sink_topics)


class _ReadOnly:
    """The pre-flight's stand-in for the committer's ender, fencer and evidence: it acts on nothing."""

    def end(self, handle: Any, commit: bool) -> Any:
        raise RuntimeError("the pre-flight ends no transaction")

    def close(self) -> None:
        pass

    def fence(self, transactional_id: str) -> None:
        raise RuntimeError("the pre-flight fences no transactional id")

    def mark_positions(self, handles: Any) -> Any:
        raise RuntimeError("the pre-flight writes no intent")

    def find(self, handle: Any, intent_at_ms: int, now_ms: int) -> Any:
        raise RuntimeError("the pre-flight decides no transaction")


def check_prefix_owner(cfg: PipelineConfig, sink_topics: Mapping[str, int], *, intents: Any = None) -> None:
    """Raise ConfigError, one sentence, when an exactly-once sink's prefix belongs to another live query.

    The sink's own rule (``TwoPhaseCommitter.check_owner``) on the commit-intent log as it is now, read
    only: this pipeline's query is the one in its checkpoint's ``metadata`` file (none in a new checkpoint:
    any live owner is then another query). Skipped without exactly-once, with
    ``takeOverTransactionalIdPrefix``, and when the prefix's log does not exist yet (in ``sink_topics``).

    Args:
        cfg: the pipeline.
        sink_topics: the topics of the sink's cluster, as the pre-flight listed them.
        intents: the intent store to read (tests pass a fake); default the prefix's ``IntentLog``.
    """
    from sparkafka.sink.intents import IntentLog, intent_topic
    from sparkafka.sink.twophase import CommitSettings, TwoPhaseCommitter
    from sparkafka.sink.writer import query_id_from_checkpoint

    sink = cfg.sink
    prefix = sink.transactional_id_prefix
    if sink.delivery != "exactly_once" or prefix is None or sink.take_over_prefix:
        return
    if intents is None:
        if intent_topic(prefix) not in sink_topics:
            return  # no query has written under this prefix yet
        quiet = {**sink.kafka, "log_level": "0"}
        intents = IntentLog(quiet, prefix, sink.metadata_timeout_ms / 1000, create=False)
    query_id = query_id_from_checkpoint(cfg.checkpoint)
    if query_id is None and not _new_local_checkpoint(cfg.checkpoint):
        return  # remote or unreadable: the sink's own check decides at commit, as it does in writer.py
    settings = CommitSettings(prefix, sink.transaction_timeout_ms, take_over=False)
    acts_on_nothing = _ReadOnly()
    committer = TwoPhaseCommitter(
        settings, intents, acts_on_nothing, acts_on_nothing, acts_on_nothing, count=lambda *_, **__: None
    )
    try:
        committer.check_owner(intents.read(), query_id or "")
    except ConfigError as e:
        new = "" if query_id else f" (checkpoint {cfg.checkpoint} is new: a copied pipeline?)"
        raise ConfigError(f"{cfg.path}: sink.options{new}: {e}") from None
    except BrokerError as e:
        raise ConfigError(f"{cfg.path}: sink.options transactionalIdPrefix = {prefix}: {e}") from None


def _new_local_checkpoint(checkpoint: str) -> bool:
    """Whether ``checkpoint`` is a local path with no ``metadata`` file yet (a query that never ran).

    A remote checkpoint (``scheme://``) or an unreadable one is not known to be new: treating it as new
    would refuse a crashed pipeline's own restart while its last record is younger than the timeout.
    """
    if "://" in checkpoint and not checkpoint.startswith("file://"):
        return False
    path = Path(checkpoint.removeprefix("file://"))
    return not (path / "metadata").exists()
