"""``sparkafka acls``: list, grant and revoke Kafka ACLs through the Admin API, without Kafka's own tools.

Runs in the CLI's process (the parser takes ``OPERATIONS`` from here, so the client layer is imported only
when a command runs). Two halves:

- pure: what the command was given (``Selectors``) becomes the ACLs to grant or revoke (``wanted``: the
  product of principals' operations and resources, or with ``--for-query`` docs/security.md's least
  privilege for one query, ``query_acls``) or the filters to list by (``list_filters``); the unit tests
  check it without a broker;
- the Admin API calls (CreateAcls, DescribeAcls, DeleteAcls) through the client layer (``admin_client``,
  ``with_retries``): retriable answers are retried within the timeout. Granting an ACL the brokers already
  hold changes nothing, so a retried grant is safe; a revoke deletes only bindings equal to the ones asked
  for (resource, pattern, principal, host, operation and permission all exact).

Kafka's rules this relies on: READ, WRITE and DELETE include DESCRIBE; a PREFIXED pattern covers every
name that starts with it; listing with a name (no ``--prefixed``) shows every ACL that applies to that
name, the wildcard ``*`` and prefixes included (Kafka's MATCH filter). Granting and revoking need ALTER on
the cluster, listing DESCRIBE (a super user has both): run the command with an administrator's settings.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args

from sparkafka.errors import AuthorizationError, BrokerError, ConfigError

__all__ = [
    "OPERATIONS",
    "Acl",
    "AclFilter",
    "Operation",
    "Selectors",
    "delete_acls",
    "describe_acls",
    "list_filters",
    "query_acls",
    "render_list",
    "to_binding",
    "wanted",
    "write_acls",
]

T = TypeVar("T")

Operation = Literal["read", "write", "describe", "create", "delete", "all"]
"""The operations ``--operation`` takes: what a connector's user grants (Kafka has a few more)."""
OPERATIONS: tuple[str, ...] = get_args(Operation)

Resource = Literal["topic", "group", "transactional id"]
"""The resource types ``sparkafka acls`` grants on, in the words of ``client.security.Access``."""

FLAGS: dict[str, str] = {"topic": "--topic", "group": "--group", "transactional id": "--transactional-id"}
"""Each resource type's option, the same as ``kafka-acls.sh``'s."""

APPLIES: dict[str, tuple[str, ...]] = {
    "topic": OPERATIONS,
    "group": ("read", "describe", "delete", "all"),
    "transactional id": ("write", "describe", "all"),
}
"""The operations Kafka defines on each resource type (among ``OPERATIONS``)."""

_PRINCIPAL = re.compile(r"[A-Za-z][\w.-]*:.+")
_SECURITY_DISABLED = 54  # the brokers have no authorizer
_CLUSTER_AUTHORIZATION_FAILED = 31
_INVALID_REQUEST = 42


@dataclass(frozen=True, order=True)
class Acl:
    """One ACL binding: ``principal`` may (or, with ``deny``, may not) do ``operation`` on a resource.

    Sorted by resource, then principal: the order ``sparkafka acls list`` shows them in.
    """

    resource: str
    """``topic``, ``group``, ``transactional id`` (``cluster`` and others only as listed)."""
    name: str
    """The resource's name, or its prefix when ``prefixed``; ``*`` is every resource of the type."""
    prefixed: bool
    """Kafka's PREFIXED pattern: every name that starts with ``name``."""
    principal: str
    """``User:alice`` (over mutual TLS, what the brokers' mapping rules make of the certificate)."""
    operation: str
    """Kafka's name: ``READ``, ``WRITE``, ``DESCRIBE``, ``CREATE``, ``DELETE``, ``ALL``, ..."""
    host: str = "*"
    """The client host it applies to; ``*`` any."""
    deny: bool = False
    """A DENY binding (it wins over every ALLOW)."""

    def __str__(self) -> str:
        where = "" if self.host == "*" else f" from host {self.host}"
        pattern = " (prefixed)" if self.prefixed else ""
        permission = "DENY" if self.deny else "ALLOW"
        return (
            f"{permission} {self.principal} {self.operation} on {self.resource} {self.name}{pattern}{where}"
        )


@dataclass(frozen=True)
class AclFilter:
    """What ``sparkafka acls list`` asks the brokers for (Kafka's AclBindingFilter)."""

    resource: str | None
    """A resource type, or None for any."""
    name: str | None
    """With ``resource``: ACLs that apply to this name (literal, ``*`` and prefixes), or None for any."""
    prefixed: bool
    """``name`` is a prefix: only the PREFIXED binding of exactly that prefix."""
    principal: str | None
    """Only this principal's ACLs (exact: ``User:*`` bindings are not shown for ``User:alice``)."""


@dataclass(frozen=True)
class Selectors:
    """What ``sparkafka acls list|grant|revoke`` was given, as the parser read it (``from_args``)."""

    principal: str | None = None
    operations: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    transactional_ids: tuple[str, ...] = ()
    prefixed: bool = False
    host: str = "*"
    deny: bool = False
    for_query: bool = False
    source_topics: tuple[str, ...] = ()
    sink_topics: tuple[str, ...] = ()
    transactional_id_prefix: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Selectors:
        """The selectors of a parsed ``sparkafka acls`` command line (options it lacks keep their default)."""
        given = vars(args)

        def many(name: str) -> tuple[str, ...]:
            return tuple(given.get(name) or ())

        return cls(
            principal=given.get("principal"),
            operations=many("operations"),
            topics=many("topics"),
            groups=many("groups"),
            transactional_ids=many("transactional_ids"),
            prefixed=bool(given.get("prefixed")),
            host=given.get("host") or "*",
            deny=bool(given.get("deny")),
            for_query=bool(given.get("for_query")),
            source_topics=many("source_topics"),
            sink_topics=many("sink_topics"),
            transactional_id_prefix=given.get("transactional_id_prefix"),
        )

    def resources(self) -> list[tuple[str, str]]:
        """(resource type, name) of each ``--topic``, ``--group``, ``--transactional-id``, in that order."""
        return (
            [("topic", t) for t in self.topics]
            + [("group", g) for g in self.groups]
            + [("transactional id", t) for t in self.transactional_ids]
        )


def _principal(text: str | None) -> str:
    if not text:
        raise ConfigError("give --principal, e.g. --principal User:alice (the user the ACLs are for)")
    if not _PRINCIPAL.fullmatch(text):
        raise ConfigError(f"--principal {text}: write it as TYPE:NAME, e.g. User:{text}")
    return text


def query_acls(
    principal: str,
    *,
    source_topics: Sequence[str] = (),
    sink_topics: Sequence[str] = (),
    groups: Sequence[str] = (),
    transactional_id_prefix: str | None = None,
    host: str = "*",
) -> list[tuple[Acl, str]]:
    """docs/security.md's least privilege for one sparkafka query, each ACL with what it is for.

    READ on each source topic (it includes the DESCRIBE the source's lookups need), READ on the group
    (``kafka.group.id``: the source's group commits), WRITE on each sink topic; for the exactly-once sink
    (``transactional_id_prefix``) WRITE on the transactional ids starting with the prefix and READ, WRITE
    and CREATE on its commit-intent log ``_sparkafka-intents-<prefix>``. Measured: exactly these run a
    query that reads, commits to its group and writes exactly once, and each one missing fails it
    (tests/integration/test_secure_acls.py).
    """
    from sparkafka.sink.intents import intent_topic

    def acl(operation: str, resource: str, name: str, prefixed: bool = False) -> Acl:
        return Acl(resource, name, prefixed, principal, operation, host)

    out = [(acl("READ", "topic", t), "read the source") for t in source_topics]
    out += [(acl("READ", "group", g), "commit offsets to the group") for g in groups]
    out += [(acl("WRITE", "topic", t), "write the output") for t in sink_topics]
    if transactional_id_prefix:
        log = intent_topic(transactional_id_prefix)
        out += [
            (
                acl("WRITE", "transactional id", transactional_id_prefix, True),
                "the exactly-once transactions",
            ),
            (acl("READ", "topic", log), "read the commit-intent log"),
            (acl("WRITE", "topic", log), "write the commit-intent log"),
            (acl("CREATE", "topic", log), "create the commit-intent log the first time"),
        ]
    return out


def wanted(selectors: Selectors) -> list[tuple[Acl, str]]:
    """The ACLs ``sparkafka acls grant`` (or ``revoke``) with these selectors grants (or revokes), each with
    what it is for (empty but with ``--for-query``).

    Without ``--for-query``: each ``--operation`` on each resource, ALLOW (DENY with ``--deny``), from
    ``--host``, the resources' names prefixes with ``--prefixed``.

    Raises:
        ConfigError: no principal, or one not written ``TYPE:NAME``; no operation or no resource; an
            operation Kafka does not define on a resource type; options of the two forms mixed.
    """
    s = selectors
    principal = _principal(s.principal)
    query_only = s.source_topics or s.sink_topics or s.transactional_id_prefix
    if s.for_query:
        if s.operations or s.topics or s.transactional_ids or s.prefixed or s.deny:
            raise ConfigError(
                "--for-query grants what a query needs from --source-topic, --sink-topic, --group and "
                "--transactional-id-prefix: leave out --operation, --topic, --transactional-id, --prefixed "
                "and --deny"
            )
        if not (query_only or s.groups):
            raise ConfigError(
                "--for-query needs the query's --source-topic, --sink-topic, --group or "
                "--transactional-id-prefix"
            )
        return query_acls(
            principal,
            source_topics=s.source_topics,
            sink_topics=s.sink_topics,
            groups=s.groups,
            transactional_id_prefix=s.transactional_id_prefix,
            host=s.host,
        )
    if query_only:
        raise ConfigError("--source-topic, --sink-topic and --transactional-id-prefix go with --for-query")
    if not s.operations:
        raise ConfigError(f"give --operation: one of {', '.join(OPERATIONS)} (repeatable)")
    resources = s.resources()
    if not resources:
        raise ConfigError("give the resource: --topic NAME, --group NAME or --transactional-id NAME")
    out = []
    for resource, name in resources:
        for operation in dict.fromkeys(s.operations):
            if operation not in APPLIES[resource]:
                raise ConfigError(
                    f"--operation {operation} does not apply to a {resource} (one takes "
                    f"{', '.join(APPLIES[resource])})"
                )
            acl = Acl(resource, name, s.prefixed, principal, operation.upper(), s.host, s.deny)
            out.append((acl, ""))
    return out


def list_filters(selectors: Selectors) -> list[AclFilter]:
    """What ``sparkafka acls list`` asks for: one filter per resource given, or one for every resource.

    Raises:
        ConfigError: a principal not written ``TYPE:NAME``, or ``--prefixed`` without a resource.
    """
    principal = _principal(selectors.principal) if selectors.principal else None
    resources = selectors.resources()
    if selectors.prefixed and not resources:
        raise ConfigError("--prefixed says a --topic, --group or --transactional-id is a prefix: give one")
    if not resources:
        return [AclFilter(None, None, False, principal)]
    return [AclFilter(kind, name, selectors.prefixed, principal) for kind, name in resources]


def render_list(acls: Iterable[Acl]) -> str:
    """``describe_acls``'s answer as a table and a count."""
    rows = [
        (
            a.principal,
            "DENY" if a.deny else "ALLOW",
            a.operation,
            a.resource,
            a.name,
            "prefixed" if a.prefixed else "literal",
            a.host,
        )
        for a in sorted(acls)
    ]
    header = ("principal", "permission", "operation", "resource", "name", "pattern", "host")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    lines.append(f"{len(rows)} ACL{'s' if len(rows) != 1 else ''}")
    return "\n".join(lines)


# ---- confluent-kafka's types ---------------------------------------------------------------------------

_KAFKA_RESOURCE = {"topic": "TOPIC", "group": "GROUP", "transactional id": "TRANSACTIONAL_ID"}
_OUR_RESOURCE = {v: k for k, v in _KAFKA_RESOURCE.items()} | {"BROKER": "cluster"}


def to_binding(acl: Acl) -> Any:
    """``acl`` as confluent-kafka's ``AclBinding`` (for CreateAcls)."""
    from confluent_kafka.admin import AclBinding

    return AclBinding(*_binding_args(acl))


def _exact_filter(acl: Acl) -> Any:
    """The ``AclBindingFilter`` that matches ``acl`` and nothing else (for DeleteAcls)."""
    from confluent_kafka.admin import AclBindingFilter

    return AclBindingFilter(*_binding_args(acl))


def _binding_args(acl: Acl) -> tuple[Any, ...]:
    from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    return (
        ResourceType[_KAFKA_RESOURCE[acl.resource]],
        acl.name,
        ResourcePatternType.PREFIXED if acl.prefixed else ResourcePatternType.LITERAL,
        acl.principal,
        acl.host,
        AclOperation[acl.operation],
        AclPermissionType.DENY if acl.deny else AclPermissionType.ALLOW,
    )


def _to_filter(f: AclFilter) -> Any:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    if f.resource is None:
        restype, pattern = ResourceType.ANY, ResourcePatternType.ANY
    else:
        restype = ResourceType[_KAFKA_RESOURCE[f.resource]]
        pattern = ResourcePatternType.PREFIXED if f.prefixed else ResourcePatternType.MATCH
    pattern = pattern if f.name is not None else ResourcePatternType.ANY
    return AclBindingFilter(
        restype, f.name, pattern, f.principal, None, AclOperation.ANY, AclPermissionType.ANY
    )


def from_binding(binding: Any) -> Acl:
    """confluent-kafka's ``AclBinding`` (as DescribeAcls and DeleteAcls answer) as an ``Acl``."""
    kind = binding.restype.name
    return Acl(
        _OUR_RESOURCE.get(kind, kind.lower().replace("_", " ")),
        binding.name,
        binding.resource_pattern_type.name == "PREFIXED",
        binding.principal,
        binding.operation.name,
        binding.host,
        binding.permission_type.name == "DENY",
    )


# ---- the Admin API -------------------------------------------------------------------------------------


def _quiet(conf: Mapping[str, str]) -> dict[str, str]:
    return {**conf, "log_level": "0"}  # a separate, silent client: the error sentence says it all


def _call(what: str, conf: Mapping[str, str], call: Callable[[Any, float], T], timeout_s: float) -> T:
    """``call(admin, remaining_s)`` with retries, its refusals worded for the user."""
    from sparkafka.client.core import admin_client, error_code, is_retriable, with_retries
    from sparkafka.client.security import principal as login_principal

    quiet = _quiet(conf)
    admin = admin_client(quiet)
    try:
        return with_retries(what, quiet, lambda left: call(admin, left), timeout_s)
    except BrokerError as e:
        cause = e.__cause__
        if cause is None:
            raise
        code = error_code(cause)
        servers = conf.get("bootstrap.servers")
        if code == _SECURITY_DISABLED:
            raise ConfigError(
                f"the brokers at {servers} have no authorizer (authorizer.class.name is not set): they keep "
                "no ACLs, and every client may do everything"
            ) from None
        if code == _CLUSTER_AUTHORIZATION_FAILED:
            who, _ = login_principal(conf)
            raise AuthorizationError(
                f"{who} may not manage ACLs ({what} needs ALTER on the cluster, listing them DESCRIBE): run "
                "sparkafka acls with an administrator's settings (--command-config FILE)",
                who,
                "ALTER",
                "cluster",
            ) from None
        if code == _INVALID_REQUEST:
            raise ConfigError(
                f"{what}: the brokers at {servers} refused the request: {_words(cause)}"
            ) from None
        if is_retriable(cause):
            raise ConfigError(
                f"no Kafka broker answered at {servers} within {timeout_s:g} s (is it running, and is "
                "--bootstrap-servers right?)"
            ) from None
        raise


def _words(error: BaseException) -> str:
    inner: Any = error.args[0] if error.args else error
    return str(inner.str() if callable(getattr(inner, "str", None)) else inner)


def write_acls(conf: Mapping[str, str], acls: Sequence[Acl], timeout_s: float = 30.0) -> None:
    """Create ``acls`` (CreateAcls); returns once the brokers took every one. Granting one the brokers
    already hold changes nothing.

    Raises:
        ConfigError: the brokers have no authorizer, refused a binding as invalid, or did not answer.
        AuthorizationError: the settings' user may not manage ACLs (ALTER on the cluster).
    """
    bindings = [to_binding(a) for a in acls]

    def create(admin: Any, left: float) -> None:
        for future in admin.create_acls(bindings, request_timeout=left).values():
            future.result(left)

    if bindings:
        _call("granting ACLs", conf, create, timeout_s)


def describe_acls(
    conf: Mapping[str, str], filters: Sequence[AclFilter], timeout_s: float = 30.0
) -> list[Acl]:
    """The ACLs the brokers hold that match any of ``filters`` (DescribeAcls), each once, sorted.

    Raises:
        ConfigError: the brokers have no authorizer, or did not answer.
        AuthorizationError: the settings' user may not list ACLs (DESCRIBE on the cluster).
    """

    def describe(admin: Any, left: float) -> set[Acl]:
        found: set[Acl] = set()
        for f in filters:
            found |= {
                from_binding(b) for b in admin.describe_acls(_to_filter(f), request_timeout=left).result(left)
            }
        return found

    return sorted(_call("listing ACLs", conf, describe, timeout_s))


def delete_acls(conf: Mapping[str, str], acls: Sequence[Acl], timeout_s: float = 30.0) -> list[Acl]:
    """Delete the bindings equal to ``acls`` (DeleteAcls with exact filters); returns those the brokers
    deleted (none for an ACL they did not hold; after a retry, those the last attempt found).

    Raises:
        ConfigError: the brokers have no authorizer, or did not answer.
        AuthorizationError: the settings' user may not manage ACLs (ALTER on the cluster).
    """
    filters = [_exact_filter(a) for a in acls]

    def delete(admin: Any, left: float) -> list[Acl]:
        deleted: list[Acl] = []
        for future in admin.delete_acls(filters, request_timeout=left).values():
            deleted += [from_binding(b) for b in future.result(left)]
        return deleted

    return sorted(set(_call("revoking ACLs", conf, delete, timeout_s))) if filters else []
