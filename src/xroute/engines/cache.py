"""A bounded route cache in front of any engine: routing key -> destinations, kept exact.

Modelled on the result cache of NATS's subject list (``server/sublist.go``): a hit costs one
dict lookup, and a binding change touches only the cached keys its pattern matches. A new
binding adds its destination to those entries in place; a removed binding drops them (another
binding may still send the key to the same destination, so the entry is recomputed on its next
miss rather than guessed). Entries the changed pattern does not match are untouched.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from xroute.core.keys import split_words
from xroute.engines.base import Words
from xroute.engines.reference import pattern_matches

# NATS keeps at most 1024 results (slCacheMax) and sweeps down to 256 (slCacheSweep). Every
# add and remove tests the changed pattern against each cached key, so this bound is also the
# bound on the extra cost of a binding change (about 1 ms at 1024 keys), whatever the traffic.
ROUTE_CACHE_MAX = 1024
# When full, the oldest entries go until this many remain: sweeping in bulk keeps the cost of
# eviction off the common miss path (one sweep per ROUTE_CACHE_MAX - ROUTE_CACHE_SWEEP misses).
ROUTE_CACHE_SWEEP = 256
# A binding change tests the cached keys one by one only if there are at most this many, or
# at most as many as the lookups since the previous change (so the tests are paid for by the
# traffic they keep warm); otherwise it drops every entry. Binding churn (100,000 changes with
# no routing between them) thus costs nothing here, instead of 1,024 pattern tests a change.
ROUTE_CACHE_PRECISE_MIN = 64


class RouteCache:
    """Routing key -> frozenset of destinations, at most ``max_size`` keys, exact under change."""

    __slots__ = ("max_size", "sweep_to", "hits", "misses", "evictions", "invalidations", "_entries",
                 "_lookups")

    def __init__(self, max_size: int = ROUTE_CACHE_MAX, sweep_to: int = ROUTE_CACHE_SWEEP) -> None:
        if not 0 <= sweep_to < max_size:
            raise ValueError(f"sweep_to={sweep_to} must be in [0, max_size={max_size})")
        self.max_size = max_size
        self.sweep_to = sweep_to
        self.hits = self.misses = self.evictions = self.invalidations = 0
        # key -> (its words, its destinations); the words are kept so that a binding change
        # does not split every cached key again.
        self._entries: dict[str, tuple[Words, frozenset]] = {}
        self._lookups = 0  # since the last binding change

    def get(self, key: str) -> frozenset | None:
        """The cached destinations of a valid ``key``, or None on a miss (counted)."""
        entry = self._entries.get(key)
        self._lookups += 1
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        return entry[1]

    def put(self, key: str, destinations: frozenset) -> None:
        """Remember the destinations of ``key``; sweeps the oldest entries when full."""
        entries = self._entries
        if len(entries) >= self.max_size:
            # dicts keep insertion order, so the first keys are the oldest.
            drop = len(entries) - self.sweep_to
            for old in list(entries)[:drop]:
                del entries[old]
            self.evictions += drop
        entries[key] = (split_words(key), destinations)

    def added(self, pattern: Words, destination: Hashable) -> None:
        """A binding was added: put its destination into every cached key it matches."""
        if self._drop_all_instead():
            return
        entries = self._entries
        changed = [
            (key, words, found | {destination})
            for key, (words, found) in entries.items()
            if destination not in found and pattern_matches(pattern, words)
        ]
        for key, words, found in changed:
            entries[key] = (words, found)
        self.invalidations += len(changed)

    def removed(self, pattern: Words, destination: Hashable) -> None:
        """A binding was removed: forget every cached key it matched (recomputed on next miss)."""
        if self._drop_all_instead():
            return
        entries = self._entries
        stale = [
            key
            for key, (words, found) in entries.items()
            if destination in found and pattern_matches(pattern, words)
        ]
        for key in stale:
            del entries[key]
        self.invalidations += len(stale)

    def _drop_all_instead(self) -> bool:
        """Called on a binding change: drop every entry if testing each would cost more than
        the traffic since the last change paid for (see `ROUTE_CACHE_PRECISE_MIN`)."""
        lookups, self._lookups = self._lookups, 0
        if len(self._entries) <= max(ROUTE_CACHE_PRECISE_MIN, lookups):
            return False
        self.invalidations += len(self._entries)
        self._entries = {}
        return True

    def clear(self) -> None:
        """Forget every entry (the counters stay)."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def stats(self) -> dict[str, Any]:
        """Size, bound, hits, misses, hit rate, evictions and entries changed by bindings."""
        lookups = self.hits + self.misses
        return {
            "cache_entries": len(self._entries),
            "cache_max": self.max_size,
            "cache_hits": self.hits,
            "cache_misses": self.misses,
            "cache_hit_rate": self.hits / lookups if lookups else 0.0,
            "cache_evictions": self.evictions,
            "cache_invalidations": self.invalidations,
        }
