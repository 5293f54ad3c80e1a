"""OpenAMQ's inverted bitmaps (seed 001): per routing key seen, the set of bindings it matches.

Bindings are numbered. The first time a key is routed, its bitmap of matching binding numbers
is compiled with the breadth-first trie; from then on the key costs one dict lookup. The
bitmaps are kept current as bindings change, as OpenAMQ does: a new binding is tested against
every known key and sets its bit where it matches; a removed binding clears its bit
everywhere it is set. The bitmaps are roaring bitmaps (pyroaring), compressed and fast to
update, rather than hand-rolled bit arrays.

The known keys are bounded by `BITMAP_MAX_KEYS` and the bits they hold by `BITMAP_MAX_BITS`;
when either is reached, the oldest keys are swept out. A binding change updates the bitmaps in
place only while few keys are known (`BITMAP_PRECISE_KEYS`); with more, it forgets them all,
so that a change never costs one pattern test per known key (10,000 removals on a warm
matcher took 10.8 s that way; RabbitMQ's #12926 deletes 100,000 bindings at once).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from pyroaring import BitMap

from xroute.core.keys import split_words
from xroute.engines.base import EMPTY, Words, register
from xroute.engines.reference import pattern_matches
from xroute.engines.trie import TrieEngine

# Every binding change tests its pattern against each known key (about 1 µs each), so this
# bound also bounds the cost of one add or remove (about 10 ms when full).
BITMAP_MAX_KEYS = 10_000
# When full, the oldest keys go until this many remain, so sweeps are rare.
BITMAP_SWEEP_TO = 7_500
# A binding change tests its pattern against each known key while there are at most this many
# (about 1 µs each), or at most as many as the keys routed since the previous change (the
# traffic pays for the tests); beyond, it drops them all and routing compiles them again on
# demand. So binding churn does not grow with keys x bindings.
BITMAP_PRECISE_KEYS = 64
# Bits set over all known keys. A key keeps its destination set too (about 40 bytes per
# destination, the roaring bitmap a few bytes per bit), and at 100k bindings one key matches
# about 2,250 of them: this bounds that memory to about 100 MB. Sweeps go down to 3/4 of it.
BITMAP_MAX_BITS = 2_000_000


class _Key:
    """A known routing key: its words, its bitmap, and its destinations once asked for."""

    __slots__ = ("words", "bits", "destinations")

    def __init__(self, words: Words, bits: BitMap) -> None:
        self.words = words
        self.bits = bits
        self.destinations: frozenset | None = None


@register
class BitmapEngine:
    """Per known routing key, a roaring bitmap of the binding numbers that match it."""

    name = "bitmap"
    # The known keys already are a route cache; another in front would only duplicate them.
    route_cache_default = False

    def __init__(
        self,
        max_keys: int = BITMAP_MAX_KEYS,
        sweep_to: int = BITMAP_SWEEP_TO,
        max_bits: int = BITMAP_MAX_BITS,
    ) -> None:
        self.max_keys = max_keys
        self.sweep_to = min(sweep_to, max_keys - 1)
        self.max_bits = max_bits
        self._bits = 0
        self._trie = TrieEngine()  # its destinations are binding numbers
        self._number: dict[tuple[Words, Hashable], int] = {}
        self._destination: list[Hashable] = []  # binding number -> destination
        self._free: list[int] = []
        self._keys: dict[str, _Key] = {}
        self._compiled = self._evicted = self._bits_set = self._bits_cleared = 0
        self._forgotten = 0
        self._matches = 0  # since the last binding change

    def add(self, words: Words, destination: Hashable) -> None:
        number = self._free.pop() if self._free else len(self._destination)
        if number == len(self._destination):
            self._destination.append(destination)
        else:
            self._destination[number] = destination
        self._number[(words, destination)] = number
        self._trie.add(words, number)
        self._before_change()
        for known in self._keys.values():
            if pattern_matches(words, known.words):
                known.bits.add(number)
                known.destinations = None
                self._bits_set += 1
                self._bits += 1

    def remove(self, words: Words, destination: Hashable) -> None:
        number = self._number.pop((words, destination))
        self._trie.remove(words, number)
        self._before_change()
        for known in self._keys.values():
            if number in known.bits:
                known.bits.remove(number)
                known.destinations = None
                self._bits_cleared += 1
                self._bits -= 1
        self._destination[number] = None
        self._free.append(number)

    # hot: `xroute bench engines` single-key bitmap latency
    def match(self, key: str) -> frozenset:
        self._matches += 1
        known = self._keys.get(key)
        if known is None:
            known = self._compile(key)
        found = known.destinations
        if found is None:
            found = known.destinations = self._destinations_of(known.bits)
        return found

    def match_many(self, keys: Sequence[str]) -> list[frozenset]:
        match = self.match
        return [match(key) for key in keys]

    def stats(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "nodes": self._trie.stats()["nodes"],
            "bitmap_keys": len(self._keys),
            "bitmap_max_keys": self.max_keys,
            "bitmap_bits": self._bits,
            "bitmap_max_bits": self.max_bits,
            "bitmap_keys_compiled": self._compiled,
            "bitmap_keys_evicted": self._evicted,
            "bitmap_keys_dropped_on_change": self._forgotten,
            "bitmap_bits_set_on_add": self._bits_set,
            "bitmap_bits_cleared_on_remove": self._bits_cleared,
        }

    def _compile(self, key: str) -> _Key:
        keys = self._keys
        if len(keys) >= self.max_keys or self._bits > self.max_bits:
            self._sweep()
        known = _Key(split_words(key), BitMap(self._trie.match(key)))
        keys[key] = known
        self._bits += len(known.bits)
        self._compiled += 1
        return known

    def _before_change(self) -> None:
        """Drop every known key if testing the change against each costs more than the
        routing since the last change paid for (`BITMAP_PRECISE_KEYS`)."""
        matches, self._matches = self._matches, 0
        if len(self._keys) > max(BITMAP_PRECISE_KEYS, matches):
            self._forgotten += len(self._keys)
            self._keys = {}
            self._bits = 0

    def _sweep(self) -> None:
        """Forget the oldest keys (dicts keep insertion order) until both bounds have room."""
        keys = self._keys
        bits_left = self.max_bits * 3 // 4
        while keys and (len(keys) > self.sweep_to or self._bits > bits_left):
            oldest = next(iter(keys))
            self._bits -= len(keys.pop(oldest).bits)
            self._evicted += 1

    def _destinations_of(self, bits: BitMap) -> frozenset:
        if not bits:
            return EMPTY
        destination = self._destination
        return frozenset([destination[number] for number in bits])
