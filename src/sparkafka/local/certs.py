"""A certificate authority and certificates for a local secured broker, made at start (nothing downloaded).

Runs in the process that starts ``SecureKafka`` (``sparkafka broker --secure``, the tests' fixture), with
the ``cryptography`` package. Keys are EC P-256: made in about a millisecond, and TLS handshakes with them
cost a fraction of RSA's. Every file is PEM, which all four TLS stacks involved read: Apache Kafka's
(``ssl.keystore.type=PEM``), librdkafka's (confluent-kafka and the native fetch), and Python's ``ssl``
(kafka-python). Private keys are written with mode 0600.

A server certificate names only ``IP:127.0.0.1`` (the brokers listen there and advertise that address), so
a client that connects to ``localhost`` fails the hostname check: one of the mistakes the tests make on
purpose. Client certificates carry the user name as their common name; the broker maps ``CN=<name>`` to
the principal ``User:<name>``, the same principal the user's SASL login gets, so one set of ACLs serves
both.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkafka.errors import BrokerError

__all__ = ["CRYPTOGRAPHY_EXTRA", "CRYPTOGRAPHY_HINT", "CertificateAuthority", "KeyPair"]

_DAY = dt.timedelta(days=1)

CRYPTOGRAPHY_EXTRA = "local"
"""The extra that installs ``cryptography`` (pyproject.toml; tests/unit/local/test_certs.py checks it)."""
CRYPTOGRAPHY_HINT = (
    "a secured broker makes its certificates with the cryptography package: "
    f"pip install 'sparkafka[{CRYPTOGRAPHY_EXTRA}]' (or pip install cryptography)"
)


def _crypto() -> Any:
    try:
        from cryptography import x509
    except ImportError:
        raise BrokerError(CRYPTOGRAPHY_HINT) from None
    return x509


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, as PEM files."""

    certificate: Path
    """The certificate (PEM)."""
    key: Path
    """The private key (PKCS#8 PEM; encrypted when made with a password)."""
    chain: Path
    """The private key, the certificate and the CA's certificate in one file: a PEM keystore for Kafka."""


class CertificateAuthority:
    """A CA made now, in ``folder``: ``ca.pem`` (the certificate clients trust) and its key.

    Args:
        folder: where every file goes (made if missing).
        name: the CA's common name.
    """

    def __init__(self, folder: Path, name: str = "sparkafka local CA") -> None:
        x509 = _crypto()
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        self.folder = folder
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY)
            .not_valid_after(now + 3650 * _DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.certificate = _write(folder / "ca.pem", self._pem(self._cert))

    @staticmethod
    def _pem(cert: Any) -> bytes:
        from cryptography.hazmat.primitives.serialization import Encoding

        return bytes(cert.public_bytes(Encoding.PEM))

    def issue(
        self,
        name: str,
        *,
        server: bool = False,
        password: str | None = None,
        expired: bool = False,
    ) -> KeyPair:
        """A certificate with common name ``name``, signed by this CA, as ``<name>.pem`` and ``<name>.key``.

        Args:
            name: the common name (a user name, or ``broker``).
            server: also valid as a TLS server for ``IP:127.0.0.1`` (the brokers' own certificate).
            password: encrypt the private key with it (``kafka.ssl.key.password``).
            expired: valid only in the past (for the tests of an expired certificate).
        """
        x509 = _crypto()
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        start, end = (now - 30 * _DAY, now - _DAY) if expired else (now - _DAY, now + 825 * _DAY)
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if server:
            san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.IPv4Address("127.0.0.1"))])
            builder = builder.add_extension(san, critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        encryption = (
            serialization.BestAvailableEncryption(password.encode())
            if password
            else serialization.NoEncryption()
        )
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        cert_pem = self._pem(cert)
        return KeyPair(
            certificate=_write(self.folder / f"{name}.pem", cert_pem),
            key=_write(self.folder / f"{name}.key", key_pem, private=True),
            chain=_write(
                self.folder / f"{name}-keystore.pem", key_pem + cert_pem + self._pem(self._cert), private=True
            ),
        )
