"""A topology's bind path (`Topology.bind` -> `TopicExchange.bind` -> `TopicMatcher.add_new`,
checked and split once; the shape index's matcher kept until a shape comes or goes): every
route after any interleaving of binds, unbinds and routes equals the reference, with the
shape bounds low enough that random sessions cross them both ways."""

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
