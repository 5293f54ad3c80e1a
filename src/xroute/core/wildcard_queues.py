"""Queue names of a topic exchange's wildcard bindings, matched by queue: the first route of a
key on an exchange where queues are bound with ``#``.

A topic exchange's own matcher binds `Binding` objects, one destination each, so that a route
tells which bindings matched (hit counts, `xroute explain`). No binding there can stand in for
another. But a queue bound with ``#`` (or ``#.#``) is in every route, and its other wildcard
bindings then change no route: the ``auto`` engine, matching queue names, keeps them out of
its trie, DFA and shapes (`xroute.engines.catch_all`). On the seed articles' mix at 100k
bindings every queue has such a binding: a first route walked about 600 bindings to find 100
queues, where this index walks the ``#`` bindings and one shape. A queue bound with a floor
(``*.#``: every key of a word or more) keeps out its bindings that need as many words: at 10k
seed bindings the index's DFA holds 860 patterns instead of 1,866, and its first routes build
a third of the states.

So `Topology.route`'s first route of a key (`Topology._route_literal`, its per-key part
`_literal_names`, which a batch's first pass calls too) asks this index for the wildcard
bindings' queue names, beside `xroute.core.literal_routes` for the literal ones. The
exchange makes it on its first wildcard binding of a queue with a catch-all pattern, from the
bindings it has, and keeps it from then on (a toggled ``#`` binding must not rebuild it);
without such a binding it would only double the wildcard bindings' memory. While a wildcard
binding leads to an exchange, the route takes the full walk (`exchange_bindings`).

It makes it too once one wildcard pattern is bound to about `FANOUT_QUEUES` queues
(`FanOutCounter`): RabbitMQ 4.3's broadcast binds ``broadcast.#`` to 10k queues, and a first
route there read each of the 10k matched bindings for its queue name (3-8 ms, cold in
memory, against 0.2 ms to freeze a set of 10k names here), once per change of that set.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

from xroute.core.keys import split_words
from xroute.engines import TopicMatcher

# A wildcard pattern bound to about this many queues makes its exchange keep the index: a
# first route over that many bindings costs about 0.3 µs a binding, against one dict lookup
# by queue name here.
FANOUT_QUEUES = 512
# Counters by hash bucket (2 bytes each, 32 KB an exchange), kept from the exchange's
# FANOUT_QUEUES // 4-th wildcard binding to a queue on: before, no pattern is near the bound.
FANOUT_BUCKETS = 1 << 14
_LAST = 65_535  # an 'H' counter saturates here


class FanOutCounter:
    """Whether a topic exchange's wildcard pattern is bound to `FANOUT_QUEUES` queues or
    more, counted by hash bucket: patterns that share a bucket add up, so it may say so early
    (the index is then kept for nothing but memory), never much late."""

    __slots__ = ("_counts", "_total")

    def __init__(self) -> None:
        self._total = 0  # wildcard bindings to queues, while not counted by bucket
        self._counts: array | None = None

    def add(self, pattern: str) -> bool:
        """A wildcard binding of ``pattern`` to a queue was made: whether its bucket reached
        `FANOUT_QUEUES`."""
        counts = self._counts
        if counts is None:
            self._total += 1
            if self._total >= FANOUT_QUEUES // 4:
                self._counts = array("H", bytes(2 * FANOUT_BUCKETS))
            return False
        bucket = hash(pattern) & (FANOUT_BUCKETS - 1)
        count = counts[bucket]
        if count < _LAST:
            counts[bucket] = count + 1
        return count + 1 >= FANOUT_QUEUES

    def remove(self, pattern: str) -> None:
        """A wildcard binding of ``pattern`` to a queue was removed."""
        counts = self._counts
        if counts is None:
            self._total -= 1
            return
        bucket = hash(pattern) & (FANOUT_BUCKETS - 1)
        if counts[bucket]:  # counted from the bucket array's start only: never below 0
            counts[bucket] -= 1


class WildcardQueues:
    """The wildcard bindings of one topic exchange, by queue name."""

    __slots__ = ("_matcher", "_holds", "_repeats", "exchange_bindings", "match", "_changed")

    def __init__(self, engine: str) -> None:
        # routed key by key only: no destination ids kept for batches
        self._matcher = TopicMatcher(engine=engine, ids_from_start=False)
        # `TopicMatcher.has` as one function, asked on every binding (hot: a bulk bind)
        self._holds = self._matcher.pair_test()
        # (pattern, queue) -> its bindings, kept only where there are two or more (the same
        # pattern and queue with other arguments is another binding, to the same queue)
        self._repeats: dict[tuple[str, str], int] = {}
        #: Wildcard bindings to exchanges: while there is one, the route takes the full walk.
        self.exchange_bindings = 0
        #: A valid routing key -> the queue names of the wildcard bindings that match it (one
        #: frozenset of str). Read inline by `Topology._literal_names`; after a change,
        #: `_ask`, which asks the matcher for it on the first key it is given (a bulk bind
        #: asks once, not once a binding).
        self.match: Callable[[str], frozenset[str]] = self._current()
        self._changed = self._ask  # made once: stored on each change

    def add(self, pattern: str, kind: str, name: str, words: tuple[str, ...] | None = None
            ) -> None:
        """A wildcard binding of ``pattern`` (a checked binding key; ``words``, its split, if
        the caller has it) to destination (``kind``, ``name``) was made."""
        if kind != "queue":
            self.exchange_bindings += 1
            return
        # (no pair made to look up where nothing repeats: hot, a bulk bind)
        if self._repeats and self._repeats.get((pattern, name)) or self._holds(pattern, name):
            pair = (pattern, name)
            self._repeats[pair] = self._repeats.get(pair, 1) + 1
            return
        self._matcher.add_new(pattern, split_words(pattern) if words is None else words, name)
        self.match = self._changed

    def remove(self, pattern: str, kind: str, name: str,
               words: tuple[str, ...] | None = None) -> None:
        """A wildcard binding of ``pattern`` (``words``, its split, if the caller has it) to
        (``kind``, ``name``), made before, was removed."""
        if kind != "queue":
            self.exchange_bindings -= 1
            return
        pair = (pattern, name)
        repeats = self._repeats.get(pair)
        if repeats is None:  # its only binding: the pair is in the matcher
            self._matcher.remove_known(
                pattern, split_words(pattern) if words is None else words, name)
            self.match = self._changed
        elif repeats > 2:
            self._repeats[pair] = repeats - 1
        else:
            del self._repeats[pair]

    def _ask(self, key: str) -> frozenset[str]:
        """`match` after a change: the matcher's function as it stands now, kept until the
        next change, and its answer for ``key``."""
        found = self._current()(key)
        # as it stands after that read: a first read may have put waiting patterns in the
        # trie (`AutoEngine._wait`), after which the matcher's function is a call shorter
        self.match = self._current()
        return found

    def _current(self) -> Callable[[str], frozenset[str]]:
        # The exchange makes this index only over an engine that splits literal bindings off
        # (``auto``): its wildcard function, valid until the next change.
        return self._matcher.wildcard_matcher()  # type: ignore[return-value]
