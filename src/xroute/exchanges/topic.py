"""The topic exchange: binding keys are patterns, matched by a `TopicMatcher` engine."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import attrgetter
from typing import Any

from xroute.core.errors import PreconditionFailed
from xroute.core.keys import HASH, STAR, is_short_key, split_words
from xroute.core.literal_routes import LiteralRoutes
from xroute.core.model import Binding
from xroute.core.profiles import DEFAULT_PROFILE, Profile
from xroute.core.wildcard_queues import FanOutCounter, WildcardQueues
from xroute.engines import TopicMatcher
from xroute.engines.catch_all import is_catch_all
from xroute.engines.literal import is_literal
from xroute.engines.reference import pattern_matches


class TopicExchange:
    """A message goes to the bindings whose pattern matches one of its keys.

    The matcher's destinations are the `Binding` objects themselves, so one route tells which
    bindings matched (for per-binding hit counts and explanations), not only where it went.
    """

    type_name = "topic"

    def __init__(self, engine: str, profile: Profile = DEFAULT_PROFILE) -> None:
        self._engine = engine
        # Each binding is its own destination, bound to its own key: no binding can shadow
        # another's, and the matcher keeps the bindings, not (key, binding) pairs.
        self.matcher = TopicMatcher(engine=engine, pattern_of=attrgetter("routing_key"))
        self.max_hash_words = profile.max_hash_words
        # An engine that keeps literal bindings apart (``auto``) can match the wildcard ones
        # alone: the literal ones' queue names are then counted here, by key, and
        # `Topology.route` unites the two on a key's first route (`xroute.core.literal_routes`).
        # The function may change with each wildcard binding change: after one,
        # `match_wildcards` is `_wildcards_changed`, which asks for it on the first key it
        # is given (a bulk bind asks once, not once a binding: three calls of a wildcard bind).
        self.match_wildcards = self.matcher.wildcard_matcher(bare=True)
        self.literal_routes = LiteralRoutes() if self.match_wildcards is not None else None
        self._wildcards_changed = self._ask_wildcards  # made once: stored on each change
        # The wildcard bindings by queue name, from the first queue bound with '#' on
        # (`xroute.core.wildcard_queues`): there such a queue's other bindings leave the trie.
        # Also from the first pattern bound to many queues (a broadcast: `FanOutCounter`).
        self.wildcard_queues: WildcardQueues | None = None
        self._fan_out: FanOutCounter | None = FanOutCounter()

    def validate_binding(self, routing_key: str, arguments: Mapping[str, Any]) -> None:
        # The topology checked the key itself (`check_pattern`) just before.
        limit = self.max_hash_words
        if limit is not None and "#" in routing_key and split_words(routing_key).count("#") > limit:
            # RabbitMQ 4.3.5 and later: its trie grows exponentially in the number of '#'.
            raise PreconditionFailed(
                f"binding key {routing_key!r} has more than {limit} '#' words; RabbitMQ 4.3.5 "
                "and later refuse it (406)"
            )

    # hot: every `Topology.bind` to a topic exchange (`xroute bench engines --shapes`, bind rate)
    def bind(self, binding: Binding) -> None:
        """Index a new binding (a `Binding` the topology made, its key checked): split once,
        and handed to the matcher without its checks (`TopicMatcher.add_new`)."""
        key = binding.routing_key
        words = tuple(key.split(".")) if key else ()  # `split_words`, inline: a call less
        self.matcher.add_new(key, words, binding)
        literal_routes = self.literal_routes
        if literal_routes is None:
            return
        target = binding.target  # the queue's name, or a `Destination` (`Binding.target`)
        if target.__class__ is str:  # no tuple made to unpack
            kind, name = "queue", target
        else:
            kind, name = target
        if STAR not in words and HASH not in words:  # `is_literal`, inline
            literal_routes.add(key, kind, name)
            return
        self.match_wildcards = self._wildcards_changed
        if self.wildcard_queues is not None:
            self.wildcard_queues.add(key, kind, name, words)
        # (`is_catch_all` and `_fans_out` inline in their usual answer: a catch-all begins
        # with '#'; no counter once there is an index by queue)
        elif kind == "queue" and (
                words[0] == HASH and is_catch_all(words)
                or self._fan_out is not None and self._fan_out.add(key)):
            self.wildcard_queues = WildcardQueues(self._engine)
            self._fan_out = None
            # First routes now ask the index: the matcher's wildcard bindings are read by
            # the full walk alone (observers, exchange-to-exchange bindings, batches' hits),
            # so they wait for such a read (`AutoEngine.wildcards_read_rarely`).
            self.matcher.defer_wildcards()
            for pattern, bound in self.matcher.bindings():
                if not _is_literal(pattern):
                    self.wildcard_queues.add(pattern, *bound.destination)

    # hot: every `Topology.unbind` from a topic exchange (issue 36 goal 5: a change between
    # routes costs at most 10 bulk binds)
    def unbind(self, binding: Binding) -> None:
        """Forget a binding indexed here (the topology found it in its own table): its key
        split once, and taken from the matcher without its checks
        (`TopicMatcher.remove_known`)."""
        key = binding.routing_key
        words = tuple(key.split(".")) if key else ()  # `split_words`, inline
        self.matcher.remove_known(key, words, binding)
        literal_routes = self.literal_routes
        if literal_routes is None:
            return
        target = binding.target  # the queue's name, or a `Destination` (`Binding.target`)
        if target.__class__ is str:  # no tuple made to unpack
            kind, name = "queue", target
        else:
            kind, name = target
        if STAR not in words and HASH not in words:  # `is_literal`, inline
            literal_routes.remove(key, kind, name)
            return
        self.match_wildcards = self._wildcards_changed
        if self.wildcard_queues is not None:
            self.wildcard_queues.remove(key, kind, name, words)
        elif kind == "queue" and self._fan_out is not None:
            self._fan_out.remove(key)

    def _ask_wildcards(self, key: str) -> Any:
        """`match_wildcards` after a wildcard binding change: the matcher's function as it
        stands now, kept until the next change, and its answer for ``key``."""
        match = self.match_wildcards = self.matcher.wildcard_matcher(bare=True)
        return match(key)  # type: ignore[misc]

    @property
    def shares_results(self) -> bool:
        """Whether one key's result is a frozenset shared by many keys (see `TopicMatcher`)."""
        return self.matcher.shares_results

    def route(self, keys: Sequence[str], headers: Mapping[str, Any]) -> Iterable[Binding]:
        match = self.matcher.match
        if len(keys) == 1:
            return match(keys[0])
        return [b for key in keys for b in (match(key) if is_short_key(key) else self._slow(key))]

    def _slow(self, key: str) -> list[Binding]:
        # A CC/BCC key longer than 255 bytes, or bytes that are not UTF-8: RabbitMQ routes it,
        # the engines take only short-string keys. Rare, so every binding is tested in turn.
        words = split_words(key)
        return [
            binding
            for pattern, binding in self.matcher.bindings()
            if pattern_matches(split_words(pattern), words)
        ]


def _is_literal(pattern: str) -> bool:
    # The words '*' and '#' are the wildcards; a '*' or '#' inside a word is literal text.
    return is_literal(split_words(pattern))
