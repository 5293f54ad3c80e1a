"""The fanout exchange: every binding, whatever the key."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from xroute.core.keys import check_pattern
from xroute.core.model import Binding


class FanoutExchange:
    """A message goes to every binding; keys and headers are ignored."""

    type_name = "fanout"

    def __init__(self) -> None:
        self._bindings: set[Binding] = set()

    def validate_binding(self, routing_key: str, arguments: Mapping[str, Any]) -> None:
        check_pattern(routing_key)

    def bind(self, binding: Binding) -> None:
        self._bindings.add(binding)

    def unbind(self, binding: Binding) -> None:
        self._bindings.discard(binding)

    def route(self, keys: Sequence[str], headers: Mapping[str, Any]) -> Iterable[Binding]:
        return self._bindings
