"""The topic exchange: binding keys are patterns, matched by a `TopicMatcher` engine."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from xroute.engines import TopicMatcher
from xroute.keys import check_pattern
from xroute.model import Binding


class TopicExchange:
    """A message goes to the bindings whose pattern matches one of its keys.

    The matcher's destinations are the `Binding` objects themselves, so one route tells which
    bindings matched (for per-binding hit counts and explanations), not only where it went.
    """

    type_name = "topic"

    def __init__(self, engine: str) -> None:
        self.matcher = TopicMatcher(engine=engine)

    def validate_binding(self, routing_key: str, arguments: Mapping[str, Any]) -> None:
        check_pattern(routing_key)

    def bind(self, binding: Binding) -> None:
        self.matcher.add(binding.routing_key, binding)

    def unbind(self, binding: Binding) -> None:
        self.matcher.remove(binding.routing_key, binding)

    def route(self, keys: Sequence[str], headers: Mapping[str, Any]) -> Iterable[Binding]:
        match = self.matcher.match
        if len(keys) == 1:
            return match(keys[0])
        return [b for key in keys for b in match(key)]
