"""The sink creates no topic (finding 2 of the refusal review): none of its producers asks the broker to
create one, ``kafka.allow.auto.create.topics=true`` is refused, and a topic a ``topic`` column names is
called missing only once the broker has kept saying so for librdkafka's ``topic.metadata.propagation.max.ms``
(a topic just created reaches each broker's metadata a moment later).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError
from hypothesis import given
from hypothesis import strategies as st

from sparkafka.client import core
from sparkafka.errors import BrokerError, ConfigError, TransactionError, is_permanent
from sparkafka.sink import identity, intents
from sparkafka.sink.delivery import Deliveries, producer_settings
from sparkafka.sink.intents import IntentLog, IntentRecord
from sparkafka.sink.options import parse_sink_options
from sparkafka.sink.task import _Counts, _plain_producer

CONF = {"bootstrap.servers": "b:9092"}

# -- no producer of the sink asks the broker to create a topic ---------------------------------------------


class Recorder:
    """confluent-kafka's Producer, remembering the settings each was made with."""

    made: list[dict[str, Any]] = []  # noqa: RUF012 - reset by the fixture

    def __init__(self, conf: dict[str, Any]) -> None:
        self.made.append(dict(conf))

    def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        return SimpleNamespace(
            topics={"_sparkafka-intents-p": SimpleNamespace(error=None, partitions={0: 0})}
        )

    def produce(self, *args: Any, on_delivery: Any = None, **kwargs: Any) -> None:
        if on_delivery is not None:  # what the intent log's write needs: an acknowledged offset
            on_delivery(None, SimpleNamespace(offset=lambda: 0))

    def flush(self, *args: Any) -> int:
        return 0

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    import confluent_kafka

    monkeypatch.setattr(Recorder, "made", [])
    monkeypatch.setattr(confluent_kafka, "Producer", Recorder)
    monkeypatch.setattr(core, "_cache", {})
    monkeypatch.setattr(core, "_closers", {})
    monkeypatch.setattr(intents, "_ensured", {("b:9092", "_sparkafka-intents-p")})  # no admin client
    return Recorder.made


def test_every_producer_the_sink_makes_asks_to_create_no_topic(made: list[dict[str, Any]]) -> None:
    """The plain producers, a task's transactional producer, the driver's fencer and the intent log's
    producer: with librdkafka's default (true) a metadata request for a missing topic makes a broker with
    ``auto.create.topics.enable=true`` create it, with the broker's defaults."""
    _plain_producer(CONF, "at_least_once")
    _plain_producer(CONF, "none")
    with pytest.raises(TransactionError):  # the recorder logs no producer id; the build is what counts
        identity.open_transactional_producer(producer_settings(CONF, Deliveries(CONF), "p-0", True), "p-0")
    with pytest.raises(TransactionError):  # the driver's fencer (commit_parts.ProducerFencer)
        identity.open_transactional_producer(CONF, "p-1")
    IntentLog(CONF, "p").append(IntentRecord("q", 0, "done", (), 1))
    assert len(made) == 5
    assert [conf.get("allow.auto.create.topics") for conf in made] == ["false"] * 5


@pytest.mark.parametrize("value", ["true", "TRUE", "t", "1"])
def test_a_sink_asked_to_create_topics_is_refused(value: str) -> None:
    with pytest.raises(
        ConfigError, match=rf"option kafka\.allow\.auto\.create\.topics={value} is not allowed"
    ) as e:
        parse_sink_options({"kafka.bootstrap.servers": "b:9092", "kafka.allow.auto.create.topics": value})
    assert "sparkafka topics create" in str(e.value)


@pytest.mark.parametrize("value", ["false", "f", "0"])
def test_a_sink_told_to_create_no_topic_runs(value: str) -> None:
    options = parse_sink_options(
        {"kafka.bootstrap.servers": "b:9092", "kafka.allow.auto.create.topics": value}
    )
    assert options.kafka["allow.auto.create.topics"] == value


# -- a topic the broker does not know yet --------------------------------------------------------------------

UNKNOWN = "unknown"
FOUND = "found"
NOT_READY = "not-ready"


class Clock:
    """Monotonic seconds that move only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.slept.append(seconds)
        self.now += seconds


class Answers:
    """A producer whose metadata answers for the topic are ``answers`` in turn (the last one repeats)."""

    def __init__(self, answers: list[str], clock: Clock) -> None:
        self.answers, self.clock = answers, clock
        self.asked_at: list[float] = []

    def list_topics(self, topic: str, timeout: float) -> Any:
        self.asked_at.append(self.clock())
        answer = self.answers[min(len(self.asked_at), len(self.answers)) - 1]
        if answer == UNKNOWN:
            meta = SimpleNamespace(error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), partitions={})
        elif answer == NOT_READY:
            meta = SimpleNamespace(error=KafkaError(KafkaError.LEADER_NOT_AVAILABLE), partitions={})
        else:
            meta = SimpleNamespace(error=None, partitions=dict.fromkeys(range(3)))
        return SimpleNamespace(topics={topic: meta})


def counts(answers: list[str], conf: dict[str, str] | None = None) -> tuple[_Counts, Answers, Clock]:
    clock = Clock()
    producer = Answers(answers, clock)
    return _Counts(producer, conf or CONF, 5.0, clock=clock, sleep=clock.sleep), producer, clock


def test_a_topic_found_on_a_later_answer_is_written_to() -> None:
    """The reviewer's case: the first answer says unknown, the next finds the topic (a broker that learns
    of a new topic a moment after another, or that creates it while answering)."""
    count, producer, _clock = counts([UNKNOWN, FOUND])
    assert count("new-topic") == 3
    assert len(producer.asked_at) == 2
    assert count("new-topic") == 3  # looked up once per task
    assert len(producer.asked_at) == 2


def test_a_topic_still_unknown_after_the_propagation_time_is_missing_for_good() -> None:
    count, producer, clock = counts([UNKNOWN])
    with pytest.raises(
        BrokerError, match=r"topic 'gone' does not exist \(the sink does not create topics\)"
    ) as e:
        count("gone")
    assert is_permanent(e.value)
    assert producer.asked_at[-1] == pytest.approx(30.0)  # librdkafka's default, 30000 ms
    assert clock.slept == sorted(clock.slept[:-1]) + clock.slept[-1:]  # backing off, the last one cut short
    assert max(clock.slept) <= 1.0


def test_the_propagation_time_is_the_producers_setting() -> None:
    count, producer, _clock = counts([UNKNOWN], {**CONF, "topic.metadata.propagation.max.ms": "2500"})
    with pytest.raises(BrokerError, match="does not exist"):
        count("gone")
    assert producer.asked_at[-1] == pytest.approx(2.5)


def test_a_topic_column_topic_that_no_answer_names_is_unknown_too() -> None:
    clock = Clock()

    class Silent:
        def list_topics(self, topic: str, timeout: float) -> Any:
            return SimpleNamespace(topics={})

    with pytest.raises(BrokerError, match="does not exist") as e:
        _Counts(Silent(), CONF, 5.0, clock=clock, sleep=clock.sleep)("never")
    assert is_permanent(e.value)
    assert clock.now == pytest.approx(30.0)


@given(
    st.lists(st.sampled_from([UNKNOWN, NOT_READY, FOUND]), min_size=1, max_size=40),
    st.integers(min_value=0, max_value=40_000),
)
def test_missing_for_good_only_after_unknown_answers_for_the_whole_propagation_time(
    answers: list[str], propagation_ms: int
) -> None:
    """The decision table: the first answer that is not UNKNOWN decides (found: written to; not ready:
    the task fails for Spark's retry); UNKNOWN answers are asked again, with a back-off, until
    ``topic.metadata.propagation.max.ms`` after the first, and only then is the topic missing for good."""
    conf = {**CONF, "topic.metadata.propagation.max.ms": str(propagation_ms)}
    count, producer, clock = counts(answers, conf)
    try:
        partitions: int | BrokerError = count("t")
    except BrokerError as e:
        partitions = e
    asked = len(producer.asked_at)
    decided = answers[min(asked, len(answers)) - 1]
    assert all(a == UNKNOWN for a in answers[: asked - 1])  # nothing but UNKNOWN is asked again
    assert clock.now <= propagation_ms / 1000 + 1e-9  # never waits past the propagation time
    if decided == FOUND:
        assert partitions == 3
    elif decided == NOT_READY:
        assert isinstance(partitions, BrokerError)
        assert not is_permanent(partitions)
    else:
        assert isinstance(partitions, BrokerError)
        assert is_permanent(partitions)
        assert clock.now == pytest.approx(propagation_ms / 1000)
