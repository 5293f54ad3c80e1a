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
  change tests at most that many keys; from then on X's own routes are also indexed by their
  key's first word (`heads`), so that a pattern whose first word is literal tests, or drops,
  only the routes of keys beginning with it (MQTT's ``s{i}.floor{j}.#``: a site's few keys,
  not the exchange's 65k), however few routes are kept. A key is tested by C-level string
  calls first (`_matched_keys`: the pattern's stem and a dot, its longest other literal
  word, or the word count of a pattern of wildcards alone), `key_test` (about 0.3 µs) only
  for those left; a first word and ``#`` (``broadcast.#``) drops that word's routes without
  a test, and a change that drops every route of X clears them at once;
- an exchange declared or deleted drops the entries whose route visited it or looked it up as
  an alternate exchange (a dangling alternate is ignored until it is declared);
- a queue declared or deleted drops the route of its name through the default exchange (its
  bindings go through the rule above).

Most routes visit one exchange and look up no alternate: those are kept per exchange, as
routing key -> queues (`own`, a dict of str to frozenset each), so a first route adds no new
object the cyclic collector tracks (no tuple per entry), a repeated route allocates nothing,
and a binding change finds the routes it may change in that exchange's dict alone (a literal
binding key: one pop). Routes through several exchanges keep the names they visited
(`entries`, indexed by exchange in `_through`).

Bounded like NATS's sublist cache: at most `ROUTE_CACHE_MAX` routes per exchange (swept oldest
first down to `ROUTE_CACHE_SWEEP`), and `ROUTE_CACHE_MAX_CELLS` queue names per exchange.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import islice
from operator import itemgetter
from typing import Any

from xroute.core.keys import HASH, STAR, split_words
from xroute.engines.reference import pattern_matches

# At most this many routes are kept per exchange (and as many through several exchanges): a
# working set of 50k keys stays warm (at 8,192 it missed on every route once it outgrew it,
# 5-6 times slower than a 5k set). An entry is a dict slot and the key: about 100 bytes.
ROUTE_CACHE_MAX = 65_536
# When full, the oldest entries go until this many remain.
ROUTE_CACHE_SWEEP = 49_152
# Queue names summed over the cached routes: frozensets made for a route (a union of literal
# and wildcard answers) are the cache's alone, 2.5M names is about 75 MB of them.
ROUTE_CACHE_MAX_CELLS = 2_500_000
# A route of more queue names than this is counted in the cells once per frozenset, however
# many keys share it: RabbitMQ 4.3's broadcast hands every key one frozenset of 10k names (one
# set in memory), and counting it per key swept half the routes at the 250th key (50-100 µs).
# Such a set is held by the cache (`_large`) until the next sweep, so that what is counted is
# what is kept, whichever routes are dropped meanwhile.
SHARED_NAMES = 256
# A wildcard binding change tests its key against at most this many cached routes of its
# exchange (`key_test`: about 0.3 µs each, where the reference's test took 2.3 µs and made one
# bind between routes cost 250 µs); beyond, they are all dropped untested, so binding churn
# stays cheap. A literal binding key (or a direct exchange's) drops only its own key's route.
ROUTE_CACHE_PRECISE_SCAN = 256

Entry = tuple[str, str]  # (exchange, routing key)


def key_test(pattern: str) -> Callable[[Any], bool]:
    """A function of a routing key: whether the topic ``pattern`` matches it, exactly as
    `pattern_matches` says, in about 0.3 µs a key (a split, a length test and one tuple
    comparison through `itemgetter`). A pattern with at most one ``#`` fixes its literal words'
    positions from the key's start (before ``#``) and from its end (after it); other patterns,
    and keys that are not str, take the reference's test."""
    words = split_words(pattern)
    if words.count(HASH) > 1:
        return lambda key: pattern_matches(words, split_words(key))
    exact = HASH not in words
    cut = len(words) if exact else words.index(HASH)
    positions = [i for i in range(cut) if words[i] != STAR]
    positions += [i - len(words) for i in range(cut + 1, len(words)) if words[i] != STAR]
    size = len(words) - (not exact)
    literals = tuple(words[i] for i in positions)
    if len(positions) == 1:
        literals = literals[0]  # itemgetter of one position gives the item itself
    take = itemgetter(*positions) if positions else lambda split: ()

    def matches(key: Any) -> bool:
        if type(key) is not str:
            return pattern_matches(words, split_words(key))
        split = key.split(".") if key else ()
        count = len(split)
        return (count == size if exact else count >= size) and take(split) == literals

    return matches


def _first_wildcard(words: tuple[str, ...]) -> int:
    """The position of a pattern's first ``*`` or ``#`` (its length if none)."""
    for at, word in enumerate(words):
        if word == STAR or word == HASH:
            return at
    return len(words)


def _matched_keys(keys: Any, pattern: str, words: tuple[str, ...]) -> list[Any]:
    """The routing keys among ``keys`` (str, or rarely another type) that the wildcard topic
    ``pattern`` (split: ``words``) matches, exactly as `pattern_matches` says.

    Cheap C-level tests go first, so that most keys cost one ``str`` method call, not a
    `key_test` call (a split and a tuple comparison: 0.3 µs, 10 times more): a key the
    pattern matches begins with its literal words before the first wildcard (the stem) and
    a dot, and holds its longest other literal word. Some patterns need nothing more: a stem
    and then only ``#`` (``broadcast.#``, ``s{i}.floor{j}.#``) matches the stem and the keys
    that begin with it and a dot; a pattern of wildcards alone (``*``, ``#.*``) matches the
    keys of as many words as its ``*`` (or more, with a ``#``), counted by their dots."""
    stop = _first_wildcard(words)
    stem = ".".join(words[:stop])
    rest = words[stop:]
    # The longest literal word after the stem, as a substring (the longest: the likeliest
    # to be rare); None if there is none.
    rare = None
    for word in rest:
        if word != STAR and word != HASH and (rare is None or len(word) > len(rare)):
            rare = word
    try:
        if not stop and rare is None:  # wildcards alone: the words counted
            stars = len(words) - words.count(HASH)
            if HASH not in words:
                return [key for key in keys if key and key.count(".") == stars - 1]
            if not stars:  # '#' alone (or several): every key
                return list(keys)
            return [key for key in keys if key and key.count(".") >= stars - 1]
        if stop:
            # the stem's words, then a dot: unless every word left is '#' (which may
            # match no word), and then those are all the pattern asks (the stem itself
            # too, but for "": that key has no word, where the stem has an empty one)
            prefix = stem + "."
            if rare is None and STAR not in rest:
                return [key for key in keys
                        if key.startswith(prefix) or key == stem and stem]
            keys = [key for key in keys if key.startswith(prefix)]
        if rare:  # (an empty literal word is no test)
            keys = [key for key in keys if rare in key]
    except (TypeError, AttributeError):  # a key that is not a str (no route keeps one)
        keys = list(keys)
    if not keys:
        return []
    test = key_test(pattern)
    return [key for key in keys if test(key)]


def _head(key: Any) -> Any:
    """A cached key's first word (`heads`), whatever the key's type."""
    return key.partition(".")[0] if type(key) is str else key


class TopologyRouteCache:
    """(exchange, routing key) -> queue names, for messages without headers; exact under change."""

    __slots__ = (
        "max_size", "sweep_to", "max_cells", "hits", "misses", "evictions", "invalidations",
        "own", "entries", "_through", "_cells", "own_cells", "heads", "precise_scan",
        "_large", "_large_cells",
    )

    def __init__(self, max_size: int = ROUTE_CACHE_MAX, sweep_to: int = ROUTE_CACHE_SWEEP,
                 max_cells: int = ROUTE_CACHE_MAX_CELLS) -> None:
        if not 0 <= sweep_to < max_size:
            raise ValueError(f"sweep_to={sweep_to} must be in [0, max_size={max_size})")
        self.max_size = max_size
        self.sweep_to = sweep_to
        self.max_cells = max_cells
        self.hits = self.misses = self.evictions = self.invalidations = 0
        # exchange -> {routing key -> queues} for routes that visited that exchange alone and
        # looked up no alternate: read (and filled, `keep`) by `Topology.route` itself, which
        # counts the hits and misses (one call less a route). Its dicts hold str keys and
        # frozenset values: nothing per entry that the collector tracks.
        self.own: dict[str, dict[str, frozenset[str]]] = {}
        # entry -> (queues, names of the exchanges its route visited or looked up), for the
        # other routes. While both ``own`` and ``entries`` are empty nothing is cached (every
        # other table indexes them): `Topology` then skips its calls on a change.
        self.entries: dict[Entry, tuple[frozenset[str], tuple[str, ...]]] = {}
        # exchange name -> the entries whose route visited or looked it up (a dict as an
        # ordered set)
        self._through: dict[str, dict[Entry, None]] = {}
        self._cells = 0  # queue names summed over `entries`
        # ... and over each exchange's `own` routes (kept up inline by `Topology`'s first
        # route too: `keep`'s usual case)
        self.own_cells: dict[str, int] = {}
        # exchange -> id of a frozenset of more than `SHARED_NAMES` names that its `own`
        # routes held since the last sweep -> the set, held here (counted in the cells once,
        # not taken off when a route lets go: it is still kept here, until the next sweep)
        self._large: dict[str, dict[int, frozenset[str]]] = {}
        # ... and their names summed, per exchange: the cells left once every route goes
        # (`_clear_own`), without a look at each set (a broadcast holds one more a change)
        self._large_cells: dict[str, int] = {}
        # exchange -> first word -> the keys of its `own` routes that begin with it (dicts as
        # ordered sets of str: untracked by the collector). Kept only for the exchanges where
        # a wildcard change found more than `precise_scan` routes: each of their first routes
        # then pays a partition and two dict operations (about 0.2 µs).
        self.heads: dict[str, dict[str, dict[str, None]]] = {}
        self.precise_scan = ROUTE_CACHE_PRECISE_SCAN

    def get(self, exchange: str, routing_key: str) -> frozenset[str] | None:
        """The cached route, or None (what `Topology.route` reads inline)."""
        own = self.own.get(exchange)
        if own is not None:
            found = own.get(routing_key)
            if found is not None:
                return found
        kept = self.entries.get((exchange, routing_key)) if self.entries else None
        return kept[0] if kept is not None else None

    def put(
        self, exchange: str, routing_key: str, queues: frozenset[str], through: Sequence[str]
    ) -> None:
        """Remember a route; ``through`` names every exchange it visited or looked up."""
        names = (through[0],) if len(through) == 1 else tuple(dict.fromkeys(through))
        self.remember((exchange, routing_key), queues, names)

    def remember(self, entry: Entry, queues: frozenset[str], names: tuple[str, ...]) -> None:
        """`put` with the entry made and ``names`` a tuple without repeats."""
        if names == (entry[0],):
            self.keep(entry[0], entry[1], queues)
            return
        entries = self.entries
        if len(entries) >= self.max_size:
            self._sweep_entries()
        entries[entry] = (queues, names)
        self._cells += len(queues)
        through = self._through
        for name in names:
            routes = through.get(name)
            if routes is None:
                routes = through[name] = {}
            routes[entry] = None

    # hot: every first route of `Topology.route` (`xroute bench engines --shapes`)
    def keep(self, exchange: str, routing_key: str, queues: frozenset[str]) -> None:
        """Remember the route of a message that visited ``exchange`` alone (a key not kept:
        `Topology.route` asks after a miss)."""
        own = self.own.get(exchange)
        if own is None:
            own = self.own[exchange] = {}
            self.own_cells[exchange] = 0
        size = len(queues)
        if size > SHARED_NAMES:  # `_hold`, inlined: a broadcast's every route comes here
            large = self._large.get(exchange)
            if large is None:
                large = self._large[exchange] = {}
            if id(queues) in large:
                size = 0
            else:
                large[id(queues)] = queues
                self._large_cells[exchange] = self._large_cells.get(exchange, 0) + size
        cells = self.own_cells[exchange] + size
        if len(own) >= self.max_size or cells > self.max_cells:
            cells = self._sweep_own(exchange, own)
            cells += self._hold(exchange, queues)
            # The index no longer knows which routes were kept: it goes, and the next change
            # past `precise_scan` drops every route and starts it again.
            self.heads.pop(exchange, None)
        own[routing_key] = queues
        self.own_cells[exchange] = cells
        heads = self.heads.get(exchange) if self.heads else None
        if heads is not None:
            head = _head(routing_key)
            keys = heads.get(head)
            if keys is None:
                heads[head] = {routing_key: None}
            else:
                keys[routing_key] = None

    def _hold(self, exchange: str, queues: frozenset[str]) -> int:
        """The cells that keeping ``queues`` in one more of ``exchange``'s routes adds: its
        size, but nothing for a large set held already."""
        if len(queues) <= SHARED_NAMES:
            return len(queues)
        large = self._large.get(exchange)
        if large is None:
            large = self._large[exchange] = {}
        if id(queues) in large:
            return 0
        large[id(queues)] = queues
        self._large_cells[exchange] = self._large_cells.get(exchange, 0) + len(queues)
        return len(queues)

    def _sweep_own(self, exchange: str, own: dict[str, frozenset[str]]) -> int:
        """An exchange's routes reached a bound: forget its oldest (dicts keep insertion
        order) down to `sweep_to`, or while the names' bound is passed; the names left (the
        large sets counted again, held only while a route keeps them)."""
        drop = len(own) - self.sweep_to if len(own) >= self.max_size else 0
        for old in list(islice(own, drop)):
            del own[old]
        self._large.pop(exchange, None)
        self._large_cells.pop(exchange, None)
        cells = 0
        holders: dict[int, int] = {}  # large set -> the routes left that keep it
        for queues in own.values():
            if len(queues) > SHARED_NAMES:
                holders[id(queues)] = holders.get(id(queues), 0) + 1
            cells += self._hold(exchange, queues)
        while cells > self.max_cells // 2 and own:  # few keys of many names each
            queues = own.pop(next(iter(own)))
            drop += 1
            if len(queues) <= SHARED_NAMES:
                cells -= len(queues)
            elif holders[id(queues)] == 1:  # its last route: no longer held
                del self._large[exchange][id(queues)]
                self._large_cells[exchange] -= len(queues)
                cells -= len(queues)
            else:
                holders[id(queues)] -= 1
        self.evictions += drop
        return cells

    def _sweep_entries(self) -> None:
        """Full: forget the oldest entries down to `sweep_to`, inlined (a call per entry was a
        third of the sweep)."""
        entries = self.entries
        through = self._through
        drop = len(entries) - self.sweep_to
        cells = self._cells
        for old in list(islice(entries, drop)):
            queues, names = entries.pop(old)
            cells -= len(queues)
            for name in names:
                routes = through.get(name)
                if routes is not None:
                    routes.pop(old, None)
        self._cells = cells
        for name in [name for name, routes in through.items() if not routes]:
            del through[name]
        self.evictions += drop

    def binding_changed(self, source: str, exchange_type: str, binding_key: str) -> None:
        """A binding from exchange ``source`` was added or removed."""
        own = self.own.get(source)
        routes = self._through.get(source)
        if not own and not routes:
            return  # nothing cached through it: a bulk bind pays nothing here
        words = split_words(binding_key) if exchange_type == "topic" else ()
        literal = exchange_type == "direct" or (
            exchange_type == "topic" and "*" not in words and "#" not in words
        )
        if own:
            if literal:  # it matches its own key alone
                self._pop_own(source, own, binding_key)
            elif exchange_type == "topic":
                self._pattern_changed(source, own, binding_key, words)
            else:
                self._drop_own(source)
        if not routes:
            return
        if literal:
            stale = [entry for entry in routes if entry[1] == binding_key]
        elif len(routes) > self.precise_scan or exchange_type != "topic":
            stale = list(routes)
        else:
            test = key_test(binding_key)
            stale = [entry for entry in routes if test(entry[1])]
        for entry in stale:
            self._drop(entry)
        self.invalidations += len(stale)

    def _pattern_changed(self, source: str, own: dict[str, frozenset[str]], pattern: str,
                         words: tuple[str, ...]) -> None:
        """A wildcard binding of topic exchange ``source`` changed: drop its `own` routes
        whose key ``pattern`` matches, testing at most `precise_scan` keys."""
        heads = self.heads.get(source)
        candidates: Any = own
        first = words[0]
        if heads is not None and first != STAR and first != HASH:
            # the keys that begin with the pattern's first word, however few routes are kept
            candidates = heads.get(first)
            if candidates is None:
                return  # no cached key begins with the pattern's first word
            # Too many to test, or a pattern that matches every key beginning with its first
            # word (``broadcast.#``: a broadcast's every key, on each of its changes): that
            # word's routes all go, without a test or a pop a key where they are all there is.
            if len(candidates) > self.precise_scan:
                if 2 * len(candidates) > len(own):
                    self._drop_own(source)
                    self.heads[source] = {}
                else:
                    self._pop_many(source, own, list(candidates))
                return
            if first and len(words) > 1 and all(word == HASH for word in words[1:]):
                if len(candidates) == len(own):
                    self._clear_own(source, own)
                else:
                    del heads[first]
                    self._pop_many(source, own, list(candidates), indexed=False)
                return
        elif len(own) > self.precise_scan:
            self._drop_own(source)  # too many to test: all go (and are indexed from now)
            self.heads[source] = {}
            return
        stale = _matched_keys(candidates, pattern, words)
        if not stale:
            return
        if len(stale) == len(own):
            self._clear_own(source, own)
        else:
            self._pop_many(source, own, stale)

    def _clear_own(self, source: str, own: dict[str, frozenset[str]]) -> None:
        """`_pop_many` of every one of ``source``'s own routes, in C: the large sets stay
        held (and counted) until a sweep, as `_pop_many` leaves them."""
        self.invalidations += len(own)
        own.clear()
        self.own_cells[source] = self._large_cells.get(source, 0)
        if source in self.heads:
            self.heads[source] = {}

    def _pop_many(self, source: str, own: dict[str, frozenset[str]], keys: list[Any],
                  indexed: bool = True) -> None:
        """`_pop_own` of each of ``keys`` (some of ``source``'s own routes), in one frame: a
        call a key was a third of a wildcard change's upkeep here. ``indexed=False``: the
        caller took them out of `heads` already."""
        cells = dropped = 0
        for key in keys:
            queues = own.pop(key, None)
            if queues is not None:
                dropped += 1
                if len(queues) <= SHARED_NAMES:  # a large set stays held until a sweep
                    cells += len(queues)
        self.own_cells[source] -= cells
        self.invalidations += dropped
        heads = self.heads.get(source) if self.heads and indexed else None
        if heads is not None:
            for key in keys:
                head = key.partition(".")[0] if type(key) is str else key  # `_head`, inline
                bucket = heads.get(head)
                if bucket is not None:
                    bucket.pop(key, None)
                    if not bucket:
                        del heads[head]

    def _pop_own(self, source: str, own: dict[str, frozenset[str]], key: Any) -> None:
        """Forget ``source``'s own route of ``key``, if kept."""
        dropped = own.pop(key, None)
        if dropped is None:
            return
        if len(dropped) <= SHARED_NAMES:  # a large set stays held, and counted, until a sweep
            self.own_cells[source] -= len(dropped)
        self.invalidations += 1
        heads = self.heads.get(source) if self.heads else None
        if heads is not None:
            head = _head(key)
            keys = heads.get(head)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del heads[head]

    def exchange_changed(self, name: str) -> None:
        """Exchange ``name`` was declared or deleted."""
        if name in self.own:
            self._drop_own(name)
        stale = list(self._through.get(name, ()))
        for entry in stale:
            self._drop(entry)
        self.invalidations += len(stale)

    def queue_changed(self, name: str, default_exchange: str = "") -> None:
        """Queue ``name`` was declared or deleted: its route through the default exchange."""
        own = self.own.get(default_exchange)
        if own is not None and name in own:
            self._pop_own(default_exchange, own, name)
        if (default_exchange, name) in self.entries:
            self._drop((default_exchange, name))
            self.invalidations += 1

    def clear(self) -> None:
        """Forget every entry (the counters stay)."""
        self.own.clear()
        self.own_cells.clear()
        self._large.clear()
        self._large_cells.clear()
        self.heads.clear()
        self.entries.clear()
        self._through.clear()
        self._cells = 0

    def __len__(self) -> int:
        return len(self.entries) + sum(len(own) for own in self.own.values())

    def stats(self) -> dict[str, Any]:
        """Size, bound, hits, misses, hit rate, evictions and entries dropped by changes."""
        lookups = self.hits + self.misses
        return {
            "route_cache_entries": len(self),
            "route_cache_max": self.max_size,
            "route_cache_cells": self._cells + sum(self.own_cells.values()),
            "route_cache_hits": self.hits,
            "route_cache_misses": self.misses,
            "route_cache_hit_rate": self.hits / lookups if lookups else 0.0,
            "route_cache_evictions": self.evictions,
            "route_cache_invalidations": self.invalidations,
        }

    def _drop_own(self, exchange: str) -> None:
        self.invalidations += len(self.own.pop(exchange))
        del self.own_cells[exchange]
        self._large.pop(exchange, None)
        self._large_cells.pop(exchange, None)
        if exchange in self.heads:
            self.heads[exchange] = {}

    def _drop(self, entry: Entry) -> None:
        queues, names = self.entries.pop(entry)
        self._cells -= len(queues)
        through = self._through
        for name in names:
            routes = through.get(name)
            if routes is not None:
                routes.pop(entry, None)
                if not routes:
                    del through[name]
