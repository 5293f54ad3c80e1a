"""``auto``, the default engine: chooses per call, so that a user never has to pick.

One trie serves every path (the DFA engine is a trie; the numba kernel flattens the same one),
so bindings are held once. In front sits a memo of routing key -> destinations, because a key
that repeats costs one dict lookup there (as `bitmap` and the route cache), against one dict
lookup per word in the DFA. The rule, also in docs/engines.md:

- ``match`` (one key, as `Topology.route` asks): the memo, else the patterns with wildcards
  by shape (`xroute.engines.shapes`: a dict lookup per shape) while they have few shapes, or
  the lazy DFA (`xroute.engines.dfa`) over them when they have many, united with the
  exact-key index of the literal ones (`xroute.engines.literal`); the memo keeps the answer.
- ``match_many`` (sets asked for): the memo and the DFA key by key, whatever the batch size,
  because the DFA hands out the frozenset its state keeps, shared by every key that ends
  there, while the kernel's flat answer needs one new frozenset per key: 30 times slower at
  10k bindings, and at 100k bindings (2,250 queues a key) still 2 to 3 times slower than the
  trie walk the DFA falls back to while it thrashes.
- ``match_many_ids`` (ids asked for) with at least `AUTO_BATCH_MIN` keys: the kernel, which
  writes ids straight from Arrow's buffers, if its flat copy of the trie is current; otherwise
  only once the keys of batches since the last binding change reach `AUTO_FLATTEN_AFTER`
  (those the matcher's key memo answered count too: `batch_keys_answered`), because
  flattening the trie costs about as much as routing that many new keys with the Python
  DFA. While the wildcards go by shape, the kernel is the shape kernel
  (`xroute.engines.flat_shapes`: a hash probe per shape and one of the exact-key table, no
  trie walk), made once the batch keys reach a key per `AUTO_FLATTEN_NODES_PER_KEY` trie
  nodes and a key per `AUTO_FLATTEN_LITERALS_PER_KEY` entries of its table (literal keys and
  shape entries). Smaller batches, and batches right after a change: the memo and the DFA (or the
  shapes), flattened by `TopicMatcher` (one id array per distinct frozenset). Where every
  wildcard pattern is '#' alone (queues that take everything, beside literal bindings), no
  kernel: each key is its literal entry's look-up, each distinct entry numbered once
  (`_catch_all_ids`).

The memo is bounded (`AUTO_MEMO_MAX_KEYS`, `AUTO_MEMO_MAX_CELLS`) and dropped whole on any
binding change: the DFA below is invalidated precisely and stays warm, so refilling the memo
costs one warm DFA walk per key, while keeping it exact key by key would cost a pattern test
per remembered key on every change (what made `bitmap` block on binding churn).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from itertools import chain, repeat
from typing import Any

import numpy as np

from xroute.core.keys import HASH, STAR, split_words
from xroute.engines import key_memo
from xroute.engines.base import EMPTY, Words, register
from xroute.engines.catch_all import CatchAllShadow, floor_of
from xroute.engines.compiled import LITERAL_TABLE_OVER, BatchKernel
from xroute.engines.dfa import DfaEngine
from xroute.engines.flat_shapes import FlatShapes
from xroute.engines.literal import LiteralIndex, is_literal
from xroute.engines.shapes import ShapeIndex, match_nothing
from xroute.engines.trie import TrieEngine

# Below this many keys a batch goes through the memo and the DFA, whose per-key cost beats the
# Arrow conversion and kernel call (about 20 µs). From it, the kernel, once its arrays are made
# (`_kernel_worth` says when): the DFA path turns each distinct answer into an id array per
# batch, so a broadcast (10k queues a key) in batches of 48 keys was 14 times slower there than
# in the kernel, which copies a kept list. (Only batches of 256 keys once made the arrays, so a
# broadcast's 48-key batches never had them, 10 times slower than `compiled` for good.)
AUTO_BATCH_MIN = 32
# Flattening costs about 5 µs per trie node, and on keys it has not seen the Python DFA costs
# about as much per key as flattening does per 10-100 nodes (both grow with the bindings; see
# `xroute bench engines`): after about this many batch keys a fresh flat trie has paid for itself.
AUTO_FLATTEN_AFTER = 4096
# ... or, while the wildcards go by shape (a key there costs 1-4 µs, not a DFA state), after a
# key per this many trie nodes: EMQX's 80k filters are 160k nodes, a 0.4-s flattening that made
# a fresh matcher's first batch of 8,000 keys 2.4 times slower than the plain trie walk.
AUTO_FLATTEN_NODES_PER_KEY = 8
# ... and after a key per this many literal bindings (and, while the wildcards go by shape,
# shape entries): their exact-key table costs about 1 µs a key to make, half what a new key
# costs through the memo and the shapes (the kernel's key costs a tenth of either), so NATS's
# 37k subjects made a fresh matcher's first batch of 8,000 keys 2 times slower than single
# first routes, and 100k literal bindings 3 times.
AUTO_FLATTEN_LITERALS_PER_KEY = 2
# Keys of the batch that flattens the trie also walked through the DFA: see `_warm_dfa`.
AUTO_WARM_KEYS = 2048
# ... for at most this share of the time the flattening took: on keys that build a state each
# (a device per key), 2,048 walks made the first batch 1.9 times slower than `compiled`'s.
# Less warming leaves single keys after a batch to build those states (at 10k seed-mix
# bindings, 0.25 made unique keys 1.2-1.5 times slower through `match_many`).
AUTO_WARM_SHARE = 0.5
# The memo's bounds. Entries: about 200 bytes each with the key (13 MB). Cells (destinations
# summed over entries): the frozensets are mostly the DFA's own, shared, but after a DFA reset
# the memo alone keeps them alive, so their size is bounded: 2.5M cells is about 75 MB of
# frozensets, room for about 1,100 keys of 2,250 queues each (100k seed bindings), as many
# cells as the route cache of `trie` and `compiled` holds there (1,024 keys).
# When either is reached the oldest quarter is forgotten (a refill is one DFA walk per key):
# forgetting half left the memo half empty on average, behind that route cache.
AUTO_MEMO_MAX_KEYS = 65_536  # at 16,384 a working set of 50k keys ran 7 times slower than 5k
AUTO_MEMO_MAX_CELLS = 2_500_000
# Keys that never repeat would make the memo pure upkeep: a lookup that misses costs the key's
# hash, a seventh of a warm DFA walk, and keeping it a quarter more. So every AUTO_MEMO_PROBE
# keys it keeps, the memo checks that it answered at least one lookup per
# AUTO_MEMO_MIN_HIT_SHARE keys kept meanwhile; if not, it pauses for AUTO_MEMO_SKIP keys. While
# paused, `match` is the bare DFA walk but for one key in AUTO_MEMO_SAMPLE, which goes through
# the memo (looked up, kept); every 1,024 keys, the pause ends if those sampled lookups hit
# their share. A working set that repeats is thus found again within a few thousand keys, even
# one whose first keys were all new when the memo paused.
AUTO_MEMO_PROBE = 1_024
AUTO_MEMO_MIN_HIT_SHARE = 4
AUTO_MEMO_SKIP = 65_536  # keys; the pause is checked every 1,024
AUTO_MEMO_SAMPLE = 64  # a power of two that divides 1,024
# Where destinations are shared (a topology's queue-name index) and the trie is made, a
# destination's wildcard patterns wait outside it (in the catch-all shadow, which lists them
# anyway) for its first this many wildcard bindings, or until it is bound with a floor
# pattern (`xroute.engines.catch_all`), which covers most of them: those never enter the
# trie. On the seed mix (10k bindings, 100 queues) 93 queues get a floor, at their 27th
# binding at the median: putting each queue's patterns into the trie before its floor and
# taking them out after was 2,704 inserts and 2,088 deletes for the 616 patterns left, three
# quarters of the index's time (837 and 221 at this bound; 1,378 and 762 at 48). A queue
# without a floor goes in by its 64th wildcard binding: a bulk bind of 70 a queue leaves
# none waiting for the first route.
AUTO_WAIT_BINDS = 64
# ... and at most this many patterns wait over all destinations (the oldest destination
# goes in first): what a first read may have to put into the trie at once (about 8 µs a
# pattern with its DFA edges and shapes), where destinations have few bindings each and
# never reach `AUTO_WAIT_BINDS`. seed-10k needs about 1,000 waiting to spare most (at 512,
# 1,704 inserts and 1,088 deletes). Waiting stops for good once the patterns that went in
# for the bounds (not spared by a floor) pass it and four times those it spared: 5k seed
# patterns of a queue each spare none, and would leave 1,024 for the first read (8 ms).
AUTO_WAIT_MAX = 1_024
AUTO_WAIT_SPARED_SHARE = 4


@register
class AutoEngine(BatchKernel, DfaEngine):
    """A key memo over the lazy DFA for keys and sets; the compiled kernel for id batches."""

    name = "auto"
    route_cache_default = False  # the memo is the route cache, dropped on change at no cost
    small_state = 0  # its trie holds wildcard patterns only: see `dfa.DFA_SMALL_STATE`

    def __init__(self) -> None:
        super().__init__()
        self._memo: dict[str, frozenset] = {}
        self._memo_cells = 0
        self._memo_clears = 0
        self._memo_hits = self._memo_inserts = 0  # since the last probe
        self._memo_resume_at = 0  # while paused: the DFA's count of walks that ends the pause
        self._memo_skips = 0
        self._batch_keys_since_change = 0
        self._kernel_batches = self._dfa_batches = 0
        # Bindings without wildcards: an exact-key index; the trie (and so the DFA) holds
        # only the patterns with '*' or '#' (see xroute.engines.literal).
        self._literal = LiteralIndex()
        # Its keys, looked up inline: a method call per key cost 15% of a warm DFA walk.
        self._literal_keys = self._literal.keys
        # Literal key -> the id of its one destination (`TopicMatcher`'s numbering), for the
        # keys bound to one destination: a batch's first pass answers such a key with one
        # look-up, where its set and then the destination's id cost two more, cold in memory
        # (`single_literal_ids`). Kept while every literal binding's destination has its id
        # when bound (a matcher that numbers destinations from the start); None otherwise.
        self._literal_ids: dict[str, int] | None = {}
        self._literal_id_keys = 0  # keys answered that way (`stats`)
        self._catch_all_keys = 0  # batch keys answered by `_catch_all_ids` (`stats`)
        # The wildcard patterns by shape as well (xroute.engines.shapes): while they have few
        # shapes, a key's wildcard answer is a dict lookup per shape, and the DFA is not used.
        # (made again from the trie after it dropped its entries for having too many shapes)
        self._shapes = ShapeIndex(self.patterns)
        self._by_shape: Any = self._shapes.matcher()
        self._flat_shapes: FlatShapes | None = None  # the shape kernel's arrays, if current
        # The wildcard bindings of destinations bound with '#' are kept out of all of them
        # (xroute.engines.catch_all): such a destination is in every answer already; so
        # are those that a destination's floor pattern (``*.#``: keys of 1 word or more)
        # covers.
        self._shadow: CatchAllShadow | None = CatchAllShadow()
        # Where destinations are shared the shadow holds every wildcard binding, so the trie
        # can wait while the shapes serve (see `_trie_deferred`), made from the bindings
        # the destinations' floors leave in the matcher (`CatchAllShadow.held`): a
        # topology's queue-name index (`xroute.core.wildcard_queues`) of 10k queues bound
        # with ``broadcast.#`` made a trie path a binding (0.7 µs of 8 a unicast binding).
        self._bindings = self._shadow.held
        self._trie_deferred = True
        # Destinations whose floor rose (their last catch-all or lowest floor binding went),
        # whose patterns it no longer covers go back into the trie and the shapes on the
        # next read (`_unshadow`), not at once:
        # removing 100k bindings of the seed mix, each queue's '#' among the first, put 60k
        # patterns back only to remove them again (3 s, against 0.6 s for `trie`).
        self._unshadowed: set[Hashable] = set()
        # The DFA's index of labelled edges is made only once the shapes no longer serve
        # (`_changed`): a binding change then, not a route, pays for making it.
        self._parents = None
        # Destinations whose wildcard patterns wait outside the trie (`AUTO_WAIT_BINDS`):
        # destination -> its wildcard bindings that entered the matcher meanwhile.
        self._waiting: dict[Hashable, int] = {}
        self._waiting_patterns = 0
        self._waiting_spared = 0  # patterns a floor covered while they waited
        self._waited_in = 0  # patterns that went in for `AUTO_WAIT_BINDS` or the bound
        self._wait_off = False  # waiting spared too little: no destination waits again

    # Given the pattern's own text too (`TopicMatcher` passes it): a literal binding's key is
    # then that string, not a copy joined from the words (43 bytes a binding of MQTT's).
    takes_pattern = True

    def add(self, words: Words, destination: Hashable, pattern: str | None = None) -> None:
        shadow = self._shadow
        # hot: every bind of a topology's topic exchange (bind rate): `is_literal`, inline
        if STAR not in words and HASH not in words:
            key = ".".join(words) if pattern is None else pattern
            if self._literal_ids is not None:
                self._literal_id_added(key, destination)
            self._literal.add(key, destination)
            self._flat = None
            # `_answers_changed`, inline (hot: a literal bind; NATS and literal binds 3-10%
            # slower through the call): the wildcards' shapes and trie are as they were
            self._batch_keys_since_change = 0
            self._flat_shapes = None
            if self._memo:
                self._memo = {}
                self._memo_cells = 0
            return
        if shadow is None:
            if self._pending_patterns is not None:  # the trie waits for a reader
                if pattern is None:
                    pattern = ".".join(words)
                self._pending_patterns.append(pattern)
                self._pending_destinations.append(destination)
                if self._pending_at is not None:  # kept once an unbind asked for it
                    self._pending_at[pattern, destination] = len(self._pending_destinations) - 1
                return  # `_by_shape` stays the flushing matcher: nothing else to drop
            if self._wildcards_wait:  # read rarely (`wildcards_read_rarely`): it waits
                self._pending_patterns = [".".join(words) if pattern is None else pattern]
                self._pending_destinations = [destination]
                self._pending_at = None
                self._pending_lazy = True
                self._changed()  # `_by_shape` the flushing matcher; the memo dropped
                return
            # hot: `_add_wildcard`'s usual case, inline (a wildcard kept in the shapes alone)
            if self._trie_deferred and self._shapes.add_if_usable(words, destination):
                self._deferred += 1
            else:
                self._add_wildcard(words, destination)  # (asks the shapes again: refused)
        else:
            waits = self._waiting.get(destination)
            if waits is None and not self._trie_deferred and not self._states and (
                    not shadow.has_wildcards(destination)) and not self._unshadowed and (
                    not self._wait_off):
                # its first wildcard binding, while nothing has read the DFA (a bulk bind,
                # not a change between routes, whose next route would pay): it waits
                waits = 0
            # A floor pattern (`xroute.engines.catch_all`) that lowers the destination's floor
            # takes the patterns it covers out of the trie and the shapes.
            enters, leaving = shadow.bind(words, destination, pattern)
            if waits is not None:  # none of its patterns is in the trie or the shapes
                # (a floor: what it leaves uncovered goes in now)
                self._wait(destination, waits + enters,
                           HASH in words and floor_of(words) is not None)
                return
            if leaving:
                self._move(leaving, destination, self._remove_wildcard)
            if enters:
                # `_add_wildcard`'s usual case, inline (hot: a queue-name index's bind)
                if self._trie_deferred and self._shapes.add_if_usable(words, destination):
                    self._deferred += 1
                else:
                    self._add_wildcard(words, destination)  # (asks the shapes again)
            elif not leaving and destination not in self._unshadowed:
                return  # covered by the destination's floor: no answer changes
        self._changed()

    def remove(self, words: Words, destination: Hashable, pattern: str | None = None) -> None:
        # hot: every unbind of a topology's topic exchange (a change between routes)
        if STAR not in words and HASH not in words:  # `is_literal`, inline
            key = ".".join(words) if pattern is None else pattern
            self._literal.remove(key, destination)
            if self._literal_ids is not None:
                self._literal_id_removed(key)
            self._flat = None
            # The wildcards' trie, shapes and DFA are as they were (and any that wait for
            # a reader still wait): only what is kept per key goes, as for a literal add.
            self._answers_changed()
            return
        shadow = self._shadow
        if self._pending_patterns is not None:
            if shadow is None:  # patterns wait in the lists
                # Not flushed: on the seed mix at 100k, the first wildcard unbind after a
                # bulk bind made the trie of the 68k waiting patterns and the DFA's edges
                # (2.2 s).
                if not self._unbind_pending(".".join(words) if pattern is None else pattern,
                                            destination):
                    self._remove_wildcard(words, destination)  # bound before any waited
                self._changed()
                return
            # Destinations wait (`_wait`: the lists are empty, the patterns the shadow's):
            # they go in first, at most `AUTO_WAIT_MAX` patterns.
            self._flush_pending()
        if shadow is None:
            self._remove_wildcard(words, destination)
        else:
            held, rose = shadow.unbind(words, destination)
            if held:
                self._remove_wildcard(words, destination)
            if rose:  # what the floor no longer covers goes back in on the next read
                self._unshadowed.add(destination)
            elif not held and destination not in self._unshadowed:
                return  # it was covered: no answer changes
        self._changed()

    def destinations_not_shared(
        self, bindings: Callable[[], Iterable[tuple[str, Hashable]]] | None = None,
    ) -> None:
        """Told by `TopicMatcher` (before any binding) that every binding has a destination of
        its own (a topology's `Binding` objects): no catch-all can shadow another binding, so
        no per-destination index of patterns is kept (about 100 bytes a wildcard binding).
        Nor can two keys or patterns share an answer of one destination: such answers are
        kept as the destination alone, not a frozenset (216 bytes a binding).

        ``bindings`` gives every (pattern, destination) bound, from the matcher's own store:
        the trie is then made from it only once the shapes stop serving (`_make_trie`)."""
        self._shadow = None
        self._literal = LiteralIndex(bare_singletons=True)
        self._literal_keys = self._literal.keys
        self._literal_ids = {} if self._numbering is not None else None
        self._shapes = ShapeIndex(self.patterns, bare_singletons=True)
        self._by_shape = self._shapes.matcher()
        self._bindings = bindings
        self._trie_deferred = bindings is not None

    # While the wildcard patterns go by shape, nothing reads the trie (nor the DFA over it):
    # a topology's exchange keeps them in the shape index alone until a pattern would make
    # the shapes unusable, and makes the trie then (MQTT: a node, a (word, node) pair and a
    # destinations tuple per word, 100 bytes and 1.6 objects for the collector a binding).
    _trie_deferred = False
    _deferred = 0  # wildcard bindings in the shapes alone
    _bindings: Callable[[], Iterable[tuple[str, Hashable]]] | None = None
    # Once a pattern would make the shapes unusable (the seed mix's hundreds of shapes), the
    # trie is still not made at once: that pattern and every wildcard one after it wait in
    # two lists (patterns, destinations: no object for the collector a binding) until
    # anything reads the wildcards, which first makes the trie and indexes them
    # (`_flush_pending`). A topology's first routes read its queue-name indexes
    # (`xroute.core.wildcard_queues`), not this trie: binding 10k seed patterns cost 2.4 times
    # less, and the trie is made by the first batch or observer, or never (an unbind takes
    # its binding out of the lists or the shapes: `_unbind_pending`). Meanwhile `_by_shape`
    # is `_pending_match`, which flushes: every reader of it sees each binding.
    _pending_patterns: list[str] | None = None
    _pending_destinations: list[Hashable]
    # (pattern, destination) -> its place in the lists, made by the first unbind or `holds`
    # that asks while patterns wait (`_pending_place`), then kept by each waiting add; None
    # till then, so that a bulk bind pays nothing for it. (By the pair: a matcher's own
    # destinations, unlike a topology's bindings, may each have several patterns.)
    _pending_at: dict[tuple[str, Hashable], int] | None = None
    # Where the wildcard answers are read rarely (`wildcards_read_rarely`: a topology's
    # exchange whose first routes ask its queue-name index instead), every wildcard binding
    # waits in those lists, whether or not the shapes would take it; a reader flushes them
    # as it flushes those the shapes refused. `_pending_lazy`: the lists wait for that
    # reason (their first pattern was not refused), so the flush offers each to the shapes.
    _wildcards_wait = False
    _pending_lazy = False

    def wildcards_read_rarely(self) -> None:
        """Told by `TopicMatcher.defer_wildcards` (where destinations are not shared) that
        the wildcard bindings' answers are read rarely: a topology's topic exchange once its
        queue-name index answers its first routes (`xroute.core.wildcard_queues`). Each
        wildcard binding then waits in the pending lists (two list slots, no object) until
        something reads the wildcards, which indexes them first (`_flush_pending`): in
        RabbitMQ 4.3's unicast shape, a ``broadcast.#`` binding a queue was indexed here
        by shape as well as by queue name in the index, which routes read."""
        if self._shadow is None:
            self._wildcards_wait = True

    def _add_wildcard(self, words: Words, destination: Hashable) -> None:
        if self._trie_deferred:
            if self._shapes.add_if_usable(words, destination):
                self._deferred += 1
                return
            if self._shadow is not None:
                # The shadow lists this binding already: the trie made from it holds it,
                # and the shapes take it (now unusable) as they would after the trie.
                self._make_trie()
                self._shapes.add(words, destination)
                return
            self._pending_patterns = [".".join(words)]
            self._pending_destinations = [destination]
            self._pending_at = None
            self._pending_lazy = False  # refused by the shapes: the trie is made on read
            return
        super().add(words, destination)
        self._shapes.add(words, destination)

    def _flush_pending(self) -> None:
        """Make the trie of every wildcard pattern (`_make_trie`), and put the waiting ones
        in the shapes too, as `_add_wildcard` does once the trie is made. Patterns that
        wait only because the wildcards are read rarely (`_pending_lazy`) go in as `add`
        would have put them: into the shapes alone while they serve, and the rest as
        before, from the first the shapes refuse."""
        if self._pending_lazy:
            self._pending_lazy = False
            patterns, destinations = self._pending_patterns, self._pending_destinations
            self._pending_patterns = self._pending_at = None
            self._pending_destinations = []
            for pattern, destination in zip(patterns, destinations):  # type: ignore[arg-type]
                if self._pending_patterns is not None:  # one was refused: the rest wait
                    self._pending_patterns.append(pattern)
                    self._pending_destinations.append(destination)
                    continue
                words = split_words(pattern)
                if self._trie_deferred and self._shapes.add_if_usable(words, destination):
                    self._deferred += 1
                else:  # (refused: lists made, the trie to make below)
                    self._add_wildcard(words, destination)
            if self._pending_patterns is None:
                self._changed()
                return
        self._make_trie()  # from the store, which lists the waiting ones too
        patterns, destinations = self._pending_patterns, self._pending_destinations
        self._pending_patterns = self._pending_at = None
        self._pending_destinations = []
        for pattern, destination in zip(patterns, destinations):  # type: ignore[arg-type]
            self._shapes.add(split_words(pattern), destination)
        self._changed()

    def _pending_place(self, pattern: str, destination: Hashable) -> int | None:
        """Where the binding of ``pattern`` to ``destination`` waits in the pending lists,
        or None if it does not wait there."""
        places = self._pending_at
        if places is None:
            places = self._pending_at = {pair: place for place, pair in enumerate(
                zip(self._pending_patterns, self._pending_destinations))}  # type: ignore[arg-type]
        return places.get((pattern, destination))

    def _unbind_pending(self, pattern: str, destination: Hashable) -> bool:
        """Take the binding out of the pending lists if it waits there (whether it did): the
        last one takes its place. Once none waits, the shapes hold every wildcard binding and
        serve again (`_changed`), the trie still unmade."""
        patterns, destinations = self._pending_patterns, self._pending_destinations
        # The usual case, a binding made and then removed between routes, is the last to
        # wait: no index of places is made for it (68k entries on the seed mix at 100k).
        if destinations[-1] is destination and patterns[-1] == pattern:  # type: ignore[index]
            place = len(destinations) - 1
        else:
            place = self._pending_place(pattern, destination)  # type: ignore[assignment]
            if place is None:
                return False
        last_pattern, last_destination = patterns.pop(), destinations.pop()  # type: ignore[union-attr]
        places = self._pending_at
        if places is not None:
            del places[pattern, destination]
        if place < len(destinations):  # not the last: the last takes its place
            patterns[place] = last_pattern  # type: ignore[index]
            destinations[place] = last_destination
            if places is not None:
                places[last_pattern, last_destination] = place
        if not destinations:
            self._pending_patterns = self._pending_at = None
        return True

    def _pending_match(self, key: str) -> frozenset:
        """`_by_shape` while patterns wait: index them, then answer as `match_wildcards`."""
        if self._pending_patterns is not None:
            self._flush_pending()
        return self.match_wildcards(key)

    def _wait(self, destination: Hashable, binds: int, floor: bool = False) -> None:
        """A wildcard binding of a waiting ``destination`` (``binds``: its bindings that entered
        the matcher, this one too; ``floor``: a floor pattern): it goes on waiting, or its
        patterns enter the trie now (`AUTO_WAIT_BINDS`, `AUTO_WAIT_MAX`). While any wait, the
        engine reads as while patterns wait in `_pending_patterns` (empty lists here: the
        patterns are the shadow's), so the first reader puts them in (`_make_trie`)."""
        waiting = self._waiting
        if floor or binds >= AUTO_WAIT_BINDS:
            waited = waiting.pop(destination, 0)
            self._waiting_patterns -= waited
            entering = self._shadow.uncovered(destination)  # type: ignore[union-attr]
            if floor:
                self._waiting_spared += max(0, binds - len(entering))
            else:
                self._waited_in += len(entering)
            self._move(entering, destination, self._add_wildcard)
            if self._waited_in > max(AUTO_WAIT_MAX,
                                     AUTO_WAIT_SPARED_SHARE * self._waiting_spared):
                self._wait_off = True  # it spares too little here: all go in now
                self._stop_waiting()
            if not self._waiting:  # the last one: nothing left for a reader to put in
                self._pending_patterns = None
        else:
            self._waiting_patterns += binds - waiting.get(destination, 0)
            waiting[destination] = binds
            while self._waiting_patterns > AUTO_WAIT_MAX:  # the oldest goes in
                self._wait(next(iter(waiting)), AUTO_WAIT_BINDS)
            if self._waiting and self._pending_patterns is None:
                self._pending_patterns, self._pending_destinations = [], []
        self._changed()

    def _stop_waiting(self) -> None:
        """Every waiting destination's patterns into the trie and the shapes."""
        waiting, self._waiting, self._waiting_patterns = self._waiting, {}, 0
        for destination in waiting:
            self._move(self._shadow.uncovered(destination), destination,  # type: ignore[union-attr]
                       self._add_wildcard)

    def _remove_wildcard(self, words: Words, destination: Hashable) -> None:
        if self._trie_deferred:
            self._shapes.remove(words, destination)
            self._deferred -= 1
            return
        super().remove(words, destination)
        self._shapes.remove(words, destination)

    def _make_trie(self) -> None:
        """The trie of the wildcard patterns bound so far, from the matcher's store (called
        before the binding at hand is in it, or after it left; once: it is then kept). With
        a shadow, from the bindings it leaves in the matcher (`CatchAllShadow.held`): every
        one the shapes hold, and the binding at hand if it enters."""
        if not self._trie_deferred:  # made: only destinations wait (`_wait`)
            self._stop_waiting()
            return
        bound = list(self._bindings())  # type: ignore[misc]  # (from the shapes, while deferred)
        self._trie_deferred = False
        self._deferred = 0
        for pattern, destination in bound:
            words = split_words(pattern)
            if not is_literal(words):
                super().add(words, destination)

    def holds(self, words: Words, destination: Hashable, pattern: str | None = None) -> bool:
        """Whether ``words`` is bound to ``destination`` here; for a matcher whose
        destinations name their pattern (`TopicMatcher`'s ``pattern_of``), which then keeps
        no store of its own; ``pattern`` is ``words`` joined, if the caller has it. Only
        where destinations are not shared (no shadow)."""
        if is_literal(words):
            return self._literal.holds(".".join(words) if pattern is None else pattern,
                                       destination)
        if self._pending_patterns is not None and self._pending_place(
                ".".join(words) if pattern is None else pattern, destination) is not None:
            return True
        if self._trie_deferred:  # (so while patterns wait: the others are in the shapes)
            return self._shapes.holds(words, destination)
        node: Any = self._root
        for word in words:
            node = node.child(word)
            if node is None:
                return False
        return destination in node.destinations

    def holds_pair(self, pattern: str, destination: Hashable) -> bool:
        """Whether ``pattern`` is bound to ``destination``, where destinations are shared (a
        `TopicMatcher` of queue names; never told `destinations_not_shared`): from the
        catch-all shadow's patterns per destination and the literal index, which between
        them hold every binding. Each holds a pattern by its own string, and only its kind
        (with a ``*`` or ``#`` word or without), so the pattern is not split: asked on every
        wildcard bind of a topology's queue-name index (`xroute.core.wildcard_queues`)."""
        return (self._shadow.holds(pattern, destination)  # type: ignore[union-attr]
                or pattern in self._literal_keys and self._literal.holds(pattern, destination))

    def bound_pairs(self) -> Iterator[tuple[str, Hashable]]:
        """Every (pattern, destination) bound, where `holds_pair` answers."""
        for key, members in self._literal.items():
            for destination in members:
                yield key, destination
        yield from self._shadow.bindings()  # type: ignore[union-attr]

    def bound_destinations(self) -> Iterator[Hashable]:
        """The destination of every binding, once per binding (no destination shared)."""
        for _, members in self._literal.items():
            yield from members
        if self._trie_deferred:
            yield from self._shapes.destinations()
        else:
            for _, destination in TrieEngine.patterns(self):
                yield destination
        # (waiting while the trie is made too, where the wildcards are read rarely)
        yield from self._pending_destinations if self._pending_patterns is not None else ()

    def patterns(self) -> Iterator[tuple[Words, Hashable]]:
        """Every (wildcard pattern words, destination) in the trie (made if deferred)."""
        if self._pending_patterns is not None:
            self._flush_pending()
        if self._trie_deferred:
            self._make_trie()
        return super().patterns()

    @property
    def _trie_nodes(self) -> int:
        # What the trie has, or would have while deferred (about two nodes a pattern).
        return 2 * self._deferred if self._trie_deferred else self._nodes

    def _unshadow(self) -> None:
        """Before a read: the wildcard patterns of destinations whose floor rose (a floor
        or catch-all binding went) and no longer covers them go back into the trie and the
        shapes."""
        pending, self._unshadowed = self._unshadowed, set()
        if self._trie_deferred:
            # Made first, from the floors as the shapes reflect them: made midway (a pattern
            # going back in that the shapes refuse), it would hold the others going back in
            # already, and they would be added again.
            self._make_trie()
        for destination in pending:
            entering, leaving = self._shadow.settle(destination)  # type: ignore[union-attr]
            self._move(leaving, destination, self._remove_wildcard)
            self._move(entering, destination, self._add_wildcard)
        self._changed()

    def _move(self, patterns: list[Words], destination: Hashable, how: Any) -> None:
        """Put a destination's shadowed ``patterns`` into, or take them out of, the trie and
        the shapes (``how``). Many at once drop the DFA first: each change would scan it."""
        if len(patterns) > 16 and self._states:
            self._reset(full=False)
        for words in patterns:
            how(words, destination)

    # hot: `xroute bench engines --paths` auto match (a hit is one dict lookup; a miss pays
    # the memo's upkeep inline, since a method call per miss cost 10% of a warm DFA walk)
    def match(self, key: str) -> frozenset:
        memo = self._memo
        found = memo.get(key)
        if found is not None:
            self._memo_hits += 1
            return found
        # The DFA walk of `DfaEngine.match`, inlined: a second Python call per miss cost as
        # much as the memo's whole upkeep. (Walks are counted for the DFA's own bounds.)
        if self._unshadowed:
            self._unshadow()
        if self._by_shape is not None:
            found = self._by_shape(key)
        elif self._bypass:
            found = DfaEngine.match(self, key)
        else:
            self._matches += 1
            state = self._start or self._make_start()
            if key:
                dead, parents = self._dead, self._parents
                for word in key.split("."):
                    following = state.next.get(word)
                    if following is None:
                        # a word of no pattern: the state's unlabelled transition, if made
                        following = (word not in parents and state.other
                                     or self._advance(state, word))
                    if following is dead:
                        state = dead
                        break
                    state = following
            found = state.destinations
            if found is None:
                found = self._finish(state)
        if key in self._literal_keys:
            found = self._literal.combine(key, found)
        if self._memo_cells > AUTO_MEMO_MAX_CELLS or len(memo) >= AUTO_MEMO_MAX_KEYS:
            memo = self._sweep_memo()
        memo[key] = found
        self._memo_cells += len(found)
        self._memo_inserts += 1
        if self._memo_inserts >= AUTO_MEMO_PROBE and not self._memo_resume_at:
            self._probe_memo()
        return found

    # hot: `xroute bench engines --paths` auto match, keys that never repeat
    def _match_paused(self, key: str) -> frozenset:
        """`match` while the memo pauses (the instance's ``match`` then): the DFA walk alone,
        inlined, for all but one key in `AUTO_MEMO_SAMPLE`, which goes through the memo. The
        DFA's count of walks is the pause's clock, so that a key costs no other counter."""
        matches = self._matches + 1
        self._matches = matches
        if not matches & (AUTO_MEMO_SAMPLE - 1):
            found = AutoEngine.match(self, key)
            if not matches & 1023:
                self._check_pause(matches)
            return found
        if self._unshadowed:
            self._unshadow()
        if self._by_shape is not None:
            found = self._by_shape(key)
            return self._literal.combine(key, found) if key in self._literal_keys else found
        if self._bypass:
            self._matches = matches - 1  # counted there: the clock passes every number
            return self._literal.combine(key, DfaEngine.match(self, key))
        state = self._start or self._make_start()
        if key:
            dead, parents = self._dead, self._parents
            for word in key.split("."):
                following = state.next.get(word)
                if following is None:
                    # a word of no pattern: the state's unlabelled transition, if made
                    following = (word not in parents and state.other
                                 or self._advance(state, word))
                if following is dead:
                    return self._literal.combine(key, EMPTY)
                state = following
        found = state.destinations
        if found is None:
            found = self._finish(state)
        return self._literal.combine(key, found) if key in self._literal_keys else found

    def match_wildcards(self, key: str) -> frozenset:
        """The destinations of the bindings with wildcards that match a valid key: by shape or
        by the DFA walk, no memo, no literal bindings (see `TopicMatcher.wildcard_matcher`)."""
        if self._unshadowed:
            self._unshadow()
        by_shape = self._by_shape
        return by_shape(key) if by_shape is not None else DfaEngine.match(self, key)

    def wildcard_function(self, bare: bool = False) -> Any:
        """`match_wildcards` as it stands until the next binding change: the shape index's
        own function while it is used (one Python call less on every first route).
        ``bare``: a key that one binding matches gets that destination itself where the
        shape index keeps it bare, not a frozenset made for it (`ShapeIndex.match_bare`);
        not while wildcard patterns wait: `_pending_match` (which flushes) answers then."""
        if self._unshadowed:
            self._unshadow()
        if bare and self._by_shape is not None and self._pending_patterns is None:
            return self._shapes.matcher(bare=True)
        return self._by_shape or self.match_wildcards

    def match_many(self, keys: Sequence[str]) -> list[frozenset]:
        # Key by key through `match` (memo, then the inlined DFA walk): the frozensets come
        # from the memo or the DFA's states, shared, never built per key. ``self.match`` is
        # looked up per key: a pause begins or ends within the batch.
        self._dfa_batches += 1
        return [self.match(key) for key in keys]

    def match_many_ids(self, keys: Any) -> tuple[np.ndarray, np.ndarray] | None:
        # None hands the batch back to TopicMatcher's generic path (match_many, flattened).
        if self._pending_patterns is not None:
            self._flush_pending()
        if self._unshadowed:
            self._unshadow()
        if self._by_shape is not None and self._numbering is not None:
            found = self._catch_all_ids(keys)
            if found is not None:
                return found
        size = len(keys)
        current = self._flat if self._by_shape is None else self._flat_shapes
        if size >= AUTO_BATCH_MIN and self._kernel_worth(size, current is not None):
            self._kernel_batches += 1
            if self._by_shape is not None:  # wildcards by shape: the shape kernel
                if current is None:
                    current = self._flat_shapes = FlatShapes(self._shapes, self._literal,
                                                             self._numbering)
                return current.route(keys)
            if self._flat is None:
                began = time.perf_counter()
                self.flat()
                if self._by_shape is None:  # else single keys go by shape, not the DFA
                    self._warm_dfa(keys, AUTO_WARM_SHARE * (time.perf_counter() - began))
            return super().match_many_ids(keys)
        self._dfa_batches += 1
        return None

    def _catch_all_ids(self, keys: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """`match_many_ids` where every wildcard pattern matches every key (each is '#' alone,
        or '#'s only: a queue that takes everything, beside literal bindings), else None.

        A key's answer is then the catch-all set united with its literal entry, so the batch
        is one C look-up a key (`map` over the literal index), and each distinct literal
        entry is numbered once, not each key's answer matched, united and made ids; nor are
        the shape kernel's tables made (seed-100k, every queue bound with '#': 20-25 ms,
        within a first pass of 20k new keys)."""
        shapes = self._shapes.shapes()
        if not shapes or any(shape.min_words or shape.exact or shape.positions
                             for shape in shapes):
            return None
        numbering = self._numbering
        every = self.match_wildcards("")  # what '#' answers: the same for every key
        every_ids = [numbering[destination] for destination in every]  # type: ignore[index]
        if not isinstance(keys, list):
            keys = keys.to_pylist()
        found = self._literal.entries(keys)
        # Answer 0 is the catch-all's; a literal entry that adds to it gets one of its own,
        # made once for every key that shares the entry's object.
        number_of = {id(None): 0}
        answers = [every_ids]
        for identity, members in dict(zip(map(id, found), found)).items():
            if members is None:
                continue
            if members.__class__ is not frozenset:  # a destination kept bare
                members = (members,)
            elif members <= every:  # (a subset test in C: most often so beside '#')
                number_of[identity] = 0
                continue
            extra = [numbering[each] for each in members  # type: ignore[index]
                     if each not in every]
            number_of[identity] = len(answers) if extra else 0
            if extra:
                answers.append(every_ids + extra)
        numbers = np.fromiter(map(number_of.__getitem__, map(id, found)), dtype=np.int32,
                              count=len(found))
        starts = np.zeros(len(answers) + 1, dtype=np.int64)
        np.cumsum([len(answer) for answer in answers], out=starts[1:])
        pool = np.fromiter(chain.from_iterable(answers), dtype=np.int32, count=int(starts[-1]))
        self._catch_all_keys += len(keys)
        return key_memo.kernel().lay_out(numbers, starts, pool)

    def stats(self) -> dict[str, Any]:
        if self._pending_patterns is not None:  # the figures of the indexes as read
            self._flush_pending()
        return {
            **super().stats(),
            "engine": self.name,
            **self.kernel_stats(),
            "auto_kernel_batches": self._kernel_batches,
            "auto_dfa_batches": self._dfa_batches,
            "auto_literal_id_keys": self._literal_id_keys,
            "auto_catch_all_keys": self._catch_all_keys,
            "auto_memo_keys": len(self._memo),
            "auto_memo_cells": self._memo_cells,
            "auto_memo_clears": self._memo_clears,
            "auto_memo_pauses": self._memo_skips,
            "auto_memo_paused": bool(self._memo_resume_at),
            **self._literal.stats(),
            **self._shapes.stats(),
            **(self._shadow.stats() if self._shadow is not None else {}),
            "auto_by_shape": self._by_shape is not None,
            "auto_trie_deferred": self._trie_deferred,  # wildcards in the shapes alone
        }

    def _warm_dfa(self, keys: Any, budget: float) -> None:
        """This batch flattened the trie for the kernel (about 5 µs a node); walking its first
        `AUTO_WARM_KEYS` keys through the DFA too, for at most ``budget`` seconds, leaves the
        single-key path as warm as the batch path after a change (keys or an Arrow array).
        It stops at half the DFA's cell bound: warming must never make the DFA reset."""
        first = keys[:AUTO_WARM_KEYS]
        deadline = time.perf_counter() + budget
        for i, key in enumerate(first if isinstance(first, list) else first.to_pylist()):
            if self._cells > self.max_cells // 2 or (
                not i & 31 and time.perf_counter() > deadline
            ):
                break
            DfaEngine.match(self, key)

    def _check_pause(self, matches: int) -> None:
        """Every 1,024 keys of a pause: end it when it is over, or early if the sampled
        lookups hit their share (keys repeat again)."""
        sampled = 1024 // AUTO_MEMO_SAMPLE
        hits, self._memo_hits = self._memo_hits, 0
        if matches >= self._memo_resume_at or hits * (AUTO_MEMO_MIN_HIT_SHARE + 1) >= sampled:
            self._memo_resume_at = 0
            self._memo_inserts = 0
            self.__dict__.pop("match", None)  # the class's `match` again

    def _probe_memo(self) -> None:
        """Every `AUTO_MEMO_PROBE` keys kept: if the memo answered few lookups meanwhile, keys
        are not repeating, so pause it (the DFA below stays warm)."""
        if self._memo_hits * AUTO_MEMO_MIN_HIT_SHARE < self._memo_inserts:
            self._memo_resume_at = self._matches + AUTO_MEMO_SKIP
            self._memo_skips += 1
            self.match = self._match_paused  # type: ignore[method-assign]
        self._memo_hits = self._memo_inserts = 0

    def _sweep_memo(self) -> dict[str, frozenset]:
        """The memo reached a bound: forget its oldest quarter (dicts keep insertion order),
        so the keys routed lately stay; the memo."""
        memo = self._memo
        drop = list(memo)[: len(memo) // 4 + 1]
        cells = self._memo_cells
        for key in drop:
            cells -= len(memo.pop(key))
        self._memo_cells = cells
        self._memo_clears += 1
        return memo

    def _changed(self) -> None:
        if self._pending_patterns is not None:
            self._by_shape = self._pending_match
            self._answers_changed()
            return
        self._by_shape = self._shapes.matcher()
        if self._by_shape is None and self._parents is None:
            self._parents = self._edges_by_word()
        # `_answers_changed`, inline (hot: every wildcard bind)
        self._batch_keys_since_change = 0
        self._flat_shapes = None
        if self._memo:
            self._memo = {}
            self._memo_cells = 0

    def _answers_changed(self) -> None:
        """A binding changed: what is kept per key (the memo, the shape kernel) goes."""
        self._batch_keys_since_change = 0
        self._flat_shapes = None
        if self._memo:
            self._memo = {}
            self._memo_cells = 0

    def batch_keys_answered(self, keys: int) -> None:
        """``keys`` keys of a batch were answered before reaching this engine (the matcher's
        key memo): they count toward the kernel's bar as batch traffic (`_kernel_worth`)."""
        self._batch_keys_since_change += keys

    def _literal_id_added(self, key: str, destination: Hashable) -> None:
        """`_literal_ids` after a literal binding of ``key`` to ``destination`` (not made yet)."""
        ids = self._literal_ids
        if key in self._literal_keys:  # a second destination: the key's set answers it
            ids.pop(key, None)  # type: ignore[union-attr]
            return
        number = None if self._numbering is None else self._numbering.get(destination)
        if number is None:  # destinations are numbered later, or never: no map kept
            self._literal_ids = None
        else:
            ids[key] = number  # type: ignore[index]

    def _literal_id_removed(self, key: str) -> None:
        """`_literal_ids` after a literal binding of ``key`` was removed."""
        members = self._literal.members(key)
        if len(members) != 1:
            self._literal_ids.pop(key, None)  # type: ignore[union-attr]
            return
        for member in members:
            number = self._numbering.get(member)  # type: ignore[union-attr]
            if number is None:
                self._literal_ids = None
            else:
                self._literal_ids[key] = number  # type: ignore[index]

    def single_literal_ids(self, keys: list[str]) -> np.ndarray | None:
        """Per valid key (`TopicMatcher._match_ids`, a batch the kernel does not take): the
        id of its one destination where one literal binding alone matches it (no wildcard
        binding does), else -1. None where no key is answered so (no map kept, a pattern of
        `#` alone, or no key of one literal destination): the generic path then, as it was."""
        ids = self._literal_ids
        if not ids:
            return None
        if self._unshadowed:
            self._unshadow()
        wild = self._by_shape is not match_nothing
        if wild and self.match_wildcards(""):
            return None  # a pattern of '#' alone: every key matches a wildcard binding
        found = np.fromiter(map(ids.get, keys, repeat(-1)), dtype=np.int64, count=len(keys))
        if wild:  # wildcard bindings: they must match none of the keys answered so
            hit = np.flatnonzero(found >= 0)
            wildcards = self.match_wildcards
            matched = np.fromiter(map(len, map(wildcards, [keys[i] for i in hit.tolist()])),
                                  dtype=np.int64, count=len(hit))
            found[hit[matched > 0]] = -1
        answered = int(np.count_nonzero(found >= 0))
        if not answered:
            return None
        self._literal_id_keys += answered
        return found

    def _kernel_worth(self, keys: int, current: bool) -> bool:
        """True if a batch of ``keys`` new keys should go through the kernel: its arrays are
        ``current``, or enough batch keys came since the last change to pay for making them."""
        self._batch_keys_since_change += keys
        if current:
            return True
        literals, bar = len(self._literal_keys), AUTO_FLATTEN_AFTER
        if self._by_shape is not None:
            bar = max(bar, self._trie_nodes // AUTO_FLATTEN_NODES_PER_KEY)
            # The shape kernel's table holds the literal keys and the shapes' entries, made
            # alike (an MQTT site's ``s{i}.*.temp`` and ``s{i}.floor{j}.#``: 20k entries
            # beside 30k literal keys, 60 ms to make, paid by a fresh matcher's first pass of
            # 20k keys that the memo and the shapes route in 50).
            entries = literals + self._shapes.entry_count()
            bar = max(bar, entries // AUTO_FLATTEN_LITERALS_PER_KEY)
        elif literals > LITERAL_TABLE_OVER * self._trie_nodes:
            # The flat trie makes the literal keys' exact-key table only where they outnumber
            # its nodes (else they are paths of it, and a new key through the DFA costs
            # 10-1,000 µs at the seed mix's 2-2,250 queues a key: waiting for 10k keys there
            # left seed-100k's batches at 15k keys/s against `compiled`'s 263k).
            bar = max(bar, literals // AUTO_FLATTEN_LITERALS_PER_KEY)
        return self._batch_keys_since_change >= bar
