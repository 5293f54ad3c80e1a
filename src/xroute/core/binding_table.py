"""A topology's bindings by identity, in the order they were made.

A binding's identity is (source, destination, binding key, arguments), arguments compared by
their AMQP-typed values (`xroute.core.headers.frozen_arguments`). Keyed by a tuple of those,
each binding cost its tuple (64 bytes) beside its `Binding` object. Most binding keys belong
to one binding (a device's key, a user's inbox), so the first binding of a key is kept under
the key's own string, which the `Binding` holds anyway. The others are kept under the
`Binding` itself (hashed by identity), in the same dict, so `values` is still the order of
binding; the key finds them by target in a dict of its own (or bare, one alone): RabbitMQ
4.3's unicast shape binds 10k queues with ``broadcast.#``, and a tuple each was 64 bytes of
its 312 a binding.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator

from xroute.core.headers import frozen_arguments
from xroute.core.model import Binding, Destination


def _frozen(binding: Binding) -> tuple:
    return frozen_arguments(binding.arguments) if binding.arguments else ()


def _within(source: str, target: str | Destination, frozen: tuple) -> tuple:
    # A key's other binding in its `BindingTable.others` dict where its target alone is
    # taken or it has arguments: a tuple of three, never equal to a target (a str, or a
    # `Destination`, a pair).
    return (source, target, frozen)


class BindingTable:
    """Bindings by identity (`find`), in the order they were added (`values`)."""

    __slots__ = ("keyed", "others")

    def __init__(self) -> None:
        # binding key -> its binding that holds the key's string; a binding kept otherwise ->
        # itself (read inline by `Topology.bind`: a key in neither dict has no binding)
        self.keyed: dict[str | Binding, Binding] = {}
        # binding key -> its bindings kept under themselves in `keyed`: one alone, bare (a
        # dict was 232 bytes where a key has two bindings), or a dict of them by target (a
        # binding without arguments whose target is free there) or by `_within` (any
        # other). Keys of one binding, most of them, have no entry: `find` then knows the
        # key's string is all.
        self.others: dict[str, Binding | dict[Hashable, Binding]] = {}

    # hot: every bind (`xroute bench engines --shapes`, bind rate): a new key is one lookup
    def find(self, source: str, target: str | Destination, routing_key: str,
             frozen: tuple) -> Binding | None:
        """The binding of this identity (``target``: its `Binding.target`, the topology's
        shared name or `Destination`; ``frozen``: the frozen arguments), or None."""
        first = self.keyed.get(routing_key)
        if first is not None and (  # the same test as below, inline: a call less a bind
                first.target is target and first.source == source
                and (not first.arguments if not frozen else _frozen(first) == frozen)):
            return first
        others = self.others.get(routing_key)
        if others is None:
            return None
        if others.__class__ is Binding:  # `_is`, inline
            return others if (  # type: ignore[return-value]
                others.target is target and others.source == source  # type: ignore[union-attr]
                and (not others.arguments if not frozen  # type: ignore[union-attr]
                     else _frozen(others) == frozen)) else None  # type: ignore[arg-type]
        if not frozen:
            found = others.get(target)  # type: ignore[union-attr]
            if found is not None and found.source == source:
                return found  # type: ignore[no-any-return]
        return others.get(_within(source, target, frozen))  # type: ignore[union-attr]

    def add(self, binding: Binding, frozen: tuple) -> None:
        """Add a binding that `find` does not know (``frozen``: its frozen arguments)."""
        table = self.keyed
        key = binding.routing_key
        if key not in table:
            table[key] = binding
            return
        others = self.others.get(key)
        if others is None:
            self.others[key] = binding
        else:
            if others.__class__ is Binding:
                alone: Binding = others  # type: ignore[assignment]
                others = self.others[key] = {}
                _put(others, alone, _frozen(alone))
            _put(others, binding, frozen)  # type: ignore[arg-type]
        table[binding] = binding

    def remove(self, binding: Binding) -> None:
        """Remove a binding held here. Another binding of its key keeps its place: the key's
        string is free for the next binding of that key."""
        table = self.keyed
        key = binding.routing_key
        if table.get(key) is binding:
            del table[key]
            return
        del table[binding]
        others = self.others[key]
        if others is binding:
            del self.others[key]
            return
        target = binding.target
        if others.get(target) is binding:  # type: ignore[union-attr]
            del others[target]  # type: ignore[union-attr]
        else:
            del others[_within(binding.source, target, _frozen(binding))]  # type: ignore
        if not others:
            del self.others[key]

    def values(self) -> Iterator[Binding]:
        """Every binding, in the order they were added."""
        return iter(self.keyed.values())

    def __len__(self) -> int:
        return len(self.keyed)


def _put(others: dict[Hashable, Binding], binding: Binding, frozen: tuple) -> None:
    # a key's other binding into its dict: by target where that is free, else `_within`
    target = binding.target
    if frozen or target in others:
        others[_within(binding.source, target, frozen)] = binding
    else:
        others[target] = binding
