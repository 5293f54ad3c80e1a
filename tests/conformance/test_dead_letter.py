"""Dead-lettering against RabbitMQ: messages that expire at once (x-message-ttl 0) or are
rejected go on through dead-letter exchanges, chains and cycles included, and land where
`Topology.dead_letter_copy` / `route_dead_letter` say."""

from __future__ import annotations

import random
import time

import pytest

from tests.conformance.plugins import plugin_mirror, plugins_url  # noqa: F401 (fixtures)

pytestmark = pytest.mark.conformance

KEYS = ["a", "b", "c", ""]


def expected_landing(mirror, exchange, key, headers, expiring, max_hops=20):
    """Queues a message finally rests in: routed, then every expiring queue it reaches
    dead-letters it again, until none does."""
    topology = mirror.topology
    final: set[str] = set()
    pending = [(queue, None) for queue in topology.route(exchange, key, headers)]
    for _ in range(max_hops):
        if not pending:
            break
        following = []
        for queue, previous in pending:
            if queue not in expiring:
                final.add(queue)
                continue
            copy = topology.dead_letter_copy(
                queue, key, headers, "expired", exchange=exchange, previous=previous
            )
            following += [(q, copy) for q in topology.route_dead_letter(copy)]
        pending = following
    assert not pending, "a dead-letter chain longer than the test expects"
    return final


@pytest.mark.parametrize("seed", range(8))
def test_random_dead_letter_chains_through_ttl_0(plugin_mirror, seed):
    rng = random.Random(4000 + seed)
    m = plugin_mirror
    exchanges = {"d": "direct", "f": "fanout", "t": "topic"}
    for name, kind in exchanges.items():
        m.exchange(name, kind)
    expiring = set()
    for i in range(5):
        arguments = {}
        if rng.random() < 0.7:
            targets = [m.name(x) for x in exchanges] + ["", m.name("missing")]
            arguments["x-dead-letter-exchange"] = rng.choice(targets)
            if rng.random() < 0.4:
                keys = KEYS + [m.name(f"q{rng.randrange(5)}")]  # "" routes by queue name
                arguments["x-dead-letter-routing-key"] = rng.choice(keys)
        if rng.random() < 0.5:
            arguments["x-message-ttl"] = 0
            expiring.add(m.name(f"q{i}"))
        m.queue(f"q{i}", arguments)
    for _ in range(10):
        source = rng.choice(list(exchanges))
        key = rng.choice(KEYS) if source != "t" else rng.choice(KEYS + ["#", "*"])
        m.bind(source, f"q{rng.randrange(5)}", key)
    expected: dict[str, set[str]] = {q: set() for q in m.queues}
    for number in range(40):
        exchange = rng.choice(list(exchanges))
        key = rng.choice(KEYS)
        headers = {"CC": [rng.choice(KEYS)]} if rng.random() < 0.3 else {}
        if rng.random() < 0.2:
            headers["BCC"] = [rng.choice(KEYS)]
        for queue in expected_landing(m, m.name(exchange), key, headers, expiring):
            expected[queue].add(str(number))
        m.publish(exchange, key, headers, {}, str(number))
    time.sleep(0.5)  # expiry and dead-lettering happen after the publish is confirmed
    received = {q: m.drain(q) for q in m.queues}
    assert received == expected


def test_rejected_messages_are_dead_lettered_and_never_dropped_as_cycles(plugin_mirror):
    m = plugin_mirror
    m.exchange("dlx", "fanout")
    m.queue("work", {"x-dead-letter-exchange": m.name("dlx")})
    m.queue("audit", {"x-dead-letter-exchange": m.name("dlx")})
    m.bind("dlx", "work", "")
    m.bind("dlx", "audit", "")
    m.publish("", m.name("work"), {}, {}, "first")
    message = m.channel.basic_get(m.name("work"), no_ack=False)
    m.channel.basic_reject(message.delivery_tag, requeue=False)
    time.sleep(0.3)
    expected = m.topology.dead_letter(m.name("work"), m.name("work"), None, "rejected")
    assert expected == {m.name("work"), m.name("audit")}  # 'work' again: rejection is no cycle
    assert {q for q in m.queues if m.drain(q)} == expected
