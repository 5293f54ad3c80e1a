"""Where a set of matched bindings leads: its queue names and its exchange names, worked out
once per set.

A DFA hands every key that ends in one of its states the state's frozenset of bindings, so a
topology that keys this work by that set turns a cold route (a key never seen) from a loop
over the ~200 matched bindings into one dict lookup. The sets are kept by identity of content
(a frozenset caches its hash), bounded by the bindings they hold, and dropped whole on a
binding change, as the DFA drops its states.
"""

from __future__ import annotations

from operator import attrgetter

from xroute.core.model import Binding, Destination

_TARGET = attrgetter("target")  # a queue's name, or a `Destination` (`Binding.target`)
_NAMES_ONLY = {str}

# About 8 bytes a binding reference, plus the sets: some tens of MB at the bound.
MAX_CELLS = 2_000_000
EMPTY_NAMES: frozenset[str] = frozenset()


class MatchedDestinations:
    """Matched binding set -> (queue names, exchange names), bounded by `MAX_CELLS`."""

    def __init__(self) -> None:
        # The sets that lead to queues alone -> their queue names: read inline by
        # `Topology._literal_names` (a call less on a first route), filled by `of`. No tuple
        # per set: one object less that the collector tracks for each new set.
        self.queue_names: dict[frozenset[Binding], frozenset[str]] = {}
        # The sets that lead to exchanges too -> (queue names, exchange names)
        self._by_set: dict[frozenset[Binding], tuple[frozenset[str], tuple[str, ...]]] = {}
        self._cells = 0
        # A one-binding set's answer, by the target it names (`Binding.target`), shared: one
        # per queue or exchange, not a new frozenset per key (EMQX's 80k filters lead to 80
        # queues).
        self._alone: dict[str | Destination, tuple[frozenset[str], tuple[str, ...]]] = {}
        # A queue's target (its name) -> the frozenset of its name alone: read inline by
        # `Topology._literal_names` for a key that one binding matched, handed over bare
        # (`TopicMatcher.wildcard_matcher`), filled by `of_binding`.
        self.queue_alone: dict[str | Destination, frozenset[str]] = {}

    # hot: every first route of `Topology.route` on a topic exchange (`--shapes`)
    def of(self, matched: frozenset[Binding]) -> tuple[frozenset[str], tuple[str, ...]]:
        """The queue names and the exchange names the bindings in ``matched`` lead to."""
        names = self.queue_names.get(matched)
        if names is not None:
            return names, ()
        if len(matched) == 1:
            # A binding per key (EMQX's shape): keyed by its destination, not by the set,
            # whose hash would be one more read of a binding that is rarely in cache.
            for binding in matched:
                found = self.of_binding(binding)
            if not found[1]:
                self._count(1)
                self.queue_names[matched] = found[0]
            return found
        found = self._by_set.get(matched)
        if found is None:
            found = self._add(matched)
        return found

    def of_binding(self, binding: Binding) -> tuple[frozenset[str], tuple[str, ...]]:
        """`of` a set of ``binding`` alone, without the set: shared by its destination."""
        target = binding.target
        found = self._alone.get(target)
        if found is None:
            kind, name = binding.destination
            if kind == "queue":
                names = self.queue_alone[target] = frozenset((name,))
                found = (names, ())
            else:
                found = (EMPTY_NAMES, (name,))
            self._alone[target] = found
        return found

    def of_parts(self, parts: list) -> frozenset[str] | None:
        """The queue names of several bindings' answers (`ShapeIndex.match_bare`'s list: sets
        of bindings, or bindings handed over bare), united; None if one leads to an
        exchange. Where one part's names hold the other's, that part's shared frozenset."""
        united: frozenset[str] | None = None
        alone = self.queue_alone
        for part in parts:
            # a binding to a queue: its shared set read inline (`of_binding`'s hit, a call
            # less a part on the MQTT shape's keys that two patterns match)
            names = None if part.__class__ is frozenset else alone.get(part.target)
            if names is None:
                names, exchanges = (self.of(part) if part.__class__ is frozenset
                                    else self.of_binding(part))
                if exchanges:
                    return None
            if united is None or united <= names:
                united = names
            elif not names <= united:
                united = united | names
        return united

    def clear(self) -> None:
        """Forget every set (their bindings may be gone)."""
        self._by_set = {}
        self.queue_names = {}
        self._cells = 0
        self._alone = {}
        self.queue_alone = {}

    def _count(self, cells: int) -> None:
        """Room for ``cells`` more binding references, or forget every set."""
        if self._cells + cells > MAX_CELLS:
            self.clear()
        self._cells += cells

    # hot: the first route of a 10k-queue fan-out (`xroute bench engines --shapes`): the
    # loops run in C (attrgetter), about 0.1 µs a binding against 0.3 in Python
    def _add(self, matched: frozenset[Binding]) -> tuple[frozenset[str], tuple[str, ...]]:
        targets = frozenset(map(_TARGET, matched))
        if not targets or set(map(type, targets)) == _NAMES_ONLY:
            queues, exchanges = targets, ()  # queues' names alone, the usual case
        else:
            destinations = {("queue", t) if t.__class__ is str else t for t in targets}
            queues = frozenset(name for kind, name in destinations if kind == "queue")
            exchanges = tuple(name for kind, name in destinations if kind != "queue")
        self._count(len(matched))
        if exchanges:
            found = self._by_set[matched] = (queues, exchanges)
            return found
        self.queue_names[matched] = queues
        return queues, ()
