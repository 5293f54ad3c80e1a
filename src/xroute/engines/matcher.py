"""`TopicMatcher`: the public topic matcher. It validates, deduplicates and counts bindings,
numbers destinations for the batch API, keeps the optional route cache exact, and hands the
matching itself to an engine from the registry."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from itertools import chain
from typing import Any

import numpy as np

from xroute.core.errors import (
    BindingNotFound,
    InvalidArguments,
    InvalidRoutingKey,
    UnknownEngine,
    short_repr,
)
from xroute.core.keys import (
    ALWAYS_SHORT,
    MAX_KEY_BYTES,
    arrow_keys_fit,
    check_pattern,
    check_routing_key,
    split_words,
)
from xroute.engines import key_memo
from xroute.engines.base import ENGINES
from xroute.engines.cache import RouteCache
from xroute.engines.key_memo import MISSING, KeyMemo, SeenKeys

DEFAULT_ENGINE = "auto"
# A batch of at most this many destinations a key on average has every key's set read
# (`TopicMatcher._flatten`): shared sets are then read once per key, not once per batch.
FLATTEN_EACH_MAX = 4
# A batch of fewer keys skips the key memo (its probe and copy cost more than they save).
MEMO_MIN_BATCH = 32
# The memo's bounds here: a key's answer is kept per key, so a broadcast's 10k ids are kept
# once per key (32 MB of ids at the bound).
MEMO_MAX_KEYS = 1 << 20
MEMO_MAX_CELLS = 8_000_000
# Id changes remembered for `TopicMatcher.ids_changed_since` (8 bytes each).
ID_LOG_MAX = 1 << 16


class TopicMatcher:
    """AMQP topic matching of routing keys against (pattern, destination) bindings.

    ``cache`` puts a bounded route cache (`xroute.engines.cache`) in front of the engine:
    ``True``, ``False``, or ``None`` (the default) for the engine's own preference, which is
    on for engines that walk the trie per key and off for those that already remember per key
    or per state (``dfa``, ``bitmap``, ``auto``): see docs/engines.md.

    ``shared_destinations=False`` says that no two bindings will share a destination (a
    topology binds each `Binding` object): ``auto`` then keeps no index of each destination's
    patterns, which it uses to leave out the other bindings of a destination bound with ``#``.
    ``pattern_of`` says more: each destination is bound to the one pattern it names
    (``pattern_of(destination)``, a `Binding`'s routing key), so the matcher keeps a set of
    destinations, not of (pattern, destination) pairs (a tuple of 56 bytes a binding, and an
    object for the collector), and over ``auto``, which can tell from its own indexes, no
    set at all; binding a destination to another pattern is refused. It implies
    ``shared_destinations=False``.

    ``ids_from_start=False`` keeps the batch API's destination ids only from its first call
    (a matcher routed key by key: see `xroute.core.wildcard_queues`); the default keeps them
    from the start for an engine with a native batch path unless ``pattern_of`` is given.

    >>> m = TopicMatcher()
    >>> m.add("floor_1.#", "q1")
    >>> sorted(m.match("floor_1.bedroom.temperature"))
    ['q1']
    """

    def __init__(
        self,
        engine: str = DEFAULT_ENGINE,
        cache: bool | None = None,
        *,
        shared_destinations: bool = True,
        pattern_of: Callable[[Any], str] | None = None,
        ids_from_start: bool | None = None,
    ) -> None:
        try:
            self._engine = ENGINES[engine]()
        except (KeyError, TypeError):
            raise UnknownEngine(engine, sorted(ENGINES)) from None
        # Whether `match` hands many keys the same frozenset objects (a DFA's states), so that
        # work keyed by the result set is done once per set, not once per key.
        self.shares_results: bool = getattr(self._engine, "shares_results", False)
        if cache is None:
            cache = getattr(self._engine, "route_cache_default", True)
        self._cache: RouteCache | None = RouteCache() if cache else None
        # An engine that keeps the pattern's text (``auto``'s literal keys) is handed it.
        self._takes_pattern: bool = getattr(self._engine, "takes_pattern", False)
        # `wildcard_matcher`'s source, looked up once: asked after every wildcard binding of a
        # topology's exchange and of its queue-name index
        self._wildcard_function = getattr(self._engine, "wildcard_function", None)
        # The bindings: (pattern, destination) pairs, or the destinations alone where each
        # names its pattern (``pattern_of``).
        self._pattern_of = pattern_of
        self._bindings: set[Any] | _HeldByEngine | _PairsHeldByEngine = set()
        if pattern_of is not None and hasattr(self._engine, "holds"):
            # ``auto`` can tell a destination's binding from its own indexes: no set here
            # (42 bytes a binding of a topology, beside the topology's own store).
            self._bindings = _HeldByEngine(self._engine, pattern_of)
        # Destination ids for the batch API: stable while a destination has a binding; the id
        # of a destination that loses its last binding is reused by the next new one.
        self._id_of: dict[Hashable, int] = {}
        # Bindings per destination (not kept with ``pattern_of``: one each).
        self._refs: dict[Hashable, int] = {}
        self._by_id: list[Any] = []
        self._free_ids: list[int] = []
        self._ids_version = 0
        # Batch keys -> their ids (`xroute.engines.key_memo`), for Arrow batches of
        # `MEMO_MIN_BATCH` keys or more: a key is kept once it repeats; dropped on every
        # binding change.
        self._memo: KeyMemo | None = None
        self._seen_keys: SeenKeys | None = None  # which batch keys repeat (kept over changes)
        # The ids that changed, in order, from version ``_id_log_base`` on (bounded): a table
        # kept by id is patched for these, not rebuilt (`ids_changed_since`).
        self._id_log: list[int] = []
        self._id_log_base = 0
        # An engine with a native batch path returns our ids directly (see match_many_ids);
        # it is handed the live mapping now and reads it only from calls that keep the ids
        # first (a batch, `destinations`, its `match_many`). Ids are kept from the start for
        # it, so that a first batch does not pay for numbering every destination, unless the
        # destinations name their patterns (a topology's exchange, whose batches go through
        # a `BatchRouter` that builds its tables of every binding anyway) or the caller says
        # otherwise (``ids_from_start``): then, as for every other engine, only from the
        # first call that reads them, and a matcher used key by key never pays for them (two
        # or three dict entries and an int a destination: 110-150 bytes).
        self._hook = getattr(self._engine, "use_destination_ids", None)
        if ids_from_start is None:
            ids_from_start = self._hook is not None and pattern_of is None
        self._ids_kept = ids_from_start
        if self._hook is not None:
            self._hook(self._id_of)
        if not shared_destinations or pattern_of is not None:
            told = getattr(self._engine, "destinations_not_shared", None)
            if told is not None:
                told(self.bindings)
        elif getattr(self._engine, "holds_pair", None) is not None:
            # ``auto`` keeps every pair in its own indexes: no set of pairs here (a tuple and
            # a set slot, about 90 bytes a binding).
            self._bindings = _PairsHeldByEngine(self._engine)
        # Engines that choose a batch path by the batch keys since a change (``auto``: its
        # compiled kernel) are told of the keys the key memo answered: else batches that repeat
        # their keys would never count, and the keys new to it would go the slow way for good.
        self._memo_answered = getattr(self._engine, "batch_keys_answered", None)
        # An engine that can answer keys bound to one literal destination by its id alone
        # (``auto``): a batch's generic path asks it first (`_match_ids`).
        self._single_literal_ids = getattr(self._engine, "single_literal_ids", None)

    @property
    def engine(self) -> str:
        """The name of the engine doing the matching."""
        return self._engine.name

    @property
    def cached(self) -> bool:
        """True if a route cache sits in front of the engine."""
        return self._cache is not None

    def add(self, pattern: str, destination: Hashable) -> None:
        """Bind ``pattern`` to ``destination``; binding the same pair again changes nothing."""
        check_pattern(pattern)
        words = split_words(pattern)
        bindings = self._bindings
        if self._pattern_of is None:
            binding: Any = (pattern, _hashable(destination))
            if binding in bindings:
                return
        else:
            binding = _hashable(destination)
            if self._pattern_of(destination) != pattern:
                raise InvalidArguments(
                    f"destination {short_repr(destination)} names the pattern "
                    f"{short_repr(self._pattern_of(destination))}, not {short_repr(pattern)}",
                    destination,
                )
            if (binding in bindings if bindings.__class__ is set
                    else self._engine.holds(words, binding, pattern)):
                return
        self.add_new(pattern, words, destination, binding)

    # hot: every `Topology.bind` to a topic exchange (`xroute bench engines --shapes`, bind rate)
    def add_new(self, pattern: str, words: tuple[str, ...], destination: Hashable,
                binding: Any = None) -> None:
        """`add` for a caller that checked ``pattern`` (`check_pattern`; ``words`` is its
        `split_words`) and knows that it is not bound to ``destination`` yet: a topology's
        topic exchange, whose every new binding is a new `Binding` object (of its own
        pattern, with ``pattern_of``), so none of `add`'s checks can refuse it.
        ``binding`` is its entry in the set of bindings, if `add` made it already."""
        if self._ids_kept:  # first: the engine may keep the destination's id (``auto``)
            self._count_destination(destination, +1)
        if self._takes_pattern:
            self._engine.add(words, destination, pattern)
        else:
            self._engine.add(words, destination)
        bindings = self._bindings
        if bindings.__class__ is set:
            if binding is None:
                binding = (destination if self._pattern_of is not None
                           else (pattern, destination))
            bindings.add(binding)
        else:  # `_HeldByEngine.add`, inline: a count (no entry made for it)
            bindings.count += 1  # type: ignore[union-attr]
        self._memo = None  # every key's answer may change: the next batch starts a new one
        if self._cache is not None:
            self._cache.added(words, destination)

    def remove(self, pattern: str, destination: Hashable) -> None:
        """Unbind the pair; `BindingNotFound` if it was never bound."""
        held = _hashable(destination)
        if self._binding(check_pattern(pattern), held) is None:
            raise BindingNotFound(pattern, destination)
        self.remove_known(pattern, split_words(pattern), held)

    # hot: every `Topology.unbind` from a topic exchange (issue 36 goal 5: a change between
    # routes), and its queue-name index's
    def remove_known(self, pattern: str, words: tuple[str, ...], destination: Hashable) -> None:
        """`remove` for a caller that knows ``pattern`` (split: ``words``) is bound to
        ``destination``, a hashable value: a topology's topic exchange, whose binding the
        topology found in its own table, and its queue-name index (which counts its pairs).
        Without `remove`'s checks: the pattern's, the destination's, and whether the engine
        holds the binding (a lookup in its indexes, cold in memory between routes)."""
        if self._takes_pattern:
            self._engine.remove(words, destination, pattern)
        else:
            self._engine.remove(words, destination)
        bindings = self._bindings
        if bindings.__class__ is set:
            bindings.remove(destination if self._pattern_of is not None
                            else (pattern, destination))
        else:  # `_HeldByEngine.remove`, inline: a count
            bindings.count -= 1  # type: ignore[union-attr]
        self._memo = None
        if self._ids_kept:
            self._count_destination(destination, -1)
        if self._cache is not None:
            self._cache.removed(words, destination)

    def has(self, pattern: str, destination: Hashable) -> bool:
        """Whether ``pattern`` is bound to ``destination``."""
        return self._binding(pattern, _hashable(destination)) is not None

    def pair_test(self) -> Callable[[str, Hashable], bool]:
        """`has` as one function of (pattern, hashable destination), for a caller that asks it
        on every binding (a topology's queue-name index, `xroute.core.wildcard_queues`): the
        engine's own test where the engine holds the pairs (`AutoEngine.holds_pair`: two
        calls, where `has` made six), else `has`. Valid for the matcher's life."""
        if self._bindings.__class__ is _PairsHeldByEngine:
            return self._engine.holds_pair  # type: ignore[no-any-return]
        return self.has

    def _binding(self, pattern: str, destination: Hashable) -> Any:
        """The entry of the binding in ``_bindings``, or None if it is not bound."""
        if self._pattern_of is None:
            pair = (pattern, destination)
            return pair if pair in self._bindings else None
        if destination in self._bindings and self._pattern_of(destination) == pattern:
            return destination
        return None

    def match(self, key: str) -> frozenset:
        """The destinations whose patterns match the routing ``key``."""
        # A short ASCII str needs no more checking (`xroute.core.keys`): two calls less a match.
        if key.__class__ is not str or len(key) > ALWAYS_SHORT or not key.isascii():
            check_routing_key(key)
        cache = self._cache
        if cache is None:
            return self._engine.match(key)
        found = cache.get(key)
        if found is None:
            found = self._engine.match(key)
            cache.put(key, found)
        return found

    def wildcard_matcher(self, bare: bool = False) -> Callable[[str], Any] | None:
        """For an engine that keeps literal bindings (no ``*`` or ``#``) apart from the others
        (``auto``): a function of a valid routing key to the destinations of the bindings
        *with* wildcards that match it (the literal ones are left to the caller, which
        indexes them itself: `xroute.core.literal_routes`). None for every other engine. Valid
        until the next `add` or `remove`: ask again after each.

        ``bare``: where a key matches one binding, the function may answer its destination
        itself rather than a frozenset of it, and where it matches several by shape, a list
        of such answers to unite (`ShapeIndex.match_bare`; the caller tells them apart by
        class; only for destinations that are never frozensets, such as a topology's
        bindings)."""
        current = self._wildcard_function
        return current(bare) if current is not None else None

    def defer_wildcards(self) -> None:
        """Tell the engine that the answers of the bindings with wildcards will be read
        rarely (a topology's topic exchange whose first routes ask its queue-name index,
        `xroute.core.wildcard_queues`): an engine that can (``auto``, where destinations
        are not shared) then indexes those bindings only when something reads them. Every
        read still sees every binding."""
        told = getattr(self._engine, "wildcards_read_rarely", None)
        if told is not None:
            told()

    def match_many(self, keys: Iterable[str]) -> list[frozenset]:
        """`match` for every key, in the same order."""
        keys = [check_routing_key(key) for key in keys]
        if self._hook is not None:
            self._keep_ids()  # an engine with a native batch path may read them (`compiled`)
        return self._match_checked(keys)

    def _match_checked(self, keys: list[str]) -> list[frozenset]:
        """`match_many` of keys validated already (a batch's, by `_batch_keys`)."""
        cache = self._cache
        if cache is None or getattr(self._engine, "batch_native", False):
            return self._engine.match_many(keys)
        results: list[frozenset | None] = [cache.get(key) for key in keys]
        missed = [i for i, found in enumerate(results) if found is None]
        if missed:
            computed = self._engine.match_many([keys[i] for i in missed])
            for i, found in zip(missed, computed):
                results[i] = found
                cache.put(keys[i], found)
        return results  # type: ignore[return-value]

    def match_many_ids(self, keys: Any) -> tuple[np.ndarray, np.ndarray]:
        """Route a batch without building a set per key: ``(offsets, ids)``.

        ``keys`` is a sequence of str or a pyarrow (Large)StringArray / ChunkedArray. The
        destinations of key ``i`` are ``ids[offsets[i]:offsets[i + 1]]`` (int32, no repeats),
        each an index into `destinations`; ``offsets`` is int64 of length ``len(keys) + 1``.
        Every key is validated as by `match` (`InvalidRoutingKey`, naming the first bad one).
        """
        # (An Arrow batch for the key memo has its text checked after the probe, and only
        # the keys the memo lacks: a key it answers has the bytes of a key checked before.)
        keys = _batch_keys(keys, utf8=False)
        self._keep_ids()
        if isinstance(keys, list) or len(keys) < MEMO_MIN_BATCH:
            if not isinstance(keys, list):
                _check_utf8(keys)
            return self._match_ids(keys)
        return self._match_ids_memo(keys)

    def _match_ids_memo(self, keys: Any) -> tuple[np.ndarray, np.ndarray]:
        """`match_many_ids` of an Arrow batch through the key memo: keys answered since the
        last binding change are probed and copied in one compiled loop, the others matched by
        the engine (`_match_ids`); of those, the keys seen before (`SeenKeys`) are
        kept. A first pass over new keys keeps nothing: it pays a hash a key, not the copy
        of each key's bytes and ids (0.3-1 µs a key, a third of a first route).
        The keys' text is checked here (`_batch_keys` left it): the keys the memo lacks."""
        from xroute.engines.compiled import utf8_buffers

        data, key_offsets = utf8_buffers(keys)
        everyone = np.arange(len(keys), dtype=np.int64)
        memo = self._memo
        if memo is None:  # made once a key repeats
            answers, missed = np.full(len(keys), MISSING, dtype=np.int32), len(keys)
        else:
            answers, missed = memo.probe(data, key_offsets, everyone)
            if not missed:
                if self._memo_answered is not None:
                    self._memo_answered(len(keys))
                return _written(memo, answers)
        lost = everyone if missed == len(keys) else np.flatnonzero(answers == MISSING)
        _check_utf8(keys if missed == len(keys) else keys.take(lost))
        if self._memo_answered is not None and missed < len(keys):
            self._memo_answered(len(keys) - missed)
        if self._seen_keys is None:
            self._seen_keys = SeenKeys()
        again = self._seen_keys.again(data, key_offsets, lost)
        kept = int(np.count_nonzero(again))
        if kept and memo is None:
            memo = self._memo = KeyMemo(MEMO_MAX_KEYS, MEMO_MAX_CELLS)
        elif kept and memo.make_room(kept):  # started again empty: the hits' answers are gone
            lost, missed, kept = everyone, len(keys), 0
        offsets, ids = self._match_ids(keys if missed == len(keys) else keys.take(lost))
        take = key_memo.kernel().take_answers
        if kept:  # keys that repeat: their answers, then the keys, kept
            if kept == len(lost):
                kept_at, numbers = lost, memo.keep_answers(offsets, ids)
            else:
                kept_at = lost[again]
                numbers = memo.keep_answers(*take(offsets, ids, np.flatnonzero(again)))
            memo.insert(data, key_offsets, kept_at, numbers)
            answers[kept_at] = numbers
        if missed == len(keys):
            return offsets, ids  # every key went to the engine: its answer as it is
        if kept == len(lost):
            return _written(memo, answers)
        # The keys met once are answered for this batch only: their answers are made, written
        # out and dropped (no key leads to them).
        once = ~again
        first = memo.add_answers(*take(offsets, ids, np.flatnonzero(once))) if kept else \
            memo.add_answers(offsets, ids)
        answers[lost[once]] = np.arange(first, first + len(lost) - kept, dtype=np.int32)
        try:
            return _written(memo, answers)
        finally:
            memo.truncate(first)

    def _match_ids(self, keys: Any) -> tuple[np.ndarray, np.ndarray]:
        """`match_many_ids` of validated keys, by the engine (no memo)."""
        native = getattr(self._engine, "match_many_ids", None)
        if native is not None:
            found = native(keys)  # None: the engine prefers the generic path for this batch
            if found is not None:
                return found
        if not isinstance(keys, list):
            keys = keys.to_pylist()
        single = None if self._single_literal_ids is None else self._single_literal_ids(keys)
        if single is None:
            return self._flatten(self._match_checked(keys))
        # Keys that one literal binding alone matches have their id already (one look-up of
        # the key, where their set and the destination's id are two more, cold in memory:
        # NATS's and a literal exchange's first pass); the others go the generic way, and
        # `write_answers` lays both out (an answer below 0 is one id, ``-2 - answer``).
        rest = np.flatnonzero(single < 0)
        if not len(rest):
            return np.arange(len(keys) + 1, dtype=np.int64), single.astype(np.int32)
        rest_offsets, rest_ids = self._flatten(self._match_checked(
            [keys[i] for i in rest.tolist()]))
        answers = (-2 - single).astype(np.int32)
        answers[rest] = np.arange(len(rest), dtype=np.int32)
        sizes = np.ones(len(keys), dtype=np.int64)
        sizes[rest] = np.diff(rest_offsets)
        offsets = np.zeros(len(keys) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        ids = np.empty(int(offsets[-1]), dtype=np.int32)
        key_memo.kernel().write_answers(answers, rest_offsets, rest_ids, offsets, ids)
        return offsets, ids

    def destinations(self) -> list[Any]:
        """The destination of each id that `match_many_ids` returns (a fresh list).

        An id stays the same while its destination has at least one binding; the slot of a
        destination that lost its last binding holds None until a new destination reuses it.
        """
        self._keep_ids()
        return list(self._by_id)

    @property
    def ids_version(self) -> int:
        """A number that changes whenever an id of `match_many_ids` gains or loses its
        destination: a table built from `destinations` holds while it stays the same."""
        self._keep_ids()
        return self._ids_version

    def ids_changed_since(self, version: int) -> list[int] | None:
        """The ids that gained or lost their destination since `ids_version` was
        ``version`` (repeats possible), or None if that is too long ago to say."""
        if version < self._id_log_base or version > self._ids_version:
            return None
        return self._id_log[version - self._id_log_base :]

    def destination_of(self, number: int) -> Any:
        """The destination of id ``number`` (None if it has none now): `destinations`'s
        entry, without the copy of the list."""
        return self._by_id[number] if number < len(self._by_id) else None

    def bindings(self) -> Iterator[tuple[str, Hashable]]:
        """Every (pattern, destination) pair bound."""
        pattern_of = self._pattern_of
        if pattern_of is None:
            return iter(self._bindings)
        return ((pattern_of(destination), destination) for destination in self._bindings)

    def stats(self) -> dict[str, Any]:
        """Engine figures (nodes, states, cache hits) plus the binding count."""
        figures = {**self._engine.stats(), "bindings": len(self._bindings)}
        if self._cache is not None:
            figures.update(self._cache.stats())
        return figures

    def __len__(self) -> int:
        return len(self._bindings)

    def __repr__(self) -> str:
        return f"TopicMatcher(engine={self.engine!r}, bindings={len(self)}, cache={self.cached})"

    def _keep_ids(self) -> None:
        if not self._ids_kept:
            self._ids_kept = True
            for _, destination in self.bindings():
                self._count_destination(destination, +1)

    def _count_destination(self, destination: Hashable, delta: int) -> None:
        if not self._ids_kept:
            return
        if self._pattern_of is not None:  # one binding a destination: no count kept
            refs = delta
        else:
            refs = self._refs.get(destination, 0) + delta
        if refs > 0:
            if self._pattern_of is None:
                self._refs[destination] = refs
            if refs == 1 and delta > 0:
                self._ids_version += 1
                new_id = self._free_ids.pop() if self._free_ids else len(self._by_id)
                if new_id == len(self._by_id):
                    self._by_id.append(destination)
                else:
                    self._by_id[new_id] = destination
                self._id_of[destination] = new_id
                self._log_id(new_id)
            return
        if self._pattern_of is None:
            del self._refs[destination]
        self._ids_version += 1
        old_id = self._id_of.pop(destination)
        self._by_id[old_id] = None
        self._free_ids.append(old_id)
        self._log_id(old_id)

    def _log_id(self, number: int) -> None:
        log = self._id_log
        log.append(number)
        if len(log) > ID_LOG_MAX:  # forget the older half: a reader that far behind rebuilds
            drop = len(log) // 2
            del log[:drop]
            self._id_log_base += drop

    def _flatten(self, results: list[frozenset]) -> tuple[np.ndarray, np.ndarray]:
        # Engines that remember (dfa, auto's memo, bitmap, the route cache) hand the same
        # frozenset to every key that ends alike: each distinct set becomes ids once (an
        # array per set cost 1-2 µs: on keys that each end in a set of their own, such as a
        # device per key, that was most of a first batch).
        id_of = self._id_of
        sizes = np.fromiter(map(len, results), dtype=np.int64, count=len(results))
        offsets = np.zeros(len(results) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        total = int(offsets[-1])
        if total <= FLATTEN_EACH_MAX * len(results):
            # A few ids a key (a device, a subject each): every key's set read in C, no
            # Python step per key (that loop was a fifth of NATS's first batch).
            ids = np.fromiter(map(id_of.__getitem__, chain.from_iterable(results)),
                              dtype=np.int32, count=total)
            return offsets, ids
        # Larger sets, most often shared by many keys (seed-mix's 100 queues a key, one set
        # for every key): each distinct set (by identity: ``results`` keeps them alive) is
        # numbered and made ids once, and every key's ids are copied from its set's by the
        # key memo's compiled loop (`write_answers`). A Python step per key is one dict
        # look-up; an array kept per key and concatenated cost 0.3-0.5 µs a key.
        # Sets equal in content but made apart (seed-mix: 95 objects for one set of 100
        # queues over 1,500 keys) are one set too: a frozenset's hash and equality read the
        # hashes it keeps, not its members, where an id look-up reads each member.
        # Each object is read once, its identity found in C for every key (a Python call per
        # key cost a third of seed-100k's flatten).
        number_of: dict[int, int] = {}
        by_content: dict[frozenset, int] = {}
        distinct: list[frozenset] = []
        for identity, found in dict(zip(map(id, results), results)).items():
            at = by_content.get(found)
            if at is None:
                at = by_content[found] = len(distinct)
                distinct.append(found)
            number_of[identity] = at
        numbers = np.fromiter(map(number_of.__getitem__, map(id, results)), dtype=np.int32,
                              count=len(results))
        starts = np.zeros(len(distinct) + 1, dtype=np.int64)
        np.cumsum([len(found) for found in distinct], out=starts[1:])
        pool = np.fromiter(map(id_of.__getitem__, chain.from_iterable(distinct)),
                           dtype=np.int32, count=int(starts[-1]))
        ids = np.empty(total, dtype=np.int32)
        key_memo.kernel().write_answers(numbers, starts, pool, offsets, ids)
        return offsets, ids


class _HeldByEngine:
    """The bound destinations of a matcher with ``pattern_of`` whose engine can say whether
    it holds a (pattern, destination) binding and list what it holds (``auto``): the set's
    operations the matcher uses, over the engine's own indexes and a count."""

    __slots__ = ("_engine", "_pattern_of", "count")

    def __init__(self, engine: Any, pattern_of: Callable[[Any], str] | None = None) -> None:
        self._engine = engine
        self._pattern_of = pattern_of
        self.count = 0  # (raised inline by `TopicMatcher.add_new`)

    def __contains__(self, destination: Any) -> bool:
        pattern = self._pattern_of(destination)  # type: ignore[misc]
        return self._engine.holds(split_words(pattern), destination, pattern)

    def add(self, entry: Any) -> None:
        self.count += 1

    def remove(self, entry: Any) -> None:
        self.count -= 1

    def __iter__(self) -> Iterator[Any]:
        return self._engine.bound_destinations()

    def __len__(self) -> int:
        return self.count


class _PairsHeldByEngine(_HeldByEngine):
    """`_HeldByEngine` for a matcher without ``pattern_of`` (shared destinations): its
    entries are (pattern, destination) pairs (`AutoEngine.holds_pair`, `bound_pairs`)."""

    __slots__ = ()

    def __contains__(self, pair: tuple[str, Any]) -> bool:
        return self._engine.holds_pair(*pair)

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return self._engine.bound_pairs()


def _written(memo: KeyMemo, answers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, ids)`` of a batch whose keys all have answers in ``memo``."""
    from xroute.engines import key_memo

    return key_memo.kernel().lay_out(answers, *memo.answers())


def _hashable(destination: Any) -> Any:
    # A destination is a dict key here: refuse an unhashable one by name, not with TypeError.
    try:
        hash(destination)
    except TypeError:
        raise InvalidArguments(
            f"a destination must be hashable, got {short_repr(destination)}", destination
        ) from None
    return destination


def _batch_keys(keys: Any, utf8: bool = True) -> Any:
    """Validated keys: a list of str, or a pyarrow StringArray / LargeStringArray as is.

    Without ``utf8``, an Arrow array's text is left to the caller (`_check_utf8`): its
    layout is checked (the buffers' sizes, offsets that never go back, so the kernels read
    within its bytes), and its keys' lengths and nulls, not that its bytes are UTF-8."""
    arrow = _as_arrow_strings(keys)
    if arrow is None:
        return [check_routing_key(key) for key in keys]
    if not utf8 and not arrow.null_count:
        try:
            arrow.validate()  # the buffers' sizes, the first and last offsets
        except Exception as error:  # pyarrow.ArrowInvalid
            raise InvalidRoutingKey("<arrow batch>", f"not a valid Arrow array ({error})") \
                from None
        from xroute.engines.compiled import utf8_buffers

        lengths = np.diff(utf8_buffers(arrow)[1])
        if not len(lengths) or (int(lengths.min()) >= 0 and int(lengths.max()) <= MAX_KEY_BYTES):
            return arrow
    if not arrow_keys_fit(arrow):  # name the first bad key
        import pyarrow.compute as pc

        bad = pc.or_(pc.is_null(arrow), pc.greater(pc.binary_length(arrow), MAX_KEY_BYTES))
        check_routing_key(arrow[pc.index(bad.fill_null(True), True).as_py()].as_py())
    _check_utf8(arrow)
    return arrow


def _check_utf8(arrow: Any) -> None:
    """Refuse an Arrow string array whose bytes are not UTF-8 (Arrow text must be, but a
    careless writer may break it), or whose offsets are not in order."""
    try:
        arrow.validate(full=True)
    except Exception as error:  # pyarrow.ArrowInvalid
        raise InvalidRoutingKey("<arrow batch>", f"not valid UTF-8 text ({error})") from None


def _as_arrow_strings(keys: Any) -> Any:
    # pyarrow is imported only if the caller already did, so list callers never pay for it.
    import sys

    pa = sys.modules.get("pyarrow")
    if pa is None:
        return None
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    if isinstance(keys, pa.Array):
        if not (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
            raise InvalidRoutingKey(f"<arrow {keys.type}>", "expected an Arrow string array")
        return keys
    return None
