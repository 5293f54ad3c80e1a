"""The topic matchers a Python user would otherwise reach for, behind one small interface, so
that benchmarks time them on the same bindings and keys as xroute's engines and count their
wrong routes against the `reference` engine.

- ``kombu``: kombu's in-memory topic exchange (``kombu.transport.virtual.exchange.
  TopicExchange``), as its virtual transports route: one regex per binding, all scanned on
  every lookup. Its ``*`` is ``[^.]+`` and its ``#`` is ``.*?`` between literal dots, so it
  misses ``a.#`` for ``a``, ``a.#.b`` for ``a.b`` and empty words, and ``#`` crosses dots.
- ``regex``: a per-binding compiled regex written with care to be exact (each key word is
  preceded by a dot, so ``#`` can match zero words): correct, and as slow as a scan must be.
- ``mqtt``: paho-mqtt's ``MQTTMatcher`` trie, with patterns translated to MQTT filters
  (``.`` -> ``/``, ``*`` -> ``+``, ``#`` -> ``#``). MQTT allows ``#`` only as the last level,
  so other patterns are skipped and counted; its routes are then wrong for every key that
  a skipped pattern matches.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from xroute.core.keys import HASH, STAR, split_words

PEER_NAMES = ("kombu", "regex", "mqtt")


class KombuPeer:
    """kombu's virtual topic exchange: ``prepare_bind`` per binding, ``lookup`` per key."""

    name = "kombu"

    def __init__(self) -> None:
        from kombu.transport.virtual.exchange import TopicExchange

        self._exchange = TopicExchange(channel=None)
        self._table: list[tuple[str, str, Any]] = []

    def add(self, pattern: str, destination: Hashable) -> bool:
        """Bind as kombu does (always expressible)."""
        self._table.append(self._exchange.prepare_bind(destination, "x", pattern, {}))
        return True

    def match(self, key: str) -> frozenset:
        """kombu's lookup: every binding's regex tried in turn."""
        return frozenset(self._exchange.lookup(self._table, "x", key, None))


def exact_regex(pattern: str) -> re.Pattern[str]:
    """An exact regex for an AMQP pattern, to be matched against `dotted` keys."""
    parts = []
    for word in split_words(pattern):
        if word == STAR:
            parts.append(r"\.[^.]*")
        elif word == HASH:
            parts.append(r"(?:\.[^.]*)*")
        else:
            parts.append(r"\." + re.escape(word))
    return re.compile("".join(parts))


def dotted(key: str) -> str:
    """The key with a dot before every word ("" has no words, so stays "")."""
    return "." + key if key else ""


class RegexPeer:
    """One exact compiled regex per binding, every one tried on every key."""

    name = "regex"

    def __init__(self) -> None:
        self._bindings: list[tuple[re.Pattern[str], Hashable]] = []

    def add(self, pattern: str, destination: Hashable) -> bool:
        """Compile the binding's regex (always expressible)."""
        self._bindings.append((exact_regex(pattern), destination))
        return True

    def match(self, key: str) -> frozenset:
        """The destinations of every regex that matches the whole (dotted) key."""
        text = dotted(key)
        return frozenset(d for regex, d in self._bindings if regex.fullmatch(text))


def mqtt_filter(pattern: str) -> str | None:
    """The MQTT topic filter for an AMQP pattern, or None if MQTT cannot express it."""
    words = split_words(pattern)
    if not words or any("/" in w or "+" in w for w in words):
        return None
    if HASH in words[:-1] or any(w != HASH and "#" in w for w in words):
        return None  # MQTT: '#' only as the last level, and never inside a word
    return "/".join("+" if w == STAR else w for w in words)


class MqttPeer:
    """paho-mqtt's MQTTMatcher on the patterns MQTT can express; keys become topics."""

    name = "mqtt"

    def __init__(self) -> None:
        from paho.mqtt.matcher import MQTTMatcher

        self._matcher = MQTTMatcher()

    def add(self, pattern: str, destination: Hashable) -> bool:
        """Add the translated filter; False (skipped) if MQTT cannot express the pattern."""
        topic_filter = mqtt_filter(pattern)
        if topic_filter is None:
            return False
        try:
            bound = self._matcher[topic_filter]
        except KeyError:
            bound = set()
            self._matcher[topic_filter] = bound
        bound.add(destination)
        return True

    def match(self, key: str) -> frozenset:
        """The union of the destination sets of every matching filter."""
        found: set[Hashable] = set()
        for bound in self._matcher.iter_match(key.replace(".", "/")):
            found |= bound
        return frozenset(found)


class KombuDirectPeer:
    """kombu's virtual direct exchange (for direct-exchange experiments, not in `PEER_NAMES`):
    every binding's key is compared on each lookup."""

    name = "kombu-direct"

    def __init__(self) -> None:
        from kombu.transport.virtual.exchange import DirectExchange

        self._exchange = DirectExchange(channel=None)
        self._table: list[tuple[str, Any, Any]] = []

    def add(self, pattern: str, destination: Hashable) -> bool:
        """Bind as kombu does (any direct key is expressible)."""
        self._table.append(self._exchange.prepare_bind(destination, "x", pattern, {}))
        return True

    def match(self, key: str) -> frozenset:
        """kombu's lookup: a scan of the whole binding table."""
        return frozenset(self._exchange.lookup(self._table, "x", key, None))


PEERS: dict[str, Callable[[], Any]] = {
    "kombu": KombuPeer, "regex": RegexPeer, "mqtt": MqttPeer, "kombu-direct": KombuDirectPeer,
}


def can_hold(name: str, pattern: str) -> bool:
    """True if the peer ``name`` can express ``pattern`` (only MQTT cannot, sometimes)."""
    return name != "mqtt" or mqtt_filter(pattern) is not None


def build_peer(name: str, bindings: Iterable[tuple[str, Hashable]]) -> tuple[Any, int]:
    """A peer holding ``bindings``, and how many of them it had to skip."""
    peer = PEERS[name]()
    skipped = sum(1 for pattern, destination in bindings if not peer.add(pattern, destination))
    return peer, skipped
