"""Least privilege, measured: docs/security.md's ACLs run a query, and each one missing is one sentence.

The query: a streaming read committing to its consumer group, into the exactly-once sink. A user made for
each test holds exactly ``least_privilege()`` (less one ACL in the second test), over SASL_SSL/SCRAM. With
one missing, the query fails naming the user, the permission and the resource; nothing reaches the output
topic (not even an aborted record) and the group holds no offset past the start. How long each failure
takes is printed (``-s``), not asserted: the report of issue 39 has the figures.

``sparkafka acls`` (issue 50: the ACL tool sparkafka ships, for users without Kafka's ``kafka-acls.sh``)
grants ``least_privilege()`` with ``--for-query``, grants what a refusal's sentence names, and lists and
revokes, run in this process as the administrator (``--command-config`` a file of the super user's settings).
"""

from __future__ import annotations

import contextlib
import shlex
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import AnalysisException

from sparkafka.cli import main
from sparkafka.cli.acls import Acl as Binding
from sparkafka.cli.acls import AclFilter, describe_acls
from sparkafka.client.metadata import AdminMetadata
from sparkafka.client.security import ADMIN_CONFIG, Access
from sparkafka.errors import AuthorizationError, SparkafkaError
from sparkafka.local.secure_kafka import Acl, SecureKafka
from sparkafka.sink.intents import intent_topic
from sparkafka.structs import TopicPartition
from tests.integration.test_after_start import assert_one_sentence, case, run_cases
from tests.support.docs import DOCS, blocks, shell_commands, sparkafka_argv
from tests.support.kafka import Kafka
from tests.support.wait import wait_until

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

    def granted(self) -> list[Binding]:
        """``least_privilege()`` as ``sparkafka acls list`` shows it."""
        acls = []
        for _, (operation, kind, name) in self.least_privilege():
            prefixed = name.endswith("*")
            resource = kind.replace("_", " ")
            acls.append(Binding(resource, name.removesuffix("*"), prefixed, f"User:{self.user}", operation))
        return sorted(acls)

    def run(self, spark: Any, checkpoint: Path) -> Any:
        """Run the query to its end: its failure (refused by ``load()``, raised by ``start()``, or the
        query's), or None."""
        try:
            query = self.start(spark, checkpoint)
        except AnalysisException as e:  # refused by load(): the source's ACLs (source.admin.check_source)
            return e
        except SparkafkaError as e:  # found by the sink's checks at start()
            return e
        with contextlib.suppress(Exception):  # awaitTermination raises the query's failure: returned below
            assert query.awaitTermination(180), "the query did not end"
        return query.exception()

    def start(self, spark: Any, checkpoint: Path) -> Any:
        return (
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


def admin_config(kafka: SecureKafka, folder: Path) -> str:
    """A ``--command-config`` file of the super user's settings (its password included, as an operator's)."""
    path = folder / "admin.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in kafka.admin_settings().items()))
    return str(path)


def sparkafka(argv: list[str], capsys: pytest.CaptureFixture[str], kafka: SecureKafka) -> str:
    """``sparkafka ARGV`` in this process: its output, once it exited 0 (no password in either stream)."""
    status = main(argv)
    out, err = capsys.readouterr()
    assert status == 0, err
    assert not any(p in out + err for p in kafka.passwords.values())
    return out


def docs_for_query_grant(scene: Scene, config: str) -> list[str]:
    """docs/security.md's ``sparkafka acls grant --for-query`` command, with the scene's names and the
    administrator's settings file in place of the page's."""
    (block,) = [b for b in blocks(DOCS / "security.md") if "--for-query" in b.code]
    assert block.run_by == "tests/integration/test_secure_acls.py"
    (command,) = shell_commands(block.code)
    argv = sparkafka_argv(command)
    assert argv is not None
    names = {
        "admin.properties": config,
        "User:orders-etl": f"User:{scene.user}",
        "orders": scene.source,
        "orders-etl": scene.group,
        "orders-enriched": scene.output,
        "orders-eos": scene.prefix,
    }
    return [names.get(a, a) for a in argv]


def test_exactly_the_documented_acls_run_source_group_commits_and_the_exactly_once_sink(
    spark: Any, secure_kafka: SecureKafka, secured: Kafka, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sparkafka acls grant --for-query`` as docs/security.md writes it grants the page's table, and the
    query runs with it."""
    scene = Scene(secure_kafka, secured)
    config = admin_config(secure_kafka, tmp_path)
    admin = ["--command-config", config]
    out = sparkafka(docs_for_query_grant(scene, config), capsys, secure_kafka)
    assert len(out.splitlines()) == len(scene.least_privilege())
    mine = AclFilter(None, None, False, f"User:{scene.user}")
    assert describe_acls(secure_kafka.admin_settings(), [mine]) == scene.granted()
    listed = sparkafka(["acls", "list", *admin, "--principal", f"User:{scene.user}"], capsys, secure_kafka)
    assert listed.splitlines()[-1] == f"{len(scene.least_privilege())} ACLs"
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
    assert f": grant it with sparkafka acls grant --principal User:{scene.user} --operation " in sentence
    assert f"or with Kafka's kafka-acls.sh --add --allow-principal User:{scene.user} " in sentence
    assert secure_kafka.passwords[scene.user] not in text
    admin = AdminMetadata({**secure_kafka.admin_settings(), "isolation.level": "read_uncommitted"})
    written = admin.latest([TopicPartition(scene.output, p) for p in range(2)])
    assert set(written.values()) == {0}, "records reached the output topic"
    # The source commits its starting offsets at its first poll; nothing read is committed past them.
    assert set(secured.group_offsets(scene.group, scene.source, 2).values()) <= {0}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "batch"])
def test_a_missing_read_on_the_source_topic_is_refused_at_load_in_two_lines(
    spark: Any, secure_kafka: SecureKafka, secured: Kafka, stream: bool
) -> None:
    """Issue 50: the source's ACL check runs at ``load()`` (``source.admin.check_source``), so a stream
    without READ on its topic is refused before ``start()``, in Spark's 2 lines with the sentence on the
    first, and a batch read alike. READ on the group is left to the stream's start: a batch read never
    commits, and ``load()`` cannot tell a stream from a batch (the group is not granted here either)."""
    scene = Scene(secure_kafka, secured)
    left_out = {"read the source", "commit to the group"}
    secure_kafka.grant(scene.user, [acl for what, acl in scene.least_privilege() if what not in left_out])
    reader = (spark.readStream if stream else spark.read).format("sparkafka").options(**scene.conf)
    with pytest.raises(Exception) as refused:  # noqa: PT011 - PySpark's AnalysisException, checked below
        reader.option("subscribe", scene.source).option("kafka.group.id", scene.group).load()
    lines = str(refused.value).splitlines()
    assert lines[0].startswith("[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: ")
    said = f"sparkafka.errors.AuthorizationError: user {scene.user} may not READ topic {scene.source}"
    grant = f": grant it with sparkafka acls grant --principal User:{scene.user} --operation read --topic "
    assert said in lines[0], lines[0]
    assert f"{grant}{scene.source} " in lines[0], lines[0]
    assert len(lines) == 2, lines
    assert secure_kafka.passwords[scene.user] not in str(refused.value)


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


def grant_command(sentence: str, config: str) -> list[str]:
    """The ``sparkafka acls grant`` command a refusal's sentence names, with ``config`` as ADMIN_CONFIG."""
    command = sentence.split(": grant it with ", 1)[1].split(f" ({ADMIN_CONFIG}: ", 1)[0]
    argv = shlex.split(command)
    assert argv[:3] == ["sparkafka", "acls", "grant"], sentence
    return [config if a == ADMIN_CONFIG else a for a in argv[1:]]


def test_the_command_a_missing_transactional_id_acl_names_lets_the_query_run(
    spark: Any, secure_kafka: SecureKafka, secured: Kafka, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal (found at ``start()``: FindCoordinator for the prefix's first id is refused without a
    grant) names the prefixed grant; run as the administrator, it is the one missing: the query then
    writes every record."""
    scene = Scene(secure_kafka, secured)
    secure_kafka.grant(scene.user, [a for what, a in scene.least_privilege() if what != "open transactions"])
    text = str(scene.run(spark, tmp_path / "ck1"))
    sentence = next(line for line in text.splitlines() if "may not WRITE transactional id" in line)
    argv = grant_command(sentence, admin_config(secure_kafka, tmp_path))
    assert "--prefixed" in argv
    sparkafka(argv, capsys, secure_kafka)
    assert scene.run(spark, tmp_path / "ck2") is None
    assert secured.committed_values(scene.output) == Counter(v.encode() for v in scene.values)


def may_read(conf: dict[str, str], topic: str) -> bool:
    """Whether the brokers say this user may READ ``topic`` (asked by a new client each time: no cache)."""
    meta = AdminMetadata({**conf, "client.id": f"check-{uuid.uuid4().hex[:8]}"}, timeout_s=30)
    try:
        meta.require([Access("READ", "topic", topic)])
    except AuthorizationError:
        return False
    return True


def test_grant_lets_a_refused_read_through_list_shows_it_and_revoke_removes_it(
    secure_kafka: SecureKafka, secured: Kafka, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The driver's check before a read (``AdminMetadata.require``) refuses; the command its sentence names
    grants READ; the user then reads the topic's offsets; the revoke of the same refuses it again."""
    user = f"reader-{uuid.uuid4().hex[:8]}"
    secure_kafka.add_user(user)
    conf = secure_kafka.sasl_settings(user)
    topic = secured.topic(partitions=1, prefix=f"acl-{user}")
    secured.produce(topic, ["a", "b", "c"])
    with pytest.raises(AuthorizationError) as refused:
        AdminMetadata(conf, timeout_s=30).require([Access("READ", "topic", topic)])
    config = admin_config(secure_kafka, tmp_path)
    argv = grant_command(str(refused.value), config)
    assert argv == [
        "acls",
        "grant",
        "--principal",
        f"User:{user}",
        "--operation",
        "read",
        "--topic",
        topic,
        "--bootstrap-servers",
        secure_kafka.bootstrap_servers,
        "--command-config",
        config,
    ]
    granted = sparkafka(argv, capsys, secure_kafka)
    assert granted.strip() == f"granted ALLOW User:{user} READ on topic {topic}"
    wait_until(lambda: may_read(conf, topic), 30, f"{user} to be allowed to read {topic}")
    tp = TopicPartition(topic, 0)
    fresh = {**conf, "client.id": f"after-grant-{user}"}
    assert AdminMetadata(fresh, timeout_s=30).latest([tp]) == {tp: 3}  # READ includes DESCRIBE
    listed = sparkafka(["acls", "list", "--topic", topic, "--command-config", config], capsys, secure_kafka)
    rows = [line.split() for line in listed.splitlines()[1:-1]]
    assert [f"User:{user}", "ALLOW", "READ", "topic", topic, "literal", "*"] in rows
    assert [row for row in rows if row[0] == f"User:{user}"] == [
        [f"User:{user}", "ALLOW", "READ", "topic", topic, "literal", "*"]
    ]
    read = [
        "--principal",
        f"User:{user}",
        "--topic",
        topic,
        "--operation",
        "read",
        "--command-config",
        config,
    ]
    revoked = sparkafka(["acls", "revoke", *read], capsys, secure_kafka)
    assert revoked.strip() == f"revoked ALLOW User:{user} READ on topic {topic}"
    wait_until(lambda: not may_read(conf, topic), 30, f"{user}'s read of {topic} to be refused again")
    listed = sparkafka(["acls", "list", "--topic", topic, "--command-config", config], capsys, secure_kafka)
    assert f"User:{user}" not in listed
    again = sparkafka(["acls", "revoke", *read], capsys, secure_kafka)
    assert again.startswith("no such ACL: nothing revoked")


def test_acls_as_a_user_who_may_not_manage_them_is_one_sentence(
    secure_kafka: SecureKafka, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user = f"nobody-{uuid.uuid4().hex[:8]}"
    secure_kafka.add_user(user)
    config = tmp_path / "user.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in secure_kafka.sasl_settings(user).items()))
    argv = ["acls", "grant", "--principal", f"User:{user}", "--topic", "t", "--operation", "read"]
    assert main([*argv, "--command-config", str(config)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"sparkafka acls: user {user} may not manage ACLs (granting ACLs needs ALTER"), err
    assert secure_kafka.passwords[user] not in err


def test_missing_sink_grants_are_one_sentence_at_start_naming_each(
    secure_kafka: SecureKafka, secured: Kafka, tmp_path: Path
) -> None:
    """Issue 50: the output topic's WRITE and the transactional ids' grant, missing, were found by the
    tasks (104 and 360 lines after ``start()``, the sentence 3 and 8 times). Now ``start()`` asks first: a
    user's script (tests/integration/after_start_job.py) sees the sentence once within 20 lines, and with
    both missing, one sentence names both."""
    scenes = {
        what: Scene(secure_kafka, secured) for what in ("write the output", "open transactions", "both")
    }
    for what, scene in scenes.items():
        left_out = {"write the output", "open transactions"} if what == "both" else {what}
        secure_kafka.grant(scene.user, [acl for w, acl in scene.least_privilege() if w not in left_out])
    cases = [
        case(
            what,
            tmp_path,
            {**scene.conf, "subscribe": scene.source, "startingOffsets": "earliest"},
            {
                **scene.conf,
                "topic": scene.output,
                "deliveryGuarantee": "exactly_once",
                "transactionalIdPrefix": scene.prefix,
            },
        )
        for what, scene in scenes.items()
    ]
    seen = run_cases(cases, tmp_path)
    output, transactions = scenes["write the output"], scenes["open transactions"]
    assert_one_sentence(seen["write the output"], f"user {output.user} may not WRITE topic {output.output}:")
    assert_one_sentence(
        seen["open transactions"],
        f"user {transactions.user} may not WRITE transactional id {transactions.prefix}*:",
    )
    both = scenes["both"]
    assert_one_sentence(
        seen["both"],
        f"user {both.user} may not WRITE topic {both.output} nor WRITE transactional id {both.prefix}*: "
        "grant them",
    )
    for scene in scenes.values():
        assert not any(secure_kafka.passwords[scene.user] in line for s in seen.values() for line in s.lines)
