"""The first route of a key on a topic exchange whose queues are bound with '#': its wildcard
bindings matched by queue name (`xroute.core.wildcard_queues`), equal to the reference walk."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import apply_route_step, check_route_steps, keys, patterns, route_topologies
from xroute import Topology

QUEUES = ["q1", "q2", "q3"]

steps = st.lists(
    st.tuples(st.sampled_from(["bind", "bind", "unbind"]),
              # floors too ('*.#': keys of a word or more), which keep patterns out by queue
              st.one_of(patterns, st.sampled_from(["#", "#.#", "a.#", "*.#", "#.*", "*.*.#",
                                                   "*.#.*"])),
              st.sampled_from([*QUEUES, "e"]),
              st.sampled_from([None, {"x": 1}, {"x": 2}])),
    max_size=30)


def _topologies() -> list[Topology]:
    return route_topologies(QUEUES)


_apply = apply_route_step


@settings(max_examples=150, deadline=None)
@given(steps=steps, probes=st.lists(keys, min_size=1, max_size=8))
def test_first_routes_by_queue_equal_the_reference_walk(steps, probes):
    """Random binds and unbinds, '#' and floors ('*.#') among them often, repeats with other
    arguments and wildcard bindings to an exchange: after each, every probe key's route (a
    first route: any change drops the route cache) equals the reference engine's uncached
    walk."""
    check_route_steps(QUEUES, steps, probes)


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


def test_a_pattern_bound_to_many_queues_makes_the_index_and_routes_stay_exact():
    """RabbitMQ 4.3's broadcast: ``broadcast.#`` to many queues. From about `FANOUT_QUEUES`
    of them the exchange matches its wildcard bindings by queue name; routes before and after,
    and after unbinding, equal the reference walk."""
    from xroute.core.wildcard_queues import FANOUT_QUEUES

    topology, truth = topologies = _topologies()[::2]
    exchange = topology.exchanges["t"].kind
    queues = [f"b{i}" for i in range(FANOUT_QUEUES + FANOUT_QUEUES // 4)]
    for made in topologies:
        for queue in queues:
            made.declare_queue(queue)
    _apply(topologies, "bind", "a.*", "q1", None)
    _apply(topologies, "bind", "broadcast.x", "q2", None)  # literal: not counted
    for i, queue in enumerate(queues):
        _apply(topologies, "bind", "broadcast.#", queue, None)
        if i == FANOUT_QUEUES // 2:
            assert exchange.wildcard_queues is None  # few queues a pattern: no index
            assert topology.route("t", "broadcast.y") == truth.route("t", "broadcast.y")
    assert exchange.wildcard_queues is not None
    for key in ("broadcast.x", "broadcast.z", "a.b", "broadcast"):
        assert topology.route("t", key) == truth.route("t", key)
    assert len(topology.route("t", "broadcast.x")) == len(queues) + 1
    for queue in queues[::2]:
        _apply(topologies, "unbind", "broadcast.#", queue, None)
    assert topology.route("t", "broadcast.x") == truth.route("t", "broadcast.x")


def test_fan_out_counter_counts_by_pattern_and_forgets_removed_bindings():
    from xroute.core.wildcard_queues import FANOUT_QUEUES, FanOutCounter

    counter = FanOutCounter()
    assert not any(counter.add(f"p{i}.#") for i in range(2 * FANOUT_QUEUES))  # one queue each
    for _ in range(FANOUT_QUEUES // 2):
        assert not counter.add("wide.#")
    for _ in range(FANOUT_QUEUES // 4):
        counter.remove("wide.#")
    found = [counter.add("wide.#") for _ in range(FANOUT_QUEUES)]
    assert found[-1] and not found[0]
