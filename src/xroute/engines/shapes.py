"""A tuple-space index of wildcard patterns: one hash lookup per pattern shape, not a walk.

Real deployments bind many patterns of few shapes: EMQX's benchmark binds 80k filters, all
``device.{s}.*.{n}.#``; RabbitMQ 4.3's binds ``broadcast.#`` beside literal keys; NATS's adds
three wildcards to 37k literal subjects. A pattern's *shape* is where its ``*`` and ``#``
stand; two patterns of one shape differ only in their literal words. So a shape is a dict
from those words to the destinations, and a key is matched by taking, for each shape, its
words at the shape's literal positions and looking them up: a few dict lookups whatever the
vocabulary, where a lazy DFA builds a state per new word (about 10 µs on EMQX's new keys).
This is the tuple space search of packet classifiers (Srinivasan, Suri and Varghese, 1999).
While every pattern begins with a literal word, a key whose first word none begins with is
answered before any shape is tried.

A shape is representable when the pattern has at most one ``#``: the words before it are at
fixed positions from the key's start and those after it at fixed positions from its end,
and the key must have at least as many words as the pattern has besides ``#``. Patterns with
two or more ``#`` (rare, and exponential in RabbitMQ's own trie) make the index unusable, as
do more than `MAX_SHAPES` shapes (the seed articles' random mix has hundreds): the caller
then walks its DFA instead, which is exact for any set.

Past `DROP_SHAPES` shapes the index keeps only a count of patterns per shape, not their
entries (the seed mix at 10k bindings: 1,300 shapes, 450 bytes and two tracked objects a
binding kept for nothing), and makes them again from its ``source`` (the caller's trie) once
it is usable again: a rebuild over every pattern, paid only when the shapes come back under
`MAX_SHAPES`, never per change. While it also has patterns of two ``#`` or more, which alone
make it unusable, it keeps no count per shape either, only theirs (a C-level count of ``#``
a change, where `shape_of` costs about 1.3 µs: 4,800 of them in a bulk bind of 10k seed
bindings, a tenth of its queue-name index's time); the counts are made again from the
source once the last such pattern goes (`ShapeIndex._recount`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Iterator
from itertools import chain
from operator import itemgetter
from typing import Any

from xroute.core.keys import HASH, STAR
from xroute.engines.base import EMPTY, Words
from xroute.engines.frozen_sets import STALE, FrozenSets

# Beyond this many shapes, a key's lookups cost more than a warm DFA walk of a 5-word key
# (about 1 µs against 0.15 µs a lookup): the caller's DFA answers instead.
MAX_SHAPES = 6
# Beyond this many shapes the entries are dropped (see the module's doc); the gap to
# `MAX_SHAPES` keeps a binding toggled at the bound from rebuilding the index each time.
DROP_SHAPES = 4 * MAX_SHAPES
# Unions of answers from several shapes, kept so that keys ending alike share one frozenset
# (`Topology` works once per distinct set): at most this many, then forgotten whole.
MAX_UNIONS = 16_384
# Unions of at most this many destinations, from parts kept bare, are kept by value.
SMALL_UNION = 16
# A pattern's destinations are kept as a frozenset, made as it is bound, while there are at
# most this many (`xroute.engines.frozen_sets`).
FREEZE_NOW = 8
# `ShapeIndex.add`'s shape key when the caller has not worked it out.
_UNKNOWN: Any = object()


class _NotCounted(dict):
    """`ShapeIndex._counts` while the shapes are not counted (see the module's doc): as
    many shapes as make the index unusable, for the inline tests of `usable`."""

    __slots__ = ()

    def __len__(self) -> int:
        return DROP_SHAPES + 1


_NOT_COUNTED: Any = _NotCounted()


class _Shape:
    """The patterns of one shape: literal words at the shape's positions -> destinations, each
    answer a shared frozenset (`xroute.engines.frozen_sets`: EMQX's 80k filters have one
    destination each; 10k queues bound to ``broadcast.#`` make one frozenset, not 10k growing
    copies)."""

    __slots__ = ("min_words", "exact", "positions", "headed", "pick", "take", "entries",
                 "frozen")

    def __init__(self, min_words: int, exact: bool, positions: tuple[int, ...],
                 bare_singletons: bool = False) -> None:
        self.min_words = min_words  # words besides '#'; exactly these many if ``exact``
        self.exact = exact
        self.positions = positions
        self.headed = positions[:1] == (0,)  # its patterns begin with a literal word
        # The literal words of a key or pattern, as one hashable value: the word itself for
        # one position, () for none, and for several the words joined by dots (no word holds
        # a dot). A string, not a tuple: a probe then compares one string with the kept one,
        # where a tuple compared each of its fresh words with a kept word object of its own
        # (EMQX's 80k filters: 230k such objects, scattered; 0.6 µs a probe against 0.1 µs).
        # ``pick``: the same words, not joined (a tuple for several positions): C-level,
        # for `ShapeIndex.match_bare` to join inline.
        self.pick: Any = _nothing if not positions else itemgetter(*positions)
        self.take: Any = self.pick if len(positions) <= 1 else _joined(self.pick)
        # An entry of one destination shares that destination's frozenset with the shape's
        # other such entries (where destinations are not kept bare): EMQX's 80k filters lead
        # to 80 queues, so a batch's first pass numbers 80 sets, hot in cache, not a set of
        # its own a key read cold (`TopicMatcher._flatten`), and 80k frozensets are not kept.
        self.entries = FrozenSets(FREEZE_NOW, share_singletons=not bare_singletons,
                                  bare_singletons=bare_singletons)
        self.frozen = self.entries.frozen  # read inline by `lookup` and the one-shape matcher

    def literal_entries(self) -> Iterator[tuple[tuple[str, ...], Collection[Hashable]]]:
        """Every entry: its literal words (in the shape's positions' order), destinations."""
        count = len(self.positions)
        for literal, destinations in self.entries.items():
            yield ((literal,) if count == 1 else tuple(literal.split(".")) if count else ()
                   ), destinations

    def lookup(self, words: list[str]) -> frozenset:
        """The destinations of this shape's pattern matching ``words`` (a key of enough
        words for it)."""
        literal = self.take(words)
        found = self.frozen.get(literal, EMPTY)
        return found if found.__class__ is frozenset else self.entries.get(literal)


def _nothing(words: Any) -> tuple[()]:
    return ()


def _joined(get: Callable[[Any], tuple[str, ...]]) -> Callable[[Any], str]:
    """``take`` for several positions: the words ``get`` picks, joined by dots."""
    join = ".".join

    def take(words: Any) -> str:
        return join(get(words))

    return take


def shape_of(words: Words) -> tuple[int, bool, tuple[int, ...]] | None:
    """A pattern's shape: (words besides ``#``, no ``#`` at all, the literal words' positions,
    counted from the key's end after a ``#``), or None if it has two ``#`` or more."""
    # hot: every wildcard bind, twice under a topology (its exchange's matcher, its queue-name
    # index): one loop in this frame, where a comprehension or two made a function each
    # (400-500 ns more a call)
    size = len(words)
    positions = []
    hashes = 0
    for i, word in enumerate(words):
        if word == HASH:
            hashes += 1
        elif word != STAR:
            positions.append(i - size if hashes else i)  # from the end, after the '#'
    if not hashes:
        return size, True, tuple(positions)
    return (size - 1, False, tuple(positions)) if hashes == 1 else None


class ShapeIndex:
    """Wildcard patterns by shape; `usable` while they fit (see the module's docstring)."""

    __slots__ = ("_shapes", "_by_length", "_open", "_unshaped", "_unions", "_plans", "_heads",
                 "_headless", "_copies", "_counts", "_source", "_dropped", "_bare", "_matchers")

    def __init__(
        self, source: Callable[[], Iterable[tuple[Words, Hashable]]] | None = None,
        bare_singletons: bool = False,
    ) -> None:
        # Destinations of one pattern each (a topology's bindings): an entry of one keeps
        # it bare, not in a frozenset of its own (`xroute.engines.frozen_sets`).
        self._bare = bare_singletons
        # Every (words, destination) indexed here, from the caller's own store: what the
        # entries are made again from after they were dropped (without it, never dropped).
        self._source = source
        self._dropped = False
        # Shape -> how many patterns have it, kept even while the entries are dropped.
        self._counts: dict[tuple[int, bool, tuple[int, ...]], int] = {}
        self._shapes: dict[tuple[int, bool, tuple[int, ...]], _Shape] = {}
        self._by_length: dict[int, list[_Shape]] = {}  # shapes without '#', by word count
        self._open: list[_Shape] = []  # shapes with one '#'
        self._unshaped = 0  # bindings whose pattern has two '#' or more
        # parts -> their union (or, small from bare parts, the union -> itself: `_union`)
        self._unions: dict[tuple[frozenset, ...], frozenset] = {}
        # Key length -> (take, frozen, shape) of each shape a key that long can match: built
        # on the first key of a length, dropped on any change (see `match`).
        self._plans: dict[int, tuple[tuple[Any, bool, dict, _Shape], ...]] = {}
        # The literal first words of the indexed patterns (bindings per word), and how many
        # patterns begin with '*' or '#' instead. While none does, a key whose first word is
        # not among them matches nothing (NATS's three wildcards all begin with ``cloud``,
        # its subjects never do): one lookup instead of one per shape.
        self._heads: dict[str, int] = {}
        self._headless = 0
        # Patterns that differ only in where '#' stands among '*'s (``*.#`` and ``#.*``) are
        # one entry of one shape: (shape, literal words, destination) -> the other patterns
        # bound alike, so that removing one of them leaves the entry.
        self._copies: dict[tuple[Any, Any, Hashable], int] = {}
        # `matcher`'s functions by ``bare``, kept while the set of shapes stays (a binding
        # of an existing shape changes entries only, which they read live).
        self._matchers: dict[bool, Callable[[str], Any]] = {}

    @property
    def usable(self) -> bool:
        """True if every pattern has a shape and there are at most `MAX_SHAPES` of them."""
        if not self._unshaped and self._counts is _NOT_COUNTED:
            self._recount()
        return not self._unshaped and len(self._counts) <= MAX_SHAPES

    def holds(self, words: Words, destination: Hashable) -> bool:
        """Whether the wildcard pattern ``words`` is indexed for ``destination`` (while the
        entries are kept: not after a drop; a copy counts as its entry)."""
        shape = self._shapes.get(shape_of(words))  # type: ignore[arg-type]
        return shape is not None and destination in shape.entries.members(shape.take(words))

    def destinations(self) -> Iterator[Hashable]:
        """The destination of every entry, once per entry (while the entries are kept)."""
        for shape in self._shapes.values():
            for _, members in shape.entries.items():
                yield from members

    def add_if_usable(self, words: Words, destination: Hashable) -> bool:
        """`add` if the index stays `usable` with one more pattern ``words``; whether it did
        (one `shape_of` for the question and the entry: asked on every wildcard binding
        while a topology's exchange keeps its wildcards in the shapes alone)."""
        if self._unshaped or len(self._counts) > MAX_SHAPES:  # not `usable` (inline)
            return False
        key = shape_of(words)
        # (the count first: a shape key's hash is not cached, and `add` takes three)
        if key is None or (len(self._counts) >= MAX_SHAPES and key not in self._counts):
            return False
        self.add(words, destination, key)
        return True

    def add(self, words: Words, destination: Hashable, key: Any = _UNKNOWN) -> None:
        """Index the new binding of the wildcard pattern ``words`` to ``destination``
        (``key``: its `shape_of`, if the caller has it)."""
        # hot: a seed-mix bind. No count by shape while dropped with patterns of two '#' or
        # more (or since the last of them went, until `matcher` counts them again).
        if self._dropped and (self._unshaped or self._counts is _NOT_COUNTED):
            self._counts = _NOT_COUNTED
            if words.count(HASH) > 1:  # (`shape_of` is None)
                self._unshaped += 1
            return
        if key is _UNKNOWN:
            key = shape_of(words)
        if key is None:
            self._unshaped += 1
            return
        counts = self._counts
        counts[key] = counts.get(key, 0) + 1
        if self._dropped:
            return
        if len(counts) > DROP_SHAPES and self._source is not None:
            self._drop()
            return
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._shapes[key] = _Shape(*key, self._bare)
            self._matchers.clear()
            if shape.exact:
                self._by_length.setdefault(shape.min_words, []).append(shape)
            else:
                self._open.append(shape)
        literal = shape.take(words)
        # A destination of one pattern (``bare_singletons``: a topology's `Binding`) is never
        # added twice, so it has no copies to look for (hot: every wildcard bind).
        if not self._bare and destination in shape.entries.members(literal):
            entry = (key, literal, destination)
            self._copies[entry] = self._copies.get(entry, 0) + 1
        else:
            shape.entries.add(literal, destination)
        if self._unions:  # (empty through a bulk bind: no call)
            self._unions.clear()
        if self._plans:
            self._plans.clear()
        if shape.headed:
            self._heads[words[0]] = self._heads.get(words[0], 0) + 1
        else:
            self._headless += 1

    def remove(self, words: Words, destination: Hashable) -> None:
        """Forget the binding of ``words`` to ``destination`` (indexed before)."""
        if self._counts is _NOT_COUNTED:  # (dropped, with patterns of two '#' or more)
            if words.count(HASH) > 1:
                self._unshaped -= 1  # at 0, `matcher` counts the shapes again
            return
        key = shape_of(words)
        if key is None:
            self._unshaped -= 1
            return
        left = self._counts[key] - 1
        if left:
            self._counts[key] = left
        else:
            del self._counts[key]
        if self._dropped:
            return
        shape = self._shapes[key]
        literal = shape.take(words)
        entry = (key, literal, destination)
        copies = self._copies.pop(entry, 0)
        if copies > 1:
            self._copies[entry] = copies - 1
        elif not copies:
            shape.entries.remove(literal, destination)
        self._unions.clear()
        self._plans.clear()
        if shape.headed:
            left = self._heads.pop(words[0]) - 1
            if left:
                self._heads[words[0]] = left
        else:
            self._headless -= 1
        if not shape.entries:  # its last binding went
            del self._shapes[key]
            self._matchers.clear()
            group = self._by_length[shape.min_words] if shape.exact else self._open
            group.remove(shape)
            if shape.exact and not group:
                del self._by_length[shape.min_words]

    def matcher(self, bare: bool = False) -> Callable[[str], Any] | None:
        """`match`, or a function equal to it made for a single shape (EMQX's and RabbitMQ
        4.3's benchmarks: no loop, the lookup inlined); None while not `usable`. To be asked
        again after each binding change.

        ``bare`` (`match_bare`): a key that one entry of one destination matches gets that
        destination itself, not a frozenset made for the read, and a key that several
        entries match gets them in a list (only where destinations are never frozensets:
        a topology's `Binding` objects)."""
        # `usable`, inline: asked after every wildcard binding change, twice or more
        if self._unshaped or len(self._counts) > MAX_SHAPES:
            if not self._unshaped and self._counts is _NOT_COUNTED:
                self._recount()  # the last pattern of two '#' went: the shapes may do
                return self.matcher(bare)
            return None
        if self._dropped:
            self._rebuild()
        found = self._matchers.get(bare)
        if found is None:
            found = self._matchers[bare] = self._make_matcher(bare)
        return found

    def _make_matcher(self, bare: bool) -> Callable[[str], Any]:
        if not self._shapes:
            # No wildcard binding at all (a direct-like topic exchange): no key is split.
            return match_nothing
        if len(self._shapes) != 1:
            return self.match_bare if bare else self.match
        (shape,) = self._shapes.values()
        least, exact, take, frozen = shape.min_words, shape.exact, shape.take, shape.frozen
        # Where every literal word stands before the '#' (EMQX's ``device.{s}.*.{n}.#``), a
        # key is split no further than its first ``least`` words, the rest left whole (a
        # 10-word key: half the words, and none of their strings made); -1: split it all.
        cut = least if not exact and all(p >= 0 for p in shape.positions) else -1

        # hot: `Topology.route`'s first route on EMQX's and RabbitMQ 4.3's shapes
        def match_one_shape(key: str) -> Any:
            words = key.split(".", cut) if key else []
            size = len(words)
            if size < least or (exact and size != least):
                return EMPTY
            found = frozen.get(take(words), EMPTY)
            # not a frozenset: STALE, or a destination kept bare (`xroute.engines.frozen_sets`)
            if found.__class__ is frozenset or (bare and found is not STALE):
                return found
            return shape.lookup(words)

        return match_one_shape

    def match(self, key: str) -> frozenset:
        """The destinations of the indexed patterns that match the valid routing ``key``
        (only while `usable`)."""
        found = self.match_bare(key)
        kind = found.__class__
        if kind is frozenset:
            return found
        return self._union(found) if kind is list else frozenset((found,))

    # hot: `auto`'s first match of a key (`xroute bench engines --shapes`, match first; NATS's
    # three shapes; `Topology.route`'s first route on the MQTT shape): the shapes a key of this
    # length can match are planned once per length, and each lookup inlined (a
    # `_Shape.lookup` call per shape was a quarter of the match).
    def match_bare(self, key: str) -> Any:
        """`match`, but a key that one entry of one destination matches gets the destination
        itself, kept bare (`xroute.engines.frozen_sets`), not a frozenset made for the read;
        and a key that several entries match gets the list of their answers (frozensets or
        bare destinations: never a list), for the caller to unite in its own terms (a
        topology: queue names, without a set of bindings made and kept per key)."""
        words = key.split(".") if key else []
        if not self._headless and (not words or words[0] not in self._heads):
            return EMPTY
        plan = self._plans.get(len(words))
        if plan is None:
            plan = self._plan(len(words))
        found: Any = None
        several: list[Any] | None = None
        for pick, joined, frozen, shape in plan:
            # `_Shape.take`, inlined: its own frame for a shape of several literal words
            # (MQTT's both) was a tenth of a first route
            literal = pick(words)
            answer = frozen.get(".".join(literal) if joined else literal)
            if answer is None:
                continue
            if answer is STALE:
                answer = shape.lookup(words)
            if found is None:
                found = answer
            elif several is None:
                several = [found, answer]
            else:
                several.append(answer)
        if several is not None:
            return several
        return EMPTY if found is None else found

    def _drop(self) -> None:
        """Too many shapes to be used: keep the counts only (see the module's doc)."""
        self._dropped = True
        self._shapes, self._by_length, self._open = {}, {}, []
        self._unions, self._plans, self._heads, self._copies = {}, {}, {}, {}
        self._matchers = {}
        self._headless = 0

    def _recount(self) -> None:
        """The patterns per shape again, from the source (they were not counted while the
        index had patterns of two '#' or more: see the module's doc)."""
        counts: dict[tuple[int, bool, tuple[int, ...]], int] = {}
        unshaped = 0
        for words, _ in self._source():  # type: ignore[misc]
            key = shape_of(words)
            if key is None:
                unshaped += 1
            else:
                counts[key] = counts.get(key, 0) + 1
        self._counts, self._unshaped = counts, unshaped

    def _rebuild(self) -> None:
        """Usable again after a drop: make the entries from the source's patterns."""
        self._dropped = False
        self._counts = {}
        self._unshaped = 0
        for words, destination in self._source():  # type: ignore[misc]
            self.add(words, destination)

    def _plan(self, size: int) -> tuple[tuple[Any, bool, dict, _Shape], ...]:
        """The shapes a key of ``size`` words can match: those without '#' of exactly that
        many words, then those with one '#' it is long enough for. Each with `_Shape.take`
        in two parts for `match_bare` to inline: a function of the words, and whether its
        answer (then a tuple of words) is to be joined by dots."""
        plan = tuple((shape.pick, len(shape.positions) > 1, shape.frozen, shape)
                     for shape in chain(self._by_length.get(size, ()), self._open)
                     if size >= shape.min_words)
        self._plans[size] = plan
        return plan

    def _union(self, parts: list[Any]) -> frozenset:
        if self._bare:
            parts = [part if part.__class__ is frozenset else (part,) for part in parts]
        if self._bare and sum(map(len, parts)) <= SMALL_UNION:
            # Parts kept bare are made per read (`xroute.engines.frozen_sets`): kept by the
            # parts, each union would hold its fresh parts and a tuple, three objects more a
            # key for the collector. A small union is made and kept by its value instead.
            union = frozenset().union(*parts)
            found = self._unions.get(union)
            if found is None:
                if len(self._unions) >= MAX_UNIONS:
                    self._unions.clear()
                found = self._unions[union] = union  # type: ignore[index]
            return found
        together = tuple(parts)
        union = self._unions.get(together)
        if union is None:
            if len(self._unions) >= MAX_UNIONS:
                self._unions.clear()
            union = self._unions[together] = frozenset().union(*parts)
        return union

    def heads(self) -> list[str] | None:
        """The patterns' literal first words, or None if a pattern begins with ``*`` or ``#``
        (then a key's first word rules out no shape)."""
        return None if self._headless else list(self._heads)

    def shapes(self) -> list[_Shape]:
        """The shapes, for `xroute.engines.flat_shapes` (only while `usable`)."""
        return list(self._shapes.values())

    def entry_count(self) -> int:
        """The entries of every shape (a shape's distinct literal parts): what the shape
        kernel's table holds beside the literal keys (`xroute.engines.flat_shapes`)."""
        return sum(len(shape.frozen) for shape in self._shapes.values())

    def stats(self) -> dict[str, int]:
        """How many shapes, and how many bindings have none (two ``#`` or more)."""
        if self._counts is _NOT_COUNTED:
            self._recount()
        return {"shapes": len(self._counts), "unshaped_bindings": self._unshaped,
                "shape_entries_dropped": self._dropped}


def match_nothing(key: str) -> frozenset:
    """`ShapeIndex.matcher` of an index with no pattern: nothing matches."""
    return EMPTY
