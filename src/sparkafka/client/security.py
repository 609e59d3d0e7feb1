"""Who the client is to the brokers, and one sentence for each way TLS, SASL or an ACL refuses it.

Runs wherever a client meets a refusal: the driver's first contact (``client.contact``), its lookups, the
Python workers' reads and writes, the exactly-once sink's commit, the CLI. Pure functions of the
``kafka.*`` settings and of what the clients said, except ``tls_verdict``, which makes one TLS handshake
with Python's ``ssl`` to learn what librdkafka words the same for every cause ("certificate verify failed"
for an unknown CA, an expired certificate and a host name the certificate does not list alike).

**Authorization.** Kafka's answers name the resource type (TOPIC_AUTHORIZATION_FAILED, ...) but neither the
operation nor the resource; the caller knows both, as an ``Access``: ``denied`` words the sentence, with the
``sparkafka acls grant`` command that grants it (shipped with sparkafka, ``cli/acls.py``: Kafka's Admin API,
no Kafka tools needed) and Kafka's own ``kafka-acls.sh`` line as the alternative. Measured on Apache Kafka 4.4
with ``allow.everyone.if.no.acl.found=false`` (tests/integration/test_secure_acls.py): a topic the user may
not DESCRIBE is absent from a listing of every topic and answers TOPIC_AUTHORIZATION_FAILED when named; WRITE
on any topic is enough for an idempotent producer (no IDEMPOTENT_WRITE on the cluster); a consumer used only
with ``assign`` still asks for its group's coordinator, so a group it may not DESCRIBE gives it a
GROUP_AUTHORIZATION_FAILED event about once a second, harmless to its reads (``is_group_denial``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import shlex
import socket
import ssl
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkafka.errors import AuthenticationError, AuthorizationError

__all__ = [
    "AUTHORIZATION_CODES",
    "Access",
    "authenticated",
    "contact_failure",
    "denied",
    "denied_all",
    "denied_by",
    "is_group_denial",
    "principal",
    "tls_verdict",
]

AUTHORIZATION_CODES = {29: "topic", 30: "group", 31: "cluster", 53: "transactional id"}
"""Kafka's authorization error codes and the resource type each is about."""

GROUP_AUTHORIZATION_FAILED = 30
_AUTHENTICATION = -169  # librdkafka: SASL refused the login, or the mechanism is not enabled
_SSL = -181  # librdkafka: the TLS handshake failed on our side (the brokers' certificate)
_TRANSPORT = -195  # librdkafka: the connection broke; with a TLS alert, the brokers refused our certificate
_ACL_FLAGS = {
    "topic": "--topic",
    "group": "--group",
    "transactional id": "--transactional-id",
    "cluster": "--cluster",
}
"""``kafka-acls.sh``'s option for each resource type; ``sparkafka acls`` takes the same, but ``--cluster``."""
ADMIN_CONFIG = "ADMIN_CONFIG"
"""What the grant command's ``--command-config`` names: a file of an administrator's settings (the user the
sentence is about may not grant itself anything)."""


@dataclass(frozen=True)
class Access:
    """An operation on a resource, as an ACL grants it: ``Access("WRITE", "transactional id", "eos-", True)``.

    ``prefixed``: the name is a prefix (Kafka's PREFIXED pattern), shown as ``eos-*``.
    """

    operation: str
    """``READ``, ``WRITE``, ``DESCRIBE``, ``CREATE`` (READ and WRITE include DESCRIBE)."""
    resource: str
    """``topic``, ``group``, ``transactional id`` or ``cluster``."""
    name: str
    prefixed: bool = False

    def __str__(self) -> str:
        return f"{self.operation} {self.resource} {self.name}{'*' if self.prefixed else ''}"

    def grant(self, principal: str, servers: str = "") -> str:
        """The ``sparkafka acls grant`` command that grants this to ``principal`` (``User:...``) on the
        brokers at ``servers``, run with an administrator's settings (``ADMIN_CONFIG``); empty for a cluster
        permission, which it does not grant.

        Its options are checked against the CLI's parser (tests/unit/test_cli_acls.py).
        """
        if self.resource == "cluster":
            return ""
        parts = [
            f"sparkafka acls grant --principal {shlex.quote(principal)} --operation {self.operation.lower()}",
            f"{_ACL_FLAGS[self.resource]} {shlex.quote(self.name)}",
        ]
        parts += ["--prefixed"] if self.prefixed else []
        parts += [f"--bootstrap-servers {shlex.quote(servers)}"] if servers else []
        return " ".join([*parts, f"--command-config {ADMIN_CONFIG}"])

    def kafka_acls(self, principal: str) -> str:
        """Apache Kafka's ``kafka-acls.sh`` command that grants this to ``principal`` (its connection
        options, ``--bootstrap-server`` and ``--command-config``, left to the administrator)."""
        flag = _ACL_FLAGS[self.resource]
        target = flag if self.resource == "cluster" else f"{flag} {shlex.quote(self.name)}"
        pattern = " --resource-pattern-type prefixed" if self.prefixed else ""
        return (
            f"kafka-acls.sh --add --allow-principal {shlex.quote(principal)} --operation "
            f"{self.operation.title()} {target}{pattern}"
        )

    def how_to_grant(self, principal: str, servers: str = "") -> str:
        """``sparkafka acls grant ...`` first, ``kafka-acls.sh`` (for users' clusters with Kafka's tools)
        as the alternative; the latter alone for a cluster permission."""
        ours = self.grant(principal, servers)
        theirs = self.kafka_acls(principal)
        if not ours:
            return theirs
        return f"{ours} ({ADMIN_CONFIG}: a file of an administrator's settings), or with Kafka's {theirs}"


def _protocol(conf: Mapping[str, Any]) -> str:
    return str(conf.get("security.protocol", "PLAINTEXT")).upper()


def authenticated(conf: Mapping[str, Any]) -> bool:
    """Whether the client proves who it is (SASL or TLS): only then can ACLs tell it from anyone else.

    The drivers' ACL checks at start run only then; on a PLAINTEXT listener every client is ANONYMOUS.
    """
    return _protocol(conf) != "PLAINTEXT"


def _mechanism(conf: Mapping[str, Any]) -> str:
    return str(conf.get("sasl.mechanism", conf.get("sasl.mechanisms", "GSSAPI"))).upper()


def principal(conf: Mapping[str, Any]) -> tuple[str, str]:
    """(how the sentence names the user, the ACL principal) for these settings.

    SASL: the user name (``User:<name>``). Mutual TLS: the client certificate's subject, which Kafka's
    default ``ssl.principal.mapping.rules`` make the principal (``User:CN=app``; brokers with other rules
    map it to another name). Otherwise ``ANONYMOUS``.
    """
    protocol = _protocol(conf)
    if protocol.startswith("SASL") and conf.get("sasl.username"):
        name = str(conf["sasl.username"])
        return f"user {name}", f"User:{name}"
    if protocol == "SSL" and conf.get("ssl.certificate.location"):
        facts = _certificate(str(conf["ssl.certificate.location"]))
        subject = facts[0] if facts else None
        if subject:
            return f"user {subject} (the client certificate's subject)", f"User:{subject}"
        return f"the user of client certificate {conf['ssl.certificate.location']}", "User:<its subject>"
    return "user ANONYMOUS", "User:ANONYMOUS"


def denied(conf: Mapping[str, Any], access: Access, doing: str | None = None) -> AuthorizationError:
    """The one sentence for a missing permission: who may not do what, and how to grant it.

    Example: ``user etl may not WRITE transactional id orders-eos* (opening the exactly-once sink's
    transaction orders-eos-0): grant it with sparkafka acls grant --principal User:etl --operation write
    --transactional-id orders-eos --prefixed --bootstrap-servers b1:9093 --command-config ADMIN_CONFIG
    (ADMIN_CONFIG: a file of an administrator's settings), or with Kafka's kafka-acls.sh --add
    --allow-principal User:etl --operation Write --transactional-id orders-eos --resource-pattern-type
    prefixed``.
    """
    who, acl_principal = principal(conf)
    context = f" ({doing})" if doing else ""
    mapping = (
        " (or to the principal the brokers' ssl.principal.mapping.rules make of the subject)"
        if _protocol(conf) == "SSL"
        else ""
    )
    return AuthorizationError(
        f"{who} may not {access}{context}: grant it with {access.how_to_grant(acl_principal, _servers(conf))}"
        f"{mapping}",
        who,
        access.operation,
        f"{access.resource} {access.name}{'*' if access.prefixed else ''}",
    )


def denied_all(conf: Mapping[str, Any], accesses: Sequence[Access]) -> AuthorizationError:
    """One sentence for every permission in ``accesses`` (at least one) that the user lacks, each named.

    One missing: ``denied``'s sentence. Several: ``user etl may not READ topic orders, WRITE topic out nor
    WRITE transactional id eos*: grant them with <one sparkafka acls grant each, ";"-separated>
    (ADMIN_CONFIG: ...), or with Kafka's <one kafka-acls.sh each>``. The error's operation and resource are
    the first's.
    """
    if len(accesses) == 1:
        return denied(conf, accesses[0])
    who, acl_principal = principal(conf)
    first, *_ = accesses
    names = [str(a) for a in accesses]
    listed = f"{', '.join(names[:-1])} nor {names[-1]}"
    ours = [a.grant(acl_principal, _servers(conf)) for a in accesses]
    theirs = [a.kafka_acls(acl_principal) for a in accesses]
    grants = "; ".join(g for g in ours if g)
    admin = f"({ADMIN_CONFIG}: a file of an administrator's settings)"
    how = f"{grants} {admin}, or with Kafka's {'; '.join(theirs)}" if grants else "; ".join(theirs)
    return AuthorizationError(
        f"{who} may not {listed}: grant them with {how}",
        who,
        first.operation,
        f"{first.resource} {first.name}{'*' if first.prefixed else ''}",
    )


def _code(error: Any) -> int | None:
    """The Kafka error code of a KafkaError, a KafkaException, a kafka-python error or a bare int."""
    if isinstance(error, int):
        return error
    inner = error.args[0] if isinstance(error, BaseException) and error.args else error
    code = getattr(inner, "code", None)
    if callable(code):
        return int(code())
    errno = getattr(inner, "errno", None)
    return errno if isinstance(errno, int) else None


def denied_by(
    error: Any, conf: Mapping[str, Any], access: Access, doing: str | None = None
) -> AuthorizationError | None:
    """``denied(conf, access)`` when ``error`` is a Kafka authorization refusal, else None.

    ``access`` is what the caller was doing; when the refusal is about another resource type than its
    (a transactional producer's produce refused for the topic, say), the sentence names that type with
    the caller's operation on ``access.name`` only if the types agree, else the refusal's own words.
    """
    code = _code(error)
    kind = AUTHORIZATION_CODES.get(code) if code is not None else None
    if kind is None:
        return None
    if kind != access.resource:
        who, _ = principal(conf)
        return AuthorizationError(
            f"{who} was refused by ACL ({kind} authorization failed) while {doing or access}: grant the "
            f"{kind} permission it needs with sparkafka acls grant, or Kafka's kafka-acls.sh "
            "(docs/security.md lists each one)",
            who,
            access.operation,
            kind,
        )
    return denied(conf, access, doing)


def is_group_denial(error: Any) -> bool:
    """Whether ``error`` is a consumer's group-coordinator lookup refused by ACL (GROUP_AUTHORIZATION_FAILED).

    sparkafka's readers and the intent-log reader consume with ``assign`` only: they never join, fetch
    offsets for or commit to their group, but librdkafka looks its coordinator up all the same (a consumer
    needs a ``group.id``) and reports the refusal as an event, about once a second. Their reads go on.
    """
    return _code(error) == GROUP_AUTHORIZATION_FAILED


# ---- Connection failures: what librdkafka said (error_cb), as one sentence -----------------------------

_SUFFIX = re.compile(r"\s*\(after \d+ms in state [A-Z_]+(?:, \d+ identical error\(s\) suppressed)?\)\s*$")
_BROKER_PREFIX = re.compile(r"^\S+://\S+/(?:bootstrap|\d+): ")


def _said(error: Any) -> str:
    text = error.str() if callable(getattr(error, "str", None)) else str(error)
    return _BROKER_PREFIX.sub("", _SUFFIX.sub("", str(text)))


def _servers(conf: Mapping[str, Any]) -> str:
    return str(conf.get("bootstrap.servers", ""))


def contact_failure(conf: Mapping[str, Any], errors: Iterable[Any]) -> AuthenticationError | None:
    """The sentence for the first decisive refusal among a client's errors (``error_cb``), else None.

    Decisive: SASL refused the login or the mechanism (``_AUTHENTICATION``), our side of the TLS handshake
    failed (``_SSL``, worded by ``tls_verdict``), or the brokers ended the handshake with a TLS alert about
    our certificate. A refused connection or a timeout is not: the caller waits its bound for another try.
    """
    for error in errors:
        code, said = _code(error), _said(error)
        if code == _AUTHENTICATION:
            return AuthenticationError(_sasl_refusal(conf, said))
        if code == _SSL:
            return AuthenticationError(tls_verdict(conf) or _tls_failure(conf, said))
        if code == _TRANSPORT and "alert" in said and "certificate" in said:
            return AuthenticationError(_client_certificate_refused(conf, said))
    return None


def _sasl_refusal(conf: Mapping[str, Any], said: str) -> str:
    mechanism = _mechanism(conf)
    offered = re.search(r"supported mechanisms: ([\w,-]+)", said)
    if offered:
        return (
            f"the brokers at {_servers(conf)} do not enable SASL mechanism {mechanism} (option "
            f"kafka.sasl.mechanism): they offer {offered.group(1).replace(',', ', ')}"
        )
    who = conf.get("sasl.username", "(no kafka.sasl.username)")
    return (
        f"authentication failed for user {who} (SASL {mechanism}) against bootstrap servers "
        f"{_servers(conf)}: check kafka.sasl.username and kafka.sasl.password (the brokers said: {said})"
    )


def _tls_failure(conf: Mapping[str, Any], said: str) -> str:
    return (
        f"the TLS handshake with {_servers(conf)} failed: {said} (is it a TLS listener, for "
        f"kafka.security.protocol={_protocol(conf)}?)"
    )


def _client_certificate_refused(conf: Mapping[str, Any], said: str) -> str:
    where = conf.get("ssl.certificate.location")
    alert = said.rsplit(":", 2)[-2].strip() if said.count(":") >= 2 else said
    if not where:
        return (
            f"the brokers at {_servers(conf)} require a client certificate (mutual TLS) and none was sent "
            f"({alert}): set kafka.ssl.certificate.location and kafka.ssl.key.location, or connect to "
            "their SASL_SSL listener"
        )
    facts = _certificate(str(where))
    detail = ""
    if facts is not None:
        subject, not_before, not_after = facts
        now = dt.datetime.now(dt.UTC)
        if not_after is not None and not_after < now:
            detail = f": it expired on {not_after:%Y-%m-%d %H:%M} UTC"
        elif not_before is not None and not_before > now:
            detail = f": it is not valid before {not_before:%Y-%m-%d %H:%M} UTC"
        else:
            detail = f" ({subject}): is it signed by a CA the brokers trust?"
    return (
        f"the brokers at {_servers(conf)} refused the client certificate kafka.ssl.certificate.location="
        f"{where}{detail} (TLS alert: {alert})"
    )


def _certificate(path: str) -> tuple[str, dt.datetime | None, dt.datetime | None] | None:
    """(subject, not valid before, not valid after) of the first certificate in a PEM file, if readable.

    Needs the ``cryptography`` package (installed with sparkafka's registry and local extras); without
    it, or for a file it cannot read, None: the sentences then name the file only.
    """
    try:
        from cryptography import x509
    except ImportError:
        return None
    try:
        with open(path, "rb") as f:
            cert = x509.load_pem_x509_certificate(f.read())
    except (OSError, ValueError):
        return None
    return cert.subject.rfc4514_string(), cert.not_valid_before_utc, cert.not_valid_after_utc


# ---- What a TLS handshake says, when librdkafka only says "certificate verify failed" ---------------------


def _first_server(conf: Mapping[str, Any]) -> tuple[str, int] | None:
    first = _servers(conf).split(",")[0].strip()
    first = first.split("://", 1)[-1]
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def tls_verdict(conf: Mapping[str, Any], timeout_s: float = 3.0) -> str | None:
    """Why the first bootstrap server's certificate is refused (or that it speaks no TLS), or None.

    One handshake with Python's ``ssl``, verifying as librdkafka does: against ``kafka.ssl.ca.location``
    (else the system's CAs), and the host name unless ``kafka.ssl.endpoint.identification.algorithm`` is
    ``none``. Made only after librdkafka failed, to tell the causes apart. None when the handshake passes
    or the server cannot be reached.
    """
    server = _first_server(conf)
    if server is None:
        return None
    host, port = server
    context = ssl.create_default_context(cafile=conf.get("ssl.ca.location") or None)
    context.check_hostname = (
        str(conf.get("ssl.endpoint.identification.algorithm", "https")).lower() == "https"
    )
    try:
        with (
            socket.create_connection((host, port), timeout=timeout_s) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return None
    except ssl.SSLCertVerificationError as e:
        return _unverified(conf, host, port, str(e.verify_message or e))
    except ssl.SSLError as e:
        return (
            f"broker {host}:{port} does not speak TLS ({e.reason or e}): check kafka.security.protocol="
            f"{_protocol(conf)} against the listener on that port"
        )
    except OSError:
        return None


def _unverified(conf: Mapping[str, Any], host: str, port: int, reason: str) -> str:
    """The sentence for a broker certificate Python's ``ssl`` refused with ``reason``."""
    where = f"{host}:{port}"
    if "hostname mismatch" in reason.lower() or "ip address mismatch" in reason.lower():
        return (
            f"the TLS certificate of broker {where} is not valid for the name {host} (host name "
            "verification, kafka.ssl.endpoint.identification.algorithm=https): connect with a name "
            f"the certificate lists{_names(host, port)}"
        )
    if "expired" in reason.lower():
        return f"the TLS certificate of broker {where} has expired ({reason}): the brokers need a new one"
    ca = conf.get("ssl.ca.location")
    trusted = f"the CA file kafka.ssl.ca.location={ca}" if ca else "the system's CA certificates"
    return (
        f"the TLS certificate of broker {where} is not trusted: {reason}; it is not signed by a CA in "
        f"{trusted} (set kafka.ssl.ca.location to the CA that signed the brokers' certificates)"
    )


def _names(host: str, port: int) -> str:
    """`` (127.0.0.1)``: the names the server's certificate lists, when they can be read."""
    with contextlib.suppress(OSError, ssl.SSLError, ValueError, ImportError):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        with (
            socket.create_connection((host, port), timeout=3.0) as raw,
            context.wrap_socket(raw) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        from cryptography import x509

        names = x509.load_der_x509_certificate(der or b"").extensions.get_extension_for_class(
            x509.SubjectAlternativeName
        )
        listed = [str(n.value) for n in names.value]
        return f" ({', '.join(listed)})" if listed else ""
    return ""


def speaks_tls(conf: Mapping[str, Any], timeout_s: float = 3.0) -> bool:
    """Whether the first bootstrap server completes a TLS handshake (nothing verified).

    For a plaintext client that got no answer: a TLS listener closes the connection on a plaintext
    request without a word (measured: librdkafka logs only "Disconnected ... in state APIVERSION_QUERY").
    """
    server = _first_server(conf)
    if server is None:
        return False
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection(server, timeout=timeout_s) as raw, context.wrap_socket(raw):
            return True
    except ssl.SSLError as e:
        # A listener that asks for a client certificate may end the handshake with an alert: still TLS.
        return "alert" in str(e).lower()
    except OSError:
        return False
