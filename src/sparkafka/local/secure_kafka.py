"""Apache Kafka secured as production clusters are: TLS, SASL (SCRAM-SHA-512, PLAIN), mutual TLS and ACLs.

For ``sparkafka broker --secure`` and the tests' secured fixture. Each node has three listeners, all TLS:

- ``SASL_SSL`` (``bootstrap_servers``): SCRAM-SHA-512 or PLAIN logins;
- ``SSL`` (``tls_bootstrap_servers``): clients prove who they are with a certificate the CA signed
  (``ssl.client.auth=required``); the brokers talk to each other there too, as ``User:broker``;
- ``CONTROLLER``: TLS with client certificates, for the KRaft quorum.

No plaintext port. The CA and every certificate are made at start (``local.certs``); SCRAM credentials are
written at format time (``kafka-storage format --add-scram``) as salted hashes, so no password is ever on
a command line; PLAIN's users are in the broker's JAAS setting, in its properties file (mode 0600).
Authorization is Kafka's ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``: the super
user (``admin``) may do anything, an application user (``app``) nothing until ACLs grant it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sparkafka.errors import BrokerError
from sparkafka.local.broker import free_port
from sparkafka.local.certs import CertificateAuthority, KeyPair
from sparkafka.local.kafka_broker import _LOG4J, ApacheKafka, _Node

__all__ = ["ADMIN", "APP", "SecureKafka"]

ADMIN = "admin"
"""The super user: every right (``super.users``)."""
APP = "app"
"""The application user: no ACLs at start."""
BROKER = "broker"
"""The brokers' own principal (their certificate's common name), a super user."""

Acl = tuple[str, str, str]
"""``(operation, resource type, name)``: ``("READ", "topic", "orders")``; a name ending in ``*`` is a
prefix (``("WRITE", "transactional_id", "orders-eos-*")``), ``*`` alone every resource of the type."""

SCRAM_ITERATIONS = 4096
"""PBKDF2 iterations of the SCRAM credentials (Kafka's minimum for SCRAM-SHA-512)."""

_PRINCIPAL_RULES = "RULE:^CN=([^,]+).*$/$1/,DEFAULT"
"""A client certificate's ``CN=<name>`` is the principal ``User:<name>``, as its SASL login would be."""


def scram_credential(user: str, password: str, iterations: int = SCRAM_ITERATIONS) -> str:
    """``kafka-storage format --add-scram``'s salted form of a SCRAM-SHA-512 credential (RFC 5802's Hi)."""
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)
    b64 = base64.b64encode
    return (
        f'SCRAM-SHA-512=[name={user},iterations={iterations},salt="{b64(salt).decode()}",'
        f'saltedpassword="{b64(salted).decode()}"]'
    )


class SecureKafka(ApacheKafka):
    """Apache Kafka on 127.0.0.1 with TLS, SASL, mutual TLS and ACLs (see the module docstring).

    Args:
        brokers, data_dir, heap, config, start_timeout_s, port: as ``ApacheKafka``'s.
        passwords: a password per user (``admin``, ``app``, or more users); random ones when not given.
    """

    LOG4J = _LOG4J + "logger.authorizer.name = kafka.authorizer.logger\nlogger.authorizer.level = INFO\n"
    """Also every request the authorizer denies, with the principal, operation and resource."""

    def __init__(
        self,
        brokers: int = 1,
        *,
        passwords: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(brokers, **kwargs)
        self.passwords = {
            ADMIN: secrets.token_urlsafe(18),
            APP: secrets.token_urlsafe(18),
            **(passwords or {}),
        }
        self.tls_dir = self.data_dir / "tls"
        self.ca: CertificateAuthority | None = None
        self.certificates: dict[str, KeyPair] = {}
        self._tls_ports: dict[int, int] = {}

    @property
    def ca_location(self) -> str:
        """The CA certificate clients trust (``kafka.ssl.ca.location``)."""
        return str(self.tls_dir / "ca.pem")

    @property
    def tls_bootstrap_servers(self) -> str:
        """The mutual-TLS listeners' addresses (``security.protocol=SSL`` with a client certificate)."""
        if not self._tls_ports:
            raise BrokerError("Apache Kafka is not running: call start() first")
        return ",".join(f"127.0.0.1:{port}" for port in self._tls_ports.values())

    def _prepare(self) -> None:
        self.ca = CertificateAuthority(self.tls_dir)
        self.certificates[BROKER] = self.ca.issue(BROKER, server=True)
        for user, password in self.passwords.items():
            self.certificates[user] = self.ca.issue(user, password=password)
        self._tls_ports = {n.node_id: free_port() for n in self._nodes}

    def _listeners(self, node: _Node) -> dict[str, str]:
        tls = self._tls_ports[node.node_id]
        plain_users = " ".join(f'user_{u}="{p}"' for u, p in self.passwords.items())
        return {
            "listeners": f"SASL_SSL://127.0.0.1:{node.port},SSL://127.0.0.1:{tls},"
            f"CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"SASL_SSL://127.0.0.1:{node.port},SSL://127.0.0.1:{tls}",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:SSL",
            "inter.broker.listener.name": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.certificates[BROKER].chain),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.ca_location,
            "listener.name.ssl.ssl.client.auth": "required",
            "listener.name.controller.ssl.client.auth": "required",
            "ssl.principal.mapping.rules": _PRINCIPAL_RULES,
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "listener.name.sasl_ssl.plain.sasl.jaas.config": (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"
            ),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:{BROKER};User:{ADMIN}",
        }

    def _format_args(self) -> list[str]:
        args = []
        for user, password in self.passwords.items():
            args += ["--add-scram", scram_credential(user, password)]
        return args

    def admin_settings(self) -> dict[str, str]:
        """The super user's settings (SASL_SSL, SCRAM-SHA-512)."""
        return self.sasl_settings(ADMIN)

    def sasl_settings(self, user: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
        """Librdkafka settings for ``user`` over SASL_SSL with ``mechanism`` (SCRAM-SHA-512 or PLAIN)."""
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": self.passwords[user],
            "ssl.ca.location": self.ca_location,
        }

    def tls_settings(self, user: str) -> dict[str, str]:
        """Librdkafka settings for ``user`` over mutual TLS: its certificate and (encrypted) key."""
        pair = self.certificates[user]
        return {
            "bootstrap.servers": self.tls_bootstrap_servers,
            "security.protocol": "SSL",
            "ssl.ca.location": self.ca_location,
            "ssl.certificate.location": str(pair.certificate),
            "ssl.key.location": str(pair.key),
            "ssl.key.password": self.passwords[user],
        }

    def add_user(self, user: str, password: str | None = None) -> str:
        """A SCRAM-SHA-512 user and a client certificate made now (no ACLs); returns its password.

        The user cannot log in with PLAIN (its users are fixed at start, in the broker's JAAS setting).
        """
        from confluent_kafka.admin import (
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        from sparkafka.client.core import admin_client

        password = password or secrets.token_urlsafe(18)
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
        upsert = UserScramCredentialUpsertion(user, info, password.encode())
        for future in admin_client(self.admin_settings()).alter_user_scram_credentials([upsert]).values():
            future.result(30)
        assert self.ca is not None
        self.passwords[user] = password
        self.certificates[user] = self.ca.issue(user, password=password)
        return password

    def grant(self, user: str, acls: Iterable[Acl]) -> None:
        """Add ALLOW ``acls`` for ``user`` (any host) as the super user; returns once the broker took them."""
        self._acls("create", user, acls)

    def revoke(self, user: str, acls: Iterable[Acl]) -> None:
        """Delete ``user``'s ALLOW ``acls``; returns once the broker deleted them."""
        self._acls("delete", user, acls)

    def _acls(self, action: str, user: str, acls: Iterable[Acl]) -> None:
        from confluent_kafka.admin import (
            AclBinding,
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        from sparkafka.client.core import admin_client

        admin = admin_client(self.admin_settings())
        bindings = []
        for operation, kind, name in acls:
            pattern = ResourcePatternType.PREFIXED if name.endswith("*") else ResourcePatternType.LITERAL
            make = AclBinding if action == "create" else AclBindingFilter
            bindings.append(
                make(
                    ResourceType[kind.upper().replace(" ", "_")],
                    name.removesuffix("*") if name != "*" else name,
                    pattern if name != "*" else ResourcePatternType.LITERAL,
                    f"User:{user}",
                    "*",
                    AclOperation[operation.upper()],
                    AclPermissionType.ALLOW,
                )
            )
        call = admin.create_acls if action == "create" else admin.delete_acls
        for future in call(bindings, request_timeout=30).values():
            future.result(30)

    def client_config(self) -> dict[str, dict[str, str]]:
        """``{"admin": ..., "app": ..., "app_tls": ...}``: ``kafka.*`` options, passwords included."""
        groups = {
            "admin": self.sasl_settings(ADMIN),
            "app": self.sasl_settings(APP),
            "app_tls": self.tls_settings(APP),
        }
        return {name: {f"kafka.{k}": v for k, v in conf.items()} for name, conf in groups.items()}

    def write_client_config(self, path: str | os.PathLike[str]) -> Path:
        """``client_config()`` as JSON in ``path``, made with mode 0600 (it holds passwords)."""
        path = Path(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # a file that existed keeps its mode through O_CREAT
        with os.fdopen(fd, "w") as f:
            json.dump(self.client_config(), f, indent=2)
            f.write("\n")
        return path


def describe_settings(kafka: SecureKafka, client_config: Path) -> str:
    """What ``sparkafka broker --secure`` prints: each login's ``kafka.*`` settings, passwords left out."""
    hidden = f"<in {client_config}>"
    lines = [
        "Secured: TLS on every listener (no plaintext port); ACLs on (StandardAuthorizer, no ACL means "
        f"deny). Users: {ADMIN} (super user), {APP} (no ACLs: grant them with `sparkafka acls grant "
        f"--command-config {client_config}#{ADMIN} --principal User:{APP} ...`, docs/security.md). "
        f"Passwords are not shown: {client_config} has every login's settings with them (JSON, mode 0600: "
        f".options(**json.load(f)['{APP}']), or --command-config {client_config}#{ADMIN} for the CLI tools).",
    ]
    shown = [
        (f"SASL_SSL as {APP} (SCRAM-SHA-512; PLAIN is enabled too)", kafka.sasl_settings(APP)),
        (f"mutual TLS as {APP} (the certificate's CN is the user)", kafka.tls_settings(APP)),
    ]
    for title, conf in shown:
        lines.append(f"{title}:")
        lines += [f"  kafka.{k}={hidden if 'password' in k else v}" for k, v in conf.items()]
    admin = kafka.certificates[ADMIN]
    lines.append(
        f"The super user: the same with kafka.sasl.username={ADMIN}, or certificate {admin.certificate} and "
        f"key {admin.key}. Requests the authorizer denies are logged in {kafka.log_path}."
    )
    return "\n".join(lines)
