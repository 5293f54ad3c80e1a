"""The definition of topic matching, pattern by pattern: the oracle every other engine must equal.

Short on purpose. Each pattern is matched by tracking the set of key positions its prefix can
end at, which is plainly polynomial (patterns x words x positions) and plainly right.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from xroute.core.keys import HASH, STAR, split_words
from xroute.engines.base import Words, register


def pattern_matches(pattern: Words, words: Words) -> bool:
    """True if the pattern's words match the key's words under AMQP topic rules."""
    size = len(words)
    positions = {0}  # key prefixes the pattern prefix read so far can match
    for part in pattern:
        if part == HASH:
            positions = set(range(min(positions), size + 1))
        elif part == STAR:
            positions = {i + 1 for i in positions if i < size}
        else:
            positions = {i + 1 for i in positions if i < size and words[i] == part}
        if not positions:
            return False
    return size in positions


@register
class ReferenceEngine:
    """Every binding is tested against every key."""

    name = "reference"

    def __init__(self) -> None:
        self._bindings: dict[tuple[Words, Hashable], None] = {}

    def add(self, words: Words, destination: Hashable) -> None:
        self._bindings[(words, destination)] = None

    def remove(self, words: Words, destination: Hashable) -> None:
        del self._bindings[(words, destination)]

    def match(self, key: str) -> frozenset:
        words = split_words(key)
        return frozenset(d for p, d in self._bindings if pattern_matches(p, words))

    def match_many(self, keys: Sequence[str]) -> list[frozenset]:
        return [self.match(key) for key in keys]

    def stats(self) -> dict[str, Any]:
        return {"engine": self.name, "bindings": len(self._bindings)}
