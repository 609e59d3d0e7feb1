"""Mistakes with a secured cluster, each one sentence at the first contact (not "no broker answered").

Against the session's secured broker (tests/support/secure.py): the first contact (``first_contact``, what
``load()``, a write, ``sparkafka run`` and the CLI tools run first) for each mistake; then one through
Spark, whose error's first line must carry the sentence, and one through a CLI tool. How fast each is
(wall clock) is no assertion here: the report of issue 39 has the figures.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sparkafka.client.contact import first_contact
from sparkafka.errors import AuthenticationError, ConfigError
from sparkafka.local.certs import CertificateAuthority
from sparkafka.local.secure_kafka import APP, SecureKafka

pytestmark = pytest.mark.xdist_group("secure-kafka")  # one secured broker for every secured test

Settings = dict[str, str]


def _other_ca(kafka: SecureKafka) -> CertificateAuthority:
    return CertificateAuthority(kafka.tls_dir / "other-ca", "a CA the brokers do not trust")


def _expired(kafka: SecureKafka, conf: Settings) -> Settings:
    assert kafka.ca is not None
    pair = kafka.ca.issue("expired-app", expired=True)
    return {**conf, "ssl.certificate.location": str(pair.certificate), "ssl.key.location": str(pair.key)} | {
        "ssl.key.password": ""
    }


def _stranger(kafka: SecureKafka, conf: Settings) -> Settings:
    pair = _other_ca(kafka).issue("stranger")
    return {**conf, "ssl.certificate.location": str(pair.certificate), "ssl.key.location": str(pair.key)} | {
        "ssl.key.password": ""
    }


def _without_certificate(conf: Settings) -> Settings:
    return {k: v for k, v in conf.items() if not k.startswith(("ssl.certificate", "ssl.key"))}


# (mistake, the settings made from app's SASL or mutual-TLS ones, what the sentence says)
MISTAKES: list[tuple[str, str, Callable[[SecureKafka, Settings], Settings], str]] = [
    (
        "wrong password",
        "sasl",
        lambda k, c: {**c, "sasl.password": "not-it"},
        "authentication failed for user app (SASL SCRAM-SHA-512) against bootstrap servers",
    ),
    (
        "wrong password with PLAIN",
        "sasl",
        lambda k, c: {**c, "sasl.mechanism": "PLAIN", "sasl.password": "not-it"},
        "authentication failed for user app (SASL PLAIN)",
    ),
    (
        "unknown user",
        "sasl",
        lambda k, c: {**c, "sasl.username": "nobody"},
        "authentication failed for user nobody (SASL SCRAM-SHA-512)",
    ),
    (
        "mechanism not enabled",
        "sasl",
        lambda k, c: {**c, "sasl.mechanism": "SCRAM-SHA-256"},
        "do not enable SASL mechanism SCRAM-SHA-256 (option kafka.sasl.mechanism): they offer SCRAM-SHA-512, "
        "PLAIN",
    ),
    (
        "untrusted CA",
        "sasl",
        lambda k, c: {**c, "ssl.ca.location": str(_other_ca(k).certificate)},
        "; it is not signed by a CA in the CA file kafka.ssl.ca.location=",
    ),
    (
        "host name not in the certificate",
        "sasl",
        lambda k, c: {**c, "bootstrap.servers": c["bootstrap.servers"].replace("127.0.0.1", "localhost")},
        "is not valid for the name localhost (host name verification, "
        "kafka.ssl.endpoint.identification.algorithm=https): connect with a name the certificate lists "
        "(127.0.0.1)",
    ),
    (
        "plaintext to a TLS port",
        "sasl",
        lambda k, c: {"bootstrap.servers": c["bootstrap.servers"]},
        "speaks TLS but kafka.security.protocol is PLAINTEXT: set it to SSL (mutual TLS) or SASL_SSL",
    ),
    (
        "SASL without TLS to a TLS port",
        "sasl",
        lambda k, c: {**c, "security.protocol": "SASL_PLAINTEXT"},
        "speaks TLS but kafka.security.protocol is SASL_PLAINTEXT",
    ),
    (
        "no client certificate at the mutual-TLS port",
        "mtls",
        lambda k, c: _without_certificate(c),
        "require a client certificate (mutual TLS) and none was sent",
    ),
    ("expired client certificate", "mtls", _expired, ": it expired on "),
    (
        "client certificate of another CA",
        "mtls",
        _stranger,
        "(CN=stranger): is it signed by a CA the brokers trust?",
    ),
]


@pytest.mark.parametrize(("login", "make", "says"), [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_each_mistake_is_one_sentence_at_the_first_contact(
    secure_kafka: SecureKafka,
    secure_conf: Callable[[str], Settings],
    login: str,
    make: Callable[[SecureKafka, Settings], Settings],
    says: str,
) -> None:
    conf = {k: v for k, v in make(secure_kafka, secure_conf(login)).items() if v != ""}
    with pytest.raises(AuthenticationError) as raised:
        first_contact(conf, {}, 30_000)
    sentence = str(raised.value)
    assert says in sentence
    assert "\n" not in sentence
    assert "no Kafka broker answered" not in sentence
    for secret in (secure_kafka.passwords[APP], "not-it"):
        assert secret not in sentence


def test_a_key_its_password_does_not_open_is_named(
    secure_kafka: SecureKafka, secure_conf: Callable[[str], Settings]
) -> None:
    conf = {**secure_conf("mtls"), "ssl.key.password": "not-it"}
    with pytest.raises(ConfigError, match=r"a wrong kafka\.ssl\.key\.password") as raised:
        first_contact(conf, {}, 30_000)
    assert "not-it" not in str(raised.value)


def test_spark_and_the_cli_say_it_first(
    spark: Any, secure_kafka: SecureKafka, secure_conf: Callable[[str], Settings], tmp_path: Path
) -> None:
    conf = {**secure_conf("sasl"), "sasl.password": "not-it"}
    reader = spark.read.format("sparkafka").options(**{f"kafka.{k}": v for k, v in conf.items()})
    with pytest.raises(Exception) as raised:  # noqa: PT011 - PySpark's AnalysisException, checked below
        reader.option("subscribe", "s-anything").load()
    first = str(raised.value).splitlines()[0]
    assert "sparkafka.errors.AuthenticationError: authentication failed for user app" in first
    assert "Traceback" not in str(raised.value)
    assert "not-it" not in str(raised.value)

    settings = tmp_path / "client.properties"
    settings.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    done = subprocess.run(
        [sys.executable, "-m", "sparkafka.cli", "topics", "list", "--command-config", str(settings)],
        env=os.environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("sparkafka topics: authentication failed for user app (SASL SCRAM-SHA-512)")
    assert "not-it" not in done.stderr
