"""A topology's declared queues by name.

Most queues are declared with the default properties (durable, not auto-delete, no
arguments), and a topology of a queue per device or user holds many. Such a queue is kept as
its name alone (the table's key, also its value): its bindings keep that one string
(`Binding.target`), whatever string a caller named the queue with, and the `Queue` a reader
asks for is made when read. A queue with other properties is kept as its `Queue`, whose name
its bindings keep. No object a queue where each binding has a queue of its own (a `Queue`,
then a shared `Destination`, were 110 and 64 bytes a queue).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from xroute.core.model import NO_ARGUMENTS, Queue


class QueueTable(Mapping[str, Queue]):
    """Declared queues by name: a read-only mapping of name to `Queue` for readers; `declare`
    and `remove` for the topology."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        #: name -> the name itself (default properties) or the queue's `Queue`: what a hot
        #: path tests membership in, and finds the name its bindings share, without a call
        self.held: dict[str, Any] = {}

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
        del self.held[name]

    def target(self, name: str) -> str:
        """The name string the bindings to the declared queue ``name`` share (their
        `Binding.target`); KeyError if it is not declared."""
        held = self.held[name]
        return held.name if held.__class__ is Queue else held  # type: ignore[no-any-return]

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
