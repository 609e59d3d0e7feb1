"""The fetch-wait decision table of ``broker_gaps``: short, raised tenfold on a stall, kept if set."""

from __future__ import annotations

import pytest

from sparkafka import broker_gaps


@pytest.fixture(autouse=True)
def _fresh_levels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker_gaps, "_wait_level", {})


def test_starts_short_and_grows_tenfold_per_stall_up_to_one_second() -> None:
    conf = {"bootstrap.servers": "b:9092"}
    seen = [broker_gaps.fetch_wait_ms(conf)]
    while broker_gaps.note_stalled_fetch(conf):
        seen.append(broker_gaps.fetch_wait_ms(conf))
    assert seen == ["10", "100", "1000"]
    assert not broker_gaps.note_stalled_fetch(conf)  # at the top it stays
    assert broker_gaps.fetch_wait_ms(conf) == "1000"


def test_a_stall_on_one_broker_leaves_others_short() -> None:
    assert broker_gaps.note_stalled_fetch({"bootstrap.servers": "slow:9092"})
    assert broker_gaps.fetch_wait_ms({"bootstrap.servers": "slow:9092"}) == "100"
    assert broker_gaps.fetch_wait_ms({"bootstrap.servers": "other:9092"}) == "10"


def test_a_wait_the_user_set_is_kept_and_never_raised() -> None:
    conf = {"bootstrap.servers": "b:9092", "fetch.wait.max.ms": "250"}
    assert broker_gaps.fetch_wait_ms(conf) == "250"
    assert not broker_gaps.note_stalled_fetch(conf)
    assert broker_gaps.fetch_wait_ms(conf) == "250"
