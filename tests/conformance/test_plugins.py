"""Differential tests of the plugin exchange types: the same random topologies and messages in
xroute and in a private RabbitMQ node with the plugins (``make conformance`` starts it)."""

from __future__ import annotations

import random

import pytest

from tests.conformance.plugins import plugin_mirror, plugins_url  # noqa: F401 (fixtures)

pytestmark = pytest.mark.conformance

WORDS = ["a", "b", "c", "", "order", "42", "-7", "é"]
HEADER_VALUES = [
    1, 7, -3, 2**40, 0, 2.5, "k1", "k2", b"k3", "", True, False, None, [1, "a"], {"n": 1}
]


def random_key(rng: random.Random) -> str:
    return ".".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4)))


def random_properties(rng: random.Random) -> dict:
    properties = {}
    if rng.random() < 0.8:
        properties["message_id"] = f"m-{rng.randrange(10**6)}"
    if rng.random() < 0.7:
        properties["correlation_id"] = rng.choice(["", "c", f"c-{rng.randrange(10**9)}"])
    if rng.random() < 0.7:
        properties["timestamp"] = rng.randrange(2**31)  # seconds, as py-amqp sends it
    return properties


@pytest.mark.parametrize("seed", range(12))
def test_random_consistent_hash(plugin_mirror, seed):
    rng = random.Random(seed)
    hash_on = rng.choice([{}, {}, {"hash-header": "h"}, {"hash-property": "message_id"},
                          {"hash-property": "correlation_id"}, {"hash-property": "timestamp"}])
    plugin_mirror.exchange("chx", "x-consistent-hash", arguments=hash_on)
    queues = [f"q{i}" for i in range(rng.randint(1, 6))]
    for queue in queues:
        plugin_mirror.queue(queue)
    made = []
    for _ in range(rng.randint(1, 10)):
        binding = (rng.choice(queues), str(rng.randint(1, 20)))
        if binding not in made:
            plugin_mirror.bind("chx", *binding)
            made.append(binding)
    for _ in range(rng.randint(0, 2)):
        if made:
            plugin_mirror.unbind("chx", *made.pop(rng.randrange(len(made))))
    messages = []
    for _ in range(120):
        headers = {"h": rng.choice(HEADER_VALUES)} if rng.random() < 0.8 else {}
        if rng.random() < 0.2:
            headers["CC"] = [random_key(rng)]
        messages.append(("chx", random_key(rng), headers, random_properties(rng)))
    plugin_mirror.publish_and_compare(messages)


def random_bindings(rng: random.Random, mirror, exchange: str, queues: list[str], keys: bool):
    """Bind queues (some twice, with other keys) and sometimes unbind one."""
    made = []
    for _ in range(rng.randint(1, 9)):
        binding = (rng.choice(queues), random_key(rng) if keys else "")
        if binding not in made:
            mirror.bind(exchange, *binding)
            made.append(binding)
    if made and rng.random() < 0.3:
        mirror.unbind(exchange, *made.pop(rng.randrange(len(made))))


@pytest.mark.parametrize("seed", range(10))
def test_random_modulus_hash(plugin_mirror, seed):
    rng = random.Random(1000 + seed)
    plugin_mirror.exchange("mod", "x-modulus-hash")
    queues = [f"q{i}" for i in range(rng.randint(1, 5))]
    for queue in queues:
        plugin_mirror.queue(queue)
    random_bindings(rng, plugin_mirror, "mod", queues, keys=True)
    messages = []
    for _ in range(100):
        headers = {"CC": [random_key(rng) for _ in range(rng.randint(1, 2))]} if rng.random() < 0.3 else {}
        if rng.random() < 0.1:
            headers["BCC"] = [random_key(rng)]
        messages.append(("mod", random_key(rng), headers))
    plugin_mirror.publish_and_compare(messages)


@pytest.mark.parametrize("seed", range(4))
def test_random_exchange_lands_in_the_candidates(plugin_mirror, seed):
    rng = random.Random(2000 + seed)
    plugin_mirror.exchange("rnd", "x-random")
    plugin_mirror.exchange("fan", "fanout")
    queues = [f"q{i}" for i in range(rng.randint(1, 5))]
    for queue in queues:
        plugin_mirror.queue(queue)
    random_bindings(rng, plugin_mirror, "rnd", queues, keys=True)
    plugin_mirror.bind("fan", "rnd", "", to_exchange=True)
    plugin_mirror.bind("fan", queues[0], "")
    messages = [(rng.choice(["rnd", "fan"]), random_key(rng), {}) for _ in range(100)]
    assert plugin_mirror.publish_and_compare(messages, random=True) > 0


@pytest.mark.parametrize("length", [None, 3])
def test_recent_history_replays_to_a_queue_bound_later(plugin_mirror, length):
    rng = random.Random(3000 + (length or 0))
    arguments = {"x-recent-history-length": length} if length else {}
    mirror = plugin_mirror
    mirror.exchange("hist", "x-recent-history", arguments=arguments)
    mirror.queue("early")
    mirror.bind("hist", "early", "")
    for number in range(25):
        headers = {"x-recent-history-no-store": True} if rng.random() < 0.2 else {}
        tag = f"h{number}"
        reached = mirror.topology.publish(mirror.name("hist"), "k", headers, properties={"app_id": tag})
        assert reached == {mirror.name("early")}
        mirror.publish("hist", "k", headers, {}, tag)
    mirror.queue("late")
    replayed = mirror.topology.bind(mirror.name("hist"), mirror.name("late"))
    mirror.channel.queue_bind(mirror.name("late"), mirror.name("hist"), "")
    got = []
    while message := mirror.channel.basic_get(mirror.name("late"), no_ack=True):
        got.append(message.properties["app_id"])
    # the same messages in the same order (oldest first) as xroute's history
    assert got == [m.properties["app_id"] for m, _ in replayed]
    assert 0 < len(got) <= (length or 20)
    assert len(mirror.drain(mirror.name("early"))) == 25


JMS_NAMES = ["colour", "n", "x", "é"]
JMS_VALUES = [0, 1, 5, -3, 2.5, 1.0, "blue", "bl_e", "b%", "", "5", True, False, 2**40]


def erl_binary(text: str) -> str:
    return "<<" + ",".join(str(b) for b in text.encode("utf-8")) + ">>"


def erl_literal(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return erl_binary(value)
    return repr(value)


def random_selector(rng: random.Random, depth: int = 0) -> str:
    ident = f"{{'ident', {erl_binary(rng.choice(JMS_NAMES))}}}"

    def operand() -> str:
        roll = rng.random()
        if roll < 0.5:
            return ident
        if roll < 0.85 or depth > 1:
            return erl_literal(rng.choice(JMS_VALUES))
        return f"{{'{rng.choice('+-*/')}', {ident}, {erl_literal(rng.choice([1, 2, 0, 0.5]))}}}"

    roll = rng.random()
    if depth < 2 and roll < 0.25:
        op = rng.choice(["and", "or"])
        return f"{{'{op}', {random_selector(rng, depth + 1)}, {random_selector(rng, depth + 1)}}}"
    if depth < 2 and roll < 0.32:
        return f"{{'not', {random_selector(rng, depth + 1)}}}"
    if roll < 0.45:
        pattern = erl_binary(rng.choice(["bl%", "_lue", "b\\\\%", "%", "bl!_e", "", "%e"]))
        escape = rng.choice(["no_escape", erl_binary("!"), erl_binary("\\\\")])
        op = rng.choice(["like", "not_like"])
        return f"{{'{op}', {ident}, {pattern}, {escape}}}"
    if roll < 0.55:
        items = ", ".join(erl_literal(rng.choice(JMS_VALUES)) for _ in range(rng.randint(0, 3)))
        return f"{{'{rng.choice(['in', 'not_in'])}', {ident}, [{items}]}}"
    if roll < 0.65:
        op = rng.choice(["between", "not_between"])
        return f"{{'{op}', {operand()}, {operand()}, {operand()}}}"
    if roll < 0.72:
        return f"{{'{rng.choice(['is_null', 'not_null'])}', {ident}}}"
    op = rng.choice(["=", "<>", ">", "<", ">=", "<="])
    return f"{{'{op}', {operand()}, {operand()}}}"


@pytest.mark.parametrize("seed", range(6))
def test_random_jms_selectors(plugin_mirror, seed):
    from xroute import RoutingFailed

    rng = random.Random(5000 + seed)
    m = plugin_mirror
    m.exchange("jms", "x-jms-topic")
    for i in range(4):
        m.queue(f"q{i}")
    for i in range(8):
        selector = random_selector(rng) + "."
        m.bind("jms", f"q{rng.randrange(4)}", f"k{i}", {"rjms_erlang_selector": selector})
    messages, failing = [], 0
    for _ in range(250):
        headers = {n: rng.choice(JMS_VALUES) for n in rng.sample(JMS_NAMES, rng.randint(0, 4))}
        try:
            m.topology.route(m.name("jms"), "", headers)
        except RoutingFailed:
            failing += 1  # RabbitMQ would close the connection: test_jms_evaluation_failure
            continue
        messages.append(("jms", "", headers))
    assert len(messages) > 30 and failing > 0
    assert m.publish_and_compare(messages) > 0


def test_jms_evaluation_failure_closes_the_connection(plugins_url):
    import uuid

    import amqp

    from xroute import RoutingFailed, Topology
    from xroute.bench.rabbitmq import connect

    name = f"xroute-jms-{uuid.uuid4().hex[:8]}"
    t = Topology(rabbitmq="3.10")
    selector = "{'>', {'+', {'ident', <<\"n\">>}, 1}, 0}."
    t.declare_exchange(name, "x-jms-topic")
    t.declare_queue(name)
    t.bind(name, name, "", {"rjms_erlang_selector": selector})
    with pytest.raises(RoutingFailed):
        t.route(name, "", {"n": "text"})  # arithmetic on a string
    assert t.route(name, "", {"n": 1}) == {name}
    connection = connect(plugins_url)
    channel = connection.channel()
    channel.exchange_declare(name, "x-jms-topic", auto_delete=False)
    channel.queue_declare(name, auto_delete=False)
    channel.queue_bind(name, name, "", arguments={"rjms_erlang_selector": selector})
    with pytest.raises(amqp.exceptions.AMQPError):
        channel.basic_publish(amqp.Message(b"", application_headers={"n": "text"}), name, "")
    with contextlib_closing(connect(plugins_url)) as again:
        channel = again.channel()
        assert channel.queue_declare(name, passive=True).message_count == 0
        channel.exchange_delete(name)
        channel.queue_delete(name)


def contextlib_closing(connection):
    import contextlib

    return contextlib.closing(connection)


def test_sql_selectors_route_as_the_broker_does(plugin_mirror):
    from xroute.exchanges.jms_sql import sql_selector

    rng = random.Random(6000)
    m = plugin_mirror
    m.exchange("sql", "x-jms-topic")
    selectors = [
        "colour = 'blue' OR n > 2",
        "n BETWEEN 0 AND 1.5 AND NOT (colour LIKE 'b%')",
        "x IN ('5', 'blue') OR n IS NULL",
        "colour NOT LIKE 'bl!_e' ESCAPE '!'",
    ]
    for i, sql in enumerate(selectors):
        m.queue(f"q{i}")
        m.bind("sql", f"q{i}", "", {"rjms_erlang_selector": sql_selector(sql)})
    messages = []
    for _ in range(200):
        headers = {
            "colour": rng.choice(["blue", "bl_e", "red", ""]),
            "x": rng.choice(["5", "blue", "y"]),
            "n": rng.choice([0, 1, 2.5, 3, -1]),
        }
        for name in rng.sample(list(headers), rng.randint(0, 2)):
            del headers[name]
        messages.append(("sql", "", headers))
    assert m.publish_and_compare(messages) > 0
