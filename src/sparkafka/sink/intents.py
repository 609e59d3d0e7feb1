"""The durable commit intent: a compacted one-partition Kafka topic per transactional-id prefix.

Before committing a batch's transactions the driver appends ``intent`` (the batch's transaction handles);
after committing them all, ``done``. Both are keyed by query id and batch id, so compaction keeps the
newest state of each batch. Spark runs a query's batches one after another, so the newest records tell
everything recovery needs: which batches are done (a replayed batch is not written again) and whether an
intent was left without ``done`` (its transactions are committed to completion on restart).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkafka.clientconf import against_servers
from sparkafka.errors import BrokerError
from sparkafka.sink.txn_control import TxnHandle

__all__ = ["IntentLog", "IntentRecord", "IntentState", "fold", "intent_topic"]

log = logging.getLogger(__name__)

TAIL = 64
"""Records read from the end of the log; far more than one query's in-flight state needs."""


def intent_topic(prefix: str) -> str:
    return f"_sparkafka-intents-{prefix}"


@dataclass(frozen=True)
class IntentRecord:
    query_id: str
    batch_id: int
    state: str
    """``intent``, ``done``, or ``claim`` (a task index above every earlier one is about to be used)."""
    handles: tuple[TxnHandle, ...] = ()
    tids_in_use: int = 0
    """How many transactional ids (``<prefix>-0`` ...) may hold transactions after this batch."""

    def key(self) -> bytes:
        return f"{self.query_id}/{self.batch_id}".encode()

    def to_json(self) -> bytes:
        data = {
            "query": self.query_id,
            "batch": self.batch_id,
            "state": self.state,
            "txns": [h.to_json() for h in self.handles],
            "tids": self.tids_in_use,
        }
        return json.dumps(data, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> IntentRecord:
        data = json.loads(raw)
        return cls(
            query_id=str(data["query"]),
            batch_id=int(data["batch"]),
            state=str(data["state"]),
            handles=tuple(TxnHandle.from_json(h) for h in data.get("txns", [])),
            tids_in_use=int(data.get("tids", 0)),
        )


@dataclass
class IntentState:
    last_done: dict[str, int] = field(default_factory=dict)
    """Per query id, the newest batch whose transactions are all committed."""
    pending: list[IntentRecord] = field(default_factory=list)
    """Intents without ``done``, oldest first."""
    tids_in_use: int = 0

    def is_done(self, query_id: str, batch_id: int) -> bool:
        return batch_id <= self.last_done.get(query_id, -1)

    def intent_for(self, query_id: str, batch_id: int) -> IntentRecord | None:
        return next((r for r in self.pending if (r.query_id, r.batch_id) == (query_id, batch_id)), None)


def fold(records: Iterable[IntentRecord]) -> IntentState:
    """The state after ``records`` (in log order)."""
    state = IntentState()
    intents: dict[tuple[str, int], IntentRecord] = {}
    for r in records:
        if r.state == "claim":
            state.tids_in_use = max(state.tids_in_use, r.tids_in_use)
            continue
        state.tids_in_use = r.tids_in_use
        if r.state == "done":
            intents.pop((r.query_id, r.batch_id), None)
            state.last_done[r.query_id] = max(r.batch_id, state.last_done.get(r.query_id, -1))
        else:
            intents[(r.query_id, r.batch_id)] = r
    state.pending = [r for r in intents.values() if not state.is_done(r.query_id, r.batch_id)]
    return state


_ensured: set[tuple[str | None, str]] = set()
"""(bootstrap servers, topic) known to exist in this process: writers are made every micro-batch."""


class IntentLog:
    """Reads and appends intent records. Creates the topic (compacted) on first use."""

    def __init__(self, conf: Mapping[str, str], prefix: str, timeout_s: float = 30.0) -> None:
        self._conf = {k: v for k, v in conf.items() if not k.startswith("transaction")}
        self.topic = intent_topic(prefix)
        self._timeout_s = timeout_s
        self._ensure_topic()

    def _ensure_topic(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        key = (self._conf.get("bootstrap.servers"), self.topic)
        if key in _ensured:
            return
        admin = AdminClient(dict(self._conf))
        try:
            if self.topic in admin.list_topics(timeout=self._timeout_s).topics:
                _ensured.add(key)
                return
            spec = NewTopic(self.topic, 1, config={"cleanup.policy": "compact"})
            futures = admin.create_topics([spec], request_timeout=self._timeout_s)
            try:
                futures[self.topic].result(self._timeout_s)
            except Exception as e:
                if "TOPIC_ALREADY_EXISTS" not in str(e):
                    raise
        except Exception as e:
            raise BrokerError(
                f"creating the commit-intent topic {self.topic} failed{self._where()}: {e}"
            ) from e
        _ensured.add(key)

    def read(self) -> IntentState:
        from confluent_kafka import Consumer, KafkaError
        from confluent_kafka import TopicPartition as CTopicPartition

        consumer = Consumer(
            {
                **self._conf,
                "group.id": "sparkafka-intents",  # required by librdkafka; never joined or committed
                "enable.auto.commit": "false",
                "enable.partition.eof": "true",
                "isolation.level": "read_uncommitted",
            }
        )
        try:
            low, high = consumer.get_watermark_offsets(CTopicPartition(self.topic, 0), self._timeout_s)
            # ``high`` only bounds where to start: the read goes on to the end-of-partition event, which
            # a fetch at the high watermark produces. A ListOffsets answer can lag records another process
            # has just had acknowledged (measured on tansu with S3 storage; never on Apache Kafka, whose
            # acks=all answer comes after the high watermark moved), and missing the newest record here
            # would take a finished batch for a pending one.
            start = max(low, high - TAIL)
            records: list[IntentRecord] = []
            consumer.assign([CTopicPartition(self.topic, 0, start)])
            while True:
                msg = consumer.poll(self._timeout_s)
                error = "timed out" if msg is None else msg.error()
                if error and getattr(error, "code", lambda: None)() == KafkaError._PARTITION_EOF:
                    break
                if error:
                    return self._failed(str(error))
                if msg.value():
                    records.append(IntentRecord.from_json(msg.value()))
        except BrokerError:
            raise
        except Exception as e:
            raise BrokerError(
                f"reading the commit-intent topic {self.topic} failed{self._where()}: {e}"
            ) from e
        finally:
            consumer.close()
        return fold(records)

    def _failed(self, why: str) -> IntentState:
        raise BrokerError(f"reading the commit-intent topic {self.topic} failed{self._where()}: {why}")

    def _where(self) -> str:
        return " " + against_servers(self._conf)

    def append(self, record: IntentRecord) -> None:
        """Write ``record`` durably (acks=all) before returning.

        Not an idempotent producer: its producer-id handshake costs about 0.5 s per producer on some brokers
        (measured on tansu), twice per batch, and a retried duplicate of a record is harmless here (folding
        the log is idempotent).
        """
        from confluent_kafka import Producer

        errors: list[Any] = []
        producer = Producer({**self._conf, "enable.idempotence": "false", "acks": "all", "linger.ms": "0"})
        producer.produce(
            self.topic, record.to_json(), key=record.key(), on_delivery=lambda e, _m: errors.append(e)
        )
        left = producer.flush(self._timeout_s)
        if left or any(e is not None for e in errors):
            raise BrokerError(
                f"writing {record.state} of batch {record.batch_id} to {self.topic} failed{self._where()}: "
                f"{errors}"
            )
