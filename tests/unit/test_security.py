"""How refusals are worded (``client.security``), from librdkafka's words as measured on Apache Kafka 4.4.

The end-to-end side (a real secured broker) is tests/integration/test_secure_mistakes.py and
test_secure_acls.py; here, the wording of each answer, with no broker.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException

from sparkafka.cli.connection import load_command_config
from sparkafka.client.contact import first_answer
from sparkafka.client.security import (
    Access,
    authenticated,
    contact_failure,
    denied,
    denied_all,
    denied_by,
    is_group_denial,
    principal,
)
from sparkafka.errors import AuthenticationError, AuthorizationError, ConfigError

SASL = {
    "bootstrap.servers": "127.0.0.1:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "etl",
    "sasl.password": "canary-password",
}

# What librdkafka's error callback said (measured, tests/integration/test_secure_mistakes.py).
WRONG_PASSWORD = (
    "sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: Authentication failed during "
    "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 311ms in state "
    "AUTH_REQ)"
)
NO_MECHANISM = (
    "sasl_ssl://127.0.0.1:9093/bootstrap: SASL SCRAM-SHA-256 mechanism handshake failed: Broker: Unsupported "
    "SASL mechanism: broker's supported mechanisms: SCRAM-SHA-512,PLAIN (after 301ms in state AUTH_HANDSHAKE)"
)
NO_CERTIFICATE = (
    "ssl://127.0.0.1:9094/bootstrap: Receive failed: error:0A000412:SSL routines::ssl/tls alert bad "
    "certificate: SSL alert number 42 (after 4ms in state APIVERSION_QUERY)"
)


def _error(code: int, text: str) -> KafkaError:
    return KafkaError(code, text)


def test_a_refused_login_names_the_user_and_mechanism_never_the_password() -> None:
    failure = contact_failure(SASL, [_error(KafkaError._AUTHENTICATION, WRONG_PASSWORD)])
    assert isinstance(failure, AuthenticationError)
    assert str(failure) == (
        "authentication failed for user etl (SASL SCRAM-SHA-512) against bootstrap servers 127.0.0.1:9093: "
        "check kafka.sasl.username and kafka.sasl.password (the brokers said: SASL authentication error: "
        "Authentication failed during authentication due to invalid credentials with SASL mechanism "
        "SCRAM-SHA-512)"
    )


def test_a_mechanism_the_brokers_do_not_enable_lists_the_ones_they_do() -> None:
    conf = {**SASL, "sasl.mechanism": "SCRAM-SHA-256"}
    failure = contact_failure(conf, [_error(KafkaError._AUTHENTICATION, NO_MECHANISM)])
    assert str(failure) == (
        "the brokers at 127.0.0.1:9093 do not enable SASL mechanism SCRAM-SHA-256 (option "
        "kafka.sasl.mechanism): they offer SCRAM-SHA-512, PLAIN"
    )


def test_a_missing_client_certificate_says_mutual_tls() -> None:
    conf = {"bootstrap.servers": "127.0.0.1:9094", "security.protocol": "SSL"}
    failure = contact_failure(conf, [_error(KafkaError._TRANSPORT, NO_CERTIFICATE)])
    assert str(failure).startswith(
        "the brokers at 127.0.0.1:9094 require a client certificate (mutual TLS) and none was sent"
    )


def test_a_refused_connection_or_a_timeout_decides_nothing() -> None:
    refused = "sasl_ssl://127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused"
    down = _error(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down")
    errors = [_error(KafkaError._TRANSPORT, refused), down]
    assert contact_failure(SASL, errors) is None


def test_first_answer_stops_at_the_first_decisive_error() -> None:
    class Admin:
        def __init__(self, settings: dict[str, object]) -> None:
            self.error_cb = settings["error_cb"]
            self.asked = 0

        def list_topics(self, timeout: float) -> None:
            self.asked += 1
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata"))

        def poll(self, _timeout: float) -> int:
            if self.asked == 2:  # the refusal arrives during the second ask
                assert callable(self.error_cb)
                self.error_cb(_error(KafkaError._AUTHENTICATION, WRONG_PASSWORD))
            return 0

    made: list[Admin] = []
    now = [0.0]
    with pytest.raises(AuthenticationError, match=r"^authentication failed for user etl"):
        first_answer(
            SASL,
            5.0,
            make_admin=lambda s: made.append(Admin(dict(s))) or made[-1],
            clock=lambda: now[0],
            sleep=lambda s: now.__setitem__(0, now[0] + s),
            probe_tls=lambda _conf: False,
        )
    assert made[0].asked == 2
    assert now[0] == pytest.approx(0.25)  # one slice waited out, not five seconds


def test_a_plaintext_client_at_a_tls_port_is_told_after_a_second_not_at_the_bound() -> None:
    """The brokers close a plaintext connection to a TLS port without a word: after TLS_PROBE_AFTER_S of
    silence the port is asked once whether it speaks TLS (measured: 5.0 s, the whole bound, before the probe
    counted from the first ask rather than from each slice)."""
    from sparkafka.client.contact import TLS_PROBE_AFTER_S

    class Silent:
        def list_topics(self, timeout: float) -> None:
            now[0] += timeout  # nothing answers within the slice
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata"))

        def poll(self, _timeout: float) -> int:
            return 0

    now = [0.0]
    probes: list[float] = []

    def probe(_conf: object) -> bool:
        probes.append(now[0])
        return True

    with pytest.raises(AuthenticationError, match=r"speaks TLS but kafka.security.protocol is PLAINTEXT"):
        first_answer(
            {"bootstrap.servers": "127.0.0.1:9093"},
            5.0,
            make_admin=lambda _s: Silent(),
            clock=lambda: now[0],
            sleep=lambda s: now.__setitem__(0, now[0] + s),
            probe_tls=probe,
        )
    assert probes == [TLS_PROBE_AFTER_S]  # once, after a second of silence, far within the 5 s bound


def test_denied_names_user_operation_resource_and_the_grant() -> None:
    access = Access("WRITE", "transactional id", "orders-eos", prefixed=True)
    error = denied(SASL, access, "opening txn orders-eos-0")
    assert str(error) == (
        "user etl may not WRITE transactional id orders-eos* (opening txn orders-eos-0): grant it with "
        "sparkafka acls grant --principal User:etl --operation write --transactional-id orders-eos "
        "--prefixed --bootstrap-servers 127.0.0.1:9093 --command-config ADMIN_CONFIG (ADMIN_CONFIG: a file "
        "of an administrator's settings), or with Kafka's kafka-acls.sh --add --allow-principal User:etl "
        "--operation Write --transactional-id orders-eos --resource-pattern-type prefixed"
    )
    assert (error.principal, error.operation, error.resource) == (
        "user etl",
        "WRITE",
        "transactional id orders-eos*",
    )


def test_denied_all_names_each_missing_grant_in_one_sentence() -> None:
    topic = Access("WRITE", "topic", "out")
    ids = Access("WRITE", "transactional id", "eos", prefixed=True)
    assert str(denied_all(SASL, [topic])) == str(denied(SASL, topic))
    error = denied_all(SASL, [topic, ids])
    assert str(error) == (
        "user etl may not WRITE topic out nor WRITE transactional id eos*: grant them with "
        "sparkafka acls grant --principal User:etl --operation write --topic out --bootstrap-servers "
        "127.0.0.1:9093 --command-config ADMIN_CONFIG; sparkafka acls grant --principal User:etl --operation "
        "write --transactional-id eos --prefixed --bootstrap-servers 127.0.0.1:9093 --command-config "
        "ADMIN_CONFIG (ADMIN_CONFIG: a file of an administrator's settings), or with Kafka's kafka-acls.sh "
        "--add --allow-principal User:etl --operation Write --topic out; kafka-acls.sh --add "
        "--allow-principal User:etl --operation Write --transactional-id eos --resource-pattern-type prefixed"
    )
    assert (error.operation, error.resource) == ("WRITE", "topic out")
    three = denied_all(SASL, [topic, ids, Access("READ", "group", "g")])
    assert "may not WRITE topic out, WRITE transactional id eos* nor READ group g: grant them" in str(three)


def test_denied_by_only_for_authorization_codes() -> None:
    access = Access("READ", "topic", "orders")
    refusal = denied_by(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)), SASL, access)
    assert isinstance(refusal, AuthorizationError)
    assert str(refusal).startswith("user etl may not READ topic orders: grant it with ")
    assert denied_by(KafkaError(KafkaError.LEADER_NOT_AVAILABLE), SASL, access) is None
    other = denied_by(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED), SASL, access)
    assert other is not None
    assert "group authorization failed" in str(other)
    assert "grant the group permission it needs with sparkafka acls grant, or Kafka's kafka-acls.sh" in (
        str(other)
    )


def test_the_principal_of_each_login() -> None:
    assert principal(SASL) == ("user etl", "User:etl")
    assert principal({"bootstrap.servers": "b:1"}) == ("user ANONYMOUS", "User:ANONYMOUS")
    tls = {"security.protocol": "SSL", "ssl.certificate.location": "/no/such.pem"}
    assert principal(tls) == ("the user of client certificate /no/such.pem", "User:<its subject>")
    assert authenticated(SASL)
    assert authenticated(tls)
    assert not authenticated({"bootstrap.servers": "b:1"})


def test_a_refused_group_lookup_is_told_apart() -> None:
    assert is_group_denial(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))
    assert not is_group_denial(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))


def test_command_config_as_properties_or_json_with_the_password_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKA_PASSWORD", "from-env")
    props = tmp_path / "client.properties"
    props.write_text("# comment\nkafka.bootstrap.servers=b:9093\nsasl.password=${KAFKA_PASSWORD}\n")
    assert load_command_config(str(props)) == {"bootstrap.servers": "b:9093", "sasl.password": "from-env"}
    several = tmp_path / "client.json"
    users = {"admin": {"kafka.sasl.username": "admin"}, "app": {"kafka.sasl.username": "app"}}
    several.write_text(json.dumps(users))
    assert load_command_config(f"{several}#app") == {"sasl.username": "app"}
    with pytest.raises(ConfigError, match=r"no object 'nobody' in .* \(it has: admin, app\)"):
        load_command_config(f"{several}#nobody")
    with pytest.raises(ConfigError, match=r"expected an object of settings; .*#NAME"):
        load_command_config(str(several))
    monkeypatch.delenv("KAFKA_PASSWORD")
    with pytest.raises(ConfigError, match=r"uses \$\{KAFKA_PASSWORD\} but that environment variable is not"):
        load_command_config(str(props))
