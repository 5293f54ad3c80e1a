"""One module per exchange type; `EXCHANGE_TYPES` maps AMQP type names to their factories.

A factory takes the `ExchangeSettings` of the exchange being declared: the standard types need
only the topic engine; the plugin types read the exchange's arguments and the version profile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from xroute.core.errors import UnknownExchangeType
from xroute.core.profiles import DEFAULT_PROFILE, Profile
from xroute.exchanges.base import ExchangeType
from xroute.exchanges.consistent_hash import ConsistentHashExchange
from xroute.exchanges.direct import DelimiterExchange, DirectExchange
from xroute.exchanges.fanout import FanoutExchange
from xroute.exchanges.headers import HeadersExchange
from xroute.exchanges.jms_topic import JmsTopicExchange
from xroute.exchanges.pick_one import (
    LocalRandomExchange,
    ModulusHashExchange,
    RandomChoice,
    RandomExchange,
)
from xroute.exchanges.recent_history import RecentHistoryExchange
from xroute.exchanges.topic import TopicExchange
from xroute.exchanges.unsupported import UnsupportedExchange


@dataclass(frozen=True)
class ExchangeSettings:
    """What a new exchange's binding index is made from."""

    name: str = ""
    engine: str = "trie"
    arguments: Mapping[str, Any] = field(default_factory=dict)
    profile: Profile = DEFAULT_PROFILE
    # How the random types pick (shared by the exchanges of one topology).
    choice: RandomChoice = field(default_factory=RandomChoice)


# The types whose routing looks only at the keys or the headers table, and that `BatchRouter`
# groups by distinct key or table.
STANDARD_TYPES = ("direct", "fanout", "topic", "headers", "x-delimiter")

EXCHANGE_TYPES: dict[str, Callable[[ExchangeSettings], ExchangeType]] = {
    "direct": lambda s: DirectExchange(),
    "fanout": lambda s: FanoutExchange(),
    "topic": lambda s: TopicExchange(s.engine, s.profile),
    "headers": lambda s: HeadersExchange(s.profile),
    "x-delimiter": lambda s: DelimiterExchange(),
    "x-consistent-hash": lambda s: ConsistentHashExchange(s.name, s.arguments, s.profile),
    "x-modulus-hash": lambda s: ModulusHashExchange(s.profile),
    "x-random": lambda s: RandomExchange(s.choice, s.profile),
    "x-local-random": lambda s: LocalRandomExchange(s.choice, s.profile),
    "x-recent-history": lambda s: RecentHistoryExchange(s.arguments),
    "x-jms-topic": lambda s: JmsTopicExchange(s.name),
}


def make_exchange_type(
    type_name: str, settings: ExchangeSettings | None = None, *, allow_unknown: bool = False
) -> ExchangeType:
    """A new, empty binding index for an exchange of AMQP type ``type_name``.

    An unknown type raises `UnknownExchangeType`, as RabbitMQ refuses to declare it, unless
    ``allow_unknown`` (definitions exports): then its index raises when a message reaches it.
    """
    settings = settings or ExchangeSettings()
    try:
        factory = EXCHANGE_TYPES[type_name]
    except (KeyError, TypeError):
        if allow_unknown and isinstance(type_name, str):
            return UnsupportedExchange(settings.name, type_name)
        raise UnknownExchangeType(
            type_name, list(EXCHANGE_TYPES), settings.profile.unknown_type_reply_code
        ) from None
    return factory(settings)


__all__ = [
    "EXCHANGE_TYPES",
    "STANDARD_TYPES",
    "ExchangeSettings",
    "ExchangeType",
    "RandomChoice",
    "UnsupportedExchange",
    "make_exchange_type",
]
