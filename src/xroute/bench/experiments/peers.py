"""The peers of `xroute.bench.peers` inside the seed experiments: built on the experiment's own
bindings, routing its keys, their wrong routes counted against the reference answers and
their time taken like the engines'.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from xroute.bench.experiments.common import seconds_per_item, traced_bytes, wrong_routes
from xroute.bench.peers import PEER_NAMES, build_peer

DIRECT_PEER_NAMES = ("kombu-direct",)
LABELS = {
    "kombu": "kombu TopicExchange",
    "regex": "regex per binding",
    "mqtt": "paho-mqtt MQTTMatcher",
    "kombu-direct": "kombu DirectExchange",
}


def peer_rows(
    bound: Sequence[tuple[str, Hashable]],
    keys: Sequence[str],
    truth: Sequence[frozenset],
    timing_keys: Sequence[str] | None = None,
    kind: str = "topic",
) -> list[dict[str, Any]]:
    """One row per peer: µs per route, wrong routes on ``keys`` (``truth`` is the reference's
    answers), and how many of the ``bound`` (pattern, destination) pairs it could take.

    The peer routes ``keys`` once to be judged, then ``timing_keys`` (default ``keys``) timed:
    the first pass also fills kombu's regex cache, so the timed pass is warm, as the engines'.
    ``kind`` is ``"topic"`` (kombu, regex, paho-mqtt) or ``"direct"`` (kombu's direct).
    """
    names = PEER_NAMES if kind == "topic" else DIRECT_PEER_NAMES
    rows = []
    for name in names:
        peer, skipped = build_peer(name, bound)
        answers = [peer.match(key) for key in keys]
        seconds = seconds_per_item(peer.match, timing_keys if timing_keys is not None else keys)
        rows.append(
            {
                "peer": LABELS.get(name, name),
                "us_per_route": seconds * 1e6,
                "wrong": wrong_routes(truth, answers),
                "keys": len(keys),
                "bindings": f"{len(bound) - skipped:,} of {len(bound):,}",
            }
        )
    return rows


def peer_memory(bound: Sequence[tuple[str, Hashable]], keys: Sequence[str] = ()) -> dict[str, int]:
    """Bytes each topic peer holds after taking ``bound`` and routing ``keys``.

    kombu keeps its compiled regexes in a class-wide cache, so call this before the peers
    route anything in an experiment, or kombu's regexes are not counted.
    """
    found = {}
    for name in PEER_NAMES:

        def build(name: str = name) -> Any:
            peer, _ = build_peer(name, bound)
            for key in keys:
                peer.match(key)
            return peer

        found[LABELS.get(name, name)], _ = traced_bytes(build)
    return found
