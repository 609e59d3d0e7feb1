"""``sparkafka acls``: command lines to ACLs and filters, the Admin API's answers worded, with no broker.

The integration side (a secured broker: a grant lets a refused operation through, a revoke refuses it
again) is tests/integration/test_secure_acls.py.
"""

from __future__ import annotations

import shlex
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from sparkafka.cli import build_parser, main
from sparkafka.cli.acls import (
    Acl,
    AclFilter,
    Selectors,
    delete_acls,
    describe_acls,
    from_binding,
    list_filters,
    query_acls,
    render_list,
    to_binding,
    wanted,
    write_acls,
)
from sparkafka.client.security import Access, denied
from sparkafka.errors import AuthorizationError, ConfigError

SASL = {
    "bootstrap.servers": "127.0.0.1:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "etl",
}


def selectors(command: str) -> Selectors:
    """The selectors of ``sparkafka <command>``, as the CLI's parser reads them."""
    return Selectors.from_args(build_parser().parse_args(shlex.split(command)))


def acls(command: str) -> list[Acl]:
    return [acl for acl, _ in wanted(selectors(command))]


def test_grant_is_each_operation_on_each_resource() -> None:
    got = acls(
        "acls grant --principal User:alice --topic orders --group etl --operation read --operation describe"
    )
    assert got == [
        Acl("topic", "orders", False, "User:alice", "READ"),
        Acl("topic", "orders", False, "User:alice", "DESCRIBE"),
        Acl("group", "etl", False, "User:alice", "READ"),
        Acl("group", "etl", False, "User:alice", "DESCRIBE"),
    ]


def test_prefixed_deny_and_host() -> None:
    got = acls(
        "acls grant --principal User:alice --transactional-id eos- --prefixed --operation write --deny "
        "--host 10.0.0.7"
    )
    assert got == [Acl("transactional id", "eos-", True, "User:alice", "WRITE", "10.0.0.7", True)]
    assert str(got[0]) == "DENY User:alice WRITE on transactional id eos- (prefixed) from host 10.0.0.7"


def test_revoke_takes_the_same_selectors_as_grant() -> None:
    line = "--principal User:alice --topic orders --operation write"
    assert acls(f"acls revoke {line}") == acls(f"acls grant {line}")


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("acls grant --topic t --operation read", "give --principal, e.g. --principal User:alice"),
        (
            "acls grant --principal alice --topic t --operation read",
            "--principal alice: write it as TYPE:NAME",
        ),
        ("acls grant --principal User:a --topic t", "give --operation: one of read, write, describe"),
        ("acls grant --principal User:a --operation read", "give the resource: --topic NAME"),
        ("acls grant --principal User:a --group g --operation create", "--operation create does not apply"),
        ("acls grant --principal User:a --transactional-id p --operation read", "one takes write, describe"),
        ("acls grant --principal User:a --source-topic t", "go with --for-query"),
        ("acls grant --for-query --principal User:a --topic t", "leave out --operation, --topic"),
        ("acls revoke --for-query --principal User:a", "--for-query needs the query's --source-topic"),
    ],
)
def test_each_mistake_is_one_sentence(command: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        wanted(selectors(command))
    assert says in str(refused.value)
    assert "\n" not in str(refused.value)


def test_for_query_grants_docs_least_privilege() -> None:
    """docs/security.md's table, row by row (tests/integration/test_secure_acls.py runs a query with it)."""
    got = acls(
        "acls grant --for-query --principal User:etl --source-topic orders --sink-topic enriched --group etl "
        "--transactional-id-prefix eos"
    )
    assert sorted(got) == sorted(
        [
            Acl("topic", "orders", False, "User:etl", "READ"),
            Acl("group", "etl", False, "User:etl", "READ"),
            Acl("topic", "enriched", False, "User:etl", "WRITE"),
            Acl("transactional id", "eos", True, "User:etl", "WRITE"),
            Acl("topic", "_sparkafka-intents-eos", False, "User:etl", "READ"),
            Acl("topic", "_sparkafka-intents-eos", False, "User:etl", "WRITE"),
            Acl("topic", "_sparkafka-intents-eos", False, "User:etl", "CREATE"),
        ]
    )
    reader_only = query_acls("User:etl", source_topics=["orders"])
    assert [a for a, _ in reader_only] == [Acl("topic", "orders", False, "User:etl", "READ")]
    assert [why for _, why in reader_only] == ["read the source"]


@pytest.mark.parametrize(
    "access",
    [
        Access("READ", "topic", "orders"),
        Access("READ", "group", "etl"),
        Access("WRITE", "transactional id", "orders-eos", prefixed=True),
        Access("CREATE", "topic", "_sparkafka-intents-orders-eos"),
        Access("DESCRIBE", "group", "odd name"),
    ],
    ids=str,
)
def test_the_command_a_refusal_names_grants_exactly_what_was_refused(access: Access) -> None:
    sentence = str(denied(SASL, access, "doing it"))
    command = sentence.split(": grant it with ", 1)[1].split(" (ADMIN_CONFIG: ", 1)[0]
    argv = shlex.split(command)
    assert argv[:3] == ["sparkafka", "acls", "grant"]
    args = build_parser().parse_args(argv[1:])
    assert (args.bootstrap_servers, args.command_config) == ("127.0.0.1:9093", "ADMIN_CONFIG")
    assert acls(shlex.join(argv[1:])) == [
        Acl(access.resource, access.name, access.prefixed, "User:etl", access.operation)
    ]
    assert "or with Kafka's kafka-acls.sh --add --allow-principal User:etl" in sentence


def test_a_cluster_permission_names_kafka_acls_only() -> None:
    sentence = str(denied(SASL, Access("ALTER", "cluster", "kafka-cluster")))
    assert sentence.endswith(
        "grant it with kafka-acls.sh --add --allow-principal User:etl --operation Alter --cluster"
    )


def test_list_filters_match_every_acl_that_applies_to_a_name() -> None:
    assert list_filters(selectors("acls list")) == [AclFilter(None, None, False, None)]
    assert list_filters(selectors("acls list --principal User:a --topic t --group g")) == [
        AclFilter("topic", "t", False, "User:a"),
        AclFilter("group", "g", False, "User:a"),
    ]
    with pytest.raises(ConfigError, match="--prefixed says a --topic"):
        list_filters(selectors("acls list --prefixed"))


def test_bindings_to_and_from_confluent_kafka() -> None:
    acl = Acl("transactional id", "eos", True, "User:etl", "WRITE", "*", False)
    binding = to_binding(acl)
    assert binding.restype == ResourceType.TRANSACTIONAL_ID
    assert binding.resource_pattern_type == ResourcePatternType.PREFIXED
    assert binding.permission_type == AclPermissionType.ALLOW
    assert from_binding(binding) == acl
    cluster = to_binding(Acl("topic", "t", False, "User:x", "ALTER"))
    cluster.restype = ResourceType.BROKER
    assert from_binding(cluster).resource == "cluster"


def test_the_list_is_a_table_and_a_count() -> None:
    table = render_list(
        [
            Acl("topic", "orders", False, "User:b", "READ"),
            Acl("group", "etl", False, "User:a", "READ", deny=True),
        ]
    ).splitlines()
    assert table[0].split() == ["principal", "permission", "operation", "resource", "name", "pattern", "host"]
    assert table[1].split() == ["User:a", "DENY", "READ", "group", "etl", "literal", "*"]
    assert table[2].split() == ["User:b", "ALLOW", "READ", "topic", "orders", "literal", "*"]
    assert table[-1] == "2 ACLs"


# ---- the Admin API, answered by a stand-in ----------------------------------------------------------------


def done(result: Any = None, error: int | None = None) -> Future[Any]:
    future: Future[Any] = Future()
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(KafkaException(KafkaError(error)))
    return future


class FakeAdmin:
    """CreateAcls, DescribeAcls and DeleteAcls over a set of bindings; ``error``: every call's answer."""

    def __init__(self, held: list[Acl] | None = None, error: int | None = None) -> None:
        self.held = set(held or [])
        self.error = error
        self.filters: list[Any] = []

    def create_acls(self, bindings: list[Any], request_timeout: float) -> dict[Any, Future[Any]]:
        if self.error is None:
            self.held |= {from_binding(b) for b in bindings}
        return {b: done(error=self.error) for b in bindings}

    def describe_acls(self, f: AclBindingFilter, request_timeout: float) -> Future[Any]:
        self.filters.append(f)
        return done([to_binding(a) for a in self.held], self.error)

    def delete_acls(self, filters: list[Any], request_timeout: float) -> dict[Any, Future[Any]]:
        out = {}
        for f in filters:
            gone = {a for a in self.held if from_binding(f) == a}
            self.held -= gone
            out[f] = done([to_binding(a) for a in gone], self.error)
        return out


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin()
    monkeypatch.setattr("sparkafka.client.core.admin_client", lambda _conf: fake)
    return fake


def test_grant_list_and_revoke_through_the_admin_api(admin: FakeAdmin) -> None:
    read = Acl("topic", "orders", False, "User:etl", "READ")
    write = Acl("topic", "orders", False, "User:etl", "WRITE")
    write_acls(SASL, [read, write])
    assert describe_acls(SASL, [AclFilter("topic", "orders", False, "User:etl")]) == [read, write]
    f = admin.filters[0]
    assert (f.restype, f.resource_pattern_type, f.operation) == (
        ResourceType.TOPIC,
        ResourcePatternType.MATCH,
        AclOperation.ANY,
    )
    assert delete_acls(SASL, [write]) == [write]
    assert admin.held == {read}
    assert delete_acls(SASL, [write]) == []  # nothing held: nothing revoked


@pytest.mark.parametrize(
    ("code", "kind", "says"),
    [
        (KafkaError.SECURITY_DISABLED, ConfigError, "the brokers at 127.0.0.1:9093 have no authorizer"),
        (KafkaError.CLUSTER_AUTHORIZATION_FAILED, AuthorizationError, "user etl may not manage ACLs"),
        (KafkaError.INVALID_REQUEST, ConfigError, "granting ACLs: the brokers at 127.0.0.1:9093 refused"),
    ],
)
def test_refusals_are_one_sentence(admin: FakeAdmin, code: int, kind: type[Exception], says: str) -> None:
    admin.error = code
    with pytest.raises(kind) as refused:
        write_acls(SASL, [Acl("topic", "t", False, "User:etl", "READ")], timeout_s=1)
    assert says in str(refused.value)


def test_the_command_checks_its_options_before_contacting_a_broker(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["acls", "grant", "--principal", "alice", "--topic", "t", "--operation", "read"])
    assert status == 1
    assert capsys.readouterr().err.strip() == (
        "sparkafka acls: --principal alice: write it as TYPE:NAME, e.g. User:alice"
    )


def test_the_command_prints_what_it_granted_and_revoked(
    admin: FakeAdmin, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sparkafka.cli.commands._settings", lambda _args: dict(SASL))
    line = ["--principal", "User:etl", "--for-query", "--source-topic", "orders", "--group", "etl"]
    assert main(["acls", "grant", *line]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "granted ALLOW User:etl READ on topic orders (read the source)",
        "granted ALLOW User:etl READ on group etl (commit offsets to the group)",
    ]
    assert main(["acls", "list", "--principal", "User:etl"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 ACLs"
    assert main(["acls", "revoke", *line]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "revoked ALLOW User:etl READ on group etl",
        "revoked ALLOW User:etl READ on topic orders",
    ]
    assert main(["acls", "revoke", *line]) == 0
    assert "nothing revoked" in capsys.readouterr().out
