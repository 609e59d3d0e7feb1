"""``sparkafka doctor``'s create_partitions probe judges the answer, not the metadata's first look."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from sparkafka.ops import probes


class _Admin:
    """Grows the topic; its metadata shows the new partition only from the ``lag``-th look on."""

    def __init__(self, lag: int, refuse: str | None = None) -> None:
        self.lag, self.looks, self.refuse = lag, 0, refuse

    def create_partitions(self, new: list[Any], request_timeout: float) -> dict[str, Future[None]]:
        done: Future[None] = Future()
        if self.refuse:
            done.set_exception(Exception(self.refuse))
        else:
            done.set_result(None)
        return {new[0].topic: done}

    def list_topics(self, topic: str, timeout: float) -> Any:
        self.looks += 1
        count = 2 if self.looks >= self.lag else 1
        partition = type("P", (), {"leader": 1})()
        meta = type("T", (), {"partitions": dict.fromkeys(range(count), partition), "error": None})()
        return type("M", (), {"topics": {topic: meta}})()


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> Any:
    def use(fake: _Admin) -> _Admin:
        monkeypatch.setattr(probes, "_admin", lambda conf: fake)
        monkeypatch.setattr(probes, "_new_topic", lambda conf: "sparkafka-probe-x")
        monkeypatch.setattr(probes, "_delete_topic", lambda conf, topic: None)
        return fake

    return use


def test_metadata_that_lags_the_answer_is_waited_for(admin: Any) -> None:
    fake = admin(_Admin(lag=3))
    found = probes.probe_create_partitions({"bootstrap.servers": "b:1"})
    assert found.ok, found.detail
    assert fake.looks == 3
    assert found.detail == "topic has 2 partitions after growing to 2"


def test_a_retry_that_finds_the_topic_grown_counts_as_grown(admin: Any) -> None:
    admin(_Admin(lag=1, refuse="KafkaError{code=INVALID_PARTITIONS,str=Topic already has 2 partitions.}"))
    assert probes.probe_create_partitions({"bootstrap.servers": "b:1"}).ok


def test_a_refusal_is_the_finding(admin: Any) -> None:
    admin(_Admin(lag=1, refuse="KafkaError{code=POLICY_VIOLATION,str=no}"))
    found = probes.probe_create_partitions({"bootstrap.servers": "b:1"})
    assert not found.ok
    assert "POLICY_VIOLATION" in found.detail
