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
from typing import Any

from xroute.keys import HASH, STAR

# A key with more than _FREEZE_NOW destinations whose set changed: its frozenset is rebuilt
# on its next route.
_STALE: Any = object()
_FREEZE_NOW = 8
# Unions kept, at most (each is a frozenset as large as its two parts): then forgotten whole.
MAX_UNIONS = 16_384


def is_literal(words: tuple[str, ...]) -> bool:
    """True if a pattern has no ``*`` or ``#``: it matches exactly one routing key."""
    return STAR not in words and HASH not in words


class LiteralIndex:
    """Routing key -> destinations of the literal bindings, each answer a shared frozenset.

    A key's destinations are kept as the frozenset routes return, rebuilt on each change
    while there are at most `_FREEZE_NOW` of them; beyond, as a set beside it (the frozenset
    is rebuilt on the key's next route), so that binding 10k queues to one key costs one
    frozenset, not 10k growing copies.
    """

    __slots__ = ("_large", "_frozen", "_unions", "keys")

    def __init__(self) -> None:
        self._frozen: dict[str, Any] = {}  # key -> frozenset, or _STALE (see _large)
        self._large: dict[str, set[Hashable]] = {}  # keys with many destinations
        self._unions: dict[tuple[frozenset, frozenset], frozenset] = {}
        # The literal keys (``key in index.keys``), for callers that test before `combine`.
        self.keys = self._frozen.keys()

    def add(self, key: str, destination: Hashable) -> None:
        """Bind ``destination`` to the literal ``key`` (not bound there yet)."""
        held = self._large.get(key)
        frozen = self._frozen.get(key)
        if held is not None:
            held.add(destination)
            self._frozen[key] = _STALE
        elif frozen is None:
            self._frozen[key] = frozenset((destination,))
        elif len(frozen) < _FREEZE_NOW:
            self._frozen[key] = frozen | {destination}
        else:
            self._large[key] = {*frozen, destination}
            self._frozen[key] = _STALE
        self._unions.clear()

    def remove(self, key: str, destination: Hashable) -> None:
        """Unbind ``destination`` from ``key`` (bound there)."""
        held = self._large.get(key)
        if held is None:
            left = self._frozen[key] - {destination}
        else:
            held.discard(destination)
            if len(held) > _FREEZE_NOW:
                self._frozen[key] = _STALE
                self._unions.clear()
                return
            left = frozenset(held)
            del self._large[key]
        if left:
            self._frozen[key] = left
        else:
            del self._frozen[key]
        self._unions.clear()

    # hot: every `auto` route of a literal key that misses its memo (`--shapes`)
    def combine(self, key: str, found: frozenset) -> frozenset:
        """``found`` (the wildcard answer for ``key``) with the literal bindings of ``key``."""
        literal = self._frozen.get(key)
        if literal is None:
            return found
        if literal is _STALE:
            literal = self._frozen[key] = frozenset(self._large[key])
        if not found:
            return literal
        pair = (literal, found)
        union = self._unions.get(pair)
        if union is None:
            if len(self._unions) >= MAX_UNIONS:
                self._unions.clear()
            union = self._unions[pair] = literal | found
        return union

    def items(self) -> Iterator[tuple[str, Collection[Hashable]]]:
        """Every (key, destinations) pair."""
        large = self._large
        for key, frozen in self._frozen.items():
            yield key, large[key] if frozen is _STALE else frozen

    def columns(self) -> tuple[list[str], list[Collection[Hashable]]]:
        """Every key, and the destinations of each (two lists in the same order): what the
        kernel's exact-key table is built from, without a tuple per key."""
        large = self._large
        keys = list(self._frozen)
        found = list(self._frozen.values())
        if large:
            found = [large[key] if frozen is _STALE else frozen
                     for key, frozen in zip(keys, found)]
        return keys, found

    def __len__(self) -> int:
        return len(self._frozen)

    def stats(self) -> dict[str, int]:
        """How many literal keys, and how many unions are kept."""
        return {"literal_keys": len(self._frozen), "literal_unions": len(self._unions)}
