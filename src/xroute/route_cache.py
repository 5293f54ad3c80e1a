"""A bounded cache of `Topology.route` answers, kept exact by the topology's changes.

`Topology.route` follows a message through exchanges, and at about 90 queues per message most
of its cost is gathering the queues of the matched bindings, not the matching. This cache keeps
(exchange, routing key) -> the frozenset of queue names, so a repeated route is one dict lookup
and returns the very same frozenset.

What it keys on: only messages **without headers** (``None`` or an empty table) are cached,
because headers can change a route (a headers exchange on the way, ``CC``/``BCC`` keys). With
no headers, a route depends only on the exchange, the key, and the topology; the topology
tells the cache about every change, and the cache drops exactly the entries it may change:

- a binding added to or removed from exchange X drops the entries whose route visited X and
  whose key the binding matches (a topic pattern, a direct key); for other exchange types
  every entry that visited X. A binding that does not match a key leaves X's matches for that
  key, so the whole walk (alternates included), as it was. When more than
  `ROUTE_CACHE_PRECISE_SCAN` entries visited X, they are all dropped without tests, so one
  change costs at most that many pattern tests;
- an exchange declared or deleted drops the entries whose route visited it or looked it up as
  an alternate exchange (a dangling alternate is ignored until it is declared);
- a queue declared or deleted drops the route of its name through the default exchange (its
  bindings go through the rule above).

Bounded like NATS's sublist cache (`ROUTE_CACHE_MAX`, swept oldest first down to
`ROUTE_CACHE_SWEEP`).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from typing import Any

from xroute.engines.reference import pattern_matches
from xroute.keys import split_words

# At most this many routes are kept: with their keys and the frozensets (shared with nothing
# else; about 90 names each in the benchmark) a few MB.
ROUTE_CACHE_MAX = 8_192
# When full, the oldest entries go until this many remain (one sweep per 2,048 misses).
ROUTE_CACHE_SWEEP = 6_144
# A binding change tests its key against at most this many cached routes (about 1 µs each);
# beyond, every route through its exchange is dropped untested, so binding churn stays cheap.
ROUTE_CACHE_PRECISE_SCAN = 256

Entry = tuple[str, str]  # (exchange, routing key)


class TopologyRouteCache:
    """(exchange, routing key) -> queue names, for messages without headers; exact under change."""

    __slots__ = (
        "max_size", "sweep_to", "hits", "misses", "evictions", "invalidations", "entries",
        "_through",
    )

    def __init__(self, max_size: int = ROUTE_CACHE_MAX, sweep_to: int = ROUTE_CACHE_SWEEP) -> None:
        if not 0 <= sweep_to < max_size:
            raise ValueError(f"sweep_to={sweep_to} must be in [0, max_size={max_size})")
        self.max_size = max_size
        self.sweep_to = sweep_to
        self.hits = self.misses = self.evictions = self.invalidations = 0
        # entry -> (queues, names of the exchanges its route visited or looked up): read by
        # `Topology.route` itself, which counts the hits and misses (one call less a route)
        self.entries: dict[Entry, tuple[frozenset[str], tuple[str, ...]]] = {}
        # exchange name -> the entries whose route visited or looked it up (a dict as an
        # ordered set)
        self._through: dict[str, dict[Entry, None]] = {}

    def put(
        self, exchange: str, routing_key: str, queues: frozenset[str], through: Sequence[str]
    ) -> None:
        """Remember a route; ``through`` names every exchange it visited or looked up."""
        names = (through[0],) if len(through) == 1 else tuple(dict.fromkeys(through))
        self.remember((exchange, routing_key), queues, names)

    # hot: every first route of `Topology.route` (`xroute bench engines --shapes`)
    def remember(self, entry: Entry, queues: frozenset[str], names: tuple[str, ...]) -> None:
        """`put` with the entry made and ``names`` a tuple without repeats."""
        entries = self.entries
        if len(entries) >= self.max_size:
            self._sweep()
        entries[entry] = (queues, names)
        through = self._through
        for name in names:
            routes = through.get(name)
            if routes is None:
                routes = through[name] = {}
            routes[entry] = None

    def _sweep(self) -> None:
        """Full: forget the oldest entries (dicts keep insertion order) down to `sweep_to`,
        inlined (a call per entry was a third of the sweep, which every first route pays
        for once the cache is full)."""
        entries = self.entries
        through = self._through
        drop = len(entries) - self.sweep_to
        for old in list(islice(entries, drop)):
            for name in entries.pop(old)[1]:
                routes = through.get(name)
                if routes is not None:
                    routes.pop(old, None)
        for name in [name for name, routes in through.items() if not routes]:
            del through[name]
        self.evictions += drop

    def binding_changed(self, source: str, exchange_type: str, binding_key: str) -> None:
        """A binding from exchange ``source`` was added or removed."""
        routes = self._through.get(source)
        if not routes:
            return
        if len(routes) > ROUTE_CACHE_PRECISE_SCAN or exchange_type not in ("topic", "direct"):
            stale = list(routes)
        elif exchange_type == "direct":
            stale = [entry for entry in routes if entry[1] == binding_key]
        else:
            words = split_words(binding_key)
            stale = [entry for entry in routes if pattern_matches(words, split_words(entry[1]))]
        for entry in stale:
            self._drop(entry)
        self.invalidations += len(stale)

    def exchange_changed(self, name: str) -> None:
        """Exchange ``name`` was declared or deleted."""
        stale = list(self._through.get(name, ()))
        for entry in stale:
            self._drop(entry)
        self.invalidations += len(stale)

    def queue_changed(self, name: str, default_exchange: str = "") -> None:
        """Queue ``name`` was declared or deleted: its route through the default exchange."""
        if (default_exchange, name) in self.entries:
            self._drop((default_exchange, name))
            self.invalidations += 1

    def clear(self) -> None:
        """Forget every entry (the counters stay)."""
        self.entries.clear()
        self._through.clear()

    def __len__(self) -> int:
        return len(self.entries)

    def stats(self) -> dict[str, Any]:
        """Size, bound, hits, misses, hit rate, evictions and entries dropped by changes."""
        lookups = self.hits + self.misses
        return {
            "route_cache_entries": len(self.entries),
            "route_cache_max": self.max_size,
            "route_cache_hits": self.hits,
            "route_cache_misses": self.misses,
            "route_cache_hit_rate": self.hits / lookups if lookups else 0.0,
            "route_cache_evictions": self.evictions,
            "route_cache_invalidations": self.invalidations,
        }

    def _drop(self, entry: Entry) -> None:
        _, names = self.entries.pop(entry)
        through = self._through
        for name in names:
            routes = through.get(name)
            if routes is not None:
                routes.pop(entry, None)
                if not routes:
                    del through[name]
