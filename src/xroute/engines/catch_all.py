"""Bindings that cannot change an answer: those of a destination bound with a floor pattern.

A pattern made only of ``#`` (``#``, ``#.#``...) matches every routing key, the empty one
included, so a destination bound with one is in every answer, and its other wildcard
bindings add nothing to any route. Deployments have such queues (an audit or firehose queue
bound with ``#`` beside its specific bindings), and in the seed articles' mix every queue is
one at 100k bindings: each of the 100 queues has a ``#`` binding among its 1,000, so the trie
walk (hundreds of live nodes a word) only finds queues already known.

More generally, a pattern of ``*`` and ``#`` words with at least one ``#`` and ``k`` stars
(``*.#``, ``#.*``, ``*.#.*``) matches exactly the keys of at least ``k`` words: a *floor* of
``k`` (a catch-all is the floor 0). Every key that a pattern of ``m`` words other than ``#``
matches has at least ``m`` words, so a destination's floor ``f`` (its lowest) covers each of
its wildcard patterns with ``m >= f``: they add nothing either. In the seed mix at 10k
bindings (100 queues), floors beyond the catch-all took 1,000 more patterns out (860 left of
1,866, DFA states built by 3,000 first keys 2,802 -> 908).

`auto` keeps those bindings here, out of its trie, its DFA, its shape index and its kernels:
a destination's floor is lowered at once (its covered patterns leave), raised lazily (they
go back on the caller's next read: a bulk unbind that takes the floor first does not put
every pattern back only to remove it again).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator

from xroute.core.keys import HASH, STAR
from xroute.engines.base import Words

# `CatchAllShadow.bind`'s patterns leaving, where none does: one shared empty list, never
# changed by its callers (they only iterate it)
_NONE_LEAVING: list[Words] = []


def is_catch_all(words: Words) -> bool:
    """True if a pattern is only ``#`` words: it matches every routing key (the empty
    pattern, no words, matches only the empty key)."""
    return bool(words) and all(word == HASH for word in words)


def floor_of(words: Words) -> int | None:
    """The floor of a pattern made only of ``*`` and ``#`` with at least one ``#``: its
    number of ``*`` (it matches exactly the keys of at least that many words); else None."""
    if HASH not in words:
        return None
    stars = 0
    for word in words:
        if word == STAR:
            stars += 1
        elif word != HASH:
            return None
    return stars


def covered(words: Words, floor: int | None) -> bool:
    """True if a destination with ``floor`` (None: none) needs no binding of ``words`` in the
    matcher: every key the pattern matches has at least ``floor`` words. The patterns with
    the floor itself stay (one of them must answer); those with a higher floor do not."""
    if floor is None:
        return False
    least = len(words) - words.count(HASH)  # words a key needs: every '*' and literal one
    return least > floor or (least == floor and floor_of(words) is None)


class CatchAllShadow:
    """Per destination: its wildcard patterns (all of them, to be moved when its floor
    changes), how many floor patterns of each floor it is bound with, and the floor that the
    caller's matcher reflects (`covered` by it: out of the matcher; the rest: in)."""

    __slots__ = ("_applied", "_floors", "_wildcards")

    def __init__(self) -> None:
        self._floors: dict[Hashable, dict[int, int]] = {}  # destination -> floor -> bindings
        self._applied: dict[Hashable, int] = {}  # destination -> the floor the matcher reflects
        # destination -> its wildcard patterns, joined by dots (a string is about a quarter
        # of a tuple of fresh words): one string alone, as most destinations of device-like
        # bindings have one (a set is 216 bytes), else a set
        self._wildcards: dict[Hashable, str | set[str]] = {}

    def floor(self, destination: Hashable) -> int | None:
        """The destination's lowest floor now (None: no floor pattern)."""
        floors = self._floors.get(destination)
        return min(floors) if floors else None

    def bind(self, words: Words, destination: Hashable, pattern: str | None = None
             ) -> tuple[bool, list[Words]]:
        """Note a wildcard binding (``pattern``: ``words`` joined, if the caller has it: its
        own string is kept, not a copy). Returns whether the caller's matcher takes it, and
        the destination's patterns that leave the matcher now (a floor pattern that lowers
        the destination's floor covers them)."""
        # hot: every wildcard bind of a topology's queue-name index (bind rate)
        if pattern is None:
            pattern = ".".join(words)
        wildcards = self._wildcards
        held = wildcards.get(destination)
        if held is None:
            wildcards[destination] = pattern
        elif held.__class__ is str:
            wildcards[destination] = {held, pattern}  # type: ignore[assignment]
        else:
            held.add(pattern)  # type: ignore[union-attr]
        applied = self._applied.get(destination)
        # No floor pattern (`floor_of` None), the usual case, without the call: no '#', or
        # a first word other than '*' and '#' (``broadcast.#``)
        if HASH not in words or words[0] != HASH and words[0] != STAR:
            if applied is None:
                return True, _NONE_LEAVING
            return not covered(words, applied), _NONE_LEAVING
        floor = floor_of(words)
        leaving: list[Words] = []
        if floor is not None:
            floors = self._floors.setdefault(destination, {})
            floors[floor] = floors.get(floor, 0) + 1
            if applied is None or floor < applied:
                # Lowered at once: what the new floor covers leaves the matcher.
                leaving = [other for other in self._patterns(destination)
                           if other != words and not covered(other, applied)
                           and covered(other, floor)]
                self._applied[destination] = applied = floor
        return not covered(words, applied), leaving

    def unbind(self, words: Words, destination: Hashable) -> tuple[bool, bool]:
        """Forget a wildcard binding. Returns whether the caller's matcher held it (to be
        removed there), and whether the destination's floor rose (then `settle` it before the
        next read: the patterns it no longer covers go back in)."""
        held = self._wildcards[destination]
        if isinstance(held, str):
            del self._wildcards[destination]
        else:
            held.discard(".".join(words))
            if len(held) == 1:
                self._wildcards[destination] = held.pop()
        applied = self._applied.get(destination)
        floor = floor_of(words)
        if floor is not None:
            floors = self._floors[destination]
            if floors[floor] > 1:
                floors[floor] -= 1
            else:
                del floors[floor]
                if not floors:
                    del self._floors[destination]
        return not covered(words, applied), self.floor(destination) != applied

    def settle(self, destination: Hashable) -> tuple[list[Words], list[Words]]:
        """Make the matcher reflect the destination's floor now: the patterns that go back
        into it, and those that leave it."""
        applied, floor = self._applied.get(destination), self.floor(destination)
        entering: list[Words] = []
        leaving: list[Words] = []
        if floor != applied:
            for words in self._patterns(destination):
                was, now = not covered(words, applied), not covered(words, floor)
                if now and not was:
                    entering.append(words)
                elif was and not now:
                    leaving.append(words)
            if floor is None:
                del self._applied[destination]
            else:
                self._applied[destination] = floor
        return entering, leaving

    def has_wildcards(self, destination: Hashable) -> bool:
        """Whether ``destination`` has a wildcard binding."""
        return destination in self._wildcards

    def uncovered(self, destination: Hashable) -> list[Words]:
        """The destination's wildcard patterns that the caller's matcher holds: those that
        the floor it reflects for the destination does not cover."""
        applied = self._applied.get(destination)
        return [words for words in self._patterns(destination) if not covered(words, applied)]

    def holds(self, pattern: str, destination: Hashable) -> bool:
        """Whether the wildcard ``pattern`` is bound to ``destination``."""
        held = self._wildcards.get(destination)
        return held == pattern if held.__class__ is str else held is not None and pattern in held

    def bindings(self) -> Iterator[tuple[str, Hashable]]:
        """Every wildcard (pattern, destination) bound."""
        for destination, held in self._wildcards.items():
            if held.__class__ is str:
                yield held, destination  # type: ignore[misc]
            else:
                for pattern in held:  # type: ignore[union-attr]
                    yield pattern, destination

    def held(self) -> Iterator[tuple[str, Hashable]]:
        """Every wildcard (pattern, destination) the caller's matcher holds: those that the
        floor it reflects for their destination does not cover."""
        applied = self._applied
        for pattern, destination in self.bindings():
            floor = applied.get(destination)
            if floor is None or not covered(tuple(pattern.split(".")), floor):
                yield pattern, destination

    def stats(self) -> dict[str, int]:
        """Destinations bound with a catch-all, with any floor pattern, and the wildcard
        bindings their floors cover."""
        shadowed = 0
        for destination in self._floors:
            floor = self.floor(destination)
            shadowed += sum(covered(words, floor) for words in self._patterns(destination))
        return {"catch_all_destinations": sum(0 in f for f in self._floors.values()),
                "floor_destinations": len(self._floors), "shadowed_bindings": shadowed}

    def _held(self, destination: Hashable) -> set[str] | tuple[str, ...]:
        held = self._wildcards.get(destination, ())
        return (held,) if isinstance(held, str) else held

    def _patterns(self, destination: Hashable) -> list[Words]:
        return [tuple(pattern.split(".")) for pattern in self._held(destination)]
