"""Differential tests: the same topologies and messages in xroute and in a real RabbitMQ.

Random topologies use a seeded generator (the seed is in the test id) over a small vocabulary
with empty words, ``*``, ``#`` and runs of ``#``, so that patterns and keys collide often.
"""

from __future__ import annotations

import json
import random
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from tests.conformance.broker import Mirror
from tests.rabbitmq_cases import Typed

pytestmark = pytest.mark.conformance

TOPIC_WORDS = ["a", "b", "c", ""]
HEADER_NAMES = ["h1", "h2", "h3", "x-h"]
TS1, TS2 = datetime(1970, 1, 1, 0, 0, 1), datetime(1970, 1, 1, 0, 0, 2)  # equal 1 and 2 at the top
# py-amqp sends str and bytes alike as long strings, so b"a" == "a" is checked too.
# Integral floats (1.0) are left out at the top level: RabbitMQ 3.10.8 (Debian 12's) matches a
# header 1 (or a timestamp of 1 s) against a binding 1.0 there, where docs/semantics.md (after
# RabbitMQ 4.x) says a float never equals an integer. Inside arrays both agree ([1] != [1.0]).
HEADER_VALUES = [
    1, 2, -7, 2**40, 2.5, -0.5, True, False, "1", "a", b"a", "", None,
    [1, "a"], [1.0], {"k": 1},
    # issue 15: timestamps, decimals (scale counts), nested tables in field order, {} == [],
    # arrays of mixed widths (py-amqp sends 1 as 32-bit, 2**40 as 64-bit)
    TS1, TS2, Decimal("1.5"), Decimal("1.50"), Decimal("2"),
    {"a": 1, "b": 2}, {"b": 2, "a": 1}, {}, [], [TS1], [1, 2**40], [Decimal("-0.5"), TS2],
    {"a": [TS1, {"b": Decimal("1.5")}]},
]
# Only at the top of a table: exact AMQP types py-amqp would not pick, which compare by value
# there (inside arrays RabbitMQ compares the width too: docs/semantics.md, the known difference).
TOP_ONLY_VALUES = [Typed("l", 1), Typed("b", -7), Typed("x", b"a"), Typed("f", 2.5), Typed("T", 2)]
# CC/BCC elements beside the keys: skipped (non-text, binary), long or not UTF-8 (still keys).
CC_EXTRAS = [1, None, ["a"], Typed("x", b"a.b"), "a." + "b" * 300, b"a.\xff", b"\xfe"]
def random_pattern(rng: random.Random) -> str:
    return ".".join(rng.choice(TOPIC_WORDS + ["*", "#", "#"]) for _ in range(rng.randint(0, 5)))


def random_key(rng: random.Random) -> str:
    return ".".join(rng.choice(TOPIC_WORDS + ["d"]) for _ in range(rng.randint(0, 6)))


@pytest.fixture
def mirror(channel, prefix):
    m = Mirror(channel, prefix)
    yield m
    m.cleanup()


@pytest.mark.parametrize("seed", range(6))
def test_random_topic_topologies(mirror, seed):
    rng = random.Random(seed)
    mirror.exchange("t", "topic")
    for q in range(5):
        mirror.queue(f"q{q}")
    for _ in range(30):
        mirror.bind("t", f"q{rng.randrange(5)}", random_pattern(rng))
    keys = [random_key(rng) for _ in range(150)]
    assert mirror.publish_and_compare([("t", key, None) for key in keys]) > 0


def random_headers_arguments(rng: random.Random) -> dict:
    arguments = {"x-match": rng.choice(["all", "any", "all-with-x", "any-with-x"])}
    for name in rng.sample(HEADER_NAMES, rng.randint(0, 3)):
        arguments[name] = top_value(rng)
    return arguments


def top_value(rng: random.Random):
    return rng.choice(TOP_ONLY_VALUES) if rng.random() < 0.1 else rng.choice(HEADER_VALUES)


def random_headers(rng: random.Random) -> dict:
    return {name: top_value(rng) for name in rng.sample(HEADER_NAMES, rng.randint(0, 4))}


def random_cc(rng: random.Random) -> list:
    keys = [random_key(rng) for _ in range(rng.randint(0, 2))]
    for _ in range(rng.randint(0, 2)):
        keys.insert(rng.randint(0, len(keys)), rng.choice(CC_EXTRAS))
    return keys


@pytest.mark.parametrize("seed", range(6))
def test_random_headers_topologies(mirror, seed):
    rng = random.Random(100 + seed)
    mirror.exchange("h", "headers")
    for q in range(5):
        mirror.queue(f"q{q}")
    for _ in range(20):
        mirror.bind("h", f"q{rng.randrange(5)}", "", random_headers_arguments(rng))
    messages = [("h", "", random_headers(rng)) for _ in range(150)]
    assert mirror.publish_and_compare(messages) > 0


def test_classic_topic_table(mirror):
    cases = json.loads((Path(__file__).parents[1] / "data" / "topic_cases.json").read_text())
    mirror.exchange("t", "topic")
    for name, pattern in cases["bindings"].items():
        mirror.queue(name)
        mirror.bind("t", name, pattern)
    keys = [key for key, _ in cases["routes"]] + [k for k, _, _ in cases["empty_words"]["cases"]]
    assert mirror.publish_and_compare([("t", key, None) for key in keys]) > 0


def test_cc_bcc_exchange_to_exchange_and_alternates(mirror):
    mirror.exchange("ae", "fanout")
    mirror.exchange("front", "direct", alternate="ae")
    mirror.exchange("topic", "topic", alternate="ae")
    mirror.exchange("hdr", "headers")
    mirror.exchange("fan", "fanout")
    for q in ("orders", "audit", "lost", "eu", "all"):
        mirror.queue(q)
    mirror.bind("ae", "lost", "")
    mirror.bind("front", "orders", "order")
    mirror.bind("front", "topic", "order", to_exchange=True)
    mirror.bind("front", "hdr", "headers", to_exchange=True)
    mirror.bind("topic", "audit", "#")
    mirror.bind("topic", "front", "loop.#", to_exchange=True)
    mirror.bind("hdr", "eu", "", {"region": "eu"})
    mirror.bind("hdr", "fan", "", {"x-match": "any", "CC": None, "BCC": None}, to_exchange=True)
    mirror.bind("fan", "all", "")
    messages = [
        ("front", "order", None),
        ("front", "nothing", None),
        ("front", "headers", {"region": "eu"}),
        ("front", "headers", {"region": "us"}),  # matched an exchange binding: no alternate
        ("front", "nothing", {"CC": ["order"]}),
        ("front", "nothing", {"BCC": ["order"]}),
        ("front", "headers", {"BCC": ["x"]}),  # BCC is stripped before headers matching
        ("front", "headers", {"CC": ["x"]}),
        ("front", "x", {"CC": ["headers", "order"], "BCC": ["nothing"], "region": "eu"}),
        ("topic", "loop.order", None),
        ("topic", "anything", None),
        ("hdr", "", {"region": "us"}),
    ]
    assert mirror.publish_and_compare(messages) > 0


@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_of_exchanges(mirror, seed):
    # Exchanges of every built-in type bound to each other (cycles included), alternate
    # exchanges, and messages carrying CC and BCC keys.
    rng = random.Random(200 + seed)
    names = [f"x{i}" for i in range(5)]
    kinds = {name: rng.choice(["direct", "fanout", "topic", "headers"]) for name in names}
    for name in names:
        alternate = rng.choice(names) if rng.random() < 0.4 else None
        mirror.exchange(name, kinds[name], alternate=alternate)
    for q in range(4):
        mirror.queue(f"q{q}")

    def binding_key(source: str) -> str:
        return random_pattern(rng) if kinds[source] == "topic" else random_key(rng)

    for _ in range(20):
        source = rng.choice(names)
        arguments = random_headers_arguments(rng) if kinds[source] == "headers" else None
        if rng.random() < 0.3:
            mirror.bind(source, rng.choice(names), binding_key(source), arguments, to_exchange=True)
        else:
            mirror.bind(source, f"q{rng.randrange(4)}", binding_key(source), arguments)
    messages = []
    for _ in range(150):
        headers = random_headers(rng)
        if rng.random() < 0.3:
            headers["CC"] = random_cc(rng)
        if rng.random() < 0.2:
            headers["BCC"] = random_cc(rng) or [random_key(rng)]
        messages.append((rng.choice(names), random_key(rng), headers))
    mirror.publish_and_compare(messages)
