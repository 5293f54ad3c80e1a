"""kombu exchange types that route with xroute: drop-in replacements for the classes in
``kombu.transport.virtual.exchange``, registered under their AMQP names.

kombu's virtual channel calls an exchange type in two places: ``prepare_bind`` when a queue is
bound (its row goes into the exchange's table) and ``deliver`` when a message is published,
which asks ``Channel._lookup`` for the queues, which calls ``lookup(table, exchange,
routing_key, default)``. ``lookup`` never sees the message, so ``deliver`` (which does) keeps
the message's headers on the exchange type for the ``lookup`` it triggers; kombu's own
``_lookup`` stays in charge of reading the table, unroutable warnings and the dead-letter queue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kombu.transport.virtual import exchange as kombu_exchange

from xroute.kombu.table import TableRouter, encode_arguments


class XRouteExchangeType:
    """What every xroute exchange type adds to kombu's: ``lookup`` through a `TableRouter`,
    and ``deliver`` that hands the message's headers to it (mixed in before a kombu class)."""

    type: str  # the AMQP name, as kombu's classes have it

    def __init__(self, channel: Any) -> None:
        super().__init__(channel)  # type: ignore[call-arg]
        self.router = TableRouter(self.type)
        self._headers: Mapping[str, Any] | None = None  # the message being delivered

    def lookup(self, table: Any, exchange: str, routing_key: str, default: Any) -> Iterable[str]:
        """The queues bound in ``table`` that a message with ``routing_key`` (and the headers
        of the message being delivered, if any) reaches; empty if none (kombu's ``_lookup``
        then applies ``default``)."""
        return self.router.route(exchange, table, routing_key or "", self._headers)

    def deliver(self, message: dict, exchange: str, routing_key: str, **kwargs: Any) -> Any:
        """Deliver as kombu's class does, routing on the message's headers too; the queues
        receive it without its ``BCC`` header, as RabbitMQ strips it."""
        headers = message.get("headers") or {}
        if "BCC" in headers:
            message = {**message, "headers": {k: v for k, v in headers.items() if k != "BCC"}}
        self._headers = headers
        try:
            return super().deliver(message, exchange, routing_key, **kwargs)  # type: ignore[misc]
        finally:
            self._headers = None


class DirectExchange(XRouteExchangeType, kombu_exchange.DirectExchange):
    """direct: the routing key (and CC/BCC keys) equal to the binding key."""


class TopicExchange(XRouteExchangeType, kombu_exchange.TopicExchange):
    """topic: AMQP's patterns (``*`` one word, empty too; ``#`` zero or more words).

    ``prepare_bind`` stays kombu's, so the rows are the ones plain kombu writes and reads: a
    process without xroute shares the same Redis tables (and routes them its own way).
    """


class FanoutExchange(XRouteExchangeType, kombu_exchange.FanoutExchange):
    """fanout: every bound queue. Delivery stays kombu's (the Redis transport broadcasts
    fanout messages over PUB/SUB to the consumers listening; the memory transport looks up
    the bound queues, through xroute)."""


class HeadersExchange(XRouteExchangeType, kombu_exchange.DirectExchange):
    """headers, which kombu lacks: the four x-match modes with AMQP's typed equality.

    The binding's arguments travel in the row's ``pattern`` field (typed, as text, so the
    Redis transport can store them); the routing key of a headers binding is only its name.
    """

    type = "headers"

    def prepare_bind(
        self, queue: str, exchange: str, routing_key: str, arguments: Mapping[str, Any] | None
    ) -> tuple[str, str, str]:
        """The table row: (routing key, the encoded arguments, queue); a bad ``x-match`` or
        argument value raises `InvalidArguments` here, at bind time."""
        return routing_key, encode_arguments(arguments), queue


class DelimiterExchange(XRouteExchangeType, kombu_exchange.DirectExchange):
    """x-delimiter: the routing key's first character splits the rest into direct keys."""

    type = "x-delimiter"


#: The exchange types xroute gives kombu's virtual channels, by AMQP name.
EXCHANGE_TYPES: dict[str, type] = {
    "direct": DirectExchange,
    "topic": TopicExchange,
    "fanout": FanoutExchange,
    "headers": HeadersExchange,
    "x-delimiter": DelimiterExchange,
}
