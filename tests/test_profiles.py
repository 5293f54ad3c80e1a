"""Version profiles: what each RabbitMQ version does differently (docs/semantics.md)."""

from __future__ import annotations

import pytest

from xroute import PreconditionFailed, Topology, UnknownProfile
from xroute.core.profiles import VERSIONS


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


def test_bindings_to_a_direct_reply_to_queue_are_refused_from_43():
    from xroute import AccessRefused, UnknownQueue

    for version in (None, "main", *VERSIONS):
        t = Topology(rabbitmq=version)
        t.declare_exchange("x", "fanout")
        refused = AccessRefused if version in (None, "main", "4.3") else UnknownQueue
        with pytest.raises(refused) as error:
            t.bind("x", "amq.rabbitmq.reply-to.g1h2AA", "")
        if refused is AccessRefused:  # 403 before anything is looked up (PR #15935)
            assert error.value.reply == (
                403, "cannot bind or unbind to a volatile (direct reply-to) queue"
            )


def test_an_unparsable_selector_is_541_before_43_and_406_after():
    from xroute import SelectorError

    for version, code in (("3.10", 541), ("4.0", 541), ("4.3", 406), ("main", 406)):
        t = Topology(rabbitmq=version)
        t.declare_exchange("j", "x-jms-topic")
        t.declare_queue("q")
        with pytest.raises(SelectorError) as error:
            t.bind("j", "q", "k", {"rjms_erlang_selector": "{'>', ."})
        assert error.value.reply[0] == code
        assert error.value.reply[1].startswith("invalid JMS selector") == (code == 406)
