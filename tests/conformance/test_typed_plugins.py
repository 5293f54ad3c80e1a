"""Typed header values (xroute.core.values) against the private RabbitMQ node with the plugins
(``make conformance``): the same typed bindings and messages in xroute and in the broker, sent
in their exact AMQP types by xroute's own encoder, and the broker's refusals (issue 34)."""

from __future__ import annotations

import random
import uuid
from decimal import Decimal

import amqp
import pytest

from tests.conformance.plugins import BROKER_PROFILE, plugin_mirror, plugins_url  # noqa: F401
from tests.conformance.typed import patched_encoder
from xroute import BrokerCrash, InvalidHeaders, PreconditionFailed, RoutingFailed, Topology
from xroute.bench.rabbitmq import connect
from xroute.core.values import (
    binary,
    byte,
    double,
    float32,
    long,
    longstr,
    short,
    signedint,
    timestamp,
    unsignedbyte,
    unsignedint,
    unsignedshort,
)
from xroute.exchanges.jms_sql import sql_selector

pytestmark = pytest.mark.conformance

# Every scalar type, with values that collide across types (1 in every width, "abc" as
# longstr and binary, 1.5 as float and double).
TYPED = [
    binary(b""), binary(b"abc"), longstr(b""), longstr(b"abc"), "abc", b"abc", longstr(b"\xff"),
    byte(1), unsignedbyte(1), short(1), unsignedshort(1), signedint(1), unsignedint(1), long(1),
    1, 2**40, float32(1.5), double(1.5), float32(0.1), 0.1, timestamp(1), timestamp(10**10),
    Decimal("1.5"), Decimal("1.50"), True, None,
]


def typed_value(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if depth < 2 and roll < 0.15:
        return [typed_value(rng, depth + 1) for _ in range(rng.randint(0, 2))]
    if depth < 2 and roll < 0.22:
        return {name: typed_value(rng, depth + 1) for name in rng.sample("ab", rng.randint(0, 2))}
    return rng.choice(TYPED)


@pytest.mark.parametrize("seed", range(4))
def test_consistent_hash_on_typed_headers(plugin_mirror, seed):
    # 3.10 hashes {Type, Value}: b"" (binary) and b"abc" land where RabbitMQ puts them, apart
    # from longstr "" and "abc".
    rng = random.Random(7000 + seed)
    m = plugin_mirror
    m.exchange("chx", "x-consistent-hash", arguments={"hash-header": "h"})
    for i in range(4):
        m.queue(f"q{i}")
        m.bind("chx", f"q{i}", str(rng.randint(1, 8)))
    messages = [("chx", "k", {"h": value}) for value in TYPED]
    messages += [("chx", "k", {"h": typed_value(rng)}) for _ in range(80)]
    assert m.publish_and_compare(messages) == len(messages)


@pytest.mark.parametrize("seed", range(4))
def test_headers_exchange_on_typed_values(plugin_mirror, seed):
    # Widths, binary/longstr, float/double count inside arrays and tables; not at the top.
    rng = random.Random(8000 + seed)
    m = plugin_mirror
    m.exchange("h", "headers")
    for i in range(6):
        m.queue(f"q{i}")
        mode = rng.choice(["all", "any"])
        arguments = {n: typed_value(rng) for n in rng.sample(["a", "b", "c"], rng.randint(1, 2))}
        m.bind("h", f"q{i}", "", {"x-match": mode, **arguments})
    bound = [dict(b.arguments) for b in m.topology.bindings(m.name("h"))]
    messages = []
    for _ in range(150):
        if bound and rng.random() < 0.5:  # a message built from a binding's own values
            source = rng.choice(bound)
            headers = {k: v for k, v in source.items() if k != "x-match"}
        else:
            headers = {}
        for name in rng.sample(["a", "b", "c"], rng.randint(0, 2)):
            headers[name] = typed_value(rng)
        messages.append(("h", "", headers))
    assert m.publish_and_compare(messages) > 0


def test_jms_selector_over_a_binary_header_closes_the_connection(plugins_url):
    name = f"xroute-jms-bin-{uuid.uuid4().hex[:8]}"
    selector = sql_selector("k = 'v'")
    t = Topology(rabbitmq=BROKER_PROFILE)
    t.declare_exchange(name, "x-jms-topic")
    t.declare_queue(name)
    t.bind(name, name, "", {"rjms_erlang_selector": selector})
    with pytest.raises(RoutingFailed) as caught:
        t.route(name, "", {"k": binary(b"v")})
    assert caught.value.reply == (541, "")
    assert t.route(name, "", {"k": longstr(b"v")}) == {name}
    connection = connect(plugins_url)
    channel = connection.channel()
    channel.exchange_declare(name, "x-jms-topic", auto_delete=False)
    channel.queue_declare(name, auto_delete=False)
    channel.queue_bind(name, name, "", arguments={"rjms_erlang_selector": selector})
    with patched_encoder():
        channel.basic_publish(amqp.Message(b"", application_headers={"k": longstr(b"v")}),
                              name, "")
        with pytest.raises(amqp.exceptions.AMQPError) as refused:
            channel.basic_publish(amqp.Message(b"", application_headers={"k": binary(b"v")}),
                                  name, "")
    assert refused.value.reply_code == 541
    again = connect(plugins_url)
    try:
        channel = again.channel()
        assert channel.queue_declare(name, passive=True).message_count == 1  # the longstr one
        channel.exchange_delete(name)
        channel.queue_delete(name)
    finally:
        again.close()


def _refusal(url: str, action) -> amqp.exceptions.AMQPError:
    connection = connect(url)
    try:
        with patched_encoder(), pytest.raises(amqp.exceptions.AMQPError) as refused:
            action(connection.channel())
        return refused.value
    finally:
        try:
            connection.close()
        except Exception:  # already closed by the broker (541)
            pass


def test_a_hash_header_that_is_not_a_longstr_crashes_the_declaration(plugins_url):
    name = f"xroute-chx-bin-{uuid.uuid4().hex[:8]}"
    with pytest.raises(BrokerCrash):
        Topology(rabbitmq=BROKER_PROFILE).declare_exchange(
            name, "x-consistent-hash", arguments={"hash-header": binary(b"h")}
        )
    error = _refusal(plugins_url, lambda ch: ch.exchange_declare(
        name, "x-consistent-hash", auto_delete=True, arguments={"hash-header": binary(b"h")}))
    assert error.reply_code == 541


def test_a_bcc_of_type_void_is_refused_with_406(plugins_url):
    name = f"xroute-bcc-{uuid.uuid4().hex[:8]}"
    with pytest.raises(InvalidHeaders):
        Topology().route("", name, {"BCC": None})

    def publish(channel):
        channel.queue_declare(name, exclusive=True)
        channel.basic_publish(amqp.Message(b"", application_headers={"BCC": None}), "", name)
        channel.basic_get(name)  # the refusal arrives before the answer

    assert _refusal(plugins_url, publish).reply_code == 406


@pytest.mark.parametrize("length,accepted", [(short(3), True), (long(3), True),
                                             (unsignedint(3), False), (timestamp(3), False)])
def test_recent_history_length_types(plugins_url, length, accepted):
    name = f"xroute-rh-{uuid.uuid4().hex[:8]}"
    arguments = {"x-recent-history-length": length}
    t = Topology(rabbitmq=BROKER_PROFILE)
    if accepted:
        t.declare_exchange(name, "x-recent-history", arguments=arguments)
        connection = connect(plugins_url)
        try:
            channel = connection.channel()
            with patched_encoder():
                channel.exchange_declare(name, "x-recent-history", auto_delete=False,
                                         arguments=arguments)
            channel.exchange_delete(name)
        finally:
            connection.close()
        return
    with pytest.raises(PreconditionFailed):
        t.declare_exchange(name, "x-recent-history", arguments=arguments)
    error = _refusal(plugins_url, lambda ch: ch.exchange_declare(
        name, "x-recent-history", auto_delete=True, arguments=arguments))
    assert error.reply_code == 406
