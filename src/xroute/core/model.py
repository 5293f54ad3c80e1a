"""The nouns of a topology: destinations, bindings, exchanges and queues."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass, field
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


_new_tuple = tuple.__new__


class Binding:
    """One binding: source exchange, destination, binding key and arguments.

    A `Topology` keeps one object per distinct binding, so identity is equality and the
    matchers can hold bindings themselves as their destinations.

    Frozen, with slots. A binding to a queue keeps the queue's name, not a `Destination`:
    where each binding has its queue (a device's or a user's), the queue's `Destination` was
    64 bytes a binding and one more object the collector tracked (a tuple subclass is never
    untracked). ``destination`` makes an equal `Destination` when read; the hot paths read
    `target` (the queue's name, or an exchange's `Destination`).
    """

    __slots__ = ("source", "target", "routing_key", "arguments")

    source: str
    #: the queue's name (a str) for a binding to a queue, else its `Destination` (an
    #: exchange's, or a queue's whose name is not a plain str): read ``kind, name`` from a
    #: `Destination`, never assume an exchange
    target: str | Destination
    routing_key: str
    arguments: dict[str, Any]

    def __init__(self, source: str, destination: Destination, routing_key: str,
                 arguments: dict[str, Any]) -> None:
        kind, name = destination
        _set_source(self, source)
        _set_target(self, name if kind == "queue" and name.__class__ is str
                    else destination if destination.__class__ is Destination
                    else Destination(kind, name))
        _set_key(self, routing_key)
        _set_arguments(self, arguments)

    @property
    def destination(self) -> Destination:
        """Where the binding leads (an equal `Destination` each read, for a queue)."""
        target = self.target
        if target.__class__ is str:
            return _new_tuple(Destination, ("queue", target))  # type: ignore[return-value]
        return target  # type: ignore[return-value]

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> Any:
        return (Binding, (self.source, self.destination, self.routing_key, self.arguments))

    def __repr__(self) -> str:
        args = f", arguments={self.arguments!r}" if self.arguments else ""
        return (
            f"Binding({self.source!r} -> {self.destination.kind} {self.destination.name!r}, "
            f"key={self.routing_key!r}{args})"
        )


@dataclass(frozen=True, eq=False)
class _BindingFields:
    # `Binding`'s fields as a dataclass states them, for `dataclasses.fields`, `replace` and
    # `asdict` on a binding as before it kept a name in place of a `Destination`
    source: str
    destination: Destination
    routing_key: str
    arguments: dict[str, Any]


for _name in ("__dataclass_fields__", "__dataclass_params__", "__match_args__"):
    setattr(Binding, _name, getattr(_BindingFields, _name))
del _name

_set_source, _set_target, _set_key, _set_arguments = (
    getattr(Binding, name).__set__ for name in Binding.__slots__)
_new_binding = object.__new__


# hot: every `Topology.bind` makes one (bind rate, issue 36): the slots set through their own
# descriptors (a Python ``__init__`` and the `Destination` unpacked are a call and more)
def binding_to(source: str, target: str | Destination, routing_key: str,
               arguments: dict[str, Any]) -> Binding:
    """A `Binding` of ``target``: a queue's name (a str), or an exchange's `Destination`."""
    binding = _new_binding(Binding)
    _set_source(binding, source)
    _set_target(binding, target)
    _set_key(binding, routing_key)
    _set_arguments(binding, arguments)
    return binding


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
