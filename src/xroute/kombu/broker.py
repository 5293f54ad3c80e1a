"""The broker state behind xroute.kombu's channels: exchanges, queues and bindings identified
as RabbitMQ identifies them, kept in a `Topology` that also routes every publish.

`Broker` holds what every store shares: each change is first made on the current `Topology`,
which validates it as RabbitMQ would (an inequivalent redeclare, a binding to a missing queue,
a reserved name, a bad ``x-match``...), and only then saved. `MemoryBroker` (kombu's memory
transport: one state per process) has nothing else to save; `xroute.kombu.redis_broker`
saves to Redis, so that every connection and process shares it.

Headers and arguments are taken as py-amqp (kombu's client) sends them to RabbitMQ
(`xroute.core.values.PY_AMQP`: ``bytes`` is a longstr).

This module does no I/O and imports no kombu.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from xroute.core.errors import (
    BindingNotFound,
    InvalidHeaders,
    PreconditionFailed,
    UnknownExchange,
    UnknownQueue,
)
from xroute.core.model import Binding, Destination, DestinationType, Exchange, Queue
from xroute.core.topology import Topology
from xroute.core.values import PY_AMQP, as_sent_by
from xroute.engines import DEFAULT_ENGINE

# The only headers that route a message on an exchange that is not a headers exchange.
SENDER_SELECTED = ("CC", "BCC")


class Broker:
    """Exchanges, queues and bindings of one virtual host, changed and routed as RabbitMQ does.

    Subclasses give `current` (the up-to-date topology) and save each change in the ``_saved_*``
    and ``_deleted_*`` hooks, which run after the topology has accepted it.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()

    # ----------------------------------------------------------------- to fill in

    def current(self) -> Topology:
        """The topology as it is now (re-read from the store if another process changed it)."""
        raise NotImplementedError

    def routing(self, exchange: str) -> Topology:
        """The topology to route a message published to ``exchange`` with."""
        return self.current()

    def _saved_exchange(self, exchange: Exchange) -> None:
        """``exchange`` was declared."""

    def _deleted_exchange(self, name: str, bindings: list[Binding]) -> None:
        """Exchange ``name`` was deleted, and ``bindings`` (from or to it) with it."""

    def _saved_queue(self, queue: Queue) -> None:
        """``queue`` was declared."""

    def _deleted_queue(self, name: str, bindings: list[Binding]) -> None:
        """Queue ``name`` was deleted (or did not exist), and ``bindings`` to it with it."""

    def _saved_binding(self, binding: Binding, topology: Topology) -> None:
        """``binding`` was made (perhaps again: saving must be idempotent)."""

    def _deleted_binding(self, binding: Binding, topology: Topology) -> None:
        """``binding`` was removed (``topology`` no longer has it)."""

    # ----------------------------------------------------------------- changes

    def declare_exchange(
        self,
        name: str,
        exchange_type: str,
        *,
        durable: bool = True,
        auto_delete: bool = False,
        arguments: Mapping[str, Any] | None = None,
    ) -> None:
        """Declare an exchange; redeclaring it differently raises `PreconditionFailed`."""
        with self.lock:
            topology = self.current()
            existed = name in topology.exchanges
            topology.declare_exchange(
                name, exchange_type, durable=durable, auto_delete=auto_delete,
                arguments=_py_amqp(arguments),
            )
            if not existed:
                self._saved_exchange(topology.exchanges[name])

    def delete_exchange(self, name: str, if_unused: bool = False) -> None:
        """Delete an exchange and every binding from or to it; queues stay. Deleting a missing
        exchange does nothing (as RabbitMQ); a built-in one raises `AccessRefused`."""
        with self.lock:
            topology = self.current()
            if name not in topology.exchanges:
                return
            bindings = [
                b for b in topology.bindings()
                if b.source == name or b.destination == ("exchange", name)
            ]
            if if_unused and any(b.source == name for b in bindings):
                raise PreconditionFailed(f"exchange {name!r} in use (AMQP 406 PRECONDITION_FAILED)")
            topology.delete_exchange(name)
            self._deleted_exchange(name, bindings)

    def declare_queue(self, name: str, auto_delete: bool = False) -> None:
        """Declare a queue; redeclaring one changes nothing."""
        with self.lock:
            topology = self.current()
            if name not in topology.queues:
                topology.declare_queue(name, auto_delete=auto_delete)
                self._saved_queue(topology.queues[name])

    def auto_delete(self, name: str) -> bool:
        """True if queue ``name`` is declared auto-delete."""
        with self.lock:
            queue = self.current().queues.get(name)
            return queue is not None and queue.auto_delete

    def delete_queue(self, name: str) -> None:
        """Delete a queue and every binding to it (deleting a missing queue does nothing but
        drop what the store still holds for it)."""
        with self.lock:
            topology = self.current()
            bindings: list[Binding] = []
            if name in topology.queues:
                bindings = [b for b in topology.bindings() if b.destination == ("queue", name)]
                topology.delete_queue(name)
            self._deleted_queue(name, bindings)

    def has_queue(self, name: str) -> bool:
        """True if queue ``name`` is declared."""
        with self.lock:
            return name in self.current().queues

    def exchange_type(self, name: str) -> str | None:
        """The type of exchange ``name`` (None if it is not declared)."""
        with self.lock:
            exchange = self.current().exchanges.get(name)
            return None if exchange is None else exchange.type

    def bind(
        self,
        source: str,
        destination: str,
        routing_key: str = "",
        arguments: Mapping[str, Any] | None = None,
        destination_type: DestinationType = "queue",
    ) -> None:
        """Bind a queue (or an exchange) to ``source``; the same (source, destination, key,
        arguments) again is the same binding."""
        arguments = _py_amqp(arguments)
        with self.lock:
            topology = self.current()
            topology.bind(source, destination, routing_key, arguments, destination_type)
            self._saved_binding(
                _binding(source, destination_type, destination, routing_key, arguments), topology
            )

    def unbind(
        self,
        source: str,
        destination: str,
        routing_key: str = "",
        arguments: Mapping[str, Any] | None = None,
        destination_type: DestinationType = "queue",
    ) -> None:
        """Remove the binding with exactly these arguments. None such (or no such exchange or
        queue): nothing happens, as in RabbitMQ 3.10, where such an unbind succeeds."""
        arguments = _py_amqp(arguments)
        with self.lock:
            topology = self.current()
            try:
                topology.unbind(source, destination, routing_key, arguments, destination_type)
            except (BindingNotFound, UnknownExchange, UnknownQueue):
                return
            self._deleted_binding(
                _binding(source, destination_type, destination, routing_key, arguments), topology
            )

    def bindings(self, source: str | None = None) -> list[Binding]:
        """Every binding, or those from exchange ``source``."""
        with self.lock:
            return self.current().bindings(source)

    # ----------------------------------------------------------------- routing

    def route(
        self, exchange: str, routing_key: str, headers: Mapping[str, Any] | None = None
    ) -> frozenset[str]:
        """The queues a message published to ``exchange`` reaches (`Topology.route`: CC/BCC,
        exchange-to-exchange bindings, alternate exchanges, the default exchange).

        A header that no AMQP table carries (kombu serialises a ``datetime``, say) fails only
        where headers route: elsewhere only ``CC`` and ``BCC`` are read.
        """
        headers = _py_amqp(headers)
        with self.lock:
            topology = self.routing(exchange)
            try:
                return topology.route(exchange, routing_key, headers)
            except InvalidHeaders:
                start = topology.exchanges.get(exchange)
                if headers is None or (start is not None and start.type == "headers"):
                    raise
                selected = {k: headers[k] for k in SENDER_SELECTED if k in headers}
                return topology.route(exchange, routing_key, selected)


def _py_amqp(table: Mapping[str, Any] | None) -> Any:
    # kombu's values travel as py-amqp sends them: bytes as a longstr (xroute.core.values.PY_AMQP).
    return as_sent_by(table, PY_AMQP) if table else table


def _binding(
    source: str,
    destination_type: DestinationType,
    destination: str,
    routing_key: str,
    arguments: Mapping[str, Any] | None,
) -> Binding:
    return Binding(source, Destination(destination_type, destination), routing_key,
                   dict(arguments or {}))


class MemoryBroker(Broker):
    """The in-process state of kombu's memory transport: the `Topology` is the store."""

    def __init__(self, engine: str = DEFAULT_ENGINE) -> None:
        super().__init__()
        self.topology = Topology(engine)

    def current(self) -> Topology:
        """The one topology (nothing to re-read)."""
        return self.topology


__all__ = ["Broker", "MemoryBroker"]
