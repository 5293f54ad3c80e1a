"""A topology's declared queues by name.

Most queues are declared with the default properties (durable, not auto-delete, no
arguments), and a topology of a queue per device or user holds many. Such a queue is kept as
its name alone (the table's key, also its value): its bindings keep that one string
(`Binding.target`), whatever string a caller named the queue with, and the `Queue` a reader
asks for is made when read. A queue with other properties is kept as its `Queue`, whose name
its bindings keep. No object a queue where each binding has a queue of its own (a `Queue`,
then a shared `Destination`, were 110 and 64 bytes a queue).

The frozenset of a queue's name alone, which a route answers for every key that leads to that
queue alone (`xroute.core.literal_routes`), is kept in the same place once made: in place of
the name (the table's entry, `singleton`), where it had a dict of its own (38 bytes a queue at
100k queues).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from xroute.core.model import NO_ARGUMENTS, Queue


class QueueTable(Mapping[str, Queue]):
    """Declared queues by name: a read-only mapping of name to `Queue` for readers; `declare`
    and `remove` for the topology."""

    __slots__ = ("held", "_ones", "_made")

    def __init__(self) -> None:
        #: name -> the name itself (default properties), or the frozenset of that name alone
        #: once made (`singleton`), or the queue's `Queue`: what a hot path tests membership
        #: in, and finds the name its bindings share, without a call
        self.held: dict[str, Any] = {}
        # name -> the frozenset of it alone, for a queue kept as its `Queue`
        self._ones: dict[str, frozenset[str]] = {}
        # how many entries of `held` are frozensets (none: `singletons` is empty)
        self._made = 0

    def declare(self, name: str, durable: bool, auto_delete: bool,
                arguments: dict[str, Any]) -> None:
        """Add a queue not declared yet (``arguments``: shared, `NO_ARGUMENTS` if empty)."""
        if name.__class__ is not str:
            name = str.__str__(name)  # a plain str: what a binding's target is told by
        if durable is True and auto_delete is False and arguments is NO_ARGUMENTS:
            self.held[name] = name
        else:
            self.held[name] = Queue(name, durable, auto_delete, arguments)

    def remove(self, name: str) -> None:
        """Forget a declared queue."""
        if self.held.pop(name).__class__ is frozenset:
            self._made -= 1
        self._ones.pop(name, None)

    def target(self, name: str) -> str:
        """The name string the bindings to the declared queue ``name`` share (their
        `Binding.target`); KeyError if it is not declared."""
        held = self.held[name]
        if held.__class__ is frozenset:
            (held,) = held
            return held  # type: ignore[no-any-return]
        return held.name if held.__class__ is Queue else held  # type: ignore[no-any-return]

    def singleton(self, name: str) -> frozenset[str]:
        """The frozenset of the queue ``name`` alone, shared by every answer of that queue
        alone: made once, and kept in the queue's entry (of a queue not declared, made
        anew)."""
        held = self.held.get(name)
        if held.__class__ is frozenset:
            return held  # type: ignore[no-any-return]
        if held.__class__ is str:
            found = self.held[name] = frozenset((held,))  # the name the bindings share
            self._made += 1
            return found
        if held is None:
            return frozenset((name,))
        found = self._ones.get(name)
        if found is None:
            found = self._ones[name] = frozenset((held.name,))
        return found

    def singletons(self) -> Mapping[str, Any]:
        """Queue name -> the frozenset of it alone, for a caller that numbers answers by
        identity (`Topology.one_queue_answers`): the table itself, no copy (filtering out the
        queues without one took 5 ms at 37k queues, a quarter of making a `BatchRouter`), so
        a value may be a queue's name or `Queue` instead, which is no answer: numbered, never
        met. Empty if no queue has one. To read only, valid until the next change."""
        if not self._made and not self._ones:
            return {}
        if not self._ones:
            return self.held
        return {**self.held, **self._ones}

    def __getitem__(self, name: str) -> Queue:
        held = self.held[name]
        if held.__class__ is Queue:
            return held  # type: ignore[no-any-return]
        return Queue(name, True, False, NO_ARGUMENTS)

    def __contains__(self, name: object) -> bool:
        return name in self.held

    def __iter__(self) -> Iterator[str]:
        return iter(self.held)

    def __len__(self) -> int:
        return len(self.held)

    def __repr__(self) -> str:
        return f"QueueTable({len(self.held)} queues)"
