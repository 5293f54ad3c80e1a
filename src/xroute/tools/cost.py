"""What a topic exchange costs to route through, estimated as trie nodes visited per key.

The cost model: the bindings of one exchange go into a `TrieEngine`; a key is walked word by
word with the engine's own ``start()`` and ``step()``, and its cost is the number of live trie
nodes summed over the walk: the live set before the first word plus the live set after each
word (the walk stops early once nothing is live). Every live node is one dictionary probe
and up to two wildcard probes, so this counts the work of a route without timing it, and the
figure does not depend on the machine or its load. A direct exchange costs one lookup per key.

The keys are the exchange's own binding keys with each ``*`` and ``#`` replaced by a random
word (`xroute.bench.workload.key_from_pattern`, as the seed article does), or real keys read
from a file (`read_keys`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xroute.bench.workload import key_from_pattern
from xroute.core.errors import InvalidLintInput, InvalidRoutingKey
from xroute.core.keys import HASH, check_routing_key, split_words
from xroute.core.topology import Topology
from xroute.engines.trie import TrieEngine, step
from xroute.tools.patterns import normal_words

# Keys generated per exchange: enough for a stable mean (the walk is deterministic per key),
# few enough that lint stays interactive on exchanges of 10k bindings.
KEYS_PER_EXCHANGE = 200


@dataclass
class ExchangeCost:
    """The estimated routing cost of one topic exchange."""

    exchange: str
    bindings: int
    nodes: int  # trie nodes holding its patterns
    keys: int  # keys measured
    keys_from: str  # "bindings" (generated) or "file"
    mean_visits: float  # trie nodes visited per key, on average
    max_visits: int
    mean_words: float
    leading_hash: int  # binding keys that begin with '#' (in normal form: '#.*' is '*.#')

    def to_dict(self) -> dict[str, Any]:
        """The cost as JSON-ready data."""
        return dict(self.__dict__)


def visits(engine: TrieEngine, key: str) -> int:
    """Trie nodes visited routing ``key``: the live set at the start plus after each word."""
    live = engine.start()
    total = len(live)
    for word in split_words(key):
        live = step(live, word)
        total += len(live)
        if not live:
            break
    return total


def exchange_cost(
    name: str, patterns: Sequence[str], keys: Sequence[str], keys_from: str
) -> ExchangeCost:
    """The cost of routing ``keys`` through a topic exchange holding ``patterns``."""
    engine = TrieEngine()
    for index, pattern in enumerate(dict.fromkeys(patterns)):
        engine.add(split_words(pattern), index)
    counts = [visits(engine, key) for key in keys]
    words = [len(split_words(key)) for key in keys]
    return ExchangeCost(
        exchange=name,
        bindings=len(patterns),
        nodes=engine.stats()["nodes"],
        keys=len(keys),
        keys_from=keys_from,
        mean_visits=sum(counts) / len(counts) if counts else 0.0,
        max_visits=max(counts, default=0),
        mean_words=sum(words) / len(words) if words else 0.0,
        leading_hash=sum(1 for p in patterns if normal_words(split_words(p))[:1] == (HASH,)),
    )


def generated_keys(
    patterns: Sequence[str], count: int = KEYS_PER_EXCHANGE, seed: int = 0
) -> list[str]:
    """Keys made from the binding keys themselves (a random word for each wildcard)."""
    rng = random.Random(seed)
    chosen = patterns if len(patterns) <= count else rng.sample(list(patterns), count)
    keys = []
    for pattern in chosen:
        key = key_from_pattern(pattern, rng)
        try:
            keys.append(check_routing_key(key))
        except InvalidRoutingKey:  # a long pattern grew past 255 bytes: leave it out
            continue
    return keys


def read_keys(path: str | Path) -> dict[str | None, list[str]]:
    """Routing keys from a file: one key per line, or ``exchange<TAB>key``.

    Keys without an exchange (under ``None``) are measured on every topic exchange. Blank lines
    are skipped, so the empty routing key cannot be given this way.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidLintInput(f"cannot read keys file {str(path)!r}: {error}", path) from None
    keys: dict[str | None, list[str]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        exchange, tab, key = line.partition("\t")
        if not tab:
            exchange, key = None, line
        try:
            check_routing_key(key)
        except InvalidRoutingKey as error:
            raise InvalidLintInput(f"{path}:{number}: {error}", path) from None
        keys.setdefault(exchange, []).append(key)
    return keys


def rank_costs(
    topology: Topology,
    keys: Mapping[str | None, Sequence[str]] | None = None,
    count: int = KEYS_PER_EXCHANGE,
    seed: int = 0,
) -> list[ExchangeCost]:
    """Every topic exchange with bindings, the most expensive first.

    ``keys`` (as `read_keys` gives) replaces the generated keys: an exchange is measured on its
    own keys plus the keys given for every exchange, when there are any.
    """
    costs = []
    for name, exchange in topology.exchanges.items():
        if exchange.type != "topic":
            continue
        patterns = [b.routing_key for b in topology.bindings(name)]
        if not patterns:
            continue
        given = [*(keys or {}).get(name, ()), *(keys or {}).get(None, ())] if keys else []
        if given:
            costs.append(exchange_cost(name, patterns, given, "file"))
        else:
            generated = generated_keys(patterns, count, seed)
            costs.append(exchange_cost(name, patterns, generated, "bindings"))
    return sorted(costs, key=lambda c: (-c.mean_visits, c.exchange))
