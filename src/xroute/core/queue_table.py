"""A topology's declared queues by name, and the shared `Destination` each binding to one holds.

Most queues are declared with the default properties (durable, not auto-delete, no
arguments), and a topology of a queue per device or user holds many. Such a queue is kept
as its `Destination` alone, which its bindings share anyway; the `Queue` a reader asks for is
made when read. A queue with other properties is kept as its `Queue`, its `Destination` beside
it once a binding needs one. That is a `Queue` object and a dict entry less a queue (about
110 bytes) where each binding has a queue of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from xroute.core.model import NO_ARGUMENTS, Destination, Queue

_new_tuple = tuple.__new__


class QueueTable(Mapping[str, Queue]):
    """Declared queues by name: a read-only mapping of name to `Queue` for readers; `declare`
    and `remove` for the topology."""

    __slots__ = ("held", "_destinations")

    def __init__(self) -> None:
        #: name -> the queue's `Destination` (default properties) or its `Queue`: what a hot
        #: path tests membership in without a Python call
        self.held: dict[str, Destination | Queue] = {}
        # name -> the `Destination` of a queue kept as its `Queue`, once a binding needs it
        self._destinations: dict[str, Destination] = {}

    def declare(self, name: str, durable: bool, auto_delete: bool,
                arguments: dict[str, Any]) -> None:
        """Add a queue not declared yet (``arguments``: shared, `NO_ARGUMENTS` if empty)."""
        if durable is True and auto_delete is False and arguments is NO_ARGUMENTS:
            # what ``Destination("queue", name)`` does, without its Python ``__new__`` (half
            # the time: a queue per binding declares as many as it binds)
            self.held[name] = _new_tuple(Destination, ("queue", name))
        else:
            self.held[name] = Queue(name, durable, auto_delete, arguments)

    def remove(self, name: str) -> None:
        """Forget a declared queue."""
        del self.held[name]
        self._destinations.pop(name, None)

    def destination(self, name: str) -> Destination:
        """The one `Destination` every binding to the declared queue ``name`` shares."""
        held = self.held[name]
        if held.__class__ is Destination:
            return held  # type: ignore[return-value]
        found = self._destinations.get(name)
        if found is None:
            found = self._destinations[name] = Destination("queue", name)
        return found

    def __getitem__(self, name: str) -> Queue:
        held = self.held[name]
        if held.__class__ is Queue:
            return held  # type: ignore[return-value]
        return Queue(name, True, False, NO_ARGUMENTS)

    def __contains__(self, name: object) -> bool:
        return name in self.held

    def __iter__(self) -> Iterator[str]:
        return iter(self.held)

    def __len__(self) -> int:
        return len(self.held)

    def __repr__(self) -> str:
        return f"QueueTable({len(self.held)} queues)"
