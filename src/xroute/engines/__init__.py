"""Topic matching engines behind one interface; `TopicMatcher` is the public entry point."""

from xroute.engines import auto, bitmap, compiled, dfa, reference, trie  # noqa: F401  (each module registers its engine)
from xroute.engines.base import ENGINES, Engine
from xroute.engines.matcher import DEFAULT_ENGINE, TopicMatcher

__all__ = ["DEFAULT_ENGINE", "ENGINES", "Engine", "TopicMatcher"]
