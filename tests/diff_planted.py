"""Random topologies (as definitions exports) with one planted change each, and messages that
exercise them; the oracle is a message-by-message comparison with `Topology.route`."""

from __future__ import annotations

import copy
import random
from collections import Counter
from typing import Any

from xroute import Topology, XRouteError

WORDS = ["a", "b", "c", ""]
QUEUES = [f"q{i}" for i in range(6)]
HEADER_NAMES = ["h1", "h2"]
HEADER_VALUES = [1, 2, "x"]
# The planted changes issue 14 names.
CHANGES = ("rename-queue", "widen-pattern", "narrow-pattern", "remove-binding", "alternate", "x-match")


def _pattern(rng: random.Random) -> str:
    return ".".join(rng.choice(WORDS + ["*", "#"]) for _ in range(rng.randint(1, 4)))


def _key(rng: random.Random) -> str:
    return ".".join(rng.choice(WORDS + ["d"]) for _ in range(rng.randint(0, 5)))


def random_export(rng: random.Random) -> dict[str, Any]:
    """Exchanges t (topic, alternate ae), d (direct), h (headers), ae (fanout), six queues and
    random bindings of each kind."""
    exchanges = [
        {"name": "t", "type": "topic", "arguments": {"alternate-exchange": "ae"}},
        {"name": "d", "type": "direct", "arguments": {}},
        {"name": "h", "type": "headers", "arguments": {}},
        {"name": "ae", "type": "fanout", "arguments": {}},
        {"name": "spare", "type": "fanout", "arguments": {}},
    ]
    bindings = []

    def bind(source: str, key: str, arguments: dict | None = None) -> None:
        bindings.append(
            {"source": source, "destination": rng.choice(QUEUES), "destination_type": "queue",
             "routing_key": key, "arguments": arguments or {}}
        )

    for _ in range(10):
        bind("t", _pattern(rng))
    for _ in range(4):
        bind("d", _key(rng))
    for _ in range(4):
        arguments = {"x-match": rng.choice(["all", "any"])}
        for name in rng.sample(HEADER_NAMES, rng.randint(1, 2)):
            arguments[name] = rng.choice(HEADER_VALUES)
        bind("h", "", arguments)
    bind("ae", "")
    bind("spare", "")
    return {
        "queues": [{"name": q, "arguments": {}} for q in QUEUES],
        "exchanges": exchanges,
        "bindings": _unique(bindings),
    }


def _unique(bindings: list[dict]) -> list[dict]:
    seen, out = set(), []
    for b in bindings:
        identity = repr(sorted(b.items()))
        if identity not in seen:
            seen.add(identity)
            out.append(b)
    return out


def plant(export: dict[str, Any], change: str, rng: random.Random) -> dict[str, Any]:
    """A copy of ``export`` with one change of kind ``change`` (one of `CHANGES`)."""
    new = copy.deepcopy(export)
    topic = [b for b in new["bindings"] if b["source"] == "t"]
    if change == "rename-queue":
        old_name = rng.choice(sorted({b["destination"] for b in new["bindings"]}))
        for q in new["queues"]:
            if q["name"] == old_name:
                q["name"] = old_name + "-v2"
        for b in new["bindings"]:
            if b["destination"] == old_name:
                b["destination"] = old_name + "-v2"
    elif change == "widen-pattern":
        b = rng.choice(topic)
        words = b["routing_key"].split(".")
        i = rng.randrange(len(words))
        words[i] = "#" if words[i] in ("*", "#") or rng.random() < 0.5 else "*"
        b["routing_key"] = ".".join(words)
        if b["routing_key"] == "*":  # make sure something widened
            b["routing_key"] = "#"
    elif change == "narrow-pattern":
        wild = [b for b in topic if {"*", "#"} & set(b["routing_key"].split("."))]
        b = rng.choice(wild or topic)
        words = b["routing_key"].split(".")
        spots = [i for i, w in enumerate(words) if w in ("*", "#")]
        if spots:
            i = rng.choice(spots)
            words[i] = "*" if words[i] == "#" else "a"
        else:
            words.append("a")  # no wildcard to narrow: a longer key (a different pattern)
        b["routing_key"] = ".".join(words)
    elif change == "remove-binding":
        new["bindings"].remove(rng.choice(new["bindings"]))
    elif change == "alternate":
        t = next(x for x in new["exchanges"] if x["name"] == "t")
        t["arguments"] = {"alternate-exchange": "spare"} if rng.random() < 0.5 else {}
    elif change == "x-match":
        b = rng.choice([b for b in new["bindings"] if b["source"] == "h"])
        b["arguments"]["x-match"] = "any" if b["arguments"]["x-match"] == "all" else "all"
    else:
        raise ValueError(change)
    new["bindings"] = _unique(new["bindings"])
    return new


def messages(rng: random.Random, n: int) -> list[tuple[str, str, str, dict | None]]:
    """(message_id, exchange, routing_key, headers) over the three publishable exchanges."""
    out = []
    for i in range(n):
        exchange = rng.choice(["t", "t", "d", "h"])
        headers = None
        if exchange == "h" or rng.random() < 0.2:
            headers = {name: rng.choice(HEADER_VALUES) for name in rng.sample(HEADER_NAMES, rng.randint(0, 2))}
        out.append((f"m{i}", exchange, _key(rng), headers))
    return out


def oracle(old: Topology, new: Topology, msgs: list[tuple[str, str, str, dict | None]]) -> dict[str, Any]:
    """The traffic diff computed message by message with the library."""
    counts = Counter()
    gained, lost = Counter(), Counter()
    changes = {}
    for message_id, exchange, key, headers in msgs:
        try:
            before = old.route(exchange, key, headers)
        except XRouteError:
            before, counts["refused_before"] = frozenset(), counts["refused_before"] + 1
        try:
            after = new.route(exchange, key, headers)
            refused_after = False
        except XRouteError:
            after, refused_after = frozenset(), True
            counts["refused_after"] += 1
        counts["messages"] += 1
        if before != after:
            counts["changed"] += 1
            changes[message_id] = (sorted(before), sorted(after))
        counts["gained_a_queue"] += bool(after - before)
        counts["lost_a_queue"] += bool(before - after)
        counts["became_unroutable"] += bool(before and not after and not refused_after)
        counts["became_routable"] += bool(not before and after)
        gained.update(after - before)
        lost.update(before - after)
    per_queue = {q: (gained[q], lost[q]) for q in set(gained) | set(lost)}
    return {"counts": counts, "per_queue": per_queue, "changes": changes}
