"""Test data for the pipeline: a topology with every exchange type, CC/BCC, exchange-to-exchange
bindings (a cycle included), an alternate exchange and an internal exchange; random messages,
some malformed; and what `Topology.route_message` says about each of them."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from xroute import Topology, XRouteError
from xroute.core.errors import InvalidHeaders, InvalidRoutingKey, UnknownExchange
from xroute.core.keys import check_routing_key

WORDS = ["a", "b", "c", "d", ""]
QUEUES = [f"q{i}" for i in range(8)] + ["lost", "a.b", "inner.log"]


def definitions() -> dict[str, Any]:
    """The test topology as a definitions export."""
    rng = random.Random(11)
    topology = Topology(engine="reference")
    for queue in QUEUES:
        topology.declare_queue(queue)
    topology.declare_exchange("topic", "topic", alternate_exchange="ae")
    topology.declare_exchange("ae", "fanout")
    topology.declare_exchange("inner", "topic", internal=True)
    topology.declare_exchange("direct", "direct")
    topology.declare_exchange("fanout", "fanout")
    topology.declare_exchange("headers", "headers")
    topology.declare_exchange("multi", "x-delimiter")
    bind = topology.bind
    for _ in range(60):
        words = [rng.choice(WORDS + ["*", "#"]) for _ in range(rng.randint(0, 4))]
        bind("topic", rng.choice(QUEUES[:8]), ".".join(words))
    bind("topic", "inner", "#.d", destination_type="exchange")
    bind("inner", "inner.log", "#")
    bind("inner", "topic", "a.#", destination_type="exchange")  # a cycle: topic, inner, topic
    bind("ae", "lost")
    for key in ("a", "b", "a.b", "c.d", ""):
        bind("direct", rng.choice(QUEUES[:8]), key)
    bind("direct", "inner", "d", destination_type="exchange")
    bind("fanout", "q1")
    bind("fanout", "q2")
    for arguments in (
        {"x-match": "all", "kind": "sensor", "floor": 1},
        {"x-match": "any", "kind": "camera", "alarm": True},
        {"x-match": "all"},  # no criteria: every message
        {"x-match": "any-with-x", "x-tag": "red"},
        {"present": None},  # presence only
    ):
        bind("headers", rng.choice(QUEUES[:8]), "", arguments)
    for key in ("a", "b", "c"):
        bind("multi", rng.choice(QUEUES[:8]), key)
    return topology.to_definitions()


EXCHANGES = [
    "topic",
    "topic",
    "topic",
    "direct",
    "fanout",
    "headers",
    "headers",
    "multi",
    "",
    "inner",
    "nope",
    None,
]


def messages(count: int, seed: int = 1) -> list[dict[str, Any]]:
    """Random messages: exchange, routing_key, headers (JSON text), message_id, size."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        exchange = rng.choice(EXCHANGES)
        key: Any = ".".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4)))
        if exchange == "multi":
            key = ":" + ":".join(rng.choice(["a", "b", "c", "z"]) for _ in range(rng.randint(0, 3)))
        headers: Any = None
        draw = rng.random()
        if draw < 0.25 or exchange == "headers":
            headers = {
                name: rng.choice(["sensor", "camera", 1, 1.0, True, "red"])
                for name in rng.sample(
                    ["kind", "floor", "alarm", "x-tag", "present"], rng.randint(0, 3)
                )
            }
        if 0.25 <= draw < 0.32:
            headers = {"CC": [rng.choice(["a", "b.c", "d", "a.b"])]}
        elif 0.32 <= draw < 0.36:
            headers = {"BCC": ["d.d"], "kind": "sensor"}
        text = None if headers is None else json.dumps(headers)
        bad = rng.random()
        if bad < 0.02:
            key = None
        elif bad < 0.04:
            key = "k" * 256
        elif bad < 0.06:
            text = '{"CC": ["a"'
        elif bad < 0.08:
            text = json.dumps({"CC": "a.b"})
        out.append(
            {
                "message_id": f"m{i}",
                "exchange": exchange,
                "routing_key": key,
                "headers": text,
                "size": rng.randint(1, 100),
            }
        )
    return out


def table(records: list[dict[str, Any]]) -> pa.Table:
    """The messages as an Arrow table, headers as JSON text."""
    return pa.table(
        {
            "message_id": pa.array([r["message_id"] for r in records], pa.string()),
            "exchange": pa.array([r["exchange"] for r in records], pa.string()),
            "routing_key": pa.array([r["routing_key"] for r in records], pa.string()),
            "headers": pa.array([r["headers"] for r in records], pa.string()),
            "size": pa.array([r["size"] for r in records], pa.int64()),
        }
    )


@dataclass
class Expected:
    """What the library says about each message."""

    deliveries: set[tuple[str, str]] = field(default_factory=set)
    unroutable: set[str] = field(default_factory=set)
    rejected: dict[str, str] = field(default_factory=dict)  # message_id -> error type
    hits: Counter = field(default_factory=Counter)  # (source, destination, key) -> messages

    def counts(self, total: int) -> dict[str, int]:
        delivered = len({m for m, _ in self.deliveries})
        return {
            "input": total,
            "delivered": delivered,
            "deliveries": len(self.deliveries),
            "unroutable": len(self.unroutable),
            "rejected": len(self.rejected),
        }


def expected(
    topology: Topology, records: list[dict[str, Any]], default: str | None = None
) -> Expected:
    """Route each message with `Topology.route_message`, one by one."""
    result = Expected()
    for r in records:
        mid = r["message_id"]
        matched: set = set()
        try:
            # The order route_message checks in: the exchange, the key, the headers.
            exchange = r["exchange"] if r["exchange"] is not None else default
            if exchange is None:
                raise UnknownExchange(None)
            topology.route_message(exchange, "")
            if r["routing_key"] is None:
                raise InvalidRoutingKey(None, "missing")
            check_routing_key(r["routing_key"])
            try:
                headers = None if r["headers"] is None else json.loads(r["headers"])
            except ValueError:
                raise InvalidHeaders("bad JSON") from None
            queues = topology.route_message(
                exchange,
                r["routing_key"],
                headers,
                observer=lambda _x, m, _v, seen=matched: seen.update(m),
            )
        except XRouteError as error:
            result.rejected[mid] = type(error).__name__
            continue
        for b in matched:
            result.hits[
                (
                    b.source,
                    b.destination.name,
                    b.routing_key,
                    json.dumps(b.arguments, sort_keys=True),
                )
            ] += 1
        if queues:
            result.deliveries.update((mid, q) for q in queues)
        else:
            result.unroutable.add(mid)
    return result
