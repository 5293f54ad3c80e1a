"""`TopicMatcher`: the public topic matcher. It validates, deduplicates and counts bindings,
and hands the matching itself to an engine from the registry."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from typing import Any

from xroute.engines.base import ENGINES
from xroute.errors import BindingNotFound, UnknownEngine
from xroute.keys import check_pattern, check_routing_key, split_words

DEFAULT_ENGINE = "trie"


class TopicMatcher:
    """AMQP topic matching of routing keys against (pattern, destination) bindings.

    >>> m = TopicMatcher()
    >>> m.add("floor_1.#", "q1")
    >>> sorted(m.match("floor_1.bedroom.temperature"))
    ['q1']
    """

    def __init__(self, engine: str = DEFAULT_ENGINE) -> None:
        try:
            self._engine = ENGINES[engine]()
        except (KeyError, TypeError):
            raise UnknownEngine(engine, sorted(ENGINES)) from None
        self._bindings: set[tuple[str, Hashable]] = set()

    @property
    def engine(self) -> str:
        """The name of the engine doing the matching."""
        return self._engine.name

    def add(self, pattern: str, destination: Hashable) -> None:
        """Bind ``pattern`` to ``destination``; binding the same pair again changes nothing."""
        check_pattern(pattern)
        binding = (pattern, destination)
        if binding not in self._bindings:
            self._engine.add(split_words(pattern), destination)
            self._bindings.add(binding)

    def remove(self, pattern: str, destination: Hashable) -> None:
        """Unbind the pair; `BindingNotFound` if it was never bound."""
        binding = (pattern, destination)
        if binding not in self._bindings:
            raise BindingNotFound(pattern, destination)
        self._engine.remove(split_words(pattern), destination)
        self._bindings.remove(binding)

    def match(self, key: str) -> frozenset:
        """The destinations whose patterns match the routing ``key``."""
        return self._engine.match(check_routing_key(key))

    def match_many(self, keys: Iterable[str]) -> list[frozenset]:
        """`match` for every key, in the same order."""
        keys = [check_routing_key(key) for key in keys]
        return self._engine.match_many(keys)

    def bindings(self) -> Iterator[tuple[str, Hashable]]:
        """Every (pattern, destination) pair bound."""
        return iter(self._bindings)

    def stats(self) -> dict[str, Any]:
        """Engine figures (nodes, states, cache hits) plus the binding count."""
        return {**self._engine.stats(), "bindings": len(self._bindings)}

    def __len__(self) -> int:
        return len(self._bindings)

    def __repr__(self) -> str:
        return f"TopicMatcher(engine={self.engine!r}, bindings={len(self)})"
