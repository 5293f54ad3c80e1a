"""The contract of an exchange type: RabbitMQ's ``rabbit_exchange_type`` callbacks that matter
for routing. Each module in this package keeps only policy and hands matching to an index."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from xroute.core.model import Binding


class ExchangeType(Protocol):
    """One exchange's binding index."""

    type_name: str

    def validate_binding(self, routing_key: str, arguments: Mapping[str, Any]) -> None:
        """Called before a binding is added: raise an `XRouteError` if RabbitMQ would refuse it."""

    def bind(self, binding: Binding) -> Iterable[Any] | None:
        """Called when a new, validated binding is added; returns the messages it receives at
        once (a recent-history exchange's replay), or None."""

    def unbind(self, binding: Binding) -> None:
        """Called when an existing binding is removed."""

    def route(self, keys: Sequence[str], headers: Mapping[str, Any]) -> Iterable[Binding]:
        """Called for each message: the bindings it matches (repeats allowed; callers dedupe).

        ``keys`` are the routing key followed by the CC and BCC keys, already validated;
        ``headers`` are the validated headers without BCC. A type that returns a frozenset
        must also say, as ``shares_results``, whether such sets are shared by many messages
        (the topology then keys its work by them: `xroute.core.destinations`).
        """
