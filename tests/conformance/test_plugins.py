"""Differential tests of the plugin exchange types: the same random topologies and messages in
xroute and in a private RabbitMQ node with the plugins (``make conformance`` starts it)."""

from __future__ import annotations

import random

import pytest

from tests.conformance.plugins import plugin_mirror, plugins_url  # noqa: F401 (fixtures)

pytestmark = pytest.mark.conformance

WORDS = ["a", "b", "c", "", "order", "42", "-7", "é"]
HEADER_VALUES = [1, 7, -3, 2**40, 0, 2.5, "k1", "k2", b"k3", "", True, False, None, [1, "a"], {"n": 1}]


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
