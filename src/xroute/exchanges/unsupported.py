"""An exchange of a type xroute does not know (a plugin it does not model yet).

A definitions export that holds one still loads, and its bindings are kept for the round trip
and for `lint`; a message that reaches it raises `UnsupportedExchangeType` naming the type.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from xroute.core.errors import UnsupportedExchangeType
from xroute.core.model import Binding
from xroute.exchanges.fanout import FanoutExchange


class UnsupportedExchange(FanoutExchange):
    """Keeps the bindings of an exchange of unknown type; routing through it raises."""

    def __init__(self, exchange: str, type_name: str) -> None:
        super().__init__()
        self.exchange = exchange
        self.type_name = type_name

    def route(self, keys: Sequence[str], headers: Mapping[str, Any]) -> Iterable[Binding]:
        raise UnsupportedExchangeType(self.exchange, self.type_name)
