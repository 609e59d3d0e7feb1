"""The secured broker's fixtures: Apache Kafka with TLS, SASL/SCRAM, mutual TLS and ACLs, started once a run.

Registered by tests/support/plugin.py. The tests that need it (tests/integration/test_secure_*.py) share one
``SecureKafka``; the plaintext broker of the other tests is another process. Users:

- ``admin`` (super user): makes topics, writes test records, reads the committed view;
- ``app``: the application, over SASL_SSL/SCRAM-SHA-512 (``secure_conf("sasl")``) or mutual TLS
  (``secure_conf("mtls")``), with ACLs on the names secured tests use: topics, groups and transactional ids
  starting ``s-``, and the commit-intent logs of those prefixes (``APP_ACLS``);
- users a test makes for itself (``SecureKafka.add_user``) start with no ACLs at all.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import pytest

from sparkafka.client.core import close_all
from sparkafka.local.secure_kafka import APP, SecureKafka
from sparkafka.structs import INTERNAL_TOPIC_PREFIX
from tests.support.kafka import Kafka

__all__ = ["APP_ACLS", "PREFIX", "secure_conf", "secure_kafka", "secured"]

PREFIX = "s-"
"""What every name a secured test makes starts with (topics, groups, transactional-id prefixes)."""

APP_ACLS = [
    ("READ", "topic", f"{PREFIX}*"),
    ("WRITE", "topic", f"{PREFIX}*"),
    ("READ", "group", f"{PREFIX}*"),
    ("WRITE", "transactional_id", f"{PREFIX}*"),
    ("READ", "topic", f"{INTERNAL_TOPIC_PREFIX}intents-{PREFIX}*"),
    ("WRITE", "topic", f"{INTERNAL_TOPIC_PREFIX}intents-{PREFIX}*"),
    ("CREATE", "topic", f"{INTERNAL_TOPIC_PREFIX}intents-{PREFIX}*"),
]
"""What ``app`` may do: docs/security.md's least privilege, on prefixes."""


@pytest.fixture(scope="session")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    """Apache Kafka with TLS only, SASL and ACLs (``sparkafka broker --secure``), for this test run."""
    kafka = SecureKafka(data_dir=tmp_path_factory.mktemp("secure-kafka"), config={"log.retention.ms": "-1"})
    with kafka:
        kafka.grant(APP, APP_ACLS)
        yield kafka
        close_all()
        gc.collect()


@pytest.fixture(scope="session")
def secure_conf(secure_kafka: SecureKafka) -> Callable[[str], dict[str, str]]:
    """``secure_conf("sasl")`` or ``secure_conf("mtls")``: ``app``'s librdkafka settings for that login."""

    def conf(login: str) -> dict[str, str]:
        if login == "sasl":
            return secure_kafka.sasl_settings(APP)
        if login == "mtls":
            return secure_kafka.tls_settings(APP)
        raise ValueError(f"login must be sasl or mtls, not {login!r}")

    return conf


@pytest.fixture
def secured(secure_kafka: SecureKafka) -> Kafka:
    """The secured broker as the super user sees it: ``secured.topic(prefix=PREFIX)``, ``.produce``, ..."""
    return Kafka(secure_kafka.admin_settings())
