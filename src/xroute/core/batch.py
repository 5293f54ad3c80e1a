"""Routing many messages at once: `BatchRouter.route` gives, for a batch of messages published
to one exchange, exactly what `Topology.route_message` gives for each of them, as flat arrays.

The walk of `Topology` is done once per exchange for the whole batch instead of once per
message. The messages that reach an exchange are matched together, each distinct key once (a
topic exchange through `TopicMatcher.match_many_ids`, which never builds a set per key; the
other types through their own ``route``; a headers exchange once per distinct headers table).
Their matched bindings are then expanded by compiled loops (`xroute.core._batch_kernel`), each
distinct key once, into queues, next exchanges (each visited at most once per message) and
per-binding hit counts; a message that matched nothing goes on to the exchange's alternate.
The set of exchanges a message visits does not depend on the order of the walk, so visiting
exchange by exchange is the same walk; `tests/test_batch.py` checks it against
`Topology.route_message` on random topologies.

Messages whose ``CC``/``BCC`` headers add routing keys take `Topology.route_message` itself,
one by one: they are rare, and it keeps the batch walk to one key per message. So does every
message of a topology with an exchange of a type beyond the standard ones (consistent hash,
random, JMS topic...: `xroute.exchanges.STANDARD_TYPES`), whose routing may read the message's
properties, or the whole header table with the keys, when such an exchange can be reached
from the one the batch is published to (through exchange-to-exchange bindings or alternates).
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from itertools import repeat
from operator import attrgetter
from typing import Any, NamedTuple

import numpy as np

from xroute.core.errors import InvalidRoutingKey, XRouteError
from xroute.core.headers import check_headers
from xroute.core.keys import MAX_KEY_BYTES, check_routing_key
from xroute.core.model import Binding, Exchange
from xroute.core.topology import DEFAULT_EXCHANGE, Topology
from xroute.engines import key_memo
from xroute.engines.compiled import utf8_buffers
from xroute.engines.key_memo import MISSING, ONE_QUEUE, REFUSED, KeyMemo, SeenKeys
from xroute.exchanges import STANDARD_TYPES

_TARGET = attrgetter("target")
_NAMES_ONLY = {str}
_EMPTY_IDS = np.zeros(0, dtype=np.int64)
_EMPTY_ANSWERS = np.zeros(0, dtype=np.int32)
_EMPTY_QUEUES = np.zeros(0, dtype=np.int32)
_ONE_START = np.zeros(1, dtype=np.int64)
EMPTY_NAMES: frozenset[str] = frozenset()
_COUNTERS_MADE = threading.Lock()  # `BatchRoutes._counters`


class _IdTables(NamedTuple):
    """Per id of a batch's matches: its binding index, and the queue or the exchange that
    binding leads to (-1: none), as `xroute.core._batch_kernel.expand_groups` reads them."""

    binding: np.ndarray  # int64
    queue: np.ndarray  # int32
    exchange: np.ndarray  # int32


class AnswersById:
    """One-queue answer sets -> their numbers (``ONE_QUEUE - q``), by the sets' identity: a
    compiled open-addressing table of their addresses (`xroute.core._batch_kernel`), one
    cache line a look-up, looked up for a whole batch in one loop.

    The topology hands out one shared frozenset a queue (`Topology.one_queue_answers`), and
    the router numbers the ones made so far when it is made: a first route's answer is then
    numbered without reading the queue's name or the queue-name table (a cold str and two
    cold table lines a key, the most of a first pass's cost over single routes, measured on
    `literal`, NATS and unicast). The sets are held, so that no other object takes an
    address while it is in the table, and at most as many as `add` is told (then it starts
    again empty: the topology makes its sets anew after some changes, and the ones it dropped
    are held here until then). A set's number never goes stale: a queue keeps its number in
    a router.
    """

    __slots__ = ("_held", "_slots")

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget every set."""
        self._held: list[frozenset[str]] = []
        self._slots = np.zeros((64, 2), dtype=np.int64)

    def __len__(self) -> int:
        return len(self._held)

    def find(self, answers: list[Any]) -> np.ndarray:
        """The number of each answer (int32), `MISSING` where the table has not its set."""
        addresses = np.fromiter(map(id, answers), dtype=np.int64, count=len(answers))
        out = np.empty(len(answers), dtype=np.int32)
        if self._held:
            _kernel().find_addresses(self._slots, addresses, out, MISSING)
        else:
            out.fill(MISSING)
        return out

    def add(self, sets: list[frozenset[str]], numbers: Sequence[int] | np.ndarray,
            max_sets: int) -> None:
        """Keep ``numbers[i]`` for one-queue set ``sets[i]``, holding at most ``max_sets``."""
        if not sets:
            return
        if len(self._held) + len(sets) > max_sets:
            self.clear()
            if len(sets) > max_sets:
                sets, numbers = sets[:max_sets], numbers[:max_sets]
        held = len(self._held) + len(sets)
        kernel = _kernel()
        if 2 * held > len(self._slots):  # at most half full: short probe runs
            size = 64
            while size < 2 * held:
                size *= 2
            slots = np.zeros((size, 2), dtype=np.int64)
            kept = self._slots[self._slots[:, 0] != 0]
            kernel.add_addresses(slots, kept[:, 0].copy(), kept[:, 1].copy())
            self._slots = slots
        self._held += sets
        kernel.add_addresses(
            self._slots, np.fromiter(map(id, sets), dtype=np.int64, count=len(sets)),
            np.asarray(numbers, dtype=np.int64))


class BatchRoutes:
    """Where each message of a batch went.

    The queues of message ``i`` are ``queue_ids[offsets[i]:offsets[i + 1]]`` (no repeats, in
    no particular order), indices into `BatchRouter.queues`. A message in ``errors`` was
    refused, with the error `Topology.route_message` raises for it, and has no queues.
    ``hits[b]`` counts the messages that matched binding ``BatchRouter.bindings[b]`` at an
    exchange they visited.

    ``hits`` may be worked out when first read (issue 36 allows it): the messages routed by
    key alone are matched against the bindings only then, as they were routed (the router
    works them out before any binding change). Given as a count of bindings (an int), no
    hit is counted yet: the array is made when first read.
    """

    __slots__ = ("offsets", "queue_ids", "errors", "queue_names", "_hits", "_later",
                 "__weakref__")

    def __init__(
        self,
        offsets: np.ndarray,
        queue_ids: np.ndarray,
        errors: dict[int, XRouteError],
        hits: np.ndarray | int,
        queue_names: Sequence[str] = (),
        later: Callable[[np.ndarray], None] | None = None,
    ) -> None:
        self.offsets = offsets
        self.queue_ids = queue_ids
        self.errors = errors
        self.queue_names = queue_names
        self._hits = hits
        # Adds the hits not counted yet to the array it is given, once.
        self._later = later

    @property
    def hits(self) -> np.ndarray:
        """Messages per binding of `BatchRouter.bindings` (see the class)."""
        self.count_hits()
        return self._counters()

    def count_hits(self) -> None:
        """Count the hits left for later now (the router calls it before a binding change)."""
        later, self._later = self._later, None
        if later is not None:
            later(self._counters())

    def _counters(self) -> np.ndarray:
        """The hit counters, made (zeros) on first use where the route counted none: a
        100k-binding array made a batch cost 17-35 µs, a fifth of a warm batch's fixed cost."""
        hits = self._hits
        if isinstance(hits, int):
            with _COUNTERS_MADE:  # two threads reading at once make one array
                hits = self._hits
                if isinstance(hits, int):
                    hits = self._hits = np.zeros(hits, dtype=np.int64)
        return hits

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __repr__(self) -> str:
        return f"BatchRoutes(messages={len(self)}, pairs={len(self.queue_ids)})"

    def counts(self) -> np.ndarray:
        """The number of queues each message reached (0: unroutable, or refused)."""
        return np.diff(self.offsets)

    def queues(self, i: int) -> frozenset[str]:
        """The queue names message ``i`` reached, as `Topology.route` returns them."""
        ids = self.queue_ids[self.offsets[i] : self.offsets[i + 1]]
        return frozenset(self.queue_names[q] for q in ids.tolist())


class BatchRouter:
    """Routes batches of messages through a `Topology`, equal to `Topology.route_message`.

    The router follows the topology's changes (it watches it: `Topology.watch`). A binding
    made gets the next number in `bindings`; a binding removed keeps its number (its hits stay
    0), as a queue or exchange declared later is numbered after the others. What a change
    can alter is dropped, not rebuilt: the key memo of the exchanges whose routes it may
    change, and a topic exchange's id tables are patched for the ids that changed.

    Messages without headers that matter (no ``CC``/``BCC``, no headers exchange on their
    way) are routed by key: a key memo per exchange (`xroute.engines.key_memo`) answers keys
    seen before in one compiled loop, and the others are routed once each by
    `Topology.route` (its route cache and first-route path, as single routes), then kept. Their
    hits are counted when read (`BatchRoutes.hits`).
    """

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.queues: list[str] = list(topology.queues)
        self.bindings: list[Binding] = topology.bindings()
        self._exchanges: list[Exchange] = list(topology.exchanges.values())
        self._exchange_index = {exchange.name: i for i, exchange in enumerate(self._exchanges)}
        # (built in C loops, as the tables below: they pay for part of numbering the
        # answers, `_number_one_queue_answers`)
        self._queue_index = dict(zip(self.queues, range(len(self.queues))))
        # One-queue answers numbered by the sets themselves (`AnswersById`), the topology's
        # shared ones made so far numbered now; and by content (a set the table has not, or
        # a set of the walk, made anew a key): a queue keeps its number, so neither goes
        # stale, and the second has at most one entry a queue.
        self._answer_ids = AnswersById()
        self._one_queue: dict[frozenset[str], int] = {}
        self._number_one_queue_answers()
        self._binding_index = dict(zip(self.bindings, range(len(self.bindings))))
        # Per binding: the queue it leads to (or -1), the exchange it leads to (or -1); room
        # is kept for bindings to come (a binding made is added, not the tables rebuilt).
        count = len(self.bindings)
        to_queue = np.full(max(count, 16), -1, dtype=np.int32)
        to_exchange = np.full(max(count, 16), -1, dtype=np.int32)
        # exchange -> the exchanges its bindings lead to, with how many bindings each
        self._leads_to: dict[str, dict[str, int]] = {}
        # `Binding.target`: a queue's name (a str), or a `Destination`
        targets = list(map(_TARGET, self.bindings))
        if set(map(type, targets)) <= _NAMES_ONLY:  # to queues alone, by their names
            to_queue[:count] = np.fromiter(
                map(self._queue_index.__getitem__, targets), dtype=np.int32, count=count)
            targets = []
        for i in range(len(targets)):
            binding = self.bindings[i]
            kind, name = binding.destination
            if kind == "queue":
                to_queue[i] = self._queue_index[name]
            else:
                to_exchange[i] = self._exchange_index[name]
                into = self._leads_to.setdefault(binding.source, {})
                into[name] = into.get(name, 0) + 1
        # Matches given as binding indices (every exchange type but topic) use these tables.
        self._by_binding = _IdTables(np.arange(len(to_queue), dtype=np.int64), to_queue,
                                     to_exchange)
        # Per exchange published to: whether an exchange of another type can be reached from
        # it (then every message goes through Topology.route_message), whether a headers
        # exchange can (then headers decide), and the exchanges it can reach.
        self._plugin_reachable: dict[str, bool] = {}
        self._headers_reachable: dict[str, bool] = {}
        self._reachable: dict[str, frozenset[str]] = {}
        #: Whether routing may read the messages' basic properties (the pipeline then reads
        #: its message_id, correlation_id and timestamp columns).
        self.reads_properties = any(x.type not in STANDARD_TYPES for x in self._exchanges)
        # Per topic exchange: its matcher's ids version and their tables (patched or rebuilt
        # when ids change).
        self._id_tables: dict[str, tuple[int, _IdTables]] = {}
        # Per exchange published to: its key memo (routes of messages by key alone).
        self._memos: dict[str, KeyMemo] = {}
        # Per exchange published to: which keys were seen (a key is kept in the memo once it
        # repeats); kept when a change drops the memo.
        self._seen: dict[str, SeenKeys] = {}
        # Routes whose hits are to be counted when read, or before the next change.
        self._uncounted: weakref.WeakSet[BatchRoutes] = weakref.WeakSet()
        self._names_changed = False  # a queue or an exchange was declared or deleted
        self._changes = 0  # changes told so far: hits left for later must see none
        self._lock = threading.RLock()
        self._per_thread = threading.local()
        topology.watch(self)

    # ------------------------------------------------------------------ following changes

    def topology_changing(self, what: str, name: str) -> None:
        """Told by the topology before a change (`Topology.watch`): count the hits left for
        later while the bindings are still as they were routed, and drop what the change may
        alter."""
        with self._lock:
            # (A `WeakSet`'s truth is one Python call; its copy, to iterate it, and a new
            # one cost 4-5 µs, a sixth of a bind between routes: only when routes wait.)
            if self._uncounted:
                for routes in list(self._uncounted):
                    routes.count_hits()
                self._uncounted = weakref.WeakSet()
            self._changes += 1
            if what == "binding":
                # The routes of the exchanges from which ``name`` can be reached (none kept
                # since the previous change, most often: then nothing to look for).
                memos = self._memos
                if memos:
                    for start, reach in self._reachable.items():
                        if name in reach:
                            memos.pop(start, None)
                    memos.pop(name, None)
                return
            if what == "queue":
                self._memos.pop(DEFAULT_EXCHANGE, None)  # routes to a queue by its name
            else:
                self._memos.clear()
                self._reachable.clear()
                self._plugin_reachable.clear()
                self._headers_reachable.clear()
            self._names_changed = True

    def binding_changed(self, binding: Binding, added: bool) -> None:
        """Told by the topology after a binding was made or removed (`Topology.watch`)."""
        kind, name = binding.destination
        if kind == "queue" and not added:
            return  # a removed binding keeps its number: nothing here changes (no lock)
        with self._lock:
            if kind == "exchange":
                into = self._leads_to.setdefault(binding.source, {})
                into[name] = into.get(name, 0) + (1 if added else -1)
                if not into[name]:
                    del into[name]
                # Which exchange reaches which changed: work it out again.
                self._reachable.clear()
                self._plugin_reachable.clear()
                self._headers_reachable.clear()
                self._memos.clear()
            if not added or binding in self._binding_index:
                return  # a removed binding keeps its number (the same binding made again too)
            self._sync_names()
            index = len(self.bindings)
            self.bindings.append(binding)
            self._binding_index[binding] = index
            tables = self._by_binding
            if index >= len(tables.queue):
                size = 2 * len(tables.queue)
                tables = self._by_binding = _IdTables(
                    np.arange(size, dtype=np.int64), _grown(tables.queue, size),
                    _grown(tables.exchange, size))
            if kind == "queue":
                tables.queue[index] = self._queue_index[name]
            else:
                tables.exchange[index] = self._exchange_index[name]

    def _number_one_queue_answers(self) -> None:
        """Number the one-queue answers the topology shares (`Topology.one_queue_answers`)."""
        index = self._queue_index
        sets: list[frozenset[str]] = []
        queues: list[int] = []
        for table in self.topology.one_queue_answers():
            try:  # C loops: no Python step a queue
                queues += map(index.__getitem__, table)
                sets += table.values()
            except KeyError:  # a queue deleted since: the others one by one
                del queues[len(sets):]
                for name, names in table.items():
                    q = index.get(name)
                    if q is not None:
                        sets.append(names)
                        queues.append(q)
        if sets:
            self._answer_ids.add(sets, ONE_QUEUE - np.array(queues, dtype=np.int64),
                                 self._max_answer_sets())

    def _max_answer_sets(self) -> int:
        """The bound of `AnswersById`: a literal routes' set and a wildcard's set a queue,
        and room for sets the topology makes anew (about 250 bytes each, table included)."""
        return 2 * len(self.queues) + (1 << 14)

    def _sync_names(self) -> None:
        """Number the queues and exchanges declared since (numbers are never reused)."""
        if not self._names_changed:
            return
        self._names_changed = False
        for name in self.topology.queues:
            if name not in self._queue_index:
                self._queue_index[name] = len(self.queues)
                self.queues.append(name)
        exchanges = self.topology.exchanges
        for name in [n for n in self._exchange_index if n not in exchanges]:
            del self._exchange_index[name]  # deleted: its slot stays, unused
        for name, exchange in exchanges.items():
            index = self._exchange_index.get(name)
            if index is None:
                self._exchange_index[name] = len(self._exchanges)
                self._exchanges.append(exchange)
            else:
                self._exchanges[index] = exchange  # deleted and declared again
        self.reads_properties = any(x.type not in STANDARD_TYPES for x in exchanges.values())

    # ------------------------------------------------------------------ the public call

    def route(
        self,
        exchange: str,
        keys: Sequence[str] | Any,
        headers: Sequence[Mapping[str, Any] | None] | None = None,
        properties: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> BatchRoutes:
        """Route ``keys[i]`` with ``headers[i]`` (None: no headers) and basic ``properties[i]``
        (`Topology.route`'s ``properties``; None: none) through ``exchange``.

        ``keys`` is a sequence of str or a pyarrow string array. An unknown or internal
        exchange, or one of a type xroute does not support, raises as `Topology.route` does; a
        bad key, bad headers or a failure further on refuse only that message (see
        `BatchRoutes.errors`).
        """
        # The exchange-level checks of route_message, with its own errors and messages.
        self.topology.check_publish(exchange)
        with self._lock:
            self._sync_names()
        size = len(keys)
        errors: dict[int, XRouteError] = {}
        valid = self._valid_keys(keys, errors)
        if self._reaches_a_plugin_type(exchange):
            hits = np.zeros(len(self.bindings), dtype=np.int64)
            fine = [i for i in range(size) if i not in errors]
            rows, queue_ids = self._route_one_by_one(
                exchange, valid, headers, fine, errors, hits, properties
            )
            offsets = np.zeros(size + 1, dtype=np.int64)
            np.cumsum(np.bincount(rows, minlength=size), out=offsets[1:])
            return BatchRoutes(offsets, queue_ids.astype(np.int32, copy=False), errors, hits,
                               self.queues)
        fast = np.ones(size, dtype=bool)
        if errors:
            fast[list(errors)] = False
        checked: list[dict[str, Any]] | None = None
        slow: list[int] = []
        by_key = fast  # messages whose headers do not matter: routed by key alone
        if headers is not None:
            checked = [{}] * size
            headers_matter = self._reaches_headers(exchange)
            by_key = fast.copy()
            # Messages often share one headers object: check each object once.
            verdicts: dict[int, Any] = {}
            for i, table in enumerate(headers):
                if not table or i in errors:
                    continue
                verdict = verdicts.get(id(table))
                if verdict is None:
                    try:
                        verdict = check_headers(table)
                    except XRouteError as error:
                        verdict = error
                    verdicts[id(table)] = verdict
                if isinstance(verdict, XRouteError):
                    errors[i] = verdict
                    fast[i] = by_key[i] = False
                    continue
                checked[i] = verdict
                if "CC" in verdict or "BCC" in verdict:
                    slow.append(i)
                    fast[i] = by_key[i] = False
                elif headers_matter and verdict:
                    by_key[i] = False
            fast &= ~by_key
        else:
            fast = np.zeros(size, dtype=bool)
        keyed = np.flatnonzero(by_key)
        answers, answer_starts, answer_ids = self._route_by_key(exchange, valid, keyed, errors)
        walked = np.flatnonzero(fast)
        # (routed by key alone, the batch counts no hit now: `BatchRoutes` makes the array
        # when they are read)
        hits: np.ndarray | int = np.zeros(len(self.bindings), dtype=np.int64) \
            if len(walked) or slow else len(self.bindings)
        rows, queue_ids = self._walk(exchange, valid, walked, checked, hits) if len(walked) \
            else (_EMPTY_IDS, _EMPTY_IDS)
        if slow:
            more_rows, more_ids = self._route_one_by_one(
                exchange, valid, headers, slow, errors, hits
            )
            rows, queue_ids = _unique_pairs(
                np.concatenate([rows, more_rows]),
                np.concatenate([queue_ids, more_ids]),
                len(self.queues),
            )
        offsets, queue_ids = _merge(size, keyed, answers, answer_starts, answer_ids, rows,
                                    queue_ids)
        later = None
        if len(keyed):
            keyed_ok = keyed if not errors else keyed[[m not in errors for m in keyed.tolist()]]
            if len(keyed_ok):
                later = partial(self._count_later, exchange, valid, keyed_ok, self._changes)
        routes = BatchRoutes(offsets, queue_ids, errors, hits, self.queues, later)
        if later is not None:
            with self._lock:
                self._uncounted.add(routes)
        return routes

    def _count_later(self, exchange: str, keys: Any, messages: np.ndarray, changes: int,
                     hits: np.ndarray) -> None:
        """The hits of messages routed by key: the batch walk over the bindings (queues
        dropped), as the topology stands (the router calls it before any change)."""
        with self._lock:
            if changes != self._changes:  # a change the router was not told of first
                raise RuntimeError("BatchRoutes.hits: the topology changed since the route")
            self._sync_names()
            self._walk(exchange, keys, messages, None, hits, queues_wanted=False)

    def _route_by_key(
        self, exchange: str, keys: Any, messages: np.ndarray, errors: dict[int, XRouteError]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each message's answer number, and the answers' (starts, queue ids): from the key
        memo, else `Topology.route_uncached` once per distinct key (kept if seen before)."""
        if not len(messages):
            return _EMPTY_ANSWERS, _ONE_START, _EMPTY_QUEUES
        if isinstance(keys, list):
            # Keys given as str: through Arrow, whose buffers the kernel reads.
            import pyarrow as pa

            keys_here = pa.array([keys[m] for m in messages.tolist()], type=pa.string())
            data, key_offsets = utf8_buffers(keys_here)
            probed = np.arange(len(messages), dtype=np.int64)
        else:
            keys_here = keys
            data, key_offsets = utf8_buffers(keys)
            probed = messages
        with self._lock:
            memo = self._memos.get(exchange)
            if memo is None:
                memo = self._memos[exchange] = KeyMemo()
                self._reachable_from(exchange)
            answers, missed = memo.probe(data, key_offsets, probed)
            if missed:
                if memo.make_room(missed):
                    answers.fill(-1)  # it started again: every key is new to it
                lost = np.flatnonzero(answers == MISSING)
                lost_at = probed[lost]
                if 4 * len(lost) >= len(keys_here):  # most of them: one conversion
                    every = keys_here.to_pylist()
                    lost_keys = every if len(lost) == len(every) else [
                        every[i] for i in lost_at.tolist()]
                else:
                    lost_keys = [keys_here[i].as_py() for i in lost_at.tolist()]
                # Only keys met before are kept (`SeenKeys`): a first pass over new keys
                # copies no key's bytes, and looks none up among the batch's.
                seen = self._seen.get(exchange)
                if seen is None:
                    seen = self._seen[exchange] = SeenKeys()
                again = seen.again(data, key_offsets, lost_at)
                numbers, refused = self._first_routes(exchange, lost_keys, again, memo)
                answers[lost] = numbers
                if refused:
                    kept = numbers > REFUSED
                    for i in np.flatnonzero(~kept).tolist():
                        errors[int(messages[lost[i]])] = refused[REFUSED - int(numbers[i])]
                    answers[lost[~kept]] = memo.answer(EMPTY_NAMES, self._queue_index)
                    lost_at, numbers, again = lost_at[kept], numbers[kept], again[kept]
                if again.any():
                    memo.insert(data, key_offsets, lost_at[again], numbers[again])
            starts, ids = memo.answers()
        return answers, starts, ids

    def _first_routes(self, exchange: str, keys: list[str], again: np.ndarray,
                      memo: KeyMemo) -> tuple[np.ndarray, list[XRouteError]]:
        """The answer number of each key (int32), by `Topology.route_uncached` (the memo keeps
        routes; the route cache need not as well), and the errors: a refused key's number is
        ``REFUSED - i``, its error the ``i``-th. A key seen before (``again``) may repeat in
        the batch: where most keys are new, each is routed, repeats too; else each once."""
        topology = self.topology
        # `route_uncached` inlined: the route cache's routes of this exchange read here (a
        # key the topology routed is one look-up), and the first route's own path
        # (`Topology._literal_names`, as single first routes take it) called straight, its
        # reads of the exchange made once a batch (`Topology.first_route_reader`). A key it
        # leaves (None: the full walk) goes through `route_uncached`.
        cache = topology._route_cache  # noqa: SLF001 (the router is the topology's)
        # (None where it holds none: a fresh topology's first pass looks nothing up there)
        own = (cache.own.get(exchange) if cache is not None else None) or None
        reader = topology.first_route_reader(exchange)
        if reader is None or reader[3] or 4 * int(np.count_nonzero(again)) > len(keys):
            # no first-route path, an alternate exchange (an empty answer walks), or many
            # repeats: key by key
            return self._first_routes_each(exchange, keys, again, memo, own, reader)
        literal_names, kind, literal, _ = reader
        # Most keys new: every key routed in one C loop (`map`), then numbered in one
        # compiled loop by the one-queue answer sets' identity (`AnswersById`); the rest
        # (answers of several queues or none: the memo's numbers, by content; sets not
        # numbered yet; keys the first-route path leaves to the walk) after.
        try:
            if own is None:
                answers = list(map(partial(literal_names, kind, literal), keys))
            else:
                answers = list(map(own.get, keys))  # routes the topology has made
                answers = [literal_names(kind, literal, key) if names is None else names
                           for key, names in zip(keys, answers)]
        except XRouteError:  # the key by key path refuses it, and routes the others
            return self._first_routes_each(exchange, keys, again, memo, own, reader)
        numbers = self._answer_ids.find(answers)
        refused: list[XRouteError] = []
        missed = np.flatnonzero(numbers == MISSING)
        if not len(missed):
            return numbers, refused
        answer_of = memo.answer_of
        picked = [answers[i] for i in missed.tolist()]
        known = np.fromiter(map(answer_of.get, picked, repeat(MISSING)), dtype=np.int32,
                            count=len(picked))
        left = np.flatnonzero(known == MISSING)
        if len(left):
            route = topology.route_uncached
            worked: list[int] = []
            shared: dict[int, tuple[frozenset[str], int]] = {}  # one-queue sets of the
            # first-route path, by identity (the topology's own: kept by it)
            for i in left.tolist():
                names = picked[i]
                if names is None:  # the full walk (its sets are made anew: not kept by id)
                    try:
                        names = route(exchange, keys[int(missed[i])])
                    except XRouteError as error:
                        worked.append(REFUSED - len(refused))
                        refused.append(error)
                        continue
                    worked.append(self._answer_number(names, memo))
                    continue
                number = self._answer_number(names, memo)
                worked.append(number)
                if number < MISSING:  # one queue (`ONE_QUEUE - q`)
                    shared[id(names)] = (names, number)
            known[left] = worked
            if shared:
                sets, numbered = zip(*shared.values())
                self._answer_ids.add(list(sets), numbered, self._max_answer_sets())
        numbers[missed] = known
        return numbers, refused

    def _answer_number(self, names: frozenset[str], memo: KeyMemo) -> int:
        """The number of the answer ``names``: ``ONE_QUEUE - q`` for one queue (kept in
        `_one_queue`), else the memo's (`KeyMemo.answer`)."""
        if len(names) == 1:
            number = self._one_queue.get(names)
            if number is None:
                for name in names:
                    number = self._one_queue[names] = ONE_QUEUE - self._queue_index[name]
            return number
        number = memo.answer_of.get(names)
        if number is None:
            number = memo.answer(names, self._queue_index)
        return number

    def _first_routes_each(self, exchange: str, keys: list[str], again: np.ndarray,
                           memo: KeyMemo, own: dict[str, frozenset[str]] | None,
                           reader: Any) -> tuple[np.ndarray, list[XRouteError]]:
        """`_first_routes` key by key: a key seen before (``again``) is routed once."""
        route = self.topology.route_uncached
        literal_names = kind = literal = None
        empty_walks = False
        if reader is not None:
            literal_names, kind, literal, empty_walks = reader
        one_queue = self._one_queue
        answer_of = memo.answer_of
        found: dict[str, int] = {}
        refused: list[XRouteError] = []
        numbers = []
        append = numbers.append
        for key, repeats in zip(keys, again.tolist()):
            number = found.get(key) if repeats else None
            if number is None:
                try:
                    names = own.get(key) if own is not None else None
                    if names is None and literal_names is not None:
                        names = literal_names(kind, literal, key)
                        if empty_walks and not names:
                            names = None  # the alternate exchange's walk
                    if names is None:
                        names = route(exchange, key)
                except XRouteError as error:
                    number = REFUSED - len(refused)
                    refused.append(error)
                else:
                    # the answer numbered here, in the loop that routes it
                    number = one_queue.get(names)
                    if number is None:
                        number = answer_of.get(names)
                        if number is None:
                            number = self._answer_number(names, memo)
                if repeats:
                    found[key] = number
            append(number)
        return np.array(numbers, dtype=np.int32), refused

    def _reachable_from(self, exchange: str) -> frozenset[str]:
        """The exchanges a message published to ``exchange`` may visit, itself included
        (every binding to an exchange and every alternate followed, declared or not)."""
        found = self._reachable.get(exchange)
        if found is not None:
            return found
        exchanges = self.topology.exchanges
        seen, pending = {exchange}, [exchange]
        while pending:
            name = pending.pop()
            following = set(self._leads_to.get(name, ()))
            here = exchanges.get(name)
            if here is not None and here.alternate_exchange is not None:
                following.add(here.alternate_exchange)
            pending += [n for n in following - seen]
            seen |= following
        found = self._reachable[exchange] = frozenset(seen)
        return found

    def _reaches_a_plugin_type(self, exchange: str) -> bool:
        """Whether a message published to ``exchange`` may meet an exchange whose type is not
        one of `STANDARD_TYPES` (following every binding to an exchange and every alternate)."""
        found = self._plugin_reachable.get(exchange)
        if found is None:
            exchanges = self.topology.exchanges
            found = self._plugin_reachable[exchange] = any(
                name in exchanges and exchanges[name].type not in STANDARD_TYPES
                for name in self._reachable_from(exchange))
        return found

    def _reaches_headers(self, exchange: str) -> bool:
        """Whether a message published to ``exchange`` may meet a headers exchange (then its
        headers may change its route; else only CC and BCC do)."""
        found = self._headers_reachable.get(exchange)
        if found is None:
            exchanges = self.topology.exchanges
            found = self._headers_reachable[exchange] = any(
                name in exchanges and exchanges[name].type == "headers"
                for name in self._reachable_from(exchange))
        return found

    # ------------------------------------------------------------------ validation

    def _valid_keys(self, keys: Any, errors: dict[int, XRouteError]) -> Any:
        """The keys, with each invalid one's error recorded (check_routing_key decides)."""
        arrow = _arrow_strings(keys)
        if arrow is None:
            # A sequence, or an Arrow array that is not text (check_routing_key refuses each
            # of its values by type).
            keys = keys.to_pylist() if hasattr(keys, "to_pylist") else list(keys)
            for i, key in enumerate(keys):
                try:
                    check_key(key)
                except XRouteError as error:
                    errors[i] = error
            return keys
        if not arrow.null_count:
            # `arrow_keys_fit` from the offsets: a NumPy pass, where Arrow's compute calls
            # cost a third of a warm batch of 1,500 keys.
            lengths = np.diff(utf8_buffers(arrow)[1])
            if not len(lengths) or int(lengths.max()) <= MAX_KEY_BYTES:
                return arrow
        import pyarrow.compute as pc

        # Only a null or an over-long key can fail check_routing_key; those few go through
        # it for the verdict and the message.
        suspects = pc.or_(
            pc.is_null(arrow), pc.greater(pc.binary_length(arrow), MAX_KEY_BYTES)
        ).fill_null(True)
        for i in np.flatnonzero(suspects.to_numpy(zero_copy_only=False)).tolist():
            try:
                check_key(arrow[i].as_py())
            except XRouteError as error:
                errors[i] = error
        return arrow

    # ------------------------------------------------------------------ the batch walk

    def _walk(
        self,
        exchange: str,
        keys: Any,
        messages: np.ndarray,
        headers: list[dict[str, Any]] | None,
        hits: np.ndarray,
        queues_wanted: bool = True,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(message, queue) pairs for ``messages``, each walked as Topology._walk does, sorted
        by message (``messages`` is ascending); only the hits if not ``queues_wanted``."""
        found: list[tuple[np.ndarray, np.ndarray]] = []
        size = len(keys)
        start = self._exchange_index[exchange]
        # seen[e][m]: message m has visited (or is queued to visit) exchange e.
        seen: dict[int, np.ndarray] = {start: np.ones(size, dtype=bool)}
        pending = deque([(start, messages)])
        python_keys: list[Any] | None = None
        while pending:
            index, here = pending.popleft()
            if not len(here):
                continue
            current = self._exchanges[index]
            if current.name == DEFAULT_EXCHANGE:
                # The default exchange routes to the queue named by each key; it matches no
                # binding, so it reports none and has no alternate.
                if python_keys is None:
                    python_keys = _as_list(keys)
                queue_index = self._queue_index
                declared = self.topology.queues  # a deleted queue keeps its number
                pairs = [
                    (m, queue_index[python_keys[m]])
                    for m in here.tolist()
                    if python_keys[m] in declared
                ]
                if pairs:
                    rows, queues = zip(*pairs)
                    found.append((np.array(rows, dtype=np.int64), np.array(queues, dtype=np.int64)))
                continue
            key_of, offsets, ids, tables = self._match(current, keys, here, headers)
            kernel = _kernel()
            group_queues, queue_starts, group_exchanges, exchange_starts = kernel.expand_groups(
                key_of, offsets, ids, *tables, hits, self._id_hits(len(tables.binding)),
                len(self.queues), len(self._exchanges))
            if queues_wanted:
                rows, queues = _pairs(kernel, here, key_of, group_queues, queue_starts)
            else:
                rows = queues = _EMPTY_IDS
            exchange_rows, targets = _pairs(kernel, here, key_of, group_exchanges,
                                            exchange_starts)
            if len(rows):
                found.append((rows, queues))
            if len(targets):
                for target in np.unique(targets).tolist():
                    self._visit(target, exchange_rows[targets == target], seen, pending, size)
            alternate = current.alternate_exchange
            if alternate is not None and alternate in self._exchange_index:
                # As RabbitMQ: the alternate takes the messages this exchange matched nothing for.
                matched_nothing = np.diff(offsets)[key_of] == 0
                self._visit(
                    self._exchange_index[alternate], here[matched_nothing], seen, pending, size
                )
        if not found:
            return _EMPTY_IDS, _EMPTY_IDS
        if len(found) == 1:
            return found[0]  # one exchange step: grouped by message, no repeats
        return _unique_pairs(
            np.concatenate([r for r, _ in found]),
            np.concatenate([q for _, q in found]),
            len(self.queues),
        )

    def _id_hits(self, size: int) -> np.ndarray:
        """This thread's zeroed hit counters by id, at least ``size`` long (`expand_groups`
        leaves them zeroed; a thread of its own each, as the kernel runs without the GIL)."""
        counters = getattr(self._per_thread, "id_hits", None)
        if counters is None or len(counters) < size:
            counters = self._per_thread.id_hits = np.zeros(size, dtype=np.int64)
        return counters

    @staticmethod
    def _visit(
        target: int, rows: np.ndarray, seen: dict[int, np.ndarray], pending: deque, size: int
    ) -> None:
        mask = seen.get(target)
        if mask is None:
            mask = seen[target] = np.zeros(size, dtype=bool)
        rows = rows[~mask[rows]]
        if len(rows):
            mask[rows] = True
            pending.append((target, rows))

    def _match(
        self,
        exchange: Exchange,
        keys: Any,
        messages: np.ndarray,
        headers: list[dict[str, Any]] | None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, _IdTables]:
        """What ``messages`` match at one exchange, each distinct input matched once:
        (group of each message, offsets and ids of each group's matches, the ids' tables)."""
        if exchange.type == "headers":
            # Only the headers decide, and messages often share one table (the same object).
            tables = (
                [{}] * len(messages) if headers is None else [headers[m] for m in messages.tolist()]
            )
            key_of, distinct = _group_by_identity(tables)
            route = exchange.kind.route
            return (key_of, *self._flatten([route((), table) for table in distinct]))
        key_of, distinct = _distinct(_take(keys, messages))
        if exchange.type == "topic":
            matcher = exchange.kind.matcher
            offsets, ids = matcher.match_many_ids(distinct)
            return key_of, offsets, ids, self._matcher_tables(exchange.name, matcher)
        route = exchange.kind.route
        return (key_of, *self._flatten([route([key], {}) for key in _as_list(distinct)]))

    def _flatten(self, found: list[Any]) -> tuple[np.ndarray, np.ndarray, _IdTables]:
        """Offsets and binding indices of lists of bindings (repeats dropped)."""
        index = self._binding_index
        found = [set(bindings) for bindings in found]
        offsets = np.zeros(len(found) + 1, dtype=np.int64)
        np.cumsum([len(bindings) for bindings in found], out=offsets[1:])
        ids = np.fromiter(
            (index[b] for bindings in found for b in bindings),
            dtype=np.int64,
            count=int(offsets[-1]),
        )
        return offsets, ids, self._by_binding

    def _matcher_tables(self, name: str, matcher: Any) -> _IdTables:
        """The tables of a topic exchange's matcher ids: its binding, queue and exchange."""
        version = matcher.ids_version
        cached = self._id_tables.get(name)
        if cached is not None and cached[0] == version:
            return cached[1]
        if cached is not None:
            changed = matcher.ids_changed_since(cached[0])
            if changed is not None and len(changed) < len(cached[1].binding):
                # A few bindings made or removed: only their ids are written again.
                tables = self._patched(cached[1], changed, matcher)
                self._id_tables[name] = (version, tables)
                return tables
        binding = np.array(
            [self._binding_index[d] if d is not None else -1 for d in matcher.destinations()],
            dtype=np.int64,
        )
        bound = binding >= 0
        queue = np.full(len(binding), -1, dtype=np.int32)
        exchange = np.full(len(binding), -1, dtype=np.int32)
        queue[bound] = self._by_binding.queue[binding[bound]]
        exchange[bound] = self._by_binding.exchange[binding[bound]]
        tables = _IdTables(binding, queue, exchange)
        self._id_tables[name] = (version, tables)
        return tables

    def _patched(self, tables: _IdTables, changed: list[int], matcher: Any) -> _IdTables:
        """``tables`` with the ids in ``changed`` written again (grown if an id is new)."""
        top = max(changed) + 1
        if top > len(tables.binding):
            size = max(top, 2 * len(tables.binding))
            tables = _IdTables(_grown(tables.binding, size), _grown(tables.queue, size),
                               _grown(tables.exchange, size))
        index = self._binding_index
        by_binding = self._by_binding
        for i in changed:
            destination = matcher.destination_of(i)
            b = -1 if destination is None else index[destination]
            tables.binding[i] = b
            tables.queue[i] = by_binding.queue[b] if b >= 0 else -1
            tables.exchange[i] = by_binding.exchange[b] if b >= 0 else -1
        return tables

    # ------------------------------------------------------------------ one by one

    def _route_one_by_one(
        self,
        exchange: str,
        keys: Any,
        headers: Sequence[Mapping[str, Any] | None] | None,
        messages: list[int],
        errors: dict[int, XRouteError],
        hits: np.ndarray,
        properties: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Messages with CC/BCC keys, or through plugin exchange types, by
        Topology.route_message and its observer."""
        index = self._binding_index
        queue_index = self._queue_index
        rows: list[int] = []
        queues: list[int] = []

        def count(_exchange: Exchange, matched: list[Binding], _via: str) -> None:
            seen_here.update(matched)

        for m in messages:
            seen_here: set[Binding] = set()
            key = keys[m] if isinstance(keys, list) else keys[m].as_py()
            try:
                reached = self.topology.route_message(
                    exchange,
                    key,
                    None if headers is None else headers[m],
                    observer=count,
                    properties=None if properties is None else properties[m],
                )
            except XRouteError as error:
                errors[m] = error
                continue
            for binding in seen_here:
                hits[index[binding]] += 1
            for name in reached:
                rows.append(m)
                queues.append(queue_index[name])
        return np.array(rows, dtype=np.int64), np.array(queues, dtype=np.int64)


def _merge(
    size: int, keyed: np.ndarray, answers: np.ndarray, answer_starts: np.ndarray,
    answer_ids: np.ndarray, rows: np.ndarray, queue_ids: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and queue ids of a batch: messages ``keyed`` have answers (numbers into
    ``answer_starts`` and ``answer_ids``), the others (message, queue) pairs sorted by
    message."""
    if len(keyed) == size and not len(rows):  # every message by key (most batches)
        return key_memo.kernel().lay_out(answers, answer_starts, answer_ids)
    counts = np.zeros(size, dtype=np.int64)
    if len(keyed):
        # an answer of one queue is the queue itself (`ONE_QUEUE`): one id
        sizes = np.diff(answer_starts, append=answer_starts[-1])  # one more: never empty
        counts[keyed] = np.where(answers >= 0, sizes[np.maximum(answers, 0)], 1)
    if len(rows):
        counts += np.bincount(rows, minlength=size)
    offsets = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    into = np.empty(int(offsets[-1]), dtype=np.int32)
    if len(keyed):
        key_memo.kernel().write_answers(answers, answer_starts, answer_ids, offsets[keyed],
                                        into)
    if len(rows):
        rank = np.arange(len(rows)) - np.searchsorted(rows, rows)  # within its message
        into[offsets[rows] + rank] = queue_ids
    return offsets, into


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    """``array`` grown to ``size``, the new part -1 (none)."""
    grown = np.full(size, -1, dtype=array.dtype)
    grown[: len(array)] = array
    return grown


def _unique_pairs(
    rows: np.ndarray, queues: np.ndarray, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """(message, queue) pairs without repeats, sorted by message."""
    codes = np.unique(rows * max(count, 1) + queues)
    return np.divmod(codes, max(count, 1))


def _distinct(keys: Any) -> tuple[np.ndarray, Any]:
    """(index of each key among the distinct keys, the distinct keys)."""
    if isinstance(keys, list):
        first: dict[Any, int] = {}
        key_of = np.fromiter(
            (first.setdefault(key, len(first)) for key in keys), dtype=np.int64, count=len(keys)
        )
        return key_of, list(first)
    encoded = keys.dictionary_encode()
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary


def _group_by_identity(tables: list[Any]) -> tuple[np.ndarray, list[Any]]:
    first: dict[int, int] = {}
    distinct: list[Any] = []
    key_of = np.empty(len(tables), dtype=np.int64)
    for i, table in enumerate(tables):
        number = first.get(id(table))
        if number is None:
            number = first[id(table)] = len(distinct)
            distinct.append(table)
        key_of[i] = number
    return key_of, distinct


def _kernel() -> Any:
    """`xroute.core._batch_kernel`, whose kernels numba compiles (or loads from its disk cache) on
    first use."""
    from xroute.core import _batch_kernel  # imports numba: only once a batch is routed

    return _batch_kernel


def _pairs(
    kernel: Any, here: np.ndarray, key_of: np.ndarray, group_ids: np.ndarray, starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(message, id) pairs: message ``here[i]`` with each id of its group ``key_of[i]``."""
    total = int(np.diff(starts)[key_of].sum()) if len(here) else 0
    rows = np.empty(total, dtype=np.int64)
    ids = np.empty(total, dtype=np.int32)
    if total:
        kernel.write_pairs(here, key_of, group_ids, starts, rows, ids)
    return rows, ids


def check_key(key: Any) -> None:
    """The check each message's key gets: `check_routing_key`, a missing key named as such."""
    if key is None:  # a missing value in a dataset
        raise InvalidRoutingKey(None, "the message has no routing key")
    check_routing_key(key)


def _arrow_strings(keys: Any) -> Any:
    """A pyarrow string array as is; anything else (a sequence, a non-text array) as None."""
    # pyarrow is looked up only if the caller imported it: list callers never pay for it.
    import sys

    pa = sys.modules.get("pyarrow")
    if pa is None:
        return None
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if isinstance(keys, pa.Array) and (
        pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)
    ):
        return keys
    return None


def _take(keys: Any, messages: np.ndarray) -> Any:
    if isinstance(keys, list):
        if len(messages) == len(keys):
            return keys
        return [keys[m] for m in messages.tolist()]
    if len(messages) == len(keys):
        return keys
    return keys.take(messages)


def _as_list(keys: Any) -> list[Any]:
    return keys if isinstance(keys, list) else keys.to_pylist()
