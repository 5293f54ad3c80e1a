"""The interface every topic engine implements, and the registry that names them.

Engines work on validated input: `xroute.TopicMatcher` checks keys and patterns, splits
patterns into words and calls ``add`` only for a new (pattern, destination) pair and
``remove`` only for an existing one, so an engine holds no validation of its own.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Protocol

Words = tuple[str, ...]
EMPTY: frozenset = frozenset()


class Engine(Protocol):
    """A topic matcher over words: the contract of every module in `xroute.engines`."""

    name: str

    def add(self, words: Words, destination: Hashable) -> None:
        """Called when a (pattern, destination) binding is new: index it."""

    def remove(self, words: Words, destination: Hashable) -> None:
        """Called when an existing binding goes: forget it and free what only it used."""

    def match(self, key: str) -> frozenset:
        """The destinations of every binding whose pattern matches the valid routing ``key``."""

    def match_many(self, keys: Sequence[str]) -> list[frozenset]:
        """`match` for each key, in order."""

    def stats(self) -> dict[str, Any]:
        """Size and cache figures, for benchmarks and operators."""


ENGINES: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: make an engine available as ``TopicMatcher(engine=cls.name)``."""
    ENGINES[cls.name] = cls
    return cls
