"""Where a sink task meets an error, and whether it is ``permanent`` (``sparkafka.errors``' table): the
topics a ``topic`` column names, a row with no topic, records the producer or the broker refuses."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException

from sparkafka.client import core
from sparkafka.errors import AuthorizationError, BrokerError, DeliveryError, TransactionError, is_permanent
from sparkafka.sink import task as task_module
from sparkafka.sink.delivery import Deliveries, refuses_record
from sparkafka.sink.options import InputColumns, parse_sink_options
from sparkafka.sink.task import TaskAbort, _Output, write_task

# A topic the broker does not know is missing at its first answer (asking again until librdkafka's
# propagation time is test_topic_creation's).
WITHOUT_TOPIC = parse_sink_options(
    {"kafka.bootstrap.servers": "b:9092", "kafka.topic.metadata.propagation.max.ms": "0"}
)


class Meta:
    """A topic's metadata as ``list_topics`` gives it."""

    def __init__(self, error: KafkaError | None = None, partitions: int = 0) -> None:
        self.error = error
        self.partitions = dict.fromkeys(range(partitions))


class Producer:
    """A producer whose metadata holds ``topics`` and whose ``produce`` calls ``on_produce``."""

    def __init__(
        self, topics: dict[str, Meta], on_produce: Callable[..., None] = lambda *a, **k: None
    ) -> None:
        self.topics, self.on_produce = topics, on_produce
        self.produced: list[tuple[str, Any]] = []

    def list_topics(self, topic: str, timeout: float) -> Any:
        class Cluster:
            topics = {topic: self.topics[topic]} if topic in self.topics else {}

        return Cluster()

    def produce(self, topic: str, value: Any, *args: Any, **kwargs: Any) -> None:
        self.on_produce(topic, value)
        self.produced.append((topic, value))

    def poll(self, timeout: float) -> int:
        return 0


def rows(topics: list[str | None]) -> pa.RecordBatch:
    values = [f"v{i}".encode() for i in range(len(topics))]
    return pa.RecordBatch.from_arrays(
        [pa.array(values, pa.binary()), pa.array(topics, pa.string())], ["value", "topic"]
    )


def write(producer: Producer, topics: list[str | None]) -> int:
    output = _Output(producer, WITHOUT_TOPIC, InputColumns(topic=True), 0, Deliveries({}))
    return output.produce_all(iter([rows(topics)]))


def test_a_topic_column_naming_a_topic_the_broker_does_not_know_is_permanent() -> None:
    producer = Producer(
        {"out": Meta(partitions=2), "gone": Meta(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))}
    )
    assert write(producer, ["out", "out"]) == 2
    with pytest.raises(
        BrokerError, match=r"topic 'gone' does not exist \(the sink does not create topics\)"
    ) as e:
        write(producer, ["out", "gone"])
    assert is_permanent(e.value)
    with pytest.raises(BrokerError, match="topic 'never' does not exist") as e:
        write(producer, ["never"])  # not in the answer at all
    assert is_permanent(e.value)


@pytest.mark.parametrize(
    ("meta", "why"),
    [(Meta(KafkaError(KafkaError.LEADER_NOT_AVAILABLE)), "Leader not available"), (Meta(), "no partitions")],
)
def test_a_topic_that_is_not_ready_yet_fails_the_task_for_a_retry(meta: Meta, why: str) -> None:
    """A topic being created (a broker that creates topics on first use answers LEADER_NOT_AVAILABLE, or
    a leader being elected: a retry finds it."""
    with pytest.raises(BrokerError, match=f"topic 'new' is not ready to write to: .*{why}") as e:
        write(Producer({"new": meta}), ["new"])
    assert not is_permanent(e.value)


def test_a_topic_column_denied_by_acl_is_permanent() -> None:
    denied = Meta(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    with pytest.raises(AuthorizationError, match="topic secret") as e:
        write(Producer({"secret": denied}), ["secret"])
    assert is_permanent(e.value)


def test_a_row_with_a_null_topic_and_no_topic_option_is_permanent() -> None:
    with pytest.raises(BrokerError, match="a row has a null topic and the sink has no option topic") as e:
        write(Producer({"out": Meta(partitions=1)}), ["out", None])
    assert is_permanent(e.value)


def refusing(code: int) -> Callable[..., None]:
    def produce(topic: str, value: Any) -> None:
        raise KafkaException(KafkaError(code))

    return produce


@pytest.mark.parametrize(
    ("code", "permanent"),
    [(KafkaError.MSG_SIZE_TOO_LARGE, True), (KafkaError._FATAL, False), (KafkaError._STATE, False)],
)
def test_a_record_the_producer_refuses_for_what_it_is_is_permanent(code: int, permanent: bool) -> None:
    """``produce()`` raises MSG_SIZE_TOO_LARGE for a record over ``kafka.message.max.bytes`` (the
    producer's own check); a producer in a fatal or abortable state is not the record's fault."""
    producer = Producer({"out": Meta(partitions=1)}, refusing(code))
    with pytest.raises(BrokerError, match="producing to the topic column failed") as e:
        write(producer, ["out"])
    assert is_permanent(e.value) is permanent


@pytest.mark.parametrize(
    ("errors", "permanent"),
    [
        ([KafkaError.MSG_SIZE_TOO_LARGE], True),
        ([KafkaError._PURGE_QUEUE, KafkaError.MSG_SIZE_TOO_LARGE], True),
        ([KafkaError.INVALID_RECORD], True),
        ([KafkaError.RECORD_LIST_TOO_LARGE], True),
        ([KafkaError.INVALID_TIMESTAMP], True),
        ([KafkaError._MSG_TIMED_OUT], False),
        ([KafkaError.NOT_ENOUGH_REPLICAS], False),
        ([KafkaError._PURGE_QUEUE], False),
    ],
)
def test_failed_deliveries_are_permanent_when_the_broker_refused_a_record(
    errors: list[int], permanent: bool
) -> None:
    class Message:
        def topic(self) -> str:
            return "out"

        def partition(self) -> int:
            return 0

    deliveries = Deliveries({})
    for code in errors:
        deliveries(KafkaError(code), Message())
    failure = deliveries.failure()
    assert isinstance(failure, DeliveryError)
    assert is_permanent(failure) is permanent
    assert deliveries.failure() is None  # forgotten: a cached producer's next flush is judged afresh
    assert not deliveries.refused


def test_unproven_and_undelivered_records_are_not_permanent() -> None:
    deliveries = Deliveries({})
    deliveries.implicit_ack("IMPLICITACK [thrd:b:9092/1]: out [2] 1 message(s) implicitly acked")
    implicit = deliveries.failure()
    assert isinstance(implicit, DeliveryError)
    assert not is_permanent(implicit)
    undelivered = deliveries.failure(left=3, timeout_s=300)
    assert isinstance(undelivered, DeliveryError)
    assert not is_permanent(undelivered)


def test_refused_records_are_named_by_librdkafkas_codes_or_their_names_in_text() -> None:
    assert refuses_record(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    assert refuses_record("MSG_SIZE_TOO_LARGE")
    assert not refuses_record(KafkaError(KafkaError._MSG_TIMED_OUT))
    assert not refuses_record(29)  # a bare code (TOPIC_AUTHORIZATION_FAILED): not a record's fault


# -- a record the broker refuses while the task still produces (finding 1 of the refusal review) ------------

EXACTLY_ONCE = parse_sink_options(
    {
        "kafka.bootstrap.servers": "b:9092",
        "topic": "out",
        "deliveryGuarantee": "exactly_once",
        "transactionalIdPrefix": "p",
    }
)


class Sent:
    """A delivered record's message, as a delivery report gives it."""

    def __init__(self, topic: str, partition: int = 0) -> None:
        self._topic, self._partition = topic, partition

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition


class TransactionalProducer:
    """librdkafka's transactional producer as far as a refused record goes: the broker's answer refusing a
    batch of ``out`` (MSG_SIZE_TOO_LARGE: over the topic's max.message.bytes) arrives just after the
    ``refused_at``-th ``produce()``; librdkafka sets the transaction's abortable error from its broker thread
    (``rd_kafka_txn_set_abortable_error``), so every later ``produce()`` raises _STATE, and queues the
    delivery report, served by the next poll. With ``late_report`` the report is queued only by the time
    the transaction is aborted (it was not queued yet when ``produce()`` raised: the broker thread sets the
    abortable error first). ``abort_fails``: the coordinator does not answer the abort."""

    def __init__(
        self,
        settings: dict[str, Any],
        refused_at: int = 0,
        late_report: bool = False,
        abort_fails: bool = False,
        local_error: int | None = None,
    ) -> None:
        self.on_delivery = settings["on_delivery"]
        self.refused_at, self.late_report, self.abort_fails = refused_at, late_report, abort_fails
        self.local_error = local_error
        self.produced = 0
        self.queued: list[tuple[KafkaError, Sent]] = []
        self.held: list[tuple[KafkaError, Sent]] = []
        self.abortable = False
        self.ended: str | None = None

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> Any:
        return SimpleNamespace(topics={topic: Meta(partitions=1)})

    def begin_transaction(self) -> None:
        pass

    def produce(self, topic: str, value: Any, *args: Any, **kwargs: Any) -> None:
        if self.abortable:
            raise KafkaException(
                KafkaError(KafkaError._STATE, "Producing not allowed in transactional state AbortableError")
            )
        self.produced += 1
        if self.produced == self.local_error:
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
        if self.produced == self.refused_at:  # the broker's answer to the batch arrives
            report = (KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), Sent("out"))
            (self.held if self.late_report else self.queued).append(report)
            self.abortable = True

    def poll(self, timeout: float = 0) -> int:
        served, self.queued = self.queued, []
        for error, message in served:
            self.on_delivery(error, message)
        return len(served)

    def flush(self, timeout: float = 0) -> int:
        self.poll(0)
        return 0

    def abort_transaction(self, timeout: float = 0) -> None:
        self.queued += self.held
        self.held = []
        if self.abort_fails:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        self.ended = "aborted"

    def purge(self) -> None:
        self.ended = "purged"

    def close(self) -> None:
        pass


@pytest.fixture
def transactional(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``write_task``'s exactly-once path over a ``made["class"]`` (``TransactionalProducer``) made with
    ``made["kwargs"]``; ``made["producer"]`` is the one made."""
    made: dict[str, Any] = {"class": TransactionalProducer, "kwargs": {}}

    class NoIntentLog:
        def __init__(self, *args: Any) -> None:
            pass

        def create(self) -> None:
            pass

    def open_producer(settings: dict[str, Any], tid: str, **kwargs: Any) -> tuple[Any, int, int]:
        made["producer"] = made["class"](settings, **made["kwargs"])
        return made["producer"], 1000, 0

    monkeypatch.setattr(task_module, "IntentLog", NoIntentLog)
    monkeypatch.setattr(task_module, "open_transactional_producer", open_producer)
    return made


def values(n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([b"x" * 10] * n, pa.binary())], ["value"])


@pytest.mark.parametrize(
    ("refused_at", "late_report"),
    [(3, False), (4, False), (6, False), (8, False), (3, True), (4, True)],
    ids=[
        "while-producing",
        "between-the-last-row-and-the-witness",
        "in-the-last-batch",
        "at-the-flush",
        "while-producing-reported-late",
        "before-the-witness-reported-late",
    ],
)
def test_a_record_the_broker_refuses_is_the_tasks_permanent_error_whenever_the_answer_comes(
    transactional: dict[str, Any], refused_at: int, late_report: bool
) -> None:
    """Rows 1-3 in one batch, 4-7 in the next, then the witness (8th). However far the task got when the
    broker's refusal arrived, the task reports it (not librdkafka's _STATE that follows it, nor a raw
    KafkaException): permanent, naming the record's error, its transaction aborted."""
    transactional["kwargs"] = {"refused_at": refused_at, "late_report": late_report}
    with pytest.raises(DeliveryError) as e:
        write_task(EXACTLY_ONCE, InputColumns(), iter([values(3), values(4)]), 0, "q")
    assert is_permanent(e.value)
    assert "out-0: KafkaError{code=MSG_SIZE_TOO_LARGE" in str(e.value)
    assert "_STATE" not in str(e.value)
    assert transactional["producer"].ended == "aborted"


def test_an_abortable_state_with_no_refused_record_stays_a_retriable_broker_error(
    transactional: dict[str, Any],
) -> None:
    """An abortable error whose cause no delivery report names (nothing refused): the task fails for
    Spark's retry, with librdkafka's words."""

    class Abortable(TransactionalProducer):
        def produce(self, topic: str, value: Any, *args: Any, **kwargs: Any) -> None:
            raise KafkaException(KafkaError(KafkaError._STATE, "in state AbortableError"))

    transactional["class"] = Abortable
    with pytest.raises(BrokerError, match=r"producing to out failed: .*AbortableError") as e:
        write_task(EXACTLY_ONCE, InputColumns(), iter([values(2)]), 0, "q")
    assert not is_permanent(e.value)
    assert transactional["producer"].ended == "aborted"


def test_the_producers_own_size_refusal_is_permanent_though_an_earlier_record_timed_out(
    transactional: dict[str, Any],
) -> None:
    """``produce()`` refuses a record over kafka.message.max.bytes itself: that is the cause, whatever
    else the deliveries hold."""

    class TimedOut(TransactionalProducer):
        def poll(self, timeout: float = 0) -> int:
            self.on_delivery(KafkaError(KafkaError._MSG_TIMED_OUT), Sent("out"))
            return 1

    transactional["class"], transactional["kwargs"] = TimedOut, {"local_error": 2}
    with pytest.raises(BrokerError, match=r"kafka\.message\.max\.bytes") as e:
        write_task(EXACTLY_ONCE, InputColumns(), iter([values(3)]), 0, "q")
    assert is_permanent(e.value)
    assert "MSG_SIZE_TOO_LARGE" in str(e.value)


def test_no_kafka_exception_leaves_a_task_raw(transactional: dict[str, Any]) -> None:
    """``begin_transaction()`` in a state librdkafka refuses: a TransactionError for Spark's retry."""

    class Unbegun(TransactionalProducer):
        def begin_transaction(self) -> None:
            raise KafkaException(KafkaError(KafkaError._STATE, "Operation not valid in state Ready"))

    transactional["class"] = Unbegun
    with pytest.raises(TransactionError, match=r"transaction p-0 failed against bootstrap servers b:9092"):
        write_task(EXACTLY_ONCE, InputColumns(), iter([values(1)]), 0, "q")


# -- at_least_once / none: a failed task's late reports are not the next task's (finding 5) ------------------

AT_LEAST_ONCE = parse_sink_options(
    {"kafka.bootstrap.servers": "b:9092", "deliveryGuarantee": "at_least_once"}
)


class PlainProducer:
    """The worker's cached producer (at_least_once, none): ``produce`` queues; ``flush`` sends, and the
    broker refuses each record ``b"BIG"`` (over the topic's max.message.bytes); with ``stuck`` nothing is
    answered (a broker gone): ``flush`` leaves every record undelivered."""

    def __init__(self, settings: dict[str, Any], stuck: bool = False) -> None:
        self.on_delivery = settings["on_delivery"]
        self.stuck = stuck
        self.queued: list[tuple[str, Any]] = []

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> Any:
        return SimpleNamespace(topics={topic: Meta(partitions=1)})

    def produce(self, topic: str, value: Any, *args: Any, **kwargs: Any) -> None:
        self.queued.append((topic, value))

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = 0) -> int:
        if self.stuck:
            return len(self.queued)
        for topic, value in self.queued:
            if value == b"BIG":
                self.on_delivery(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), Sent(topic))
        self.queued = []
        return 0


class Worker:
    """A Python worker's plain producers: each made by ``factory`` (``new_producer``), cached per worker
    as the real ones are; ``made`` holds them in order."""

    def __init__(self) -> None:
        self.made: list[PlainProducer] = []
        self.factory: Callable[[dict[str, Any]], PlainProducer] = PlainProducer

    def new_producer(self, settings: dict[str, Any]) -> PlainProducer:
        self.made.append(self.factory(settings))
        return self.made[-1]


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> Worker:
    worker = Worker()
    monkeypatch.setattr(core, "_cache", {})
    monkeypatch.setattr(core, "_closers", {})
    monkeypatch.setattr(task_module, "new_producer", worker.new_producer)
    return worker


def routed(values: list[bytes], topics: list[str | None]) -> Iterator[pa.RecordBatch]:
    arrays = [pa.array(values, pa.binary()), pa.array(topics, pa.string())]
    return iter([pa.RecordBatch.from_arrays(arrays, ["value", "topic"])])


@pytest.mark.parametrize("delivery", ["at_least_once", "none"])
def test_a_refused_tasks_late_delivery_failures_are_not_the_next_tasks_refusal(
    worker: Worker, delivery: str
) -> None:
    """Task A produces a record the broker will refuse, then meets a row with no topic: its refusal is
    the null topic. Task B, on the same worker and producer, writes a good row: it succeeds (before, it
    read A's MSG_SIZE_TOO_LARGE as its own and refused the batch of another query)."""
    options = parse_sink_options({"kafka.bootstrap.servers": "b:9092", "deliveryGuarantee": delivery})
    columns = InputColumns(topic=True)
    with pytest.raises(BrokerError, match="a row has a null topic") as a:
        write_task(options, columns, routed([b"BIG", b"y"], ["out", None]), 0, "q1")
    assert is_permanent(a.value)
    assert write_task(options, columns, routed([b"ok"], ["out"]), 0, "q2").records == 1
    assert len(worker.made) == 1  # one producer per worker, as before


def test_a_retriable_error_gives_way_to_a_refusal_its_records_met(worker: Worker) -> None:
    """A task fails with an error a retry may heal (a topic not ready yet), after a record the broker
    refuses: the refusal is the task's error, since the retry would meet it again."""

    class NewTopic(PlainProducer):
        def list_topics(self, topic: str | None = None, timeout: float = 0) -> Any:
            return SimpleNamespace(topics={topic: Meta(partitions=0 if topic == "new" else 1)})

    worker.factory = NewTopic
    with pytest.raises(DeliveryError, match="MSG_SIZE_TOO_LARGE") as e:
        write_task(AT_LEAST_ONCE, InputColumns(topic=True), routed([b"BIG", b"y"], ["out", "new"]), 0)
    assert is_permanent(e.value)


def test_a_producer_left_with_undelivered_records_serves_no_later_task(worker: Worker) -> None:
    """The drain is bounded: a producer still holding the failed task's records after it is dropped from
    the worker's cache, so that their late reports reach no later task."""
    worker.factory = lambda settings: PlainProducer(settings, stuck=not worker.made)
    columns = InputColumns(topic=True)
    with pytest.raises(BrokerError, match="a row has a null topic"):
        write_task(AT_LEAST_ONCE, columns, routed([b"BIG", b"y"], ["out", None]), 0, "q1")
    assert write_task(AT_LEAST_ONCE, columns, routed([b"ok"], ["out"]), 0, "q2").records == 1
    assert len(worker.made) == 2
    assert worker.made[0].queued == [("out", b"BIG")]  # its late report reaches no one


# -- what a failed task says of its transaction (finding 3) -------------------------------------------------


@pytest.mark.parametrize("abort_fails", [False, True], ids=["abort-confirmed", "abort-unanswered"])
def test_a_failed_task_reports_its_transactions_abort(
    transactional: dict[str, Any], abort_fails: bool
) -> None:
    """The writer puts it in the task's refusal: Spark's abort then fences an id whose abort the broker
    did not confirm (its transaction may still be open)."""
    transactional["kwargs"] = {"refused_at": 2, "abort_fails": abort_fails}
    aborts: list[TaskAbort] = []
    with pytest.raises(DeliveryError):
        write_task(EXACTLY_ONCE, InputColumns(), iter([values(3)]), 4, "q", aborts=aborts)
    assert aborts == [TaskAbort("p-4", confirmed=not abort_fails)]
    assert transactional["producer"].ended == ("purged" if abort_fails else "aborted")


def test_a_task_that_opened_no_transaction_reports_no_abort(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoIntentLog:
        def __init__(self, *args: Any) -> None:
            pass

        def create(self) -> None:
            raise BrokerError("the intent log cannot be created")

    monkeypatch.setattr(task_module, "IntentLog", NoIntentLog)
    aborts: list[TaskAbort] = []
    with pytest.raises(BrokerError):
        write_task(EXACTLY_ONCE, InputColumns(), iter([values(1)]), 0, "q", aborts=aborts)
    assert aborts == []


def test_a_refusal_reported_by_the_abort_is_read_before_the_producer_is_closed(
    transactional: dict[str, Any],
) -> None:
    """``close()`` ends the producer: a report served only after it would never reach the task."""

    class Closing(TransactionalProducer):
        def close(self) -> None:
            self.queued, self.held = [], []

    transactional["class"] = Closing
    transactional["kwargs"] = {"refused_at": 3, "late_report": True}
    with pytest.raises(DeliveryError, match="MSG_SIZE_TOO_LARGE") as e:
        write_task(EXACTLY_ONCE, InputColumns(), iter([values(3), values(4)]), 0, "q")
    assert is_permanent(e.value)


NONE = parse_sink_options({"kafka.bootstrap.servers": "b:9092", "deliveryGuarantee": "none"})


class NotReadyTopic(PlainProducer):
    """A producer whose metadata has the topic ``new`` without partitions yet (an error a retry heals)."""

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> Any:
        return SimpleNamespace(topics={topic: Meta(partitions=0 if topic == "new" else 1)})


def test_none_takes_no_earlier_task_s_refused_record_as_its_error(worker: Worker) -> None:
    """Review: under none a task never flushes, so the worker's reports are earlier tasks' too: batch N's
    refused record became batch N+1's refusal (the query failed, naming another batch's record)."""
    worker.factory = NotReadyTopic
    columns = InputColumns(topic=True)
    assert write_task(NONE, columns, routed([b"BIG"], ["out"]), 0, "q").records == 1  # never flushed
    with pytest.raises(BrokerError) as later:
        write_task(NONE, columns, routed([b"ok", b"y"], ["out", "new"]), 0, "q")
    assert not is_permanent(later.value)
    assert "MSG_SIZE_TOO_LARGE" not in str(later.value)


def test_none_keeps_the_worker_s_producer_and_its_exit_flush_after_a_failed_task(worker: Worker) -> None:
    """Review: a failed none task dropped the worker's producer from the cache, and with it the exit
    flush that sends the earlier successful tasks' records (never flushed under none): they were lost."""
    worker.factory = lambda settings: NotReadyTopic(settings, stuck=not worker.made)
    columns = InputColumns(topic=True)
    assert write_task(NONE, columns, routed([b"a", b"b"], ["out", "out"]), 0, "q").records == 2
    with pytest.raises(BrokerError):
        write_task(NONE, columns, routed([b"ok", b"y"], ["out", "new"]), 0, "q")
    flushed: list[float] = []
    worker.made[0].flush = lambda timeout=0: flushed.append(timeout) or 0  # type: ignore[method-assign]
    core.close_all()  # the worker's exit
    assert flushed  # the exit flush sends what the successful task left
    assert len(worker.made) == 1


def test_an_empty_transaction_s_failed_abort_is_a_transaction_error(transactional: dict[str, Any]) -> None:
    """Review: a task that wrote nothing aborted its transaction outside the error handling: a raw
    KafkaException left the task, and no abort was reported."""
    transactional["kwargs"] = {"abort_fails": True}
    aborts: list[TaskAbort] = []
    with pytest.raises(TransactionError, match="aborting transaction p-0, which wrote nothing, failed"):
        write_task(EXACTLY_ONCE, InputColumns(), iter([]), 0, "q", aborts=aborts)
    assert aborts == [TaskAbort("p-0", confirmed=False)]
