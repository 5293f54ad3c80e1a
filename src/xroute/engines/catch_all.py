"""Bindings that cannot change an answer: those of a destination bound with a catch-all.

A pattern made only of ``#`` (``#``, ``#.#``...) matches every routing key, the empty one
included, so a destination bound with one is in every answer, and its other wildcard
bindings add nothing to any route. Deployments have such queues (an audit or firehose queue
bound with ``#`` beside its specific bindings), and in the seed articles' mix every queue is
one at 100k bindings: each of the 100 queues has a ``#`` binding among its 1,000, so the trie
walk (hundreds of live nodes a word) only finds queues already known. `auto` keeps those
bindings here, out of its trie, its DFA, its shape index and its kernels, and puts them back
when the destination's last catch-all binding goes.
"""

from __future__ import annotations

from collections.abc import Hashable

from xroute.core.keys import HASH
from xroute.engines.base import Words


def is_catch_all(words: Words) -> bool:
    """True if a pattern is only ``#`` words: it matches every routing key (the empty
    pattern, no words, matches only the empty key)."""
    return bool(words) and all(word == HASH for word in words)


class CatchAllShadow:
    """Per destination: how many catch-all patterns it is bound with, and its other wildcard
    patterns (kept whether or not they are shadowed, to be moved when that changes)."""

    __slots__ = ("_catch_alls", "_wildcards")

    def __init__(self) -> None:
        self._catch_alls: dict[Hashable, int] = {}
        # destination -> its wildcard patterns that are not catch-all, joined by dots (a
        # string is about a quarter of a tuple of fresh words): one string alone, as most
        # destinations of device-like bindings have one (a set is 216 bytes), else a set
        self._wildcards: dict[Hashable, str | set[str]] = {}

    def bind_catch_all(self, destination: Hashable) -> list[Words]:
        """Count a catch-all binding; the destination's other wildcard patterns if it was not
        covered before (they leave the caller's matcher now)."""
        held = self._catch_alls.get(destination, 0)
        self._catch_alls[destination] = held + 1
        return [] if held else self._patterns(destination)

    def unbind_catch_all(self, destination: Hashable) -> list[Words]:
        """Count a catch-all binding gone; the destination's other wildcard patterns if it was
        the last (they go back into the caller's matcher now)."""
        left = self._catch_alls[destination] - 1
        if left:
            self._catch_alls[destination] = left
            return []
        del self._catch_alls[destination]
        return self._patterns(destination)

    def bind(self, words: Words, destination: Hashable) -> bool:
        """Note a wildcard binding that is not catch-all; True if it is shadowed."""
        pattern = ".".join(words)
        held = self._wildcards.get(destination)
        if held is None:
            self._wildcards[destination] = pattern
        elif isinstance(held, str):
            self._wildcards[destination] = {held, pattern}
        else:
            held.add(pattern)
        return destination in self._catch_alls

    def unbind(self, words: Words, destination: Hashable) -> bool:
        """Forget a wildcard binding that is not catch-all; True if it was shadowed."""
        held = self._wildcards[destination]
        if isinstance(held, str):
            del self._wildcards[destination]
        else:
            held.discard(".".join(words))
            if len(held) == 1:
                self._wildcards[destination] = held.pop()
        return destination in self._catch_alls

    def stats(self) -> dict[str, int]:
        """Destinations bound with a catch-all, and the wildcard bindings they shadow."""
        shadowed = sum(len(self._held(d)) for d in self._catch_alls)
        return {"catch_all_destinations": len(self._catch_alls), "shadowed_bindings": shadowed}

    def _held(self, destination: Hashable) -> set[str] | tuple[str, ...]:
        held = self._wildcards.get(destination, ())
        return (held,) if isinstance(held, str) else held

    def patterns(self, destination: Hashable) -> list[Words]:
        """The destination's wildcard patterns that are not catch-all, as words."""
        return self._patterns(destination)

    def _patterns(self, destination: Hashable) -> list[Words]:
        return [tuple(pattern.split(".")) for pattern in self._held(destination)]
