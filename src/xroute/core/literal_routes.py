"""Queue names of a topic exchange's literal bindings, by routing key: the first route of a
key without a walk over its bindings.

A binding without ``*`` or ``#`` matches exactly one routing key. `Topology.route`'s first
route of a key used to match bindings, then map the matched set to queue names
(`xroute.core.destinations`): on RabbitMQ 4.3's unicast benchmark every key has its own set of
one binding, so that mapping ran once per key, and on its large fan-out (10k queues on one
key) it was a loop over 10k bindings (2 ms). Here each key's queue names are kept as the
frozenset a route returns, updated when a binding is made or removed, so a first route is a
dict lookup; the exchange's wildcard bindings are matched apart
(`TopicMatcher.wildcard_matcher`) and united with it.

A key with a literal binding to an exchange (exchange-to-exchange) has no answer here that a
route may use (`names` answers None): the topology then takes its full walk.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xroute.engines.frozen_sets import STALE, FrozenSets

EMPTY_NAMES: frozenset[str] = frozenset()
# A key with more queues than this keeps them in a set, frozen on its next route after a
# change (`xroute.engines.frozen_sets`). Up to it, each change copies the key's frozenset.
FREEZE_NOW = 64


class LiteralRoutes:
    """Routing key -> the frozenset of queue names its literal bindings lead to."""

    __slots__ = ("_names", "frozen", "_ones", "_repeats", "exchange_keys")

    def __init__(self) -> None:
        # Queue names: many keys lead to one queue alone (a client's topics), one frozenset.
        self._names = FrozenSets(FREEZE_NOW, share_singletons=True)
        # Key -> its queue names' frozenset, or STALE (then `names` makes it); read inline
        # by `Topology.route`.
        self.frozen = self._names.frozen
        # Member -> its shared singleton (`FrozenSets`'s own table, or a topology's queue
        # table: `share_singletons_with`), read inline by `add`: a value not a frozenset is
        # not one.
        self._ones: dict[str, Any] = self._names.singletons  # type: ignore[assignment]
        # (key, queue) -> its literal bindings, kept only where there are two or more (the
        # same key and queue with other arguments is another binding, to the same queue)
        self._repeats: dict[tuple[str, str], int] = {}
        # key -> its literal bindings to exchanges (read inline as `frozen`)
        self.exchange_keys: dict[str, int] = {}

    def add(self, key: str, kind: str, name: str) -> None:
        """A literal binding of ``key`` to destination (``kind``, ``name``) was made."""
        if kind != "queue":
            self.exchange_keys[key] = self.exchange_keys.get(key, 0) + 1
        elif key not in self.frozen:  # a new key (most of a bulk bind): it has no member
            # hot: `FrozenSets.add` of a new key, inline: the queue's shared singleton (an
            # MQTT client's other topics), made for its first key
            alone = self._ones.get(name)
            self.frozen[key] = (alone if alone.__class__ is frozenset
                                else self._names.alone(name))
        elif name in self._names.members(key):
            pair = (key, name)
            self._repeats[pair] = self._repeats.get(pair, 1) + 1
        else:
            self._names.add(key, name)

    def remove(self, key: str, kind: str, name: str) -> None:
        """A literal binding of ``key`` to (``kind``, ``name``), made before, was removed."""
        if kind != "queue":
            left = self.exchange_keys[key] - 1
            if left:
                self.exchange_keys[key] = left
            else:
                del self.exchange_keys[key]
            return
        pair = (key, name)
        repeats = self._repeats.get(pair)
        if repeats is None:
            self._names.remove(key, name)
        elif repeats > 2:
            self._repeats[pair] = repeats - 1
        else:
            del self._repeats[pair]

    # `Topology.route` reads `frozen` itself and calls this only for a key frozen on read
    # or while literal bindings lead to exchanges
    def names(self, key: str) -> frozenset[str] | None:
        """The queue names ``key``'s literal bindings lead to (empty if none); None if one of
        them leads to an exchange (the caller must walk)."""
        frozen = self.frozen.get(key, EMPTY_NAMES)
        if frozen is STALE:
            frozen = self._names.get(key)
        if self.exchange_keys and key in self.exchange_keys:
            return None
        return frozen

    def share_singletons_with(self, held: dict[str, Any],
                              singleton: Callable[[str], frozenset[str]]) -> None:
        """Take each queue's frozenset of its name alone from a topology's queue table
        (`QueueTable.singleton`, which keeps it in the queue's entry of ``held``, read here
        inline), not from a table of this one's: a dict entry less a queue. Before any
        binding."""
        self._names.share_singletons_with(singleton)
        self._ones = held

    @property
    def singletons(self) -> dict[str, frozenset[str]] | None:
        """Queue name -> the frozenset of it alone that the keys leading to that queue alone
        share (the table itself: read only); None where the queue table keeps them
        (`share_singletons_with`)."""
        return self._names.singletons

    def stats(self) -> dict[str, Any]:
        """How many keys have literal bindings to queues, to exchanges."""
        return {"literal_route_keys": len(self.frozen),
                "literal_exchange_keys": len(self.exchange_keys)}
