"""A fault-injecting Kafka protocol proxy: the instrument for races a real broker shows only by chance.

``KafkaProxy`` listens on 127.0.0.1 and passes every client connection through to one broker. It frames
each request (size, api key, version, correlation id), logs it, and applies the first ``Rule`` that
matches it:

- ``answer``: the proxy answers the request itself with a chosen error after a delay, and never forwards
  it (a broker that refuses the request without writing anything: NOT_LEADER_OR_FOLLOWER);
- ``delay``: the request is forwarded after a delay (and with it every later request of its connection,
  which keeps their order);
- ``slow``: the request is forwarded at once, and the broker's answer passed on no sooner than a delay after
  the request arrived (a slow network or broker: the client keeps sending behind it);
- ``drop``: the request is forwarded, and once the broker has answered it (so it was written), the proxy
  closes the client's connection without passing the answer on (a client that gave up on a request the
  broker carried out).

Responses reach a client in the order of its requests, as a broker sends them: an answered request holds
back the answers of the requests behind it, though those are forwarded (and carried out) at once. That is
the condition of librdkafka's implicit ack: a refused Produce, and a later one of the same partition that
the broker already accepted.

A broker whose ``advertised.listeners`` names the proxy's port (``ProxiedKafka``) sends every client there,
including the transaction coordinator's own marker requests. Produce requests are decoded with
kafka-python's protocol classes (the partitions, and each batch's producer id, epoch, first sequence and
record count), and answers are encoded with them at the request's version.

Threads: one accepting, and three per connection (requests in, answers from the broker, answers out).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from sparkafka.local.broker import free_port
from sparkafka.local.kafka_broker import ApacheKafka
from sparkafka.structs import TopicPartition

__all__ = [
    "NOT_LEADER_OR_FOLLOWER",
    "PRODUCE",
    "Batch",
    "KafkaProxy",
    "ProxiedKafka",
    "Request",
    "Rule",
    "first_produce_per_partition",
]

PRODUCE = 0
NOT_LEADER_OR_FOLLOWER = 6

Action = Literal["answer", "delay", "slow", "drop"]


@dataclass(frozen=True)
class Batch:
    """One record batch of a Produce request (its v2 header), for the log."""

    tp: TopicPartition
    producer_id: int
    epoch: int
    first_sequence: int
    records: int


@dataclass
class Request:
    """A request as the proxy saw it; ``batches`` and ``acks`` only for Produce."""

    connection: int
    api_key: int
    version: int
    correlation_id: int
    at: float
    raw: bytes = field(repr=False)
    acks: int | None = None
    batches: tuple[Batch, ...] = ()
    in_flight: frozenset[TopicPartition] = frozenset()
    """Partitions of ``batches`` for which an earlier Produce request of the same connection (one client)
    was still unanswered when this one arrived: a partition's requests pipelined."""
    action: Action | None = None
    """What a rule did with it (None: passed through)."""
    transactional_id: str | None = None

    @property
    def partitions(self) -> tuple[TopicPartition, ...]:
        """The partitions a Produce request writes to."""
        return tuple(b.tp for b in self.batches)

    def expects_response(self) -> bool:
        """Whether the broker answers it (not a Produce with acks=0)."""
        return not (self.api_key == PRODUCE and self.acks == 0)


@dataclass
class Rule:
    """What to do with requests ``match`` accepts, at most ``times`` times (None: every time).

    ``error`` is the code an ``answer`` carries (Produce only); ``delay_s`` is how long an answer or a
    forwarded request waits (``answer``, ``slow``: at most, when ``release`` says sooner). ``release``
    (the proxy, the request) is asked while an answer waits: once it holds, the answer goes. ``fired``
    lists the requests it acted on.
    """

    match: Callable[[Request], bool]
    action: Action
    error: int = NOT_LEADER_OR_FOLLOWER
    delay_s: float = 0.0
    times: int | None = 1
    release: Callable[[KafkaProxy, Request], bool] | None = None
    fired: list[Request] = field(default_factory=list)

    def takes(self, request: Request) -> bool:
        """Whether this rule acts on ``request`` (and, if so, records it as fired)."""
        if self.times is not None and len(self.fired) >= self.times:
            return False
        if not self.match(request):
            return False
        self.fired.append(request)
        return True


def pipelined(proxy: KafkaProxy, request: Request) -> bool:
    """Whether the same client (connection) has sent a later Produce request of one of ``request``'s
    partitions (a ``release``)."""
    wanted = set(request.partitions)
    return any(
        r.connection == request.connection and r.at > request.at and wanted & set(r.partitions)
        for r in proxy.produce_requests()
    )


def first_produce_per_partition(
    topic: str | Callable[[str], bool],
    *,
    error: int = NOT_LEADER_OR_FOLLOWER,
    delay_s: float = 0.3,
    until_pipelined: bool = False,
) -> Rule:
    """Answer a Produce request with ``error`` after ``delay_s`` when it carries the first batch the proxy
    sees for one of ``topic``'s partitions (``topic``: a name, or a test of names).

    The request is answered whole (each of its partitions with ``error``): a broker that has just lost
    leadership answers every partition it no longer leads. ``until_pipelined``: the answer goes as soon as
    the client has sent a later request of one of those partitions (which the broker carries out), or after
    ``delay_s`` when it sends none: the refusal then reaches a client that pipelines every time, not by
    chance.
    """
    wanted = topic if callable(topic) else (lambda name: name == topic)
    seen: set[TopicPartition] = set()

    def match(request: Request) -> bool:
        if request.api_key != PRODUCE:
            return False
        fresh = {tp for tp in request.partitions if wanted(tp.topic) and tp not in seen}
        seen.update(fresh)
        return bool(fresh)

    release = pipelined if until_pipelined else None
    return Rule(match, "answer", error=error, delay_s=delay_s, times=None, release=release)


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        try:
            chunk = sock.recv(left)
        except OSError:
            return None
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed frame, without its size; None at the end of the connection."""
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    return _read_exactly(sock, size)


def _batches(topic: str, partition: int, records: bytes | None) -> Iterable[Batch]:
    """The v2 record batches in a partition's ``records`` (their headers only)."""
    data = records or b""
    pos = 0
    while pos + 61 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        producer_id, epoch, sequence, count = struct.unpack_from(">qhii", data, pos + 43)
        yield Batch(TopicPartition(topic, partition), producer_id, epoch, sequence, count)
        pos += 12 + length


def _decode_produce(frame: bytes, version: int) -> tuple[int, str | None, tuple[Batch, ...]]:
    """A Produce request's acks, transactional id and batches, decoded by kafka-python."""
    from kafka.protocol.producer import ProduceRequest

    if version >= 13:  # topics by id: rules match names, and would silently stop firing
        raise NotImplementedError(f"Produce v{version} names topics by id; the proxy's rules match names")
    request = ProduceRequest.decode(frame, version=version, header=True)
    batches: list[Batch] = []
    for topic in request.topic_data:
        name = topic.name
        for part in topic.partition_data:
            records = (
                part.records if isinstance(part.records, bytes | bytearray | None) else bytes(part.records)
            )
            batches.extend(_batches(name, part.index, records))
    return request.acks, request.transactional_id, tuple(batches)


def _produce_answer(request: Request, error: int) -> bytes:
    """A framed ProduceResponse at the request's version: every partition of it answered ``error``."""
    from kafka.protocol.producer import ProduceResponse

    cls = ProduceResponse[request.version]
    by_topic: dict[str, list[int]] = {}
    for tp in request.partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    part_cls = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
    topics = [
        ProduceResponse.TopicProduceResponse(
            name=name,
            partition_responses=[
                part_cls(
                    index=p,
                    error_code=error,
                    base_offset=-1,
                    log_append_time_ms=-1,
                    log_start_offset=-1,
                    record_errors=[],
                    error_message=None,
                )
                for p in parts
            ],
        )
        for name, parts in by_topic.items()
    ]
    response = cls(responses=topics, throttle_time_ms=0)
    response.with_header(correlation_id=request.correlation_id)
    return bytes(response.encode(header=True, framed=True))


@dataclass
class _Slot:
    """A response owed to the client, in request order."""

    request: Request
    ready_at: float = 0.0
    answer: bytes | None = None
    """The proxy's own answer (``answer``), or None: the broker's."""
    release: Callable[[KafkaProxy, Request], bool] | None = None


class _Connection:
    """One client connection and its broker connection."""

    def __init__(self, proxy: KafkaProxy, number: int, client: socket.socket) -> None:
        self.proxy = proxy
        self.number = number
        self.client = client
        self.upstream = socket.create_connection(proxy.upstream, timeout=10)
        self.upstream.settimeout(None)
        self.slots: deque[_Slot] = deque()
        self.responses: dict[int, bytes] = {}
        self.cond = threading.Condition()
        self.closed = False
        self.threads = [
            threading.Thread(target=self._requests, name=f"proxy-{number}-in", daemon=True),
            threading.Thread(target=self._broker_answers, name=f"proxy-{number}-broker", daemon=True),
            threading.Thread(target=self._answers_out, name=f"proxy-{number}-out", daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _requests(self) -> None:
        while not self.closed:
            frame = _read_frame(self.client)
            if frame is None:
                break
            try:
                request = self.proxy._arrived(self.number, frame)
            except Exception as e:  # noqa: BLE001 - a request the proxy cannot read: the test must fail
                self.proxy.errors.append(f"connection {self.number}: {e!r}")
                break
            rule = self.proxy._rule_for(request)
            request.action = rule.action if rule is not None else None
            if rule is not None and rule.action == "answer" and request.expects_response():
                answer = _produce_answer(request, rule.error)
                self._owe(_Slot(request, request.at + rule.delay_s, answer, rule.release))
                continue
            if rule is not None and rule.action == "delay":
                self._hold(request, request.at + rule.delay_s, rule.release)
            if request.expects_response():
                slow = rule is not None and rule.action == "slow"
                ready_at = request.at + rule.delay_s if rule is not None and slow else 0.0
                self._owe(_Slot(request, ready_at, None, rule.release if rule is not None and slow else None))
            try:
                self.upstream.sendall(struct.pack(">i", len(frame)) + frame)
            except OSError:
                break
        # The client is gone: the broker's connection stays until it answered what was forwarded (closing it
        # with an answer unread would reset it, and could drop a request the broker had not read yet).
        with self.cond:
            self.cond.wait_for(lambda: self.closed or not self.slots, timeout=10)
        self.close()

    def _owe(self, slot: _Slot) -> None:
        with self.cond:
            self.slots.append(slot)
            self.cond.notify_all()

    def _broker_answers(self) -> None:
        while not self.closed:
            frame = _read_frame(self.upstream)
            if frame is None:
                break
            (correlation_id,) = struct.unpack_from(">i", frame, 0)
            with self.cond:
                self.responses[correlation_id] = frame
                self.cond.notify_all()
        self.close()

    def _answers_out(self) -> None:
        while True:
            with self.cond:
                while not self.closed and not self.slots:
                    self.cond.wait()
                if self.closed:
                    return
                slot = self.slots[0]
                cid = slot.request.correlation_id
                while not self.closed and slot.answer is None and cid not in self.responses:
                    self.cond.wait()
                if self.closed:
                    return
            self._wait_until_due(slot)
            if slot.answer is not None:
                data = slot.answer
            else:
                with self.cond:
                    frame = self.responses.pop(cid)
                if slot.request.action == "drop":
                    self.proxy._answered(slot.request)
                    self.close()
                    return
                data = struct.pack(">i", len(frame)) + frame
            with self.cond:
                self.slots.popleft()
            self.proxy._answered(slot.request)
            try:
                self.client.sendall(data)
            except OSError:
                self.close()
                return

    def _wait_until_due(self, slot: _Slot) -> None:
        self._hold(slot.request, slot.ready_at, slot.release)

    def _hold(
        self, request: Request, until: float, release: Callable[[KafkaProxy, Request], bool] | None
    ) -> None:
        """Until ``until`` (monotonic), or until ``release`` holds (asked every 5 ms), or the proxy stops.

        Not when the client goes away: a request it sent still reaches the broker (one the broker had
        queued, or the network held, is carried out after its client gave up)."""
        while self.proxy.running:
            wait = until - time.monotonic()
            if wait <= 0 or (release is not None and release(self.proxy, request)):
                return
            time.sleep(min(wait, 0.005))


class KafkaProxy:
    """A Kafka protocol proxy on 127.0.0.1 in front of the broker at ``upstream`` (see the module docstring).

    Use as a context manager, or ``start()`` and ``stop()``. ``rules`` apply in order, the first that takes a
    request wins; ``log`` holds every request seen, in arrival order.
    """

    def __init__(self, upstream: tuple[str, int], port: int | None = None) -> None:
        self.upstream = upstream
        self.port = port or free_port()
        self.rules: list[Rule] = []
        self.log: list[Request] = []
        self.errors: list[str] = []
        """Requests the proxy could not read (it closed their connections): a test's fixture fails on any."""
        self._lock = threading.Lock()
        self._unanswered: dict[tuple[int, TopicPartition], int] = {}
        self._connections: list[_Connection] = []
        self._server: socket.socket | None = None
        self._acceptor: threading.Thread | None = None

    def __enter__(self) -> KafkaProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> KafkaProxy:
        """Listen and accept in the background."""
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self._server = server
        self._acceptor = threading.Thread(target=self._accept, name="proxy-accept", daemon=True)
        self._acceptor.start()
        return self

    def stop(self) -> None:
        """Stop listening and close every connection (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(OSError):
                server.shutdown(socket.SHUT_RDWR)
            server.close()
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()
        for connection in connections:
            for thread in connection.threads:
                thread.join(5)
        if self._acceptor is not None:
            self._acceptor.join(5)

    @property
    def running(self) -> bool:
        """Whether the proxy listens (held requests and answers go on waiting while it does)."""
        return self._server is not None

    def add(self, rule: Rule) -> Rule:
        """Apply ``rule`` from now on (after the rules added before it); returns it."""
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        """Remove every rule (requests pass through again) and fail on any request it could not read."""
        with self._lock:
            self.rules.clear()
            errors, self.errors = self.errors, []
        assert not errors, f"the proxy could not read requests: {errors}"

    def produce_requests(self, topic: str | None = None) -> list[Request]:
        """The Produce requests seen, those writing to ``topic`` when given."""
        with self._lock:
            requests = [r for r in self.log if r.api_key == PRODUCE]
        return [r for r in requests if topic is None or any(tp.topic == topic for tp in r.partitions)]

    def _accept(self) -> None:
        number = 0
        while self._server is not None:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            number += 1
            try:
                connection = _Connection(self, number, client)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._server is None:
                    connection.close()
                    return
                self._connections.append(connection)

    def _arrived(self, number: int, frame: bytes) -> Request:
        api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 0)
        request = Request(number, api_key, version, correlation_id, time.monotonic(), frame)
        if api_key == PRODUCE:
            request.acks, request.transactional_id, request.batches = _decode_produce(frame, version)
        with self._lock:
            if request.expects_response():
                keys = [(number, tp) for tp in request.partitions]
                request.in_flight = frozenset(key[1] for key in keys if self._unanswered.get(key))
                for key in keys:
                    self._unanswered[key] = self._unanswered.get(key, 0) + 1
            self.log.append(request)
        return request

    def _answered(self, request: Request) -> None:
        with self._lock:
            for tp in request.partitions:
                self._unanswered[(request.connection, tp)] -= 1

    def _rule_for(self, request: Request) -> Rule | None:
        with self._lock:
            rules = list(self.rules)
        return next((rule for rule in rules if rule.takes(request)), None)


class ProxiedKafka(ApacheKafka):
    """One Apache Kafka node that advertises ``proxy``'s port, so every client (and the broker's own
    marker requests) goes through the proxy; the proxy forwards to the node's real port."""

    def __init__(self, **kwargs: Any) -> None:
        self.broker_port = free_port()
        self.proxy = KafkaProxy(("127.0.0.1", self.broker_port))
        super().__init__(brokers=1, port=self.broker_port, **kwargs)

    @property
    def bootstrap_servers(self) -> str:
        """The proxy's address: clients bootstrap through it too."""
        super().bootstrap_servers  # noqa: B018 - raises if not started
        return f"127.0.0.1:{self.proxy.port}"

    def _listeners(self, node: Any) -> dict[str, str]:
        listeners = super()._listeners(node)
        listeners["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{self.proxy.port}"
        return listeners

    def start(self) -> ProxiedKafka:
        """Start the proxy, then the node."""
        self.proxy.start()
        try:
            super().start()
        except BaseException:
            self.proxy.stop()
            raise
        return self

    def stop(self, timeout_s: float = 20.0) -> None:
        """Stop the node, then the proxy."""
        super().stop(timeout_s)
        self.proxy.stop()
