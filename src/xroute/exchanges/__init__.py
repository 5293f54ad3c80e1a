"""One module per exchange type; `EXCHANGE_TYPES` maps AMQP type names to their classes."""

from __future__ import annotations

from collections.abc import Callable

from xroute.errors import UnknownExchangeType
from xroute.exchanges.base import ExchangeType
from xroute.exchanges.direct import DelimiterExchange, DirectExchange
from xroute.exchanges.fanout import FanoutExchange
from xroute.exchanges.headers import HeadersExchange
from xroute.exchanges.topic import TopicExchange

EXCHANGE_TYPES: dict[str, Callable[[str], ExchangeType]] = {
    "direct": lambda engine: DirectExchange(),
    "fanout": lambda engine: FanoutExchange(),
    "topic": TopicExchange,
    "headers": lambda engine: HeadersExchange(),
    "x-delimiter": lambda engine: DelimiterExchange(),
}


def make_exchange_type(type_name: str, engine: str) -> ExchangeType:
    """A new, empty binding index for an exchange of AMQP type ``type_name``."""
    try:
        factory = EXCHANGE_TYPES[type_name]
    except (KeyError, TypeError):
        raise UnknownExchangeType(type_name, list(EXCHANGE_TYPES)) from None
    return factory(engine)


__all__ = ["EXCHANGE_TYPES", "ExchangeType", "make_exchange_type"]
