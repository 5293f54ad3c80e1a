"""The direct exchange, and the x-delimiter exchange that routes several keys as direct."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from xroute.core.keys import check_pattern
from xroute.core.model import Binding


class DirectExchange:
    """A message goes to the bindings whose key equals its routing key, byte for byte."""

    type_name = "direct"

    def __init__(self) -> None:
        self._by_key: dict[str, set[Binding]] = {}

    def validate_binding(self, routing_key: str, arguments: Mapping[str, Any]) -> None:
        check_pattern(routing_key)

    def bind(self, binding: Binding) -> None:
        self._by_key.setdefault(binding.routing_key, set()).add(binding)

    def unbind(self, binding: Binding) -> None:
        bound = self._by_key[binding.routing_key]
        bound.discard(binding)
        if not bound:
            del self._by_key[binding.routing_key]

    def route(self, keys: Sequence[str], headers: Mapping[str, Any]) -> Iterable[Binding]:
        by_key = self._by_key
        if len(keys) == 1:
            return by_key.get(keys[0], ())
        return [b for key in keys for b in by_key.get(key, ())]


def delimited_keys(routing_key: str) -> list[str]:
    """The keys in an x-delimiter routing key: its first *byte* is the delimiter, and the rest
    is split on that byte (the plugin's ``<<Delim:1/binary, Route/binary>>``).

    ``""`` holds no key, ``":"`` one empty key, ``":a:b"`` the keys ``a`` and ``b``. A key
    that begins with a character of several bytes splits on its first byte: ``"éaéb"`` gives
    two pieces that are not UTF-8 (each the bytes ``\xa9`` and a letter, kept as surrogate
    escapes), which no text binding key equals.
    """
    if not routing_key:
        return []
    if routing_key.isascii():  # one byte a character: the same split, without encoding
        return routing_key[1:].split(routing_key[0])
    raw = routing_key.encode("utf-8", "surrogateescape")
    return [
        piece.decode("utf-8", "surrogateescape") for piece in raw[1:].split(raw[:1])
    ]


class DelimiterExchange(DirectExchange):
    """x-delimiter (seed 004): each routing key carries several keys, each routed as direct."""

    type_name = "x-delimiter"

    def route(self, keys: Sequence[str], headers: Mapping[str, Any]) -> Iterable[Binding]:
        return super().route([piece for key in keys for piece in delimited_keys(key)], headers)
