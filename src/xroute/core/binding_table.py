"""A topology's bindings by identity, in the order they were made.

A binding's identity is (source, destination, binding key, arguments), arguments compared by
their AMQP-typed values (`xroute.core.headers.frozen_arguments`). Keyed by a tuple of those,
each binding cost its tuple (64 bytes) beside its `Binding` object. Most binding keys belong
to one binding (a device's key, a user's inbox), so the first binding of a key is kept under
the key's own string, which the `Binding` holds anyway, and only the others under a tuple. One
dict holds both (a str never equals a tuple), so the order of `values` is still the order of
binding.
"""

from __future__ import annotations

from collections.abc import Iterator

from xroute.core.headers import frozen_arguments
from xroute.core.model import Binding, Destination


def identity(source: str, target: Destination, routing_key: str, frozen: tuple) -> tuple:
    """A binding's key in the table when its binding key's string is taken. A queue's is made
    of strings (and the frozen arguments) alone, so the collector stops tracking it at its
    first pass (a `Destination` in it kept it tracked); it never equals an exchange's, whose
    second item is the `Destination`. Without arguments the key has three items (8 bytes
    less), never equal to one with arguments (four)."""
    if target.kind == "queue":
        return (source, target.name, routing_key, frozen) if frozen else (
            source, target.name, routing_key)
    return (source, target, routing_key, frozen) if frozen else (source, target, routing_key)


def _frozen(binding: Binding) -> tuple:
    return frozen_arguments(binding.arguments) if binding.arguments else ()


class BindingTable:
    """Bindings by identity (`find`), in the order they were added (`values`)."""

    __slots__ = ("keyed", "others")

    def __init__(self) -> None:
        # binding key -> its binding that holds the key's string, or `identity` -> any other
        # (read inline by `Topology.bind`: a key in neither dict has no binding)
        self.keyed: dict[str | tuple, Binding] = {}
        # binding key -> how many of its bindings are kept under a tuple (keys of one
        # binding, most of them, have no entry: `find` then knows the key's string is all)
        self.others: dict[str, int] = {}

    # hot: every bind (`xroute bench engines --shapes`, bind rate): a new key is one lookup
    def find(self, source: str, target: Destination, routing_key: str,
             frozen: tuple) -> Binding | None:
        """The binding of this identity (``target``: the topology's shared `Destination`;
        ``frozen``: the frozen arguments), or None."""
        table = self.keyed
        first = table.get(routing_key)
        if first is not None and (
                first.destination is target and first.source == source
                and (not first.arguments if not frozen else _frozen(first) == frozen)):
            return first
        if routing_key not in self.others:
            return None
        return table.get(identity(source, target, routing_key, frozen))

    def add(self, binding: Binding, frozen: tuple) -> None:
        """Add a binding that `find` does not know (``frozen``: its frozen arguments)."""
        table = self.keyed
        key = binding.routing_key
        if key in table:
            self.others[key] = self.others.get(key, 0) + 1
            table[identity(binding.source, binding.destination, key, frozen)] = binding
        else:
            table[key] = binding

    def remove(self, binding: Binding) -> None:
        """Remove a binding held here. Another binding of its key keeps its tuple: the key's
        string is free for the next binding of that key."""
        table = self.keyed
        key = binding.routing_key
        if table.get(key) is binding:
            del table[key]
            return
        del table[identity(binding.source, binding.destination, key, _frozen(binding))]
        others = self.others
        if others[key] > 1:
            others[key] -= 1
        else:
            del others[key]

    def values(self) -> Iterator[Binding]:
        """Every binding, in the order they were added."""
        return iter(self.keyed.values())

    def __len__(self) -> int:
        return len(self.keyed)
