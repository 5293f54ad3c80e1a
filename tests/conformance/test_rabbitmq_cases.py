"""Issue 15's cases and refusals against the real broker: each case of tests/rabbitmq_cases.py
is declared, published with confirms and read back; the broker must answer as recorded there,
and xroute as it says (they differ only where the case says so, row 10)."""

from __future__ import annotations

import math

import amqp
import pytest
from amqp import spec

from tests.conformance.typed import patched_encoder
from tests.rabbitmq_cases import CASES, QUEUE, Case, Typed
from tests.test_rabbitmq_cases import route_case
from xroute import InvalidArguments, InvalidHeaders, PreconditionFailed, Topology
from xroute.bench.rabbitmq import connect

pytestmark = pytest.mark.conformance


def _broker_value(value, queue):
    return queue if value == QUEUE else value


def broker_routes(channel, case: Case, prefix: str) -> bool:
    """Run ``case`` in RabbitMQ: does its message reach the queue?"""
    exchange, queue = prefix + "X", prefix + "q"
    headers = case.headers if case.wire_headers is None else case.wire_headers
    arguments = case.arguments if case.wire_arguments is None else case.wire_arguments
    with patched_encoder():
        channel.exchange_declare(
            exchange, case.exchange_type, auto_delete=False, arguments=case.exchange_arguments
        )
        channel.queue_declare(queue, exclusive=True, auto_delete=False)
        channel.queue_bind(queue, exchange, case.binding_key, arguments=arguments)
        message = amqp.Message(b"", application_headers=headers)
        channel.basic_publish(message, exchange, _broker_value(case.routing_key, queue))
    try:
        return channel.basic_get(queue, no_ack=True) is not None
    finally:
        channel.exchange_delete(exchange)
        channel.queue_delete(queue)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_against_rabbitmq(channel, prefix, case: Case) -> None:
    broker = broker_routes(channel, case, prefix)
    xroute = route_case(case, Topology(rabbitmq="3.10"), prefix + "X", prefix + "q")
    assert broker is case.broker, f"RabbitMQ routed={broker}, recorded {case.broker}: {case}"
    assert xroute is case.routed, f"xroute routed={xroute}, expected {case.routed}: {case}"


# ------------------------------------------------------------------ refusals


def test_bytes_x_match_is_refused_by_both(broker_url, prefix) -> None:
    exchange, queue = prefix + "h", prefix + "q"
    connection = connect(broker_url)
    channel = connection.channel()
    channel.exchange_declare(exchange, "headers", auto_delete=False)
    channel.queue_declare(queue, exclusive=False, auto_delete=True)
    with pytest.raises(amqp.PreconditionFailed, match="x-match"), patched_encoder():
        channel.queue_bind(queue, exchange, "", arguments={"x-match": Typed("x", b"any"), "k": 1})
    channel = connection.channel()  # a 406 closes the channel
    channel.exchange_delete(exchange)
    channel.queue_delete(queue)
    connection.close()
    t = Topology()
    t.declare_exchange("h", "headers")
    t.declare_queue("q")
    with pytest.raises(InvalidArguments, match="x-match"):
        t.bind("h", "q", "", {"x-match": b"any", "k": 1})
    assert t.bindings() == []


def _declare(channel, name: str, durable: bool, auto_delete: bool, internal: bool, arguments: dict):
    # py-amqp's exchange_declare always sends internal=False: send the method ourselves.
    channel.send_method(
        spec.Exchange.Declare,
        "BssbbbbbF",
        (0, name, "direct", False, durable, auto_delete, internal, False, arguments),
        wait=spec.Exchange.DeclareOk,
    )


FIRST = {"durable": False, "auto_delete": False, "internal": False, "arguments": {}}
REDECLARES = [
    ({"durable": True}, False),
    ({"auto_delete": True}, False),
    ({"internal": True}, False),
    ({"arguments": {"alternate-exchange": "elsewhere"}}, False),
    ({"arguments": {"x-other": 1}}, True),  # only alternate-exchange is compared
]


@pytest.mark.parametrize("change,accepted", REDECLARES, ids=[str(c) for c, _ in REDECLARES])
def test_redeclare_with_other_flags(broker_url, prefix, change, accepted) -> None:
    name = prefix + "x"
    connection = connect(broker_url)
    channel = connection.channel()
    _declare(channel, name, **FIRST)
    try:
        _declare(channel, name, **{**FIRST, **change})
        broker_accepted = True
    except amqp.PreconditionFailed:
        broker_accepted = False
        channel = connection.channel()
    channel.exchange_delete(name)
    connection.close()
    assert broker_accepted is accepted

    t = Topology()
    t.declare_exchange("x", "direct", **FIRST)
    if accepted:
        t.declare_exchange("x", "direct", **{**FIRST, **change})
        assert t.exchanges["x"].arguments == {}  # the first declare stands
    else:
        with pytest.raises(PreconditionFailed):
            t.declare_exchange("x", "direct", **{**FIRST, **change})


@pytest.mark.parametrize(
    "headers",
    [{"n": math.nan}, {"n": math.inf}, {"n": -math.inf}, {"n": [1, math.nan]}],
    ids=["nan", "inf", "-inf", "nan-in-array"],
)
def test_non_finite_headers_are_refused(broker_url, prefix, headers) -> None:
    connection = connect(broker_url)
    channel = connection.channel()
    channel.queue_declare(prefix + "q", exclusive=False, auto_delete=True)
    with pytest.raises(amqp.exceptions.InternalError):  # 541: the broker closes the connection
        channel.basic_publish(amqp.Message(b"", application_headers=headers), "", prefix + "q")
    cleanup = connect(broker_url)
    cleanup.channel().queue_delete(prefix + "q")
    cleanup.close()
    t = Topology()
    t.declare_queue("q")
    with pytest.raises(InvalidHeaders, match="finite"):
        t.route("", "q", headers)
