"""Least privilege, measured: docs/security.md's ACLs run a query, and each one missing is one sentence.

The query: a streaming read committing to its consumer group, into the exactly-once sink. A user made for
each test holds exactly ``least_privilege()`` (less one ACL in the second test), over SASL_SSL/SCRAM. With
one missing, the query fails naming the user, the permission and the resource; nothing reaches the output
topic (not even an aborted record) and the group holds no offset past the start. How long each failure
takes is printed (``-s``), not asserted: the report of issue 39 has the figures.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sparkafka.client.metadata import AdminMetadata
from sparkafka.errors import AuthorizationError
from sparkafka.local.secure_kafka import Acl, SecureKafka
from sparkafka.sink.intents import intent_topic
from sparkafka.structs import TopicPartition
from tests.support.kafka import Kafka

pytestmark = pytest.mark.xdist_group("secure-kafka")  # one secured broker for every secured test


class Scene:
    """One test's user, topics, group and transactional-id prefix on the secured broker."""

    def __init__(self, kafka: SecureKafka, secured: Kafka) -> None:
        u = uuid.uuid4().hex[:8]
        self.user = f"etl-{u}"
        kafka.add_user(self.user)
        self.kafka = kafka
        self.conf = {f"kafka.{k}": v for k, v in kafka.sasl_settings(self.user).items()}
        self.source = secured.topic(partitions=2, prefix=f"orders-{u}")
        self.output = secured.topic(partitions=2, prefix=f"enriched-{u}")
        self.group = f"etl-{u}"
        self.prefix = f"etl-eos-{u}"
        self.values = secured.produce(self.source, [f"o{i}" for i in range(30)], partitions=2)

    def least_privilege(self) -> list[tuple[str, Acl]]:
        """docs/security.md's table for this query, each ACL with what it is for."""
        log = intent_topic(self.prefix)
        return [
            ("read the source", ("READ", "topic", self.source)),
            ("commit to the group", ("READ", "group", self.group)),
            ("write the output", ("WRITE", "topic", self.output)),
            ("open transactions", ("WRITE", "transactional_id", f"{self.prefix}*")),
            ("create the intent log", ("CREATE", "topic", log)),
            ("read the intent log", ("READ", "topic", log)),
            ("write the intent log", ("WRITE", "topic", log)),
        ]

    def run(self, spark: Any, checkpoint: Path) -> Any:
        query = (
            spark.readStream.format("sparkafka")
            .options(**self.conf)
            .option("subscribe", self.source)
            .option("kafka.group.id", self.group)
            .option("startingOffsets", "earliest")
            .load()
            .select("key", "value")
            .writeStream.format("sparkafka")
            .options(**self.conf)
            .option("topic", self.output)
            .option("deliveryGuarantee", "exactly_once")
            .option("transactionalIdPrefix", self.prefix)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        with contextlib.suppress(Exception):  # awaitTermination raises the query's failure: returned below
            assert query.awaitTermination(180), "the query did not end"
        return query.exception()


def test_exactly_the_documented_acls_run_source_group_commits_and_the_exactly_once_sink(
    spark: Any, secure_kafka: SecureKafka, secured: Kafka, tmp_path: Path
) -> None:
    scene = Scene(secure_kafka, secured)
    secure_kafka.grant(scene.user, [acl for _, acl in scene.least_privilege()])
    assert scene.run(spark, tmp_path / "ck") is None
    assert secured.committed_values(scene.output) == Counter(v.encode() for v in scene.values)
    ends = {TopicPartition(scene.source, p): 15 for p in range(2)}
    assert secured.group_offsets(scene.group, scene.source, 2) == ends


MISSING = [
    ("read the source", "may not READ topic orders-"),
    ("commit to the group", "may not READ group etl-"),
    ("write the output", "may not WRITE topic enriched-"),
    ("open transactions", "may not WRITE transactional id etl-eos-"),
    ("create the intent log", "may not CREATE topic _sparkafka-intents-etl-eos-"),
    ("read the intent log", "may not READ topic _sparkafka-intents-etl-eos-"),
    ("write the intent log", "may not WRITE topic _sparkafka-intents-etl-eos-"),
]


@pytest.mark.parametrize(("missing", "says"), MISSING, ids=[m for m, _ in MISSING])
def test_each_missing_acl_is_one_sentence_with_nothing_written_or_committed(
    spark: Any, secure_kafka: SecureKafka, secured: Kafka, tmp_path: Path, missing: str, says: str
) -> None:
    scene = Scene(secure_kafka, secured)
    granted = [acl for what, acl in scene.least_privilege() if what != missing]
    secure_kafka.grant(scene.user, granted)
    began = time.monotonic()
    error = scene.run(spark, tmp_path / "ck")
    print(f"\n{missing}: failed after {time.monotonic() - began:.1f} s")
    assert error is not None
    text = str(error)
    sentence = next((line for line in text.splitlines() if f"user {scene.user} {says}" in line), None)
    assert sentence is not None, text
    assert ": grant it with kafka-acls.sh --add --allow-principal User:" in sentence
    assert secure_kafka.passwords[scene.user] not in text
    admin = AdminMetadata({**secure_kafka.admin_settings(), "isolation.level": "read_uncommitted"})
    written = admin.latest([TopicPartition(scene.output, p) for p in range(2)])
    assert set(written.values()) == {0}, "records reached the output topic"
    # The source commits its starting offsets at its first poll; nothing read is committed past them.
    assert set(secured.group_offsets(scene.group, scene.source, 2).values()) <= {0}


def test_a_group_the_user_may_not_read_is_refused_in_one_sentence_by_the_offset_lookup(
    secure_kafka: SecureKafka, secured: Kafka
) -> None:
    """What ``sparkafka offsets show`` and ``lag`` and a group start ask (``AdminMetadata.committed``):
    FindCoordinator refused by ACL is the refusal's sentence, not a time-out (librdkafka's consumer says it
    only as an error event, and would wait out its whole timeout)."""
    scene = Scene(secure_kafka, secured)
    secure_kafka.grant(
        scene.user, [acl for what, acl in scene.least_privilege() if what != "commit to the group"]
    )
    meta = AdminMetadata(secure_kafka.sasl_settings(scene.user), timeout_s=60)
    with pytest.raises(AuthorizationError) as refused:
        meta.committed(scene.group, [TopicPartition(scene.source, 0)])
    assert f"user {scene.user} may not DESCRIBE group {scene.group}" in str(refused.value)
    assert secure_kafka.passwords[scene.user] not in str(refused.value)
