"""A topology: exchanges, queues and bindings, and `Topology.route`, which follows a message
through them exactly as RabbitMQ does (CC/BCC keys, exchange-to-exchange bindings, alternate
exchanges, the default exchange)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xroute.core.binding_table import BindingTable
from xroute.core.dead_letter import X_DEATH, DeadLetter, cycling, make_dead_letter
from xroute.core.destinations import MatchedDestinations
from xroute.core.errors import (
    AccessRefused,
    BindingNotFound,
    DefinitionsError,
    InequivalentArgument,
    InvalidArguments,
    InvalidArgumentType,
    ReplayFailed,
    SelectorError,
    UnknownExchange,
    UnknownQueue,
    XRouteError,
    short_repr,
)
from xroute.core.headers import check_headers, frozen_arguments, sender_selected_keys
from xroute.core.keys import ALWAYS_SHORT, check_pattern, check_routing_key
from xroute.core.literal_routes import EMPTY_NAMES
from xroute.core.model import (
    ALTERNATE_EXCHANGE,
    DEFAULT_EXCHANGE,
    NO_ARGUMENTS,
    Binding,
    Destination,
    DestinationType,
    Exchange,
    MessageHeaders,
    Queue,
    binding_to,
    shared_arguments,
)
from xroute.core.profiles import Profile, profile
from xroute.core.queue_table import QueueTable
from xroute.core.route_cache import SHARED_NAMES, TopologyRouteCache
from xroute.engines import DEFAULT_ENGINE
from xroute.engines.frozen_sets import STALE
from xroute.exchanges import (
    STANDARD_TYPES,
    ExchangeSettings,
    RandomChoice,
    UnsupportedExchange,
    make_exchange_type,
)
from xroute.exchanges.recent_history import RecordedMessage, Replay

if TYPE_CHECKING:
    from xroute.sources.definitions import ExportRecords

# The names of direct reply-to queues (rabbit_volatile_queue's prefix).
REPLY_TO_PREFIX = "amq.rabbitmq.reply-to."
# The exchanges every RabbitMQ virtual host has from the start.
STANDARD_EXCHANGES = {
    "amq.direct": "direct",
    "amq.fanout": "fanout",
    "amq.topic": "topic",
    "amq.headers": "headers",
    "amq.match": "headers",
}

# The basic properties of an AMQP 0-9-1 message (what `route` may be given as ``properties``).
BASIC_PROPERTIES = (
    "content_type", "content_encoding", "delivery_mode", "priority", "correlation_id",
    "reply_to", "expiration", "message_id", "timestamp", "type", "user_id", "app_id",
    "cluster_id",
)

# Called once per exchange a message visits: (exchange, bindings it matched, how it got there:
# "published", "binding" or "alternate").
RouteObserver = Callable[[Exchange, list[Binding], str], None]


def _arguments(arguments: Any, what: str) -> dict[str, Any]:
    # A table of arguments, or None for none; anything else is refused by name.
    if arguments is None:
        return {}
    if not isinstance(arguments, Mapping):
        raise InvalidArguments(
            f"{what} arguments must be a dict, got {type(arguments).__name__} "
            f"({short_repr(arguments)})",
            arguments,
        )
    return dict(arguments)


def _check_equivalent(
    existing: Exchange,
    exchange_type: str,
    durable: bool,
    auto_delete: bool,
    internal: bool,
    arguments: Mapping[str, Any],
) -> None:
    # What RabbitMQ's assert_equivalence compares on a redeclare: the type, the three flags and
    # the alternate-exchange argument. Other arguments may differ; the first declare stands.
    wanted = {
        "type": (existing.type, exchange_type),
        "durable": (existing.durable, durable),
        "auto_delete": (existing.auto_delete, auto_delete),
        "internal": (existing.internal, internal),
        ALTERNATE_EXCHANGE: (
            existing.arguments.get(ALTERNATE_EXCHANGE),
            arguments.get(ALTERNATE_EXCHANGE),
        ),
    }
    for what, (current, requested) in wanted.items():
        if _raw(current) != _raw(requested):
            raise InequivalentArgument(existing.name, what, requested, current)


def _raw(value: Any) -> Any:
    # rabbit_misc:assert_args_equivalence compares the values without their AMQP types when
    # both are present: the longstr and the binary "a1" are equivalent. A boolean is an atom.
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return value


def check_properties(properties: Any) -> dict[str, Any]:
    """A message's basic properties as a dict, refused by name when they are not a mapping of
    AMQP basic property names (None values are absent properties)."""
    if properties is None:
        return {}
    if not isinstance(properties, Mapping):
        raise InvalidArguments(
            f"message properties must be a dict, got {type(properties).__name__} "
            f"({short_repr(properties)})",
            properties,
        )
    unknown = [name for name in properties if name not in BASIC_PROPERTIES]
    if unknown:
        raise InvalidArguments(
            f"unknown message properties {short_repr(unknown)}; AMQP basic properties are "
            f"{', '.join(BASIC_PROPERTIES)}",
            properties,
        )
    checked = {name: value for name, value in properties.items() if value is not None}
    stamp = checked.get("timestamp")
    if stamp is not None and not isinstance(stamp, datetime):
        if isinstance(stamp, str) and stamp.isdigit():
            stamp = checked["timestamp"] = int(stamp)
        if not isinstance(stamp, int) or isinstance(stamp, bool) or not 0 <= stamp < 2**64:
            raise InvalidArguments(
                f"the timestamp property is seconds since 1970 (an integer) or a datetime, got "
                f"{short_repr(stamp)}",
                properties,
            )
    return checked


def _check_name(name: Any, what: str) -> str:
    try:
        return check_pattern(name)
    except Exception as error:
        raise InvalidArguments(f"invalid {what} name {name!r}: {error}", name) from None


class Topology:
    """Exchanges, queues and bindings of one virtual host, and the routing of messages through them.

    Every declare, bind and unbind validates all of its input before it changes anything, so a
    failed call leaves the topology as it was.
    """

    def __init__(
        self,
        engine: str = DEFAULT_ENGINE,
        route_cache: bool = True,
        *,
        rabbitmq: str | Profile | None = None,
    ) -> None:
        self.engine = engine
        # What differs between RabbitMQ versions (xroute.core.profiles); None: 4.3, any '#' count.
        self.profile = profile(rabbitmq)
        # How x-random and x-local-random pick: from the message unless seeded
        # (`seed_random`); `route_candidates` gives every possible pick.
        self.random = RandomChoice()
        # Routes of messages without headers, dropped precisely on change (xroute.core.route_cache).
        self._route_cache = TopologyRouteCache() if route_cache else None
        self._destinations = MatchedDestinations()  # dropped on every unbind
        self._exchanges: dict[str, Exchange] = {}
        self._queues = QueueTable()  # also each queue's name, shared by its bindings
        self._bindings = BindingTable()
        # One `Destination` per bound exchange (a queue's is in `_queues`), shared by all its
        # bindings: a first route reads a matched binding's destination, then looks its names
        # up by it (EMQX's 80k filters lead to 80 queues: 80 objects, not 80k scattered ones).
        self._targets: dict[Destination, Destination] = {}
        # Policies of a definitions export, kept verbatim for the round trip.
        self.policies: list[dict[str, Any]] = []
        # Exchanges of the plugin types, and of x-recent-history: an edge asks on every message
        # whether routes need its properties or keep it, without looking at every exchange.
        self._plugin_exchanges = 0
        self._history_exchanges = 0
        # Whoever keeps state derived from the routes (a `BatchRouter`), told of each change
        # (`watch`); weak references, so a dropped router is forgotten. A tuple of them, not
        # a `WeakSet`: a binding change reads the watchers twice, and copying a `WeakSet` to
        # iterate it (its iteration guard, a generator) cost 2-3 µs each time, a tenth of
        # a bind between routes (issue 36, goal 5).
        self._watchers: tuple[weakref.ref[Any], ...] = ()
        # Whether any watcher was ever added (asked on every declare and bind).
        self._watched = False
        self._exchanges[DEFAULT_EXCHANGE] = Exchange(DEFAULT_EXCHANGE, "direct", None)
        for name, type_name in STANDARD_EXCHANGES.items():
            self.declare_exchange(name, type_name)

    def watch(self, watcher: Any) -> None:
        """Tell ``watcher`` (held weakly) of every change to the routes: its
        ``topology_changing(what, name)`` before the change (``what`` is "binding" with the
        source exchange's name, "exchange" or "queue"), and its ``binding_changed(binding,
        added)`` after a binding is made or removed."""
        if all(ref() is not watcher for ref in self._watchers):
            self._watchers = (*self._watchers, weakref.ref(watcher))
        self._watched = True

    def _watching(self) -> list[Any]:
        """The watchers still alive, held for the change at hand (the references of those
        gone are forgotten)."""
        refs = self._watchers
        alive = []
        for ref in refs:
            watcher = ref()
            if watcher is not None:
                alive.append(watcher)
        if len(alive) != len(refs):
            self._watchers = tuple(ref for ref in refs if ref() is not None)
        return alive

    def _changing(self, what: str, name: str) -> None:
        for watcher in self._watching():
            watcher.topology_changing(what, name)

    # ----------------------------------------------------------------- declaring

    def declare_exchange(
        self,
        name: str,
        exchange_type: str,
        alternate_exchange: str | None = None,
        *,
        durable: bool = True,
        auto_delete: bool = False,
        internal: bool = False,
        arguments: Mapping[str, Any] | None = None,
        allow_unknown_type: bool = False,
    ) -> None:
        """Declare an exchange of one of the types in `xroute.exchanges.EXCHANGE_TYPES`.

        An unknown type raises `UnknownExchangeType`, as RabbitMQ refuses it, unless
        ``allow_unknown_type`` (definitions exports do): the exchange is then kept, and a
        message that reaches it raises `UnsupportedExchangeType`.
        Redeclaring with the same type and arguments changes nothing; with others it raises
        `PreconditionFailed`, as RabbitMQ does.
        """
        _check_name(name, "exchange")
        if name == DEFAULT_EXCHANGE:
            raise AccessRefused("the default exchange '' cannot be declared")
        arguments = _arguments(arguments, f"exchange {name!r}")
        if alternate_exchange is not None:
            arguments[ALTERNATE_EXCHANGE] = alternate_exchange
        frozen_arguments(arguments)  # validates the value types
        existing = self._exchanges.get(name)
        if existing is not None:
            # As RabbitMQ's channel: the type must be known, then the redeclare equivalent;
            # the arguments of an existing exchange are not validated again.
            make_exchange_type(
                exchange_type, ExchangeSettings(name, self.engine, {}, self.profile, self.random),
                allow_unknown=allow_unknown_type,
            )
            _check_equivalent(existing, exchange_type, durable, auto_delete, internal, arguments)
            return
        alternate = arguments.get(ALTERNATE_EXCHANGE)
        if alternate is not None and not isinstance(alternate, str):
            raise InvalidArgumentType(name, ALTERNATE_EXCHANGE, alternate)
        kind = make_exchange_type(
            exchange_type,
            ExchangeSettings(name, self.engine, arguments, self.profile, self.random),
            allow_unknown=allow_unknown_type,
        )
        if name.startswith("amq.") and name not in STANDARD_EXCHANGES:
            raise AccessRefused(f"exchange name {name!r} is reserved: names beginning 'amq.'")
        literal = getattr(kind, "literal_routes", None)
        if literal is not None:  # a queue's answer alone kept in its entry (`QueueTable`)
            literal.share_singletons_with(self._queues.held, self._queues.singleton)
        if alternate == DEFAULT_EXCHANGE:
            alternate = None  # as RabbitMQ: the default exchange is never an alternate
        if self._watchers:
            self._changing("exchange", name)
        self._exchanges[name] = Exchange(
            name, exchange_type, kind, durable, auto_delete, internal, arguments, alternate
        )
        self._count_type(exchange_type, 1)
        if self._route_cache is not None:
            self._route_cache.exchange_changed(name)

    def _count_type(self, exchange_type: str, change: int) -> None:
        if exchange_type not in STANDARD_TYPES:
            self._plugin_exchanges += change
        if exchange_type == "x-recent-history":
            self._history_exchanges += change

    def declare_queue(
        self,
        name: str,
        *,
        durable: bool = True,
        auto_delete: bool = False,
        arguments: Mapping[str, Any] | None = None,
    ) -> None:
        """Declare a queue; redeclaring one changes nothing."""
        # hot: a queue per binding (bind rate of the unicast, NATS and literal shapes): a
        # short ASCII name (`_check_name`'s test, passed, inline) without arguments, declared
        # already (nothing changes) or new, of default properties, without the calls below
        queues = self._queues
        if (
            name.__class__ is str and name and len(name) <= ALWAYS_SHORT and name.isascii()
            and arguments is None
        ):
            if name in queues.held:
                return
            if durable is True and auto_delete is False and not self._watched:
                queues.declare(name, True, False, NO_ARGUMENTS)
                cache = self._route_cache
                if cache is not None and (cache.own or cache.entries):  # else nothing to drop
                    cache.queue_changed(name, DEFAULT_EXCHANGE)
            else:
                self._declare_queue(name, durable, auto_delete, NO_ARGUMENTS)
            return
        _check_name(name, "queue")
        if not name:
            raise InvalidArguments("a queue needs a name (server-named queues are not modelled)")
        if arguments is None:
            arguments = NO_ARGUMENTS
        else:
            arguments = _arguments(arguments, f"queue {name!r}")
            frozen_arguments(arguments)
        self._declare_queue(name, durable, auto_delete, arguments)

    def _declare_queue(self, name: str, durable: bool, auto_delete: bool,
                       arguments: dict[str, Any]) -> None:
        # `declare_queue` once every part is checked
        if name not in self._queues.held:
            if self._watched and self._watchers:
                self._changing("queue", name)
            self._queues.declare(name, durable, auto_delete, shared_arguments(arguments))
            cache = self._route_cache
            if cache is not None and (cache.own or cache.entries):  # else nothing to drop
                cache.queue_changed(name, DEFAULT_EXCHANGE)

    def delete_exchange(self, name: str) -> None:
        """Delete an exchange and every binding from or to it."""
        self._exchange(name, "delete_exchange")
        if name == DEFAULT_EXCHANGE or name in STANDARD_EXCHANGES:
            raise AccessRefused(f"exchange {name!r} is built in and cannot be deleted")
        if self._watchers:
            self._changing("exchange", name)
        for binding in list(self._bindings.values()):
            if binding.source == name or binding.target == ("exchange", name):
                self._remove(binding)
        self._count_type(self._exchanges.pop(name).type, -1)
        self._targets.pop(Destination("exchange", name), None)
        if self._route_cache is not None:
            self._route_cache.exchange_changed(name)

    def delete_queue(self, name: str) -> None:
        """Delete a queue and every binding to it."""
        if name not in self._queues:
            raise UnknownQueue(name, "delete_queue")
        if self._watchers:
            self._changing("queue", name)
        for binding in list(self._bindings.values()):
            target = binding.target  # a queue's name, or a `Destination` (`Binding.target`)
            if (target == name) if target.__class__ is str else (target == ("queue", name)):
                self._remove(binding)
        self._queues.remove(name)
        if self._route_cache is not None:
            self._route_cache.queue_changed(name, DEFAULT_EXCHANGE)

    # ----------------------------------------------------------------- binding

    def _binding_identity(
        self,
        source: str,
        destination: str,
        routing_key: str,
        arguments: Mapping[str, Any] | None,
        destination_type: DestinationType,
    ) -> tuple[Exchange, str | Destination, dict[str, Any], tuple]:
        """The source exchange, the shared target, the arguments as a dict (`NO_ARGUMENTS`
        if none) and frozen (the binding's identity with the source and key), once every
        part is checked."""
        # hot: every bind (`xroute bench engines --shapes`, bind rate): the usual case (a
        # plain str, no arguments) is told apart inline, without a call.
        if destination.__class__ is not str or destination.startswith(REPLY_TO_PREFIX):
            self.check_bindable(destination, destination_type)
        exchange = self._exchange(source, "binding source")
        if source == DEFAULT_EXCHANGE:
            raise AccessRefused("bindings to or from the default exchange '' are not allowed")
        if destination_type == "queue":
            # the queue's shared name or its answer alone if of default properties (else its
            # `Queue`), or None
            target = self._queues.held.get(destination) if isinstance(destination, str) else None
            if target is None:
                raise UnknownQueue(destination, f"binding destination from {short_repr(source)}")
        elif destination_type == "exchange":
            self._exchange(destination, f"binding destination from {short_repr(source)}")
            if destination == DEFAULT_EXCHANGE:
                raise AccessRefused("bindings to or from the default exchange '' are not allowed")
        else:
            raise InvalidArguments(
                "destination_type must be 'queue' or 'exchange', got "
                f"{short_repr(destination_type)}"
            )
        check_pattern(routing_key)
        if arguments is None:
            arguments, frozen = NO_ARGUMENTS, ()  # shared: no table made a bind
        else:
            arguments = shared_arguments(_arguments(arguments, "binding"))
            frozen = frozen_arguments(arguments) if arguments else ()
        # A binding's target (`Binding.target`): a queue's name as the queue table keeps it;
        # an exchange's `Destination` (a tuple: the shared one is found by a plain tuple, and
        # made only for a new target).
        if destination_type == "queue":
            if target.__class__ is not str:
                target = self._queues.target(destination)
        else:
            target = self._targets.get((destination_type, destination))
            if target is None:
                target = Destination(destination_type, destination)
                target = self._targets.setdefault(target, target)
        return exchange, target, arguments, frozen

    def check_bindable(self, destination: Any, destination_type: str = "queue") -> None:
        """`AccessRefused` (403) for a binding to or from a direct reply-to queue
        (``amq.rabbitmq.reply-to.*``), which RabbitMQ refuses from 4.3.0 before it looks
        anything up (``rabbit_channel:reject_volatile_queue_as_binding_target``)."""
        if (
            self.profile.refuses_reply_to_bindings
            and destination_type == "queue"
            and isinstance(destination, str)
            and destination.startswith(REPLY_TO_PREFIX)
        ):
            raise AccessRefused(
                f"queue {destination!r} is a direct reply-to queue: RabbitMQ 4.3 and later "
                "refuse bindings to it"
            ).replying(403, "cannot bind or unbind to a volatile (direct reply-to) queue")

    def bind(
        self,
        source: str,
        destination: str,
        routing_key: str = "",
        arguments: Mapping[str, Any] | None = None,
        destination_type: DestinationType = "queue",
    ) -> list[Replay]:
        """Bind ``destination`` (a queue, or an exchange) to exchange ``source``.

        Binding the same (source, destination, key, arguments) again is one binding.
        Returns what the new binding receives at once: an ``x-recent-history`` exchange's kept
        messages, each with the queues it lands in (`Replay`; a queue gets them oldest first,
        an exchange routes them newest first); other types none. When a kept message routes
        to no queue through the bound exchange, `ReplayFailed` is raised and nothing is bound,
        as the plugin refuses it (`xroute.exchanges.recent_history`).
        """
        # hot: a bulk bind (bind rate, `xroute bench engines --shapes`). The usual binding (no
        # arguments, a short ASCII key, to a declared queue of default properties, from a
        # declared exchange other than the default one: `_binding_identity`'s checks, each
        # passed, inline) goes without the calls that tell it apart, and a key no binding
        # holds yet (the table's own test, inline) without `find`; any other case takes the
        # full path, whose checks come in RabbitMQ's order.
        table = self._bindings
        exchange = self._exchanges.get(source) if source.__class__ is str else None
        target = (self._queues.held.get(destination)
                  if destination.__class__ is str and destination_type == "queue" else None)
        if target.__class__ is frozenset:
            (target,) = target  # a queue kept as its answer alone (`QueueTable`): its name
        if (
            exchange is not None and source and target.__class__ is str
            and arguments is None and routing_key.__class__ is str
            and len(routing_key) <= ALWAYS_SHORT and routing_key.isascii()
            and not destination.startswith(REPLY_TO_PREFIX)
        ):
            arguments, frozen = NO_ARGUMENTS, ()
            new_key = routing_key not in table.keyed and routing_key not in table.others
            if not new_key and table.find(source, target, routing_key, frozen) is not None:
                return []
        else:
            exchange, target, arguments, frozen = self._binding_identity(
                source, destination, routing_key, arguments, destination_type
            )
            if table.find(source, target, routing_key, frozen) is not None:
                return []
            new_key = False
        kind = exchange.kind
        try:
            kind.validate_binding(routing_key, arguments)
        except SelectorError as error:
            # How the plugin refuses it depends on the version (`Profile.selector_refusal`).
            code = self.profile.selector_refusal
            raise error.replying(code, f"invalid JMS selector: {error}" if code == 406 else "")
        kept = getattr(kind, "replay", None)
        if kept is not None:
            destination_of = (Destination("queue", target) if target.__class__ is str
                              else target)
            replays = self._replays(source, kept(destination_of), destination_of)
        else:
            replays = []
        binding = binding_to(source, target, routing_key, arguments)
        watchers = self._watching() if self._watchers else None
        if watchers:
            for watcher in watchers:
                watcher.topology_changing("binding", source)
        kind.bind(binding)
        if new_key:
            table.keyed[routing_key] = binding  # `BindingTable.add` of a key's first binding
        else:
            table.add(binding, frozen)
        if watchers:
            for watcher in watchers:
                watcher.binding_changed(binding, True)
        cache = self._route_cache
        # a bulk bind into a topology that has routed nothing: no call (nothing to drop)
        if cache is not None and (cache.own or cache.entries):
            cache.binding_changed(source, exchange.type, routing_key)
        return replays

    def _replays(
        self, source: str, messages: list[RecordedMessage], target: Destination
    ) -> list[Replay]:
        """Where each kept message of ``source`` lands when ``target`` is bound to it: the
        queue itself, or the queues it reaches through the exchange (routed, as the plugin
        does, from that exchange; the recent-history exchanges it passes keep it)."""
        if target.kind == "queue":
            queues = frozenset((target.name,))
            return [Replay(message, queues) for message in messages]
        start = self._exchanges[target.name]
        replays: list[Replay] = []
        visited: list[Exchange] = []

        def visit(exchange: Exchange, matched: list[Binding], via: str) -> None:
            visited.append(exchange)

        for message in messages:
            table = dict(message.headers)
            keys = [message.routing_key]
            keys += sender_selected_keys(table, "CC") + sender_selected_keys(table, "BCC")
            table.pop("BCC", None)
            visited.clear()
            headers = MessageHeaders(table, message.properties)
            reached = frozenset(self._walk(start, keys, headers, visit, None))
            if not reached:
                raise ReplayFailed(
                    f"binding exchange {target.name!r} to x-recent-history exchange "
                    f"{source!r}: a kept message (routing key {message.routing_key!r}) "
                    "reaches no queue through it; the plugin fails the binding (541)",
                    source,
                    replays,
                )
            self._keep(message, visited)
            replays.append(Replay(message, reached))
        return replays

    @staticmethod
    def _keep(message: RecordedMessage, visited: list[Exchange]) -> None:
        # Each recent-history exchange a message passes keeps it (the plugin's route/2).
        for passed in visited:
            record = getattr(passed.kind, "record", None)
            if record is not None:
                record(message)

    def unbind(
        self,
        source: str,
        destination: str,
        routing_key: str = "",
        arguments: Mapping[str, Any] | None = None,
        destination_type: DestinationType = "queue",
    ) -> None:
        """Remove a binding; `BindingNotFound` if there is no such binding."""
        # hot: a change between routes (issue 36, goal 5). The usual binding, told apart
        # inline as `bind` does (no arguments, a short ASCII key, a declared queue of default
        # properties, a declared exchange other than the default one: `_binding_identity`'s
        # checks, each passed); any other case takes the full path, checks in RabbitMQ's order.
        target = (self._queues.held.get(destination)
                  if destination.__class__ is str and destination_type == "queue" else None)
        if target.__class__ is frozenset:
            (target,) = target  # a queue kept as its answer alone (`QueueTable`): its name
        if (
            target.__class__ is str and source.__class__ is str and source
            and source in self._exchanges and arguments is None
            and routing_key.__class__ is str and len(routing_key) <= ALWAYS_SHORT
            and routing_key.isascii() and not destination.startswith(REPLY_TO_PREFIX)
        ):
            frozen: tuple = ()
        else:
            _, target, _, frozen = self._binding_identity(
                source, destination, routing_key, arguments, destination_type
            )
        binding = self._bindings.find(source, target, routing_key, frozen)
        if binding is None:
            raise BindingNotFound(
                routing_key, f"{destination_type} {short_repr(destination)} on {short_repr(source)}"
            )
        self._remove(binding)

    def _remove(self, binding: Binding) -> None:
        exchange = self._exchanges[binding.source]
        watchers = self._watching() if self._watchers else None
        if watchers:
            for watcher in watchers:
                watcher.topology_changing("binding", binding.source)
        exchange.kind.unbind(binding)
        self._destinations.clear()
        if self._route_cache is not None:
            self._route_cache.binding_changed(binding.source, exchange.type, binding.routing_key)
        self._bindings.remove(binding)
        if watchers:
            for watcher in watchers:
                watcher.binding_changed(binding, False)

    # ----------------------------------------------------------------- looking

    @property
    def exchanges(self) -> Mapping[str, Exchange]:
        """Declared exchanges by name (the default exchange ``""`` and ``amq.*`` included)."""
        return self._exchanges

    @property
    def reads_properties(self) -> bool:
        """Whether a route may read the message's basic properties (``message_id``,
        ``correlation_id``, ``timestamp``): true once an exchange of a plugin type exists
        (consistent hash on a property, random); the standard types read only keys and
        headers."""
        return self._plugin_exchanges > 0

    @property
    def keeps_history(self) -> bool:
        """Whether an ``x-recent-history`` exchange exists: messages must then be published
        with `publish` (which keeps them) rather than only routed."""
        return self._history_exchanges > 0

    @property
    def queues(self) -> Mapping[str, Queue]:
        """Declared queues by name (read-only; a `Queue` is made when read, as most are kept
        as their name alone: `xroute.core.queue_table`)."""
        return self._queues

    def bindings(self, source: str | None = None) -> list[Binding]:
        """Every binding, or those from exchange ``source``."""
        if source is None:  # a C copy (`BatchRouter` reads them all when it is made)
            return list(self._bindings.values())
        return [b for b in self._bindings.values() if b.source == source]

    def _exchange(self, name: Any, context: str) -> Exchange:
        try:
            return self._exchanges[name]
        except (KeyError, TypeError):
            raise UnknownExchange(name, context) from None

    # ----------------------------------------------------------------- routing

    def route(
        self,
        exchange: str,
        routing_key: str,
        headers: Mapping[str, Any] | None = None,
        *,
        properties: Mapping[str, Any] | None = None,
    ) -> frozenset[str]:
        """The names of the queues a message published to ``exchange`` reaches.

        ``headers`` is the message's header table as Python values; its ``CC`` and ``BCC``
        lists add routing keys. ``properties`` are its basic properties by name
        (``message_id``, ``correlation_id``, ``timestamp``...), read by the types that need
        them. An empty result means the message is unroutable.

        Routes of messages without headers or properties are cached (see `route_cache_stats`).
        """
        cache = self._route_cache
        if (
            cache is None
            or properties is not None
            or not (headers is None or (type(headers) is dict and not headers))
        ):
            return self.route_message(exchange, routing_key, headers, properties=properties)
        try:  # the cache's dicts read inline: one Python call less on every route
            own = cache.own.get(exchange)
            if own is not None:
                kept = own.get(routing_key)
                if kept is not None:
                    cache.hits += 1
                    return kept
            if cache.entries:  # routes through several exchanges
                found = cache.entries.get((exchange, routing_key))
                if found is not None:
                    cache.hits += 1
                    return found[0]
        except TypeError:  # unhashable: route_message names the bad value
            return self.route_message(exchange, routing_key, headers)
        cache.misses += 1
        found = self._route_literal(exchange, routing_key)
        if found is not None:
            return found
        through: list[str] = []  # every exchange the route visits or looks up as alternate
        found = self._route(exchange, routing_key, None, None, through)
        cache.put(exchange, routing_key, found, through)
        return found

    def route_uncached(self, exchange: str, routing_key: str) -> frozenset[str]:
        """`route` of a message without headers, read from the route cache if it is there but
        not kept in it when worked out: for a caller that keeps routes itself
        (`xroute.core.batch.BatchRouter`'s key memo), whose first pass over new keys would
        otherwise pay for two caches."""
        cache = self._route_cache
        if cache is None or type(routing_key) is not str:
            return self.route_message(exchange, routing_key)
        own = cache.own.get(exchange)
        if own is not None:
            kept = own.get(routing_key)
            if kept is not None:
                return kept
        found = self._route_literal(exchange, routing_key, keep=False)
        if found is None:
            found = self._route(exchange, routing_key, None, None, [])  # `route`'s walk
        return found

    # hot: the first route of a key (`xroute bench engines --shapes`, route first)
    def _route_literal(self, exchange: str, routing_key: str,
                       keep: bool = True) -> frozenset[str] | None:
        """The first route of a message without headers through a topic exchange whose
        engine keeps literal bindings apart (``auto``): `_literal_names`, cached. None where
        the full walk is needed: an exchange-to-exchange binding matched, an alternate
        exchange is to be used, a key that is not a plain short string (the walk validates
        it), another exchange type. ``keep=False``: the answer is not cached
        (`route_uncached`)."""
        start = self._exchanges.get(exchange)
        if start is None or start.internal:
            return None
        kind = start.kind
        literal = getattr(kind, "literal_routes", None)
        if literal is None:
            return None
        names = self._literal_names(kind, literal, routing_key)
        if names is None:
            return None
        alternate = start.alternate_exchange
        if alternate is None or alternate == exchange:
            # one exchange visited: no tuple made, nothing new for the collector to track
            if keep:
                cache: Any = self._route_cache
                size = len(names)
                # `TopologyRouteCache.keep`'s usual case, inline (its call was a tenth of a
                # first route on the MQTT shape): a set of few names (a broadcast's is not:
                # asked first), room under both bounds, no index of the routes by first
                # word to keep up
                if size <= SHARED_NAMES and not cache.heads:
                    own = cache.own.get(exchange)
                    if own is not None and len(own) < cache.max_size:
                        cells = cache.own_cells[exchange] + size
                        if cells <= cache.max_cells:
                            own[routing_key] = names
                            cache.own_cells[exchange] = cells
                            return names
                cache.keep(exchange, routing_key, names)
        elif not names:
            return None  # nothing matched: the alternate exchange's walk
        elif keep:
            self._route_cache.remember(  # type: ignore[union-attr]
                (exchange, routing_key), names, (exchange, alternate))
        return names

    def first_route_reader(
        self, exchange: str,
    ) -> tuple[Callable[[Any, Any, Any], frozenset[str] | None], Any, Any, bool] | None:
        """For a caller that routes many new keys through one exchange
        (`xroute.core.batch.BatchRouter`): `_literal_names` and its first two arguments, the
        reads of `_route_literal` that do not depend on the key made once, and whether an
        empty answer needs the walk (an alternate exchange). Each key's answer is then
        ``names(kind, literal, key)``, None (or empty, if so told) where `route_uncached`
        must answer. None if `_route_literal` would answer no key of ``exchange``. Valid
        until the topology changes."""
        start = self._exchanges.get(exchange)
        if start is None or start.internal or self._route_cache is None:
            return None
        kind = start.kind
        literal = getattr(kind, "literal_routes", None)
        if literal is None:
            return None
        alternate = start.alternate_exchange
        return (self._literal_names, kind, literal,
                alternate is not None and alternate != exchange)

    def one_queue_answers(self) -> list[Mapping[str, frozenset[str]]]:
        """Tables of queue name -> the frozenset of that name alone, for the one-queue
        answers that first routes share, as far as they are made yet: the queue table's (made
        for the literal routes, `xroute.core.queue_table`), any topic exchange's own (one not
        sharing the queue table's) and those of wildcard bindings matched
        alone (`xroute.core.destinations`). A table may name a queue no longer declared, and
        the queue table's may hold a value that is not a frozenset (a queue without one, not
        an answer: `QueueTable.singletons`). For
        a caller that numbers answers by content once, before it routes
        (`xroute.core.batch.BatchRouter`); a set made later is an answer like any other. To
        read only, and valid until the topology changes."""
        tables: list[Mapping[str, frozenset[str]]] = []
        singletons = self._queues.singletons()
        if singletons:
            tables.append(singletons)
        for exchange in self._exchanges.values():
            literal = getattr(exchange.kind, "literal_routes", None)
            if literal is not None and literal.singletons:
                tables.append(literal.singletons)
        alone = self._destinations.queue_alone
        if alone:
            # keyed by `Binding.target`: a queue's name, or its `Destination` (a name not a str)
            tables.append({target if target.__class__ is str else target.name: names
                           for target, names in alone.items()})
        return tables

    # hot: the first route of a key, single (`_route_literal`) and in batches
    # (`first_route_reader`): one code path for both
    def _literal_names(self, kind: Any, literal: Any,
                       routing_key: str) -> frozenset[str] | None:
        """The queues a message without headers reaches through a topic exchange of type
        ``kind`` whose literal bindings are ``literal`` (before any alternate exchange): the
        literal bindings' queue names by key (`xroute.core.literal_routes`) united with the
        wildcard bindings' (matched by queue where queues are bound with '#',
        `xroute.core.wildcard_queues`; else one set per DFA state,
        `xroute.core.destinations`). None where the full walk is needed: an
        exchange-to-exchange binding matched, a key that is not a plain short string."""
        if (
            type(routing_key) is not str
            or len(routing_key) > ALWAYS_SHORT
            or not routing_key.isascii()
        ):
            return None
        # `LiteralRoutes.names`, inlined where it is a plain read
        names = literal.frozen.get(routing_key, EMPTY_NAMES)
        if names is STALE or literal.exchange_keys:
            names = literal.names(routing_key)
            if names is None:
                return None
        by_queue = kind.wildcard_queues
        if by_queue is not None and not by_queue.exchange_bindings:
            # queues bound with '#' keep their other bindings out (`xroute.core.wildcard_queues`)
            queues = by_queue.match(routing_key)
        else:
            queues = EMPTY_NAMES
            wild = kind.match_wildcards(routing_key)
            if wild.__class__ is list:  # several bindings' answers (`ShapeIndex.match_bare`)
                queues = self._destinations.of_parts(wild)
                if queues is None:
                    return None
            elif wild.__class__ is not frozenset:
                # one binding matched, handed over bare (`TopicMatcher.wildcard_matcher`):
                # its queue's shared frozenset, by destination (`of_binding`, inlined)
                queues = self._destinations.queue_alone.get(wild.target)
                if queues is None:
                    queues, exchanges = self._destinations.of_binding(wild)
                    if exchanges:
                        return None
            elif wild:
                queues = self._destinations.queue_names.get(wild)  # `of`, its lookup inlined
                if queues is None:
                    queues, exchanges = self._destinations.of(wild)
                    if exchanges:
                        return None
        if not names:
            return queues
        if queues and queues is not names:
            # Where one holds the other (MQTT: a site's literal and '#' bindings to one
            # client queue) the larger is the answer: no new frozenset kept in the cache
            # for the collector to track.
            return (names if queues <= names else queues if names <= queues
                    else names | queues)
        return names

    def seed_random(self, seed: Any = None) -> None:
        """Make x-random and x-local-random exchanges pick with a `random.Random` seeded with
        ``seed``, as RabbitMQ picks at random (routes are then no longer cached). By default
        they pick deterministically from the message id (docs/semantics.md)."""
        self.random.seed(seed)
        self._route_cache = None

    def route_cache_stats(self) -> dict[str, Any]:
        """Hits, misses and size of the route cache (empty if the topology has none)."""
        return self._route_cache.stats() if self._route_cache is not None else {}

    def route_message(
        self,
        exchange: str,
        routing_key: str,
        headers: Mapping[str, Any] | None = None,
        observer: RouteObserver | None = None,
        *,
        properties: Mapping[str, Any] | None = None,
    ) -> frozenset[str]:
        """`route`, telling ``observer`` what each visited exchange matched (for explanations
        and per-binding counts); the queues are the same with or without one."""
        return self._route(exchange, routing_key, headers, observer, None, properties)

    def route_candidates(
        self,
        exchange: str,
        routing_key: str,
        headers: Mapping[str, Any] | None = None,
        *,
        properties: Mapping[str, Any] | None = None,
    ) -> frozenset[str]:
        """Every queue the message may reach: `route`, except that a random exchange
        (``x-random``, ``x-local-random``) leads to all the bindings it could pick from."""
        return self._route(exchange, routing_key, headers, None, None, properties, True)

    def publish(
        self,
        exchange: str,
        routing_key: str,
        headers: Mapping[str, Any] | None = None,
        *,
        properties: Mapping[str, Any] | None = None,
        payload: Any = None,
    ) -> frozenset[str]:
        """`route`, and the message is kept by every ``x-recent-history`` exchange it passes
        (`route` itself changes nothing); ``payload`` is handed back with its replays."""
        visited: list[Exchange] = []
        queues = self.route_message(
            exchange,
            routing_key,
            headers,
            lambda x, matched, via: visited.append(x),
            properties=properties,
        )
        message = RecordedMessage(
            routing_key, dict(headers or {}), dict(properties or {}), payload
        )
        self._keep(message, visited)
        return queues

    def dead_letter(
        self,
        queue: str,
        routing_key: str,
        headers: Mapping[str, Any] | None = None,
        reason: str = "rejected",
        *,
        properties: Mapping[str, Any] | None = None,
        exchange: str = "",
    ) -> frozenset[str]:
        """The queues a dead-lettered copy of a message reaches when ``queue`` rejects it,
        it expires there or the queue overflows (``reason``: rejected, expired, maxlen,
        delivery_limit). ``routing_key`` and ``headers`` are the message's as published (to
        ``exchange``); see `xroute.core.dead_letter` for the rules."""
        copy = self.dead_letter_copy(queue, routing_key, headers, reason, exchange=exchange)
        return self.route_dead_letter(copy, properties=properties)

    def dead_letter_copy(
        self,
        queue: str,
        routing_key: str,
        headers: Mapping[str, Any] | None = None,
        reason: str = "rejected",
        *,
        exchange: str = "",
        previous: DeadLetter | None = None,
        time: Any = None,
        expiration: Any = None,
    ) -> DeadLetter:
        """The copy ``queue`` makes when it dead-letters a message (`xroute.core.dead_letter`).
        For a copy that is dead-lettered again, pass it as ``previous`` (its keys, headers
        and dead-letter exchange stand for the message's). ``time`` and ``expiration`` (its
        expiration property) go into a new x-death entry, as the broker writes them."""
        if queue not in self._queues:
            raise UnknownQueue(queue, "dead_letter")
        if previous is not None:
            keys, table = list(previous.keys), dict(previous.headers)
            exchange = previous.exchange or ""
        else:
            check_routing_key(routing_key)
            table = check_headers(headers)
            keys = [routing_key]
            keys += sender_selected_keys(table, "CC") + sender_selected_keys(table, "BCC")
            table.pop("BCC", None)
        return make_dead_letter(
            queue,
            self._queues[queue].arguments,
            self.policies,
            keys,
            table,
            reason,
            exchange,
            last_death_headers=self.profile.name not in ("3.10", "3.12"),
            time=time,
            expiration=expiration,
        )

    def route_dead_letter(
        self,
        copy: DeadLetter,
        observer: RouteObserver | None = None,
        *,
        properties: Mapping[str, Any] | None = None,
    ) -> frozenset[str]:
        """The queues a dead-lettered copy reaches through its dead-letter exchange, less the
        queues that would close an automatic cycle."""
        if copy.exchange is None or copy.exchange not in self._exchanges:
            return frozenset()  # no dead-letter exchange, or a missing one: dropped
        start = self._exchanges[copy.exchange]
        headers: dict[str, Any] = MessageHeaders(
            copy.headers, check_properties(properties), False
        )
        reached = self._walk(start, list(copy.keys), headers, observer, None)
        deaths = copy.headers[X_DEATH]
        return frozenset(q for q in reached if not cycling(q, deaths, copy.reason))

    def check_publish(self, exchange: str) -> Exchange:
        """The exchange a message is published to, refused as RabbitMQ does: unknown
        (`UnknownExchange`), internal (`AccessRefused`), or of a type xroute does not support
        (`UnsupportedExchangeType`)."""
        start = self._exchange(exchange, "publish")
        if start.internal:
            raise AccessRefused(f"exchange {exchange!r} is internal: it cannot be published to")
        if type(start.kind) is UnsupportedExchange:
            start.kind.route((), {})  # raises, naming the type
        return start

    def _route(
        self,
        exchange: str,
        routing_key: str,
        headers: Mapping[str, Any] | None,
        observer: RouteObserver | None,
        through: list[str] | None,
        properties: Mapping[str, Any] | None = None,
        candidates: bool = False,
    ) -> frozenset[str]:
        start = self._exchange(exchange, "publish")
        if start.internal:
            raise AccessRefused(f"exchange {exchange!r} is internal: it cannot be published to")
        check_routing_key(routing_key)
        keys = [routing_key]
        headers = check_headers(headers)
        if "CC" in headers or "BCC" in headers:
            # CC/BCC keys are longstr: any length, and bytes (RabbitMQ's header_routes).
            keys += sender_selected_keys(headers, "CC") + sender_selected_keys(headers, "BCC")
            # RabbitMQ strips BCC when the message is made, before any exchange sees it.
            headers.pop("BCC", None)
        if properties is not None or candidates:
            headers = MessageHeaders(headers, check_properties(properties), candidates)
        return frozenset(self._walk(start, keys, headers, observer, through))

    def _walk(
        self,
        start: Exchange,
        keys: list[str],
        headers: dict[str, Any],
        observer: RouteObserver | None,
        through: list[str] | None,
    ) -> set[str] | frozenset[str]:
        """The queues reached from ``start``; ``through`` (if given) gets the name of every
        exchange visited or looked up as an alternate."""
        first = None if start.name == DEFAULT_EXCHANGE else start.kind.route(keys, headers)
        if observer is None and type(first) is frozenset and start.kind.shares_results:
            # The usual route: one exchange whose matcher hands out the sets it keeps (a DFA
            # state's), whose queues are worked out once per set, not once per message.
            queue_names, exchange_names = self._destinations.of(first)
            if not exchange_names and (first or start.alternate_exchange is None):
                if through is not None:
                    through.append(start.name)
                    if start.alternate_exchange is not None:
                        through.append(start.alternate_exchange)
                return queue_names
        queues: set[str] = set()
        seen = {start.name}
        pending = [(start, "published")]
        exchanges = self._exchanges
        while pending:
            exchange, via = pending.pop()
            if through is not None:
                through.append(exchange.name)
                if exchange.alternate_exchange is not None:
                    through.append(exchange.alternate_exchange)
            if exchange.name == DEFAULT_EXCHANGE:
                matched: Iterable[Binding] = ()
                queues.update(key for key in keys if key in self._queues)
            elif exchange is start and first is not None:
                matched, first = first, None
            else:
                matched = exchange.kind.route(keys, headers)
            if observer is not None:
                matched = list(matched)
                observer(exchange, matched, via)
            reached_any = False
            for binding in matched:
                reached_any = True
                target = binding.target  # a queue's name, or a `Destination`
                if target.__class__ is str:
                    queues.add(target)
                    continue
                kind, name = target
                if kind == "queue":
                    queues.add(name)
                elif name not in seen:
                    seen.add(name)
                    pending.append((exchanges[name], "binding"))
            # As RabbitMQ: the alternate is used when the exchange's own bindings matched nothing.
            alternate = exchange.alternate_exchange
            if not reached_any and alternate is not None and alternate not in seen:
                seen.add(alternate)
                if alternate in exchanges:  # a dangling alternate is ignored, as in RabbitMQ
                    pending.append((exchanges[alternate], "alternate"))
        return queues

    # ----------------------------------------------------------------- definitions

    @classmethod
    def from_definitions(
        cls,
        source: str | Path | Mapping[str, Any],
        vhost: str | None = None,
        engine: str = DEFAULT_ENGINE,
        *,
        password: str | None = None,
        rabbitmq: str | None = None,
    ) -> Topology:
        """Load a RabbitMQ definitions export: a path, JSON text, a parsed dict, or a live
        broker's management API URL ``http(s)://user@host:15672`` (``password`` defaults to
        ``RABBITMQ_PASSWORD``; see `xroute.sources.management`); errors name the entry that is wrong.

        An exchange of a type xroute does not know is kept (`lint` names it); only messages
        that reach it fail. Bindings are added in the export's order, which stands for their
        creation order where a type depends on it (``x-consistent-hash``): RabbitMQ lists them
        sorted, not in the order they were made. ``rabbitmq`` is a version profile
        (`xroute.core.profiles`); by default the one the export carries, if any."""
        from xroute.sources.definitions import parse_definitions  # reading files is not the core's

        records = parse_definitions(source, vhost, password=password)
        topology = cls(engine=engine, rabbitmq=rabbitmq or records.rabbitmq)
        try:
            topology._declare_records(records)
        except DefinitionsError:
            raise
        except XRouteError as error:
            # Keep the specific error type; say that it came from the definitions.
            error.args = (f"definitions: {error}",)
            raise
        topology.policies = records.policies
        return topology

    def _declare_records(self, records: ExportRecords) -> None:
        for queue in records.queues:
            self.declare_queue(queue.name, durable=queue.durable, auto_delete=queue.auto_delete,
                               arguments=queue.arguments)
        for exchange in records.exchanges:
            self.declare_exchange(
                exchange.name, exchange.type, durable=exchange.durable,
                auto_delete=exchange.auto_delete, internal=exchange.internal,
                arguments=exchange.arguments, allow_unknown_type=True,
            )
            if ALTERNATE_EXCHANGE not in exchange.arguments and exchange.policy_alternate:
                self._exchanges[exchange.name].alternate_exchange = exchange.policy_alternate
        for binding in records.bindings:
            try:
                self.bind(binding.source, binding.destination, binding.routing_key,
                          binding.arguments, destination_type=binding.destination_type)
            except DefinitionsError:
                raise
            except XRouteError as error:
                # RabbitMQ's import fails on such a binding too; say which one it is.
                error.args = (f"binding of {binding.destination_type} {binding.destination!r} "
                              f"to exchange {binding.source!r} (key {binding.routing_key!r}): "
                              f"{error}",)
                raise

    def to_definitions(self) -> dict[str, Any]:
        """This topology as a RabbitMQ definitions export of one virtual host (no ``vhost``
        fields, as ``/api/definitions/VHOST`` gives)."""
        builtin = {DEFAULT_EXCHANGE, *STANDARD_EXCHANGES}
        return {
            "queues": [
                {"name": q.name, "durable": q.durable, "auto_delete": q.auto_delete,
                 "arguments": dict(q.arguments)}
                for q in self._queues.values()
            ],
            "exchanges": [
                {"name": x.name, "type": x.type, "durable": x.durable,
                 "auto_delete": x.auto_delete, "internal": x.internal,
                 "arguments": dict(x.arguments)}
                for x in self._exchanges.values()
                if x.name not in builtin
            ],
            "bindings": [
                {"source": b.source, "destination": b.destination.name,
                 "destination_type": b.destination.kind, "routing_key": b.routing_key,
                 "arguments": dict(b.arguments)}
                for b in self.bindings()
            ],
            "policies": [dict(p) for p in self.policies],
        }

    def __repr__(self) -> str:
        return (
            f"Topology(exchanges={len(self._exchanges)}, queues={len(self._queues)}, "
            f"bindings={len(self._bindings)})"
        )
