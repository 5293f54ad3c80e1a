"""An exact-key index for bindings without wildcards, looked up beside the wildcard automaton.

Most bindings of real deployments are literal (one per device, user or tenant). In a trie
each is a path of its own, and a DFA over them builds a state per key it routes: the first
route of ``devices.dev7.cmd`` cost 20 µs where a dict lookup costs 0.1 µs. Here a literal
binding is a dict entry, routing key -> destinations, and only the patterns with ``*`` or
``#`` stay in the trie (so the DFA's vocabulary and states are those of the wildcards).

A key's answer is the literal entry's set united with the wildcard answer. Both are shared
frozensets (the entry's, and the DFA state's), so a union is kept per pair of sets: keys that
end alike still get the very same frozenset, which `Topology` keys its own work by.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterator

from xroute.core.keys import HASH, STAR
from xroute.engines.frozen_sets import STALE, FrozenSets

# A key with more destinations than this keeps them in a set, frozen on its next route.
_FREEZE_NOW = 8
# Unions kept, at most (each is a frozenset as large as its two parts): then forgotten whole.
MAX_UNIONS = 16_384
# `combine` tests whether one answer holds the other when it has at most this many members.
SUBSET_TEST_MAX = 16


def is_literal(words: tuple[str, ...]) -> bool:
    """True if a pattern has no ``*`` or ``#``: it matches exactly one routing key."""
    return STAR not in words and HASH not in words


class LiteralIndex:
    """Routing key -> destinations of the literal bindings, each answer a shared frozenset
    (`xroute.engines.frozen_sets`)."""

    __slots__ = ("_sets", "_frozen", "_unions", "keys", "_bare")

    def __init__(self, bare_singletons: bool = False) -> None:
        # ``bare_singletons``: destinations of one key each (see `FrozenSets`)
        self._sets = FrozenSets(_FREEZE_NOW, bare_singletons=bare_singletons)
        self._bare = bare_singletons
        self._frozen = self._sets.frozen  # read inline by `combine`
        self._unions: dict[tuple[frozenset, frozenset], frozenset] = {}
        # The literal keys (``key in index.keys``), for callers that test before `combine`.
        self.keys = self._frozen.keys()

    def add(self, key: str, destination: Hashable) -> None:
        """Bind ``destination`` to the literal ``key`` (not bound there yet)."""
        frozen = self._frozen
        if (self._bare and key not in frozen and destination is not None
                and destination.__class__ is not frozenset):
            frozen[key] = destination  # hot: `FrozenSets.add` of a new key, kept bare, inline
        else:
            self._sets.add(key, destination)
        if self._unions:  # (empty through a bulk bind: no call)
            self._unions.clear()

    def remove(self, key: str, destination: Hashable) -> None:
        """Unbind ``destination`` from ``key`` (bound there)."""
        self._sets.remove(key, destination)
        self._unions.clear()

    # hot: every `auto` route of a literal key that misses its memo (`--shapes`)
    def combine(self, key: str, found: frozenset) -> frozenset:
        """``found`` (the wildcard answer for ``key``) with the literal bindings of ``key``."""
        literal = self._frozen.get(key)
        if literal is None:
            return found
        if literal.__class__ is not frozenset:  # STALE, or a member kept bare
            literal = self._sets.get(key)
        if not found:
            return literal
        # Where one holds the other (a '#' answer of every queue and a key's literal binding to
        # one of them; an MQTT site's literal topic and '#' bound to one client queue) the
        # larger is the answer: shared by every such key (a batch numbers it once), no union
        # made per key (`Topology._literal_names` answers alike). A subset test checks sizes
        # first, then each member of the smaller set: only a small one is tested, as a large
        # pair's union is made once and kept.
        if len(literal) <= SUBSET_TEST_MAX and literal <= found:
            return found
        if len(found) <= SUBSET_TEST_MAX and found <= literal:
            return literal
        pair = (literal, found)
        union = self._unions.get(pair)
        if union is None:
            if len(self._unions) >= MAX_UNIONS:
                self._unions.clear()
            union = self._unions[pair] = literal | found
        return union

    def entries(self, keys: list[str]) -> list[Collection[Hashable] | Hashable | None]:
        """Each key's destinations as kept, in the order of ``keys``: a frozenset, a member
        kept bare, or None where the key has no literal binding. One C look-up a key; keys
        bound alike share one object, so a batch numbers each distinct entry once."""
        found = list(map(self._frozen.get, keys))
        if STALE in found:  # a large key's set not frozen yet
            get = self._sets.get
            found = [get(key) if members is STALE else members
                     for key, members in zip(keys, found)]
        return found

    def holds(self, key: str, destination: Hashable) -> bool:
        """Whether ``destination`` is bound to ``key``."""
        return destination in self._sets.members(key)

    def members(self, key: str) -> Collection[Hashable]:
        """The destinations bound to ``key`` as kept (empty if none), not copied."""
        return self._sets.members(key)

    def items(self) -> Iterator[tuple[str, Collection[Hashable]]]:
        """Every (key, destinations) pair."""
        return self._sets.items()

    def columns(self) -> tuple[list[str], list[Collection[Hashable]]]:
        """Every key, and the destinations of each (two lists in the same order): what the
        kernel's exact-key table is built from."""
        return self._sets.columns()

    def __len__(self) -> int:
        return len(self._frozen)

    def stats(self) -> dict[str, int]:
        """How many literal keys, and how many unions are kept."""
        return {"literal_keys": len(self._frozen), "literal_unions": len(self._unions)}
