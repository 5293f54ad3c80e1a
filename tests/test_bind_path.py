"""A topology's bind path (`Topology.bind` -> `TopicExchange.bind` -> `TopicMatcher.add_new`,
checked and split once; the shape index's matcher kept until a shape comes or goes; past the
shapes, wildcard bindings waiting for the trie until a reader: `AutoEngine._flush_pending`):
every route after any interleaving of binds, unbinds, routes and walks (which read the
bindings' own matcher) equals the reference, with the shape bounds low enough that random
sessions cross them both ways."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import keys, patterns
from xroute.core.keys import split_words
from xroute.core.topology import Topology
from xroute.engines import shapes
from xroute.engines.reference import pattern_matches

QUEUES = ["q1", "q2", "q3"]
steps = st.lists(
    st.one_of(
        st.tuples(st.just("bind"), patterns, st.sampled_from(QUEUES)),
        st.tuples(st.just("unbind"), st.integers(0, 30)),
        st.tuples(st.just("route"), keys),
        st.tuples(st.just("walk"), keys),  # the bindings' own matcher (`route_message`)
    ),
    max_size=40,
)


def _truth(live: list[tuple[str, str]], key: str) -> frozenset[str]:
    words = split_words(key)
    return frozenset(q for p, q in live if pattern_matches(split_words(p), words))


def _session(ops: list) -> None:
    topology = Topology()
    topology.declare_exchange("x", "topic")
    for queue in QUEUES:
        topology.declare_queue(queue)
    live: list[tuple[str, str]] = []
    for op in ops:
        if op[0] == "bind":
            _, pattern, queue = op
            topology.bind("x", queue, pattern)
            if (pattern, queue) not in live:
                live.append((pattern, queue))
        elif op[0] == "unbind" and live:
            pattern, queue = live.pop(op[1] % len(live))
            topology.unbind("x", queue, pattern)
        elif op[0] == "route":
            assert topology.route("x", op[1]) == _truth(live, op[1]), (live, op[1])
        elif op[0] == "walk":
            matched: list = []
            found = topology.route_message("x", op[1], observer=lambda x, m, via: matched.extend(m))
            assert found == _truth(live, op[1]), (live, op[1])
            assert sorted((b.routing_key, b.destination.name) for b in matched) == sorted(
                (p, q) for p, q in live if pattern_matches(split_words(p), split_words(op[1])))
    for key in ("", "a", "a.b", "a.b.c", "b..c", "a.b.c.a.b"):
        assert topology.route("x", key) == _truth(live, key), (live, key)
    assert sorted((b.routing_key, b.destination.name) for b in topology.bindings()) == sorted(
        live)


@settings(max_examples=150, deadline=None)
@given(ops=steps)
def test_binds_unbinds_and_routes_equal_the_reference(ops):
    _session(ops)


@pytest.mark.parametrize("max_shapes", [1, 2])
@settings(max_examples=100, deadline=None)
@given(ops=steps)
def test_shape_bounds_crossed_both_ways_stay_exact(max_shapes, ops):
    """A shape that comes or goes drops the kept matcher (`ShapeIndex.matcher`); one more
    pattern of a known shape keeps it, and it sees the new entry."""
    with mock.patch.object(shapes, "MAX_SHAPES", max_shapes), \
            mock.patch.object(shapes, "DROP_SHAPES", max_shapes + 1):
        _session(ops)


def test_a_bind_between_routes_of_one_shape_is_seen_at_once():
    topology = Topology()
    topology.declare_exchange("x", "topic")
    topology.declare_queue("q")
    topology.bind("x", "q", "device.1.*")
    assert topology.route("x", "device.2.t") == frozenset()
    topology.bind("x", "q", "device.2.*")  # same shape: the kept matcher, one entry more
    assert topology.route("x", "device.2.t") == {"q"}
    topology.unbind("x", "q", "device.1.*")
    assert topology.route("x", "device.1.t") == frozenset()
    assert topology.route("x", "device.2.u") == {"q"}


def test_wildcards_past_the_shapes_wait_for_a_reader_and_every_reader_sees_them():
    """Past `MAX_SHAPES` shapes the trie is not made at bind: the patterns wait; routes and
    a batch through the queue-name indexes, a walk of the bindings (which makes the trie)
    and binds and unbinds after it all see every binding."""
    from xroute.core.batch import BatchRouter

    topology = Topology()
    topology.declare_exchange("x", "topic")
    live = [(".".join(["a"] * i + ["*"]), f"q{i % 3}") for i in range(1, 12)]
    # q3 bound with '#': first routes go by queue name (`xroute.core.wildcard_queues`)
    live += [("b.#", "q0"), ("#.c", "q1"), ("a.b", "q2"), ("#", "q3")]
    for queue in ("q0", "q1", "q2", "q3"):
        topology.declare_queue(queue)
    for pattern, queue in live:
        topology.bind("x", queue, pattern)
    engine = topology.exchanges["x"].kind.matcher._engine
    assert engine._pending_patterns  # waiting: nothing read the wildcards yet
    probe = ["a.a.x", "b.c", "a.b", "a.a.a.a.a.a.a.z", "c", "a"]
    for key in probe:
        assert topology.route("x", key) == _truth(live, key), key
    assert engine._pending_patterns  # those routes did not read the bindings' trie
    routes = BatchRouter(topology).route("x", probe)
    assert [routes.queues(i) for i in range(len(probe))] == [_truth(live, k) for k in probe]
    matched: list = []
    walked = topology.route_message("x", "a.a.x", observer=lambda x, m, via: matched.extend(m))
    assert walked == _truth(live, "a.a.x")
    assert sorted(b.routing_key for b in matched) == ["#", "a.a.*"]
    assert engine._pending_patterns is None  # the walk read them: the trie is made
    topology.unbind("x", "q1", "#.c")
    live.remove(("#.c", "q1"))
    topology.bind("x", "q2", "z.*.*.*.*.*.*.*")  # after the trie: bound in it at once
    live.append(("z.*.*.*.*.*.*.*", "q2"))
    for key in probe + ["z.1.2.3.4.5.6.7"]:
        assert topology.route("x", key) == _truth(live, key), key


def test_first_routes_by_the_exchange_wildcard_function_see_the_waiting_patterns():
    """No queue bound with '#' and no fan-out: first routes ask the exchange's wildcard
    function (`AutoEngine.wildcard_function`), which while patterns wait is the flushing
    one, never the shape index's alone."""
    topology = Topology()
    topology.declare_exchange("x", "topic")
    topology.declare_queue("q")
    live = [(".".join(["a"] * i + ["*"]), "q") for i in range(1, 12)]
    for pattern, queue in live:
        topology.bind("x", queue, pattern)
    assert topology.exchanges["x"].kind.matcher._engine._pending_patterns
    assert topology.exchanges["x"].kind.wildcard_queues is None
    for key in ("a.z", "a.a.a.a.a.a.a.a.a.a.z", "b.z"):
        assert topology.route("x", key) == _truth(live, key), key
