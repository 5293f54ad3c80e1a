"""Shared by the xroute.kombu tests: random topic and headers topologies, the answer
`Topology.route` gives for them, and the same topology run through a real kombu connection
(declared with Exchange/Queue/binding, published with a Producer, drained with a Consumer)."""

from __future__ import annotations

import functools
import socket
import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import strategies as st
from kombu import Connection, Consumer, Exchange, Producer, Queue, binding

from tests.strategies import keys, patterns
import xroute.kombu
from xroute import Topology
from xroute.bench.redis import RedisUnavailable, redis_server

QUEUES = 4
# Values a headers test draws from. No integral float: Debian's RabbitMQ 3.10.8 lets a
# top-level 1 match 1.0 (SEMANTICS.md); no bytes: kombu's JSON body codec would tag them.
HEADER_NAMES = ["h1", "h2", "x-h"]
HEADER_VALUES = [1, 2, -7, 2.5, True, False, "1", "a", "", None]
X_MATCH = [None, "all", "any", "all-with-x", "any-with-x"]


@dataclass
class Case:
    """One topology and the messages published to it. A binding is (routing key, arguments,
    queue number); a message is (routing key, headers)."""

    kind: str
    bindings: list[tuple[str, dict[str, Any] | None, int]]
    messages: list[tuple[str, dict[str, Any]]]
    queues: int = QUEUES


sender_keys = st.lists(keys, min_size=1, max_size=2)


@st.composite
def topic_cases(draw: Any) -> Case:
    """Random topic bindings over a few queues, and keys (some with CC/BCC keys) for them."""
    bound = draw(st.lists(st.tuples(patterns, st.integers(0, QUEUES - 1)), max_size=12))
    messages = []
    for key in draw(st.lists(keys, min_size=1, max_size=8)):
        headers: dict[str, Any] = {}
        if draw(st.integers(0, 4)) == 0:
            headers[draw(st.sampled_from(["CC", "BCC"]))] = draw(sender_keys)
        messages.append((key, headers))
    return Case("topic", [(p, None, q) for p, q in bound], messages)


header_tables = st.dictionaries(
    st.sampled_from(HEADER_NAMES), st.sampled_from(HEADER_VALUES), max_size=3
)


@st.composite
def headers_cases(draw: Any) -> Case:
    """Random headers bindings (every x-match mode, void arguments included) and messages.

    Each binding has its own routing key: kombu knows a binding by (queue, exchange, key)
    alone, so two bindings of a queue that differ only in arguments would be one to kombu.
    """
    bound = []
    for number in range(draw(st.integers(0, 10))):
        arguments = dict(draw(header_tables))
        mode = draw(st.sampled_from(X_MATCH))
        if mode is not None:
            arguments["x-match"] = mode
        bound.append((f"b{number}", arguments, draw(st.integers(0, QUEUES - 1))))
    messages = [("", dict(h)) for h in draw(st.lists(header_tables, min_size=1, max_size=8))]
    return Case("headers", bound, messages)


def expected(case: Case) -> dict[int, list[int]]:
    """For each queue, the numbers of the messages `Topology.route` sends it."""
    topology = Topology()
    topology.declare_exchange("x", case.kind)
    for number in range(case.queues):
        topology.declare_queue(f"q{number}")
    for key, arguments, queue in case.bindings:
        topology.bind("x", f"q{queue}", key, arguments)
    received: dict[int, list[int]] = {q: [] for q in range(case.queues)}
    for number, (key, headers) in enumerate(case.messages):
        for queue in topology.route("x", key, headers):
            received[int(queue[1:])].append(number)
    return received


def through_kombu(connection: Connection, case: Case, exact: bool = True) -> dict[int, list[int]]:
    """Run ``case`` through ``connection``: for each queue, the numbers of the messages its
    Consumer received (each copy counted), and no BCC header in any.

    With ``exact``, draining stops as soon as `expected`'s count has arrived plus a short
    wait for extras; otherwise it waits for silence (kombu's own routing, any count).
    """
    prefix = f"xroute-kombu-test-{uuid.uuid4().hex[:10]}-"
    channel = connection.channel()
    exchange = Exchange(f"{prefix}x", type=case.kind, durable=False, channel=channel)
    exchange.declare()
    per_queue: dict[int, list] = defaultdict(list)
    for key, arguments, queue in case.bindings:
        per_queue[queue].append(binding(exchange, routing_key=key, arguments=arguments))
    queues = [
        Queue(f"{prefix}q{n}", bindings=per_queue[n], durable=False, channel=channel)
        for n in range(case.queues)
    ]
    for queue in queues:
        queue.declare()
    received: dict[int, list[int]] = {q: [] for q in range(case.queues)}
    try:
        producer = Producer(channel, exchange=exchange, serializer="json")
        for number, (key, headers) in enumerate(case.messages):
            producer.publish({"n": number}, routing_key=key, headers=dict(headers))

        def on_message(queue: int, body: Any, message: Any) -> None:
            received[queue].append(body["n"])
            assert "BCC" not in (message.headers or {}), message.headers
            message.ack()

        consumer_channel = connection.channel()
        consumers = [
            Consumer(consumer_channel, queues=[queue], accept=["json"],
                     callbacks=[functools.partial(on_message, n)])
            for n, queue in enumerate(queues)
        ]
        for consumer in consumers:
            consumer.consume()
        want = sum(len(v) for v in expected(case).values()) if exact else None
        _drain(connection, received, want)
        for consumer in consumers:
            consumer.cancel()
        consumer_channel.close()
    finally:
        for queue in queues:
            queue.delete()
        exchange.delete()
        channel.close()
    return {q: sorted(v) for q, v in received.items()}


def _drain(connection: Connection, received: dict[int, list[int]], want: int | None) -> None:
    def count() -> int:
        return sum(len(v) for v in received.values())

    # Until the expected count arrived (bounded), then until a short silence: extras show.
    patience = 50
    while want is not None and count() < want and patience:
        try:
            connection.drain_events(timeout=0.1)
        except socket.timeout:
            patience -= 1
    while True:
        try:
            connection.drain_events(timeout=0.1)
        except socket.timeout:
            return


def mismatch(case: Case, want: dict[int, list[int]], got: dict[int, list[int]]) -> str:
    """A readable account of a disagreement, for the assertion message."""
    lines = [f"{case.kind} bindings (key, arguments, queue): {case.bindings}"]
    for number, (key, headers) in enumerate(case.messages):
        w = [q for q, ms in want.items() if number in ms]
        g = [q for q, ms in got.items() if number in ms]
        flag = "" if w == g else "   <-- differs"
        lines.append(f"  message {number} key={key!r} headers={headers}: want {w} got {g}{flag}")
    return "\n".join(lines)



@pytest.fixture(scope="module")
def redis_url():
    """The Redis on 127.0.0.1:6379, else a private one (skips, saying why, if neither)."""
    try:
        with redis_server() as url:
            yield url
    except RedisUnavailable as error:
        print(f"no Redis: {error}")
        pytest.skip(f"no Redis could be found or started: {error}")


@pytest.fixture
def installed():
    """xroute.kombu installed for the test."""
    xroute.kombu.install()
    yield
    xroute.kombu.uninstall()
