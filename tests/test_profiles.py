"""Version profiles: what each RabbitMQ version does differently (docs/semantics.md)."""

from __future__ import annotations

import pytest

from xroute import PreconditionFailed, Topology, UnknownProfile
from xroute.profiles import VERSIONS


def test_unknown_profiles_are_named():
    with pytest.raises(UnknownProfile, match="2.8.*4.3, 4.0, 3.13, 3.12, 3.10"):
        Topology(rabbitmq="2.8")


def test_topic_hash_words_are_limited_from_43():
    for version in (None, *VERSIONS):
        t = Topology(rabbitmq=version)
        t.declare_exchange("t", "topic")
        t.declare_queue("q")
        t.bind("t", "q", "#.a.#")
        if version == "4.3":
            with pytest.raises(PreconditionFailed, match="more than 2"):
                t.bind("t", "q", "#.a.#.b.#")
        else:
            t.bind("t", "q", "#.a.#.b.#")
            assert t.route("t", "x.a.y.b") == {"q"}


def test_3x_matches_a_top_level_integer_with_a_float():
    # Up to 3.12 (==); from 3.13 headers compare with =:= (message containers, PR #5077).
    for version, equal in (("3.10", True), ("3.12", True), ("3.13", False), ("4.0", False),
                           (None, False)):
        t = Topology(rabbitmq=version)
        t.declare_exchange("h", "headers")
        t.declare_queue("q")
        t.bind("h", "q", "", {"n": 1.0})
        assert (t.route("h", "", {"n": 1}) == {"q"}) is equal
        assert t.route("h", "", {"n": [1]}) == frozenset()  # only at the top
        assert t.route("h", "", {"n": 1.5}) == frozenset()
