"""The nouns of a topology: destinations, bindings, exchanges and queues."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal, NamedTuple

DestinationType = Literal["queue", "exchange"]

DEFAULT_EXCHANGE = ""  # the default (nameless) exchange every virtual host has
ALTERNATE_EXCHANGE = "alternate-exchange"  # the argument (and policy key) naming an alternate


class Destination(NamedTuple):
    """Where a binding leads: a queue or an exchange (they may share a name)."""

    kind: DestinationType
    name: str


class NoArguments(dict):  # type: ignore[type-arg]
    """The empty arguments table, one object shared by every binding and queue declared
    without arguments: a fresh empty dict was 64 bytes a binding (a binding's table is
    never changed after it is made). A dict, equal to ``{}``; changing it raises TypeError."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("the shared empty arguments table cannot be changed; copy it first")

    __setitem__ = __delitem__ = __ior__ = _refuse  # type: ignore[assignment]
    update = pop = popitem = clear = setdefault = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> Any:
        return (dict, ())  # a copy or a pickle is an ordinary, changeable empty dict

    def __copy__(self) -> dict[str, Any]:
        return {}

    def __deepcopy__(self, memo: Any) -> dict[str, Any]:
        return {}


NO_ARGUMENTS: dict[str, Any] = NoArguments()


def shared_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` itself, or `NO_ARGUMENTS` in place of an empty table."""
    return arguments if arguments else NO_ARGUMENTS


@dataclass(frozen=True, eq=False, slots=True)
class Binding:
    """One binding: source exchange, destination, binding key and arguments.

    A `Topology` keeps one object per distinct binding, so identity is equality and the
    matchers can hold bindings themselves as their destinations.
    """

    source: str
    destination: Destination
    routing_key: str
    arguments: dict[str, Any]

    def __repr__(self) -> str:
        args = f", arguments={self.arguments!r}" if self.arguments else ""
        return (
            f"Binding({self.source!r} -> {self.destination.kind} {self.destination.name!r}, "
            f"key={self.routing_key!r}{args})"
        )


def _init_through_slots(cls: type) -> None:
    """Give `Binding` (a frozen slots dataclass) an ``__init__`` that sets its fields through
    the slots' own descriptors. The generated one calls ``object.__setattr__`` once a field
    (600 ns a binding, a tenth of a bulk bind); this takes 370. Same parameters, same frozen
    instance after (setting a field still raises `FrozenInstanceError`)."""
    names = [each.name for each in fields(cls)]
    if names != ["source", "destination", "routing_key", "arguments"]:
        raise TypeError(f"{cls.__name__}: fields {names}")  # the ones this __init__ names
    set_source, set_destination, set_key, set_arguments = (
        getattr(cls, name).__set__ for name in names)

    def __init__(self: Any, source: str, destination: Destination, routing_key: str,
                 arguments: dict[str, Any]) -> None:
        set_source(self, source)
        set_destination(self, destination)
        set_key(self, routing_key)
        set_arguments(self, arguments)

    cls.__init__ = __init__  # type: ignore[misc]


# hot: every `Topology.bind` makes one (bind rate, issue 36)
_init_through_slots(Binding)


@dataclass(slots=True)
class Queue:
    """A declared queue; its properties are kept for the definitions round trip (slots: a
    topology of a queue per device holds many)."""

    name: str
    durable: bool = True
    auto_delete: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class Exchange:
    """A declared exchange and the index of its bindings (``kind``, one of `xroute.exchanges`)."""

    name: str
    type: str
    kind: Any
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)
    alternate_exchange: str | None = None


class MessageHeaders(dict):
    """A message's header table that also carries its basic properties (``message_id``,
    ``correlation_id``, ``timestamp``...), for the exchange types that read them.

    A dict, so the standard types read it as the plain table they always get; `Topology`
    makes one only when a message has properties or candidates are asked for.
    """

    __slots__ = ("candidates", "properties")

    def __init__(
        self, table: dict[str, Any], properties: Any = None, candidates: bool = False
    ) -> None:
        super().__init__(table)
        self.properties: dict[str, Any] = dict(properties or {})
        # True: random exchanges return every binding they could pick, not one.
        self.candidates = candidates


def properties_of(headers: Any) -> dict[str, Any]:
    """The basic properties a header table carries (none for a plain dict)."""
    return headers.properties if type(headers) is MessageHeaders else {}
