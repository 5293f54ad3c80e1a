"""A topology: exchanges, queues and bindings, and `Topology.route`, which follows a message
through them exactly as RabbitMQ does (CC/BCC keys, exchange-to-exchange bindings, alternate
exchanges, the default exchange)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from xroute.engines import DEFAULT_ENGINE
from xroute.errors import (
    AccessRefused,
    BindingNotFound,
    InvalidArguments,
    PreconditionFailed,
    UnknownExchange,
    UnknownQueue,
)
from xroute.exchanges import make_exchange_type
from xroute.headers import canonical, check_headers, sender_selected_keys
from xroute.keys import check_pattern, check_routing_key
from xroute.model import Binding, Destination, DestinationType, Exchange, Queue

DEFAULT_EXCHANGE = ""
ALTERNATE_EXCHANGE = "alternate-exchange"
# The exchanges every RabbitMQ virtual host has from the start.
STANDARD_EXCHANGES = {
    "amq.direct": "direct",
    "amq.fanout": "fanout",
    "amq.topic": "topic",
    "amq.headers": "headers",
    "amq.match": "headers",
}

# Called once per exchange a message visits: (exchange, bindings it matched, how it got there:
# "published", "binding" or "alternate").
RouteObserver = Callable[[Exchange, list[Binding], str], None]


def _frozen(arguments: Mapping[str, Any]) -> tuple:
    # Binding identity compares arguments with their types, as RabbitMQ's tables do.
    return tuple(sorted((name, canonical(value, name)) for name, value in arguments.items()))


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

    def __init__(self, engine: str = DEFAULT_ENGINE) -> None:
        self.engine = engine
        self._exchanges: dict[str, Exchange] = {}
        self._queues: dict[str, Queue] = {}
        self._bindings: dict[tuple, Binding] = {}
        # Policies of a definitions export, kept verbatim for the round trip.
        self.policies: list[dict[str, Any]] = []
        self._exchanges[DEFAULT_EXCHANGE] = Exchange(DEFAULT_EXCHANGE, "direct", None)
        for name, type_name in STANDARD_EXCHANGES.items():
            self.declare_exchange(name, type_name)

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
    ) -> None:
        """Declare an exchange of type direct, fanout, topic, headers or x-delimiter.

        Redeclaring with the same type and arguments changes nothing; with others it raises
        `PreconditionFailed`, as RabbitMQ does.
        """
        _check_name(name, "exchange")
        if name == DEFAULT_EXCHANGE:
            raise AccessRefused("the default exchange '' cannot be declared")
        arguments = dict(arguments or {})
        if alternate_exchange is not None:
            arguments[ALTERNATE_EXCHANGE] = alternate_exchange
        _frozen(arguments)  # validates the value types
        alternate = arguments.get(ALTERNATE_EXCHANGE)
        if alternate is not None and not isinstance(alternate, str):
            raise InvalidArguments(
                f"exchange {name!r}: alternate-exchange must be an exchange name, got {alternate!r}",
                arguments,
            )
        kind = make_exchange_type(exchange_type, self.engine)
        existing = self._exchanges.get(name)
        if existing is not None:
            if existing.type != exchange_type or _frozen(existing.arguments) != _frozen(arguments):
                raise PreconditionFailed(
                    f"exchange {name!r} exists as {existing.type} with arguments "
                    f"{existing.arguments!r}; cannot redeclare it as {exchange_type} with "
                    f"{arguments!r}"
                )
            return
        if name.startswith("amq.") and name not in STANDARD_EXCHANGES:
            raise AccessRefused(f"exchange name {name!r} is reserved: names beginning 'amq.'")
        self._exchanges[name] = Exchange(
            name, exchange_type, kind, durable, auto_delete, internal, arguments, alternate
        )

    def declare_queue(
        self,
        name: str,
        *,
        durable: bool = True,
        auto_delete: bool = False,
        arguments: Mapping[str, Any] | None = None,
    ) -> None:
        """Declare a queue; redeclaring one changes nothing."""
        _check_name(name, "queue")
        if not name:
            raise InvalidArguments("a queue needs a name (server-named queues are not modelled)")
        arguments = dict(arguments or {})
        _frozen(arguments)
        if name not in self._queues:
            self._queues[name] = Queue(name, durable, auto_delete, arguments)

    def delete_exchange(self, name: str) -> None:
        """Delete an exchange and every binding from or to it."""
        self._exchange(name, "delete_exchange")
        if name == DEFAULT_EXCHANGE or name in STANDARD_EXCHANGES:
            raise AccessRefused(f"exchange {name!r} is built in and cannot be deleted")
        for binding in list(self._bindings.values()):
            if binding.source == name or binding.destination == ("exchange", name):
                self._remove(binding)
        del self._exchanges[name]

    def delete_queue(self, name: str) -> None:
        """Delete a queue and every binding to it."""
        if name not in self._queues:
            raise UnknownQueue(name, "delete_queue")
        for binding in list(self._bindings.values()):
            if binding.destination == ("queue", name):
                self._remove(binding)
        del self._queues[name]

    # ----------------------------------------------------------------- binding

    def _binding_identity(
        self,
        source: str,
        destination: str,
        routing_key: str,
        arguments: Mapping[str, Any] | None,
        destination_type: DestinationType,
    ) -> tuple[Exchange, Destination, dict[str, Any], tuple]:
        exchange = self._exchange(source, "binding source")
        if source == DEFAULT_EXCHANGE:
            raise AccessRefused("bindings to or from the default exchange '' are not allowed")
        if destination_type == "queue":
            if destination not in self._queues:
                raise UnknownQueue(destination, f"binding destination from {source!r}")
        elif destination_type == "exchange":
            self._exchange(destination, f"binding destination from {source!r}")
            if destination == DEFAULT_EXCHANGE:
                raise AccessRefused("bindings to or from the default exchange '' are not allowed")
        else:
            raise InvalidArguments(
                f"destination_type must be 'queue' or 'exchange', got {destination_type!r}"
            )
        check_pattern(routing_key)
        arguments = dict(arguments or {})
        frozen = _frozen(arguments)
        target = Destination(destination_type, destination)
        return exchange, target, arguments, (source, target, routing_key, frozen)

    def bind(
        self,
        source: str,
        destination: str,
        routing_key: str = "",
        arguments: Mapping[str, Any] | None = None,
        destination_type: DestinationType = "queue",
    ) -> None:
        """Bind ``destination`` (a queue, or an exchange) to exchange ``source``.

        Binding the same (source, destination, key, arguments) again is one binding.
        """
        exchange, target, arguments, identity = self._binding_identity(
            source, destination, routing_key, arguments, destination_type
        )
        if identity in self._bindings:
            return
        exchange.kind.validate_binding(routing_key, arguments)
        binding = Binding(source, target, routing_key, arguments)
        exchange.kind.bind(binding)
        self._bindings[identity] = binding

    def unbind(
        self,
        source: str,
        destination: str,
        routing_key: str = "",
        arguments: Mapping[str, Any] | None = None,
        destination_type: DestinationType = "queue",
    ) -> None:
        """Remove a binding; `BindingNotFound` if there is no such binding."""
        *_, identity = self._binding_identity(
            source, destination, routing_key, arguments, destination_type
        )
        binding = self._bindings.get(identity)
        if binding is None:
            raise BindingNotFound(routing_key, f"{destination_type} {destination!r} on {source!r}")
        self._remove(binding)

    def _remove(self, binding: Binding) -> None:
        self._exchanges[binding.source].kind.unbind(binding)
        del self._bindings[
            (binding.source, binding.destination, binding.routing_key, _frozen(binding.arguments))
        ]

    # ----------------------------------------------------------------- looking

    @property
    def exchanges(self) -> Mapping[str, Exchange]:
        """Declared exchanges by name (the default exchange ``""`` and ``amq.*`` included)."""
        return self._exchanges

    @property
    def queues(self) -> Mapping[str, Queue]:
        """Declared queues by name."""
        return self._queues

    def bindings(self, source: str | None = None) -> list[Binding]:
        """Every binding, or those from exchange ``source``."""
        return [b for b in self._bindings.values() if source is None or b.source == source]

    def _exchange(self, name: Any, context: str) -> Exchange:
        try:
            return self._exchanges[name]
        except (KeyError, TypeError):
            raise UnknownExchange(name, context) from None

    # ----------------------------------------------------------------- routing

    def route(
        self, exchange: str, routing_key: str, headers: Mapping[str, Any] | None = None
    ) -> frozenset[str]:
        """The names of the queues a message published to ``exchange`` reaches.

        ``headers`` is the message's header table as Python values; its ``CC`` and ``BCC``
        lists add routing keys. An empty result means the message is unroutable.
        """
        return self.route_message(exchange, routing_key, headers)

    def route_message(
        self,
        exchange: str,
        routing_key: str,
        headers: Mapping[str, Any] | None = None,
        observer: RouteObserver | None = None,
    ) -> frozenset[str]:
        """`route`, telling ``observer`` what each visited exchange matched (for explanations
        and per-binding counts); the queues are the same with or without one."""
        start = self._exchange(exchange, "publish")
        if start.internal:
            raise AccessRefused(f"exchange {exchange!r} is internal: it cannot be published to")
        check_routing_key(routing_key)
        keys = [routing_key]
        headers = check_headers(headers)
        if "CC" in headers or "BCC" in headers:
            extra = sender_selected_keys(headers, "CC") + sender_selected_keys(headers, "BCC")
            keys.extend(check_routing_key(key) for key in extra)
            # RabbitMQ strips BCC when the message is made, before any exchange sees it.
            headers.pop("BCC", None)
        return frozenset(self._walk(start, keys, headers, observer))

    def _walk(
        self,
        start: Exchange,
        keys: list[str],
        headers: dict[str, Any],
        observer: RouteObserver | None,
    ) -> set[str]:
        queues: set[str] = set()
        seen = {start.name}
        pending = [(start, "published")]
        exchanges = self._exchanges
        while pending:
            exchange, via = pending.pop()
            if exchange.name == DEFAULT_EXCHANGE:
                matched: Iterable[Binding] = ()
                queues.update(key for key in keys if key in self._queues)
            else:
                matched = exchange.kind.route(keys, headers)
            if observer is not None:
                matched = list(matched)
                observer(exchange, matched, via)
            reached_any = False
            for binding in matched:
                reached_any = True
                kind, name = binding.destination
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
    ) -> Topology:
        """Load a RabbitMQ definitions export (a path, JSON text or a parsed dict)."""
        from xroute.definitions import load_definitions

        return load_definitions(source, vhost=vhost, engine=engine)

    def to_definitions(self) -> dict[str, Any]:
        """This topology as a RabbitMQ definitions export (one virtual host)."""
        from xroute.definitions import dump_definitions

        return dump_definitions(self)

    def __repr__(self) -> str:
        return (
            f"Topology(exchanges={len(self._exchanges)}, queues={len(self._queues)}, "
            f"bindings={len(self._bindings)})"
        )
