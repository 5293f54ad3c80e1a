"""Queue names of a topic exchange's literal bindings, by routing key: the first route of a
key without a walk over its bindings.

A binding without ``*`` or ``#`` matches exactly one routing key. `Topology.route`'s first
route of a key used to match bindings, then map the matched set to queue names
(`xroute.destinations`): on RabbitMQ 4.3's unicast benchmark every key has its own set of
one binding, so that mapping ran once per key, and on its large fan-out (10k queues on one
key) it was a loop over 10k bindings (2 ms). Here each key's queue names are kept as the
frozenset a route returns, updated when a binding is made or removed, so a first route is a
dict lookup; the exchange's wildcard bindings are matched apart
(`TopicMatcher.wildcard_matcher`) and united with it.

A key with a literal binding to an exchange (exchange-to-exchange) has no answer here that a
route may use (`names` answers None): the topology then takes its full walk.
"""

from __future__ import annotations

from typing import Any

EMPTY_NAMES: frozenset[str] = frozenset()
# A key with more queues than this keeps them in a set, frozen on its next route after a
# change: binding 10k queues to one key then costs one frozenset, not 10k growing copies.
# Up to it, each change copies the key's frozenset (at most this many names).
FREEZE_NOW = 64
_STALE: Any = object()  # in place of a large key's frozenset while its set changed


class LiteralRoutes:
    """Routing key -> the frozenset of queue names its literal bindings lead to."""

    __slots__ = ("_frozen", "_large", "_repeats", "_exchanges")

    def __init__(self) -> None:
        self._frozen: dict[str, frozenset[str]] = {}
        self._large: dict[str, set[str]] = {}  # keys with more than FREEZE_NOW queues
        # (key, queue) -> its literal bindings, kept only where there are two or more (the
        # same key and queue with other arguments is another binding, to the same queue)
        self._repeats: dict[tuple[str, str], int] = {}
        self._exchanges: dict[str, int] = {}  # key -> its literal bindings to exchanges

    def add(self, key: str, kind: str, name: str) -> None:
        """A literal binding of ``key`` to destination (``kind``, ``name``) was made."""
        if kind != "queue":
            self._exchanges[key] = self._exchanges.get(key, 0) + 1
            return
        large = self._large.get(key)
        frozen = self._frozen.get(key)
        if name in (large if large is not None else frozen or EMPTY_NAMES):
            pair = (key, name)
            self._repeats[pair] = self._repeats.get(pair, 1) + 1
        elif large is not None:
            large.add(name)
            self._frozen[key] = _STALE
        elif frozen is None:
            self._frozen[key] = frozenset((name,))
        elif len(frozen) < FREEZE_NOW:
            self._frozen[key] = frozen | {name}
        else:
            self._large[key] = {*frozen, name}
            self._frozen[key] = _STALE

    def remove(self, key: str, kind: str, name: str) -> None:
        """A literal binding of ``key`` to (``kind``, ``name``), made before, was removed."""
        if kind != "queue":
            left = self._exchanges[key] - 1
            if left:
                self._exchanges[key] = left
            else:
                del self._exchanges[key]
            return
        pair = (key, name)
        repeats = self._repeats.get(pair)
        if repeats is not None:
            if repeats > 2:
                self._repeats[pair] = repeats - 1
            else:
                del self._repeats[pair]
            return
        large = self._large.get(key)
        if large is None:
            remaining = self._frozen[key] - {name}
        else:
            large.discard(name)
            if len(large) > FREEZE_NOW:
                self._frozen[key] = _STALE
                return
            remaining = frozenset(large)
            del self._large[key]
        if remaining:
            self._frozen[key] = remaining
        else:
            del self._frozen[key]

    # hot: `Topology.route`, the first route of every key of a topic exchange (`--shapes`)
    def names(self, key: str) -> frozenset[str] | None:
        """The queue names ``key``'s literal bindings lead to (empty if none); None if one of
        them leads to an exchange (the caller must walk)."""
        frozen = self._frozen.get(key, EMPTY_NAMES)
        if frozen is _STALE:
            frozen = self._frozen[key] = frozenset(self._large[key])
        if self._exchanges and key in self._exchanges:
            return None
        return frozen

    def stats(self) -> dict[str, Any]:
        """How many keys have literal bindings to queues, to exchanges."""
        return {"literal_route_keys": len(self._frozen),
                "literal_exchange_keys": len(self._exchanges)}
