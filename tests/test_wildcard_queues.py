"""The first route of a key on a topic exchange whose queues are bound with '#': its wildcard
bindings matched by queue name (`xroute.core.wildcard_queues`), equal to the reference walk."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import keys, patterns
from xroute import Topology
from xroute.core.errors import XRouteError

QUEUES = ["q1", "q2", "q3"]

steps = st.lists(
    st.tuples(st.sampled_from(["bind", "bind", "unbind"]),
              st.one_of(patterns, st.sampled_from(["#", "#.#", "a.#", "*.#"])),
              st.sampled_from([*QUEUES, "e"]),
              st.sampled_from([None, {"x": 1}, {"x": 2}])),
    max_size=30)


def _topologies() -> list[Topology]:
    made = [Topology(), Topology(route_cache=False), Topology("reference", False)]
    for topology in made:
        topology.declare_exchange("t", "topic")
        topology.declare_exchange("e", "fanout")
        for queue in [*QUEUES, "via-e"]:
            topology.declare_queue(queue)
        topology.bind("e", "via-e")
    return made


def _apply(topologies: list[Topology], operation: str, pattern: str, destination: str,
           arguments: dict | None) -> None:
    kind = "exchange" if destination == "e" else "queue"
    for topology in topologies:
        try:
            getattr(topology, operation)("t", destination, pattern, arguments, kind)
        except XRouteError:
            pass  # refused alike by all: the routes below are compared


@settings(max_examples=150, deadline=None)
@given(steps=steps, probes=st.lists(keys, min_size=1, max_size=8))
def test_first_routes_by_queue_equal_the_reference_walk(steps, probes):
    """Random binds and unbinds, '#' among them often, repeats with other arguments and
    wildcard bindings to an exchange: after each, every probe key's route (a first route:
    any change drops the route cache) equals the reference engine's uncached walk."""
    cached, plain, truth = topologies = _topologies()
    for step in steps:
        _apply(topologies, *step)
        expected = [truth.route("t", key) for key in probes]
        assert [cached.route("t", key) for key in probes] == expected
        assert [cached.route("t", key) for key in probes] == expected  # from the cache
        assert [plain.route("t", key) for key in probes] == expected


def test_index_is_made_on_the_first_queue_bound_with_hash_and_keeps_repeats():
    topology, truth = topologies = _topologies()[::2]
    exchange = topology.exchanges["t"].kind
    _apply(topologies, "bind", "a.*", "q1", None)
    _apply(topologies, "bind", "b.#", "q2", None)
    assert exchange.wildcard_queues is None  # no catch-all: nothing to gain, no memory spent
    _apply(topologies, "bind", "#", "q1", None)
    index = exchange.wildcard_queues
    assert index is not None
    assert index._matcher.stats()["shadowed_bindings"] == 1  # a.* of q1: covered by '#'
    # b.# to q2 three times (other arguments): q2 gets b.x until the last is unbound
    _apply(topologies, "bind", "b.#", "q2", {"x": 1})
    _apply(topologies, "bind", "b.#", "q2", {"x": 2})
    for arguments in (None, {"x": 1}):
        _apply(topologies, "unbind", "b.#", "q2", arguments)
        assert topology.route("t", "b.x") == truth.route("t", "b.x") == {"q1", "q2"}
    _apply(topologies, "unbind", "b.#", "q2", {"x": 2})
    assert topology.route("t", "b.x") == truth.route("t", "b.x") == {"q1"}
    # a wildcard binding to an exchange: routes take the full walk while it lasts
    _apply(topologies, "bind", "c.*", "e", None)
    assert index.exchange_bindings == 1
    assert topology.route("t", "c.d") == truth.route("t", "c.d") == frozenset({"q1", "via-e"})
    _apply(topologies, "unbind", "c.*", "e", None)
    assert index.exchange_bindings == 0
    _apply(topologies, "unbind", "#", "q1", None)
    assert exchange.wildcard_queues is index  # kept: a toggled '#' must not rebuild it
    assert topology.route("t", "a.z") == truth.route("t", "a.z") == frozenset({"q1"})
    assert topology.route("t", "z") == frozenset()
