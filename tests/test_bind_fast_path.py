"""The bind path's shortcuts (issue 36, goal 5-6: branch ``bind-path``) and what they must
leave as it was: the usual bind and queue declare go without the calls that check the rarer
cases (every other case still takes them, in RabbitMQ's order); a topic exchange asks its
matcher for the wildcard function once after many wildcard binds, not after each; a key's
many members are kept as a dict's keys (a third of a set's bytes). Routes against the
reference after any interleaving are `tests/test_bind_path.py`'s; no timing is asserted."""

from __future__ import annotations

from unittest import mock

import pytest

from xroute.bench.contact import traced_bytes_per_binding
from xroute.bench.shapes import unicast
from xroute.core import topology as topology_module
from xroute.core.errors import (
    AccessRefused,
    InvalidArguments,
    InvalidPattern,
    UnknownExchange,
    UnknownQueue,
)
from xroute.core.model import NO_ARGUMENTS, Destination
from xroute.core.topology import Topology
from xroute.engines import TopicMatcher
from xroute.engines.frozen_sets import FrozenSets


def _topology(**options) -> Topology:
    topology = Topology(**options)
    topology.declare_exchange("x", "topic")
    return topology


def test_a_plain_bind_of_a_new_key_skips_the_identity_checks_and_is_the_binding_they_make():
    topology = _topology()
    topology.declare_queue("q")
    with mock.patch.object(Topology, "_binding_identity", side_effect=AssertionError):
        assert topology.bind("x", "q", "a.b") == []
        assert topology.bind("x", "q", "a.*") == []
    (literal, wildcard) = topology.bindings("x")
    assert (literal.source, literal.destination, literal.routing_key) == (
        "x", Destination("queue", "q"), "a.b")
    assert literal.arguments is NO_ARGUMENTS and wildcard.routing_key == "a.*"
    assert literal.target is wildcard.target  # the queue's shared name (`Binding.target`)
    # A key bound already is looked up (`BindingTable.find`): the same binding again is one
    # binding, and a binding with arguments (the full path) is another one.
    with mock.patch.object(Topology, "_binding_identity", side_effect=AssertionError):
        assert topology.bind("x", "q", "a.b") == [] and len(topology.bindings()) == 2
    topology.bind("x", "q", "a.b", {})  # an empty table is no table
    assert len(topology.bindings()) == 2
    topology.bind("x", "q", "a.b", {"k": 1})
    assert len(topology.bindings()) == 3
    assert topology.route("x", "a.b") == {"q"} and topology.route("x", "a.c") == {"q"}
    topology.unbind("x", "q", "a.b")
    assert topology.route("x", "a.b") == {"q"}  # the binding with arguments is left
    topology.unbind("x", "q", "a.b", {"k": 1})
    topology.unbind("x", "q", "a.*")
    assert topology.route("x", "a.b") == frozenset() and topology.bindings() == []


@pytest.mark.parametrize(("source", "destination", "key", "error"), [
    ("nowhere", "q", "a", UnknownExchange),
    ("x", "nowhere", "a", UnknownQueue),
    ("", "q", "a", AccessRefused),  # the default exchange
    ("x", "q", "a" * 256, InvalidPattern),
    ("x", "q", 7, InvalidPattern),
    ("x", 7, "a", UnknownQueue),
    (7, "q", "a", UnknownExchange),
    ("x", "amq.rabbitmq.reply-to.abc", "a", AccessRefused),  # 4.3 refuses it first
])
@pytest.mark.parametrize("bound_before", [False, True])
def test_every_bind_the_shortcut_does_not_take_is_refused_as_before(source, destination, key,
                                                                    error, bound_before):
    topology = _topology()
    topology.declare_queue("q")
    if bound_before:  # the key has a binding already (to another queue)
        topology.declare_queue("other")
        topology.bind("x", "other", key if isinstance(key, str) and len(key) < 256 else "a")
    held = topology.bindings()
    with pytest.raises(error):
        topology.bind(source, destination, key)
    assert topology.bindings() == held


def test_binds_the_shortcut_leaves_to_the_full_path_are_made_as_before():
    topology = _topology(rabbitmq="3.13")  # binds to a reply-to queue's name are allowed
    topology.declare_queue("amq.rabbitmq.reply-to.abc")
    topology.declare_queue("kept", durable=False)  # kept as its `Queue`
    topology.declare_exchange("y", "fanout")
    topology.declare_queue("é")
    topology.bind("x", "amq.rabbitmq.reply-to.abc", "r")
    topology.bind("x", "kept", "k")
    topology.bind("x", "y", "e", destination_type="exchange")
    topology.bind("x", "é", "é.*")  # not ASCII
    topology.bind("y", "kept", "")
    assert topology.route("x", "r") == {"amq.rabbitmq.reply-to.abc"}
    assert topology.route("x", "k") == {"kept"}
    assert topology.route("x", "e") == {"kept"}
    assert topology.route("x", "é.1") == {"é"}
    assert topology.queues["kept"].durable is False
    with pytest.raises(InvalidArguments):
        topology.bind("x", "kept", "k", destination_type="neither")  # type: ignore[arg-type]


def test_a_plain_queue_declare_skips_the_name_checks_and_is_the_queue_they_make():
    topology = Topology()
    with mock.patch.object(topology_module, "_check_name", side_effect=AssertionError):
        topology.declare_queue("q")
        topology.declare_queue("q")  # a redeclare: still one queue
    queue = topology.queues["q"]
    assert (queue.name, queue.durable, queue.auto_delete, queue.arguments) == (
        "q", True, False, {})
    assert len(topology.queues) == 1
    # Every other declare is checked as before.
    for name, error in (("", InvalidArguments), (7, InvalidArguments),
                        ("a" * 256, InvalidArguments)):
        with pytest.raises(error):
            topology.declare_queue(name)  # type: ignore[arg-type]
    topology.declare_queue("é", durable=False)
    topology.declare_queue("args", arguments={"x-max-length": 3})
    assert topology.queues["é"].durable is False
    assert topology.queues["args"].arguments == {"x-max-length": 3}


def test_a_watched_topology_is_told_of_a_plain_queue_declare():
    topology = Topology()
    told = []

    class Watcher:
        def topology_changing(self, what, name):
            told.append((what, name))

        def binding_changed(self, binding, added):
            told.append(("bound" if added else "unbound", binding.routing_key))

    watcher = Watcher()
    topology.watch(watcher)
    topology.declare_exchange("x", "topic")
    told.clear()
    topology.declare_queue("q")
    topology.bind("x", "q", "a.b")
    assert told == [("queue", "q"), ("binding", "x"), ("bound", "a.b")]


def test_a_declare_drops_the_routes_cached_for_the_queue_name():
    topology = Topology()
    assert topology.route("", "q") == frozenset()  # cached: the default exchange, no queue
    topology.declare_queue("q")
    assert topology.route("", "q") == {"q"}


def test_the_wildcard_function_is_asked_once_after_many_wildcard_binds_and_after_each_unbind():
    topology = _topology()
    for i in range(20):
        topology.declare_queue(f"q{i}")
    exchange = topology.exchanges["x"].kind
    asked = mock.patch.object(TopicMatcher, "wildcard_matcher", autospec=True,
                              side_effect=TopicMatcher.wildcard_matcher)
    with asked as wildcard_matcher:

        def asked_by_the_exchange() -> int:  # (the queue-name index has a matcher too)
            return sum(call.args[0] is exchange.matcher for call in wildcard_matcher.mock_calls)

        for i in range(20):
            topology.bind("x", f"q{i}", f"a.*.{i}")
            topology.bind("x", f"q{i}", f"b.{i}")
        assert asked_by_the_exchange() == 0
        assert topology.route("x", "a.z.3") == {"q3"}
        assert topology.route("x", "a.z.4") == {"q4"}
        assert asked_by_the_exchange() == 1
        assert exchange.match_wildcards is not exchange._wildcards_changed
        topology.unbind("x", "q3", "a.*.3")
        assert topology.route("x", "a.y.3") == frozenset()
        assert asked_by_the_exchange() == 2
        topology.bind("x", "q3", "#")  # from here on, wildcards are matched by queue name
        assert topology.route("x", "a.x.4") == {"q3", "q4"}
        assert topology.route("x", "b.5") == {"q3", "q5"}
        topology.bind("x", "q7", "*.*.7")
        assert topology.route("x", "a.x.7") == {"q3", "q7"}
        assert topology.route_message("x", "a.x.7") == {"q3", "q7"}  # the matcher's walk


def test_a_key_of_many_members_keeps_them_as_a_dict_and_stays_exact():
    sets = FrozenSets(freeze_now=4)
    for member in range(1_000):
        sets.add("k", member)
    assert type(sets.members("k")) is dict and 999 in sets.members("k")
    assert sets.get("k") == frozenset(range(1_000))
    for member in range(996):
        sets.remove("k", member)
    assert sets.get("k") == {996, 997, 998, 999} and type(sets.members("k")) is frozenset


def test_bytes_a_binding_of_rabbitmq_43_unicast_stay_under_the_bound():
    # tracemalloc counts what a build allocates and keeps: the same on every machine and
    # load (Python 3.11: 376 bytes at 2k queues; 410 before the members of a key with many,
    # the 2k '#' bindings, were a dict's keys rather than a set).
    assert traced_bytes_per_binding(unicast(2_000, 10)) < 390
