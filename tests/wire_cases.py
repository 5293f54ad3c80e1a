"""Scripts of typed AMQP operations for the wire differential test (`tests.wire_replay`):
generated ones (seeded) over every exchange type the plugin node has, and hand-picked ones for
the differences issue 34 names."""

from __future__ import annotations

import random
from typing import Any

# Field values of every type RabbitMQ's parser reads, and the same value in several types.
VALUES: list[list] = [
    ["b", 1], ["B", 1], ["s", 1], ["u", 1], ["I", 1], ["i", 1], ["l", 1], ["s", -2],
    ["l", 2**40], ["f", 1.5], ["d", 1.5], ["d", 1.0], ["D", [1, 15]], ["D", [2, 150]],
    ["S", "abc"], ["x", "616263"], ["S", ""], ["x", ""], ["S", "é"], ["T", 1_700_000_000],
    ["V", None], ["t", True], ["t", False],
    ["A", [["s", 1]]], ["A", [["I", 1]]], ["A", [["l", 1]]], ["A", [["f", 1.5]]],
    ["A", [["d", 1.5]]], ["A", [["S", "abc"]]], ["A", [["x", "616263"]]], ["A", []],
    ["A", [["A", [["b", 2]]], ["F", {"k": ["u", 3]}]]],
    ["F", {"k": ["s", 1]}], ["F", {"k": ["I", 1]}], ["F", {}], ["F", {"k": ["V", None]}],
]
NAMES = ["a", "b", "n", "colour"]
WORDS = ["a", "b", "c", "", "order", "é"]
TYPES = ["direct", "topic", "headers", "fanout", "x-consistent-hash", "x-modulus-hash",
         "x-jms-topic", "x-recent-history"]
SELECTORS = [
    "{'=', {'ident', <<\"n\">>}, 1}.",
    "{'>', {'ident', <<\"n\">>}, 0}.",
    "{'=', {'ident', <<\"colour\">>}, <<\"abc\">>}.",
    "{'like', {'ident', <<\"colour\">>}, {<<\"a%\">>, no_escape}}.",
    "{'is_null', {'ident', <<\"a\">>}}.",
    "{'not_null', {'ident', <<\"b\">>}}.",
    "{'and', {'>', {'ident', <<\"n\">>}, 0}, {'<', {'ident', <<\"n\">>}, 2}}.",
    "{'>', {'+', {'ident', <<\"n\">>}, 1}, 1}.",
    "{'ident', <<\"b\">>}.",
]


def _key(rng: random.Random) -> str:
    return ".".join(rng.choice(WORDS) for _ in range(rng.randint(0, 3)))


def _headers(rng: random.Random) -> dict[str, list] | None:
    roll = rng.random()
    if roll < 0.15:
        return None
    headers = {name: rng.choice(VALUES) for name in rng.sample(NAMES, rng.randint(0, 3))}
    if rng.random() < 0.2:
        headers["CC"] = ["A", [["S", _key(rng)] for _ in range(rng.randint(0, 2))]]
    if rng.random() < 0.1:
        headers["BCC"] = rng.choice([["A", [["S", _key(rng)]]], ["A", [["x", "61"]]],
                                     ["V", None], ["S", "a"]])
    return headers


def _exchange_arguments(rng: random.Random, kind: str, others: list[str]) -> dict[str, list]:
    arguments: dict[str, list] = {}
    if kind == "x-consistent-hash":
        arguments = rng.choice([
            {}, {}, {"hash-header": ["S", "n"]}, {"hash-header": ["S", "colour"]},
            {"hash-property": ["S", "message_id"]}, {"hash-property": ["S", "correlation_id"]},
            {"hash-property": ["S", "timestamp"]}, {"hash-header": ["x", "6e"]},
        ])
    elif kind == "x-recent-history" and rng.random() < 0.7:
        arguments = {"x-recent-history-length": [rng.choice("bsIli"), rng.randint(1, 4)]}
    if others and rng.random() < 0.2:
        arguments["alternate-exchange"] = ["S", rng.choice(others)]
    return arguments


def _binding(rng: random.Random, kind: str) -> tuple[str, dict[str, list] | None]:
    if kind in ("direct", "topic", "x-modulus-hash"):
        key = _key(rng)
        if kind == "topic" and rng.random() < 0.3:
            key = rng.choice(["#", "*.b", "a.#", "#.a.#", "*"])
        return key, None
    if kind == "x-consistent-hash":
        return str(rng.randint(1, 5)), None
    if kind == "headers":
        mode = rng.choice([["S", "any"], ["S", "all"], ["S", "any-with-x"], ["x", "616e79"]])
        arguments = {"x-match": mode}
        for name in rng.sample(NAMES, rng.randint(0, 2)):
            arguments[name] = rng.choice(VALUES)
        return "", arguments
    if kind == "x-jms-topic":
        return _key(rng), {"rjms_erlang_selector": ["S", rng.choice(SELECTORS)]}
    return "", None


def generate(seed: int) -> list[dict[str, Any]]:
    """One script: exchanges of the plugin node's types, queues, typed bindings, messages
    with typed headers and properties, then unbinds, deletes and more messages."""
    rng = random.Random(seed)
    script: list[dict[str, Any]] = []
    exchanges: dict[str, str] = {}
    for i in range(rng.randint(2, 4)):
        name, kind = f"e{i}", rng.choice(TYPES)
        op = {"op": "exchange.declare", "name": name, "type": kind}
        arguments = _exchange_arguments(rng, kind, list(exchanges))
        if arguments:
            op["arguments"] = arguments
        script.append(op)
        exchanges[name] = kind
    queues = [f"q{i}" for i in range(rng.randint(2, 4))]
    script += [{"op": "queue.declare", "name": q} for q in queues]
    bindings = []
    messages = 0

    def publish(count: int) -> None:
        nonlocal messages
        for _ in range(count):
            op: dict[str, Any] = {"op": "publish", "exchange": rng.choice([*exchanges, ""]),
                                  "key": _key(rng) if rng.random() < 0.8 else rng.choice(queues),
                                  "id": f"m{messages}"}
            headers = _headers(rng)
            if headers is not None:
                op["headers"] = headers
            properties = {}
            if rng.random() < 0.8:
                properties["message_id"] = f"id-{rng.randrange(1000)}"
            if rng.random() < 0.5:
                properties["correlation_id"] = rng.choice(["", "c", f"c-{rng.randrange(99)}"])
            if rng.random() < 0.5:
                properties["timestamp"] = rng.choice([rng.randrange(2**31), 2**62])
            if properties:
                op["properties"] = properties
            script.append(op)
            messages += 1

    publish(rng.randint(0, 3))  # before any binding: recent history keeps them
    for _ in range(rng.randint(3, 9)):
        source = rng.choice(list(exchanges))
        key, arguments = _binding(rng, exchanges[source])
        if rng.random() < 0.2 and len(exchanges) > 1:
            destination = rng.choice([e for e in exchanges if e != source])
            op = {"op": "exchange.bind", "source": source, "destination": destination,
                  "key": key}
        else:
            op = {"op": "queue.bind", "source": source, "destination": rng.choice(queues),
                  "key": key}
        if arguments is not None:
            op["arguments"] = arguments
        script.append(op)
        bindings.append(op)
    publish(rng.randint(8, 16))
    for op in rng.sample(bindings, min(len(bindings), rng.randint(0, 2))):
        script.append({**op, "op": op["op"].replace("bind", "unbind")})
    if rng.random() < 0.3:
        script.append({"op": "exchange.delete", "name": rng.choice(list(exchanges))})
    if rng.random() < 0.3:
        script.append({"op": "queue.delete", "name": rng.choice(queues)})
    publish(rng.randint(2, 6))
    return script


# Hand-picked: each names what it pins (issue 34's list).
HAND_PICKED: dict[str, list[dict[str, Any]]] = {
    "consistent hash hashes a binary header as binary (b'' and b'abc' apart)": [
        {"op": "exchange.declare", "name": "chx", "type": "x-consistent-hash",
         "arguments": {"hash-header": ["S", "h"]}},
        *[{"op": "queue.declare", "name": f"q{i}"} for i in range(4)],
        *[{"op": "queue.bind", "source": "chx", "destination": f"q{i}", "key": "3"}
          for i in range(4)],
        *[{"op": "publish", "exchange": "chx", "key": "", "id": f"m{i}",
           "headers": {"h": value}}
          for i, value in enumerate([["x", ""], ["S", ""], ["x", "616263"], ["S", "abc"],
                                     ["s", 7], ["l", 7], ["f", 1.5], ["d", 1.5],
                                     ["A", [["x", "61"]]], ["A", [["S", "61"]]]])],
    ],
    "headers arrays compare element types: [short 1] is not [long 1]": [
        {"op": "exchange.declare", "name": "h", "type": "headers"},
        *[{"op": "queue.declare", "name": f"q{i}"} for i in range(5)],
        *[{"op": "queue.bind", "source": "h", "destination": f"q{i}",
           "arguments": {"x-match": ["S", "any"], "a": value}}
          for i, value in enumerate([["A", [["s", 1]]], ["A", [["l", 1]]], ["A", [["f", 1.5]]],
                                     ["A", [["x", "616263"]]], ["A", [["S", "abc"]]]])],
        *[{"op": "publish", "exchange": "h", "key": "", "id": f"m{i}", "headers": {"a": value}}
          for i, value in enumerate([["A", [["s", 1]]], ["A", [["I", 1]]], ["A", [["l", 1]]],
                                     ["A", [["f", 1.5]]], ["A", [["d", 1.5]]],
                                     ["A", [["x", "616263"]]], ["A", [["S", "abc"]]]])],
    ],
    "a JMS selector over a binary header closes the connection (541)": [
        {"op": "exchange.declare", "name": "jms", "type": "x-jms-topic"},
        {"op": "queue.declare", "name": "q0"},
        {"op": "queue.bind", "source": "jms", "destination": "q0", "key": "k",
         "arguments": {"rjms_erlang_selector": ["S", "{'=', {'ident', <<\"c\">>}, <<\"a\">>}."]}},
        {"op": "publish", "exchange": "jms", "key": "k", "id": "m0", "headers": {"c": ["S", "a"]}},
        {"op": "publish", "exchange": "jms", "key": "k", "id": "m1", "headers": {"c": ["x", "61"]}},
        {"op": "publish", "exchange": "jms", "key": "k", "id": "m2", "headers": {"c": ["s", 1]}},
    ],
    "x-recent-history-length of type unsignedint is refused (406)": [
        {"op": "exchange.declare", "name": "r1", "type": "x-recent-history",
         "arguments": {"x-recent-history-length": ["i", 5]}},
        {"op": "exchange.declare", "name": "r2", "type": "x-recent-history",
         "arguments": {"x-recent-history-length": ["s", 2]}},
        {"op": "exchange.declare", "name": "r3", "type": "x-recent-history",
         "arguments": {"x-recent-history-length": ["S", "5"]}},
    ],
    "BCC and CC of other types": [
        {"op": "queue.declare", "name": "q0"},
        {"op": "publish", "exchange": "", "key": "", "id": "m0",
         "headers": {"CC": ["A", [["S", "q0"], ["x", "7130"]]]}},
        {"op": "publish", "exchange": "", "key": "", "id": "m1",
         "headers": {"BCC": ["A", [["S", "q0"]]]}},
        {"op": "publish", "exchange": "", "key": "", "id": "m2", "headers": {"BCC": ["V", None]}},
        {"op": "publish", "exchange": "", "key": "", "id": "m3", "headers": {"CC": ["S", "q0"]}},
        {"op": "publish", "exchange": "", "key": "", "id": "m4",
         "headers": {"CC": ["A", [["x", "7130"]]], "BCC": ["l", 1]}},
    ],
    "a timestamp property past the year 9999 is acked": [
        {"op": "queue.declare", "name": "q0"},
        {"op": "publish", "exchange": "", "key": "q0", "id": "m0",
         "properties": {"timestamp": 2**62}, "headers": {"t": ["T", 2**62]}},
    ],
    "recent history replayed through an exchange where a message goes nowhere (541)": [
        {"op": "exchange.declare", "name": "h", "type": "x-recent-history"},
        {"op": "exchange.declare", "name": "d", "type": "direct"},
        {"op": "queue.declare", "name": "qa"},
        {"op": "queue.bind", "source": "d", "destination": "qa", "key": "a"},
        *[{"op": "publish", "exchange": "h", "key": k, "id": f"m{i}"}
          for i, k in enumerate("aba")],
        {"op": "exchange.bind", "source": "h", "destination": "d"},
        {"op": "publish", "exchange": "h", "key": "a", "id": "m3"},
        {"op": "queue.declare", "name": "late"},
        {"op": "queue.bind", "source": "h", "destination": "late"},
    ],
    "a binding whose two ends are missing names its source": [
        {"op": "exchange.declare", "name": "x", "type": "direct"},
        {"op": "exchange.bind", "source": "nx1", "destination": "nx2"},
        {"op": "queue.bind", "source": "nx1", "destination": "nq"},
        {"op": "queue.bind", "source": "x", "destination": "nq"},
        {"op": "exchange.bind", "source": "x", "destination": "nx2"},
        {"op": "exchange.unbind", "source": "nx1", "destination": "nx2"},
    ],
    "inequivalent redeclares, in RabbitMQ's words": [
        {"op": "exchange.declare", "name": "x", "type": "x-consistent-hash"},
        {"op": "exchange.declare", "name": "x", "type": "direct"},
        {"op": "exchange.declare", "name": "y", "type": "direct",
         "arguments": {"alternate-exchange": ["S", "a1"]}},
        {"op": "exchange.declare", "name": "y", "type": "direct",
         "arguments": {"alternate-exchange": ["x", "6131"]}},
        {"op": "exchange.declare", "name": "y", "type": "direct"},
        {"op": "exchange.declare", "name": "y", "type": "direct", "durable": True},
    ],
}

