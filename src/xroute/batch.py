"""Routing many messages at once: `BatchRouter.route` gives, for a batch of messages published
to one exchange, exactly what `Topology.route_message` gives for each of them, as flat arrays.

The walk of `Topology` is done once per exchange for the whole batch instead of once per
message: the messages that reach an exchange are matched together (a topic exchange through
`TopicMatcher.match_many_ids`, which never builds a set per key; the other types through
their own `route`), and their matched bindings are expanded with NumPy into queues, further
exchanges (each visited at most once per message) and alternate exchanges (when a message
matched nothing there). The set of exchanges a message visits does not depend on the order of
the walk, so visiting exchange by exchange is the same walk.

Messages whose ``CC``/``BCC`` headers add routing keys take `Topology.route_message` itself,
one by one: they are rare, and it keeps the batch walk to one key per message.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xroute.errors import InvalidRoutingKey, XRouteError
from xroute.headers import check_headers
from xroute.keys import MAX_KEY_BYTES, check_routing_key
from xroute.model import Binding, Exchange
from xroute.topology import DEFAULT_EXCHANGE, Topology

_EMPTY_IDS = np.zeros(0, dtype=np.int64)


@dataclass
class BatchRoutes:
    """Where each message of a batch went.

    The queues of message ``i`` are ``queue_ids[offsets[i]:offsets[i + 1]]`` (sorted, no
    repeats), indices into `BatchRouter.queues`. A message in ``errors`` was refused, with the
    error `Topology.route_message` raises for it, and has no queues. ``hits[b]`` counts the
    messages that matched binding ``BatchRouter.bindings[b]`` at an exchange they visited.
    """

    offsets: np.ndarray
    queue_ids: np.ndarray
    errors: dict[int, XRouteError]
    hits: np.ndarray
    queue_names: Sequence[str] = field(repr=False, default=())

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def counts(self) -> np.ndarray:
        """The number of queues each message reached (0: unroutable, or refused)."""
        return np.diff(self.offsets)

    def queues(self, i: int) -> frozenset[str]:
        """The queue names message ``i`` reached, as `Topology.route` returns them."""
        ids = self.queue_ids[self.offsets[i] : self.offsets[i + 1]]
        return frozenset(self.queue_names[q] for q in ids.tolist())


class BatchRouter:
    """Routes batches of messages through a `Topology`, equal to `Topology.route_message`.

    The router numbers the topology's queues and bindings when it is made: make a new one
    after the topology changes.
    """

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.queues: list[str] = list(topology.queues)
        self.bindings: list[Binding] = topology.bindings()
        self._exchanges: list[Exchange] = list(topology.exchanges.values())
        self._exchange_index = {exchange.name: i for i, exchange in enumerate(self._exchanges)}
        self._queue_index = {name: i for i, name in enumerate(self.queues)}
        self._binding_index = {binding: i for i, binding in enumerate(self.bindings)}
        # Per binding: the queue it leads to (or -1), the exchange it leads to (or -1).
        self._to_queue = np.full(len(self.bindings), -1, dtype=np.int64)
        self._to_exchange = np.full(len(self.bindings), -1, dtype=np.int64)
        for i, binding in enumerate(self.bindings):
            kind, name = binding.destination
            if kind == "queue":
                self._to_queue[i] = self._queue_index[name]
            else:
                self._to_exchange[i] = self._exchange_index[name]
        # Per topic exchange: matcher destination id -> binding index (rebuilt if ids change).
        self._id_maps: dict[str, tuple[int, np.ndarray]] = {}

    # ------------------------------------------------------------------ the public call

    def route(
        self,
        exchange: str,
        keys: Sequence[str] | Any,
        headers: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> BatchRoutes:
        """Route ``keys[i]`` with ``headers[i]`` (None: no headers) through ``exchange``.

        ``keys`` is a sequence of str or a pyarrow string array. An unknown or internal
        exchange raises as `Topology.route` does; a bad key or bad headers refuse only that
        message (see `BatchRoutes.errors`).
        """
        # The exchange-level checks of route_message, with its own errors and messages.
        self.topology.route_message(exchange, "")
        size = len(keys)
        errors: dict[int, XRouteError] = {}
        valid = self._valid_keys(keys, errors)
        fast = np.ones(size, dtype=bool)
        fast[list(errors)] = False
        checked: list[dict[str, Any]] | None = None
        slow: list[int] = []
        if headers is not None:
            checked = [{}] * size
            for i, table in enumerate(headers):
                if not table or i in errors:
                    continue
                try:
                    table = check_headers(table)
                except XRouteError as error:
                    errors[i] = error
                    fast[i] = False
                    continue
                checked[i] = table
                if "CC" in table or "BCC" in table:
                    slow.append(i)
                    fast[i] = False
        hits = np.zeros(len(self.bindings), dtype=np.int64)
        rows, queue_ids = self._walk(exchange, valid, np.flatnonzero(fast), checked, hits)
        if slow:
            more_rows, more_ids = self._route_one_by_one(exchange, valid, headers, slow, errors, hits)
            rows = np.concatenate([rows, more_rows])
            queue_ids = np.concatenate([queue_ids, more_ids])
        # One delivery per (message, queue) however many paths led there; sorted by message.
        codes = np.unique(rows * max(len(self.queues), 1) + queue_ids)
        rows, queue_ids = np.divmod(codes, max(len(self.queues), 1))
        offsets = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=size), out=offsets[1:])
        return BatchRoutes(offsets, queue_ids.astype(np.int32), errors, hits, self.queues)

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
                    _check_key(key)
                except XRouteError as error:
                    errors[i] = error
            return keys
        import pyarrow.compute as pc

        # Arrow text is UTF-8, so only a null or an over-long key can fail check_routing_key;
        # those few go through it for the verdict and the message.
        suspects = pc.or_(
            pc.is_null(arrow), pc.greater(pc.binary_length(arrow), MAX_KEY_BYTES)
        ).fill_null(True)
        for i in np.flatnonzero(suspects.to_numpy(zero_copy_only=False)).tolist():
            try:
                _check_key(arrow[i].as_py())
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
    ) -> tuple[np.ndarray, np.ndarray]:
        """(message, queue) pairs for ``messages``, each walked as Topology._walk does."""
        found_rows: list[np.ndarray] = []
        found_queues: list[np.ndarray] = []
        start = self._exchange_index[exchange]
        # seen[e][m]: message m has visited (or is queued to visit) exchange e.
        seen: dict[int, np.ndarray] = {start: np.ones(len(keys), dtype=bool)}
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
                pairs = [
                    (m, queue_index[python_keys[m]])
                    for m in here.tolist()
                    if python_keys[m] in queue_index
                ]
                if pairs:
                    rows, queues = zip(*pairs)
                    found_rows.append(np.array(rows, dtype=np.int64))
                    found_queues.append(np.array(queues, dtype=np.int64))
                continue
            counts, matched = self._match(current, keys, here, headers)
            if len(matched):
                hits += np.bincount(matched, minlength=len(hits))
                rows = np.repeat(here, counts)
                queues = self._to_queue[matched]
                to_queue = queues >= 0
                found_rows.append(rows[to_queue])
                found_queues.append(queues[to_queue])
                targets = self._to_exchange[matched]
                to_exchange = targets >= 0
                if to_exchange.any():
                    rows, targets = rows[to_exchange], targets[to_exchange]
                    for target in np.unique(targets).tolist():
                        self._visit(target, rows[targets == target], seen, pending, len(keys))
            alternate = current.alternate_exchange
            if alternate is not None and alternate in self._exchange_index:
                # As RabbitMQ: the alternate takes the messages this exchange matched nothing for.
                self._visit(
                    self._exchange_index[alternate], here[counts == 0], seen, pending, len(keys)
                )
        if not found_rows:
            return _EMPTY_IDS, _EMPTY_IDS
        return np.concatenate(found_rows), np.concatenate(found_queues)

    @staticmethod
    def _visit(
        target: int, rows: np.ndarray, seen: dict[int, np.ndarray], pending: deque, size: int
    ) -> None:
        mask = seen.get(target)
        if mask is None:
            mask = seen[target] = np.zeros(size, dtype=bool)
        rows = np.unique(rows)
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
    ) -> tuple[np.ndarray, np.ndarray]:
        """(bindings matched per message, their binding indices flat) at one exchange."""
        if _is_topic(exchange):
            matcher = exchange.kind.matcher
            if hasattr(matcher, "match_many_ids"):
                subset = _take(keys, messages)
                offsets, ids = matcher.match_many_ids(subset)
                return np.diff(offsets), self._id_map(exchange.name, matcher)[ids]
            # A TopicMatcher without the batch call: one frozenset per key.
            found = matcher.match_many(_as_list(_take(keys, messages)))
        else:
            python_keys = _as_list(_take(keys, messages))
            route = exchange.kind.route
            if headers is None:
                found = [set(route([key], {})) for key in python_keys]
            else:
                found = [
                    set(route([key], headers[m])) for key, m in zip(python_keys, messages.tolist())
                ]
        index = self._binding_index
        counts = np.fromiter((len(f) for f in found), dtype=np.int64, count=len(found))
        matched = np.fromiter(
            (index[b] for f in found for b in f), dtype=np.int64, count=int(counts.sum())
        )
        return counts, matched

    def _id_map(self, name: str, matcher: Any) -> np.ndarray:
        """Matcher destination id -> binding index for a topic exchange's matcher."""
        destinations = matcher.destinations()
        cached = self._id_maps.get(name)
        if cached is not None and cached[0] == len(destinations):
            return cached[1]
        table = np.array(
            [self._binding_index[d] if d is not None else -1 for d in destinations],
            dtype=np.int64,
        )
        self._id_maps[name] = (len(destinations), table)
        return table

    # ------------------------------------------------------------------ one by one

    def _route_one_by_one(
        self,
        exchange: str,
        keys: Any,
        headers: Sequence[Mapping[str, Any] | None],
        messages: list[int],
        errors: dict[int, XRouteError],
        hits: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Messages with CC/BCC keys, through Topology.route_message and its observer."""
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
                reached = self.topology.route_message(exchange, key, headers[m], observer=count)
            except XRouteError as error:
                errors[m] = error
                continue
            for binding in seen_here:
                hits[index[binding]] += 1
            for name in reached:
                rows.append(m)
                queues.append(queue_index[name])
        return np.array(rows, dtype=np.int64), np.array(queues, dtype=np.int64)


def _check_key(key: Any) -> None:
    if key is None:  # a missing value in a dataset, named as such
        raise InvalidRoutingKey(None, "the message has no routing key")
    check_routing_key(key)


def _is_topic(exchange: Exchange) -> bool:
    return exchange.type == "topic"


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
