"""`BatchRouter.route` and `TopicMatcher.match_many_ids` on the contact bench's shapes (issue 36):
first passes over keys new to the topology or the matcher, repeated passes (the key memo),
keys mixed with keys seen, and binding changes between batches, against
`Topology.route_message` and the ``reference`` engine."""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xroute import TopicMatcher, Topology
from xroute.bench.contact import CONTACT_SHAPES, shape_at
from xroute.core.batch import BatchRouter

EXCHANGE = "shapes"
BINDINGS = 2_000  # a shape's bindings taken, spread over all of them
KEYS = 400


@lru_cache(maxsize=None)
def _sample(name: str) -> tuple[tuple, tuple, tuple]:
    """(bindings, queues, keys) of a shape, cut down: every n-th binding, first and
    repeated keys."""
    shape = shape_at(name, 0.002)
    step = max(1, len(shape.bindings) // BINDINGS)
    bindings = tuple(shape.bindings[::step])
    queues = tuple(sorted({queue for _, queue in bindings}))
    keys = tuple(shape.first_keys[:KEYS]) + tuple(shape.repeat_keys[: KEYS // 4])
    return bindings, queues, keys


def _topology(bindings, queues) -> Topology:
    topology = Topology()
    topology.declare_exchange(EXCHANGE, "topic")
    for queue in queues:
        topology.declare_queue(queue)
    for pattern, queue in bindings:
        topology.bind(EXCHANGE, queue, pattern)
    return topology


def _check_router(router: BatchRouter, topology: Topology, keys: list[str]) -> None:
    routes = router.route(EXCHANGE, pa.array(keys, pa.string()))
    assert not routes.errors
    for i, key in enumerate(keys):
        assert routes.queues(i) == topology.route_message(EXCHANGE, key), key


def _check_matcher(matcher: TopicMatcher, truth: TopicMatcher, keys: list[str]) -> None:
    offsets, ids = matcher.match_many_ids(pa.array(keys, pa.string()))
    names = matcher.destinations()
    for i, key in enumerate(keys):
        got = ids[offsets[i]:offsets[i + 1]].tolist()
        assert len(set(got)) == len(got)
        assert frozenset(names[j] for j in got) == truth.match(key), key


@pytest.mark.parametrize("name", CONTACT_SHAPES)
def test_batches_on_a_shape_equal_single_routes(name):
    """New keys (a fresh topology, some routed one by one first), the same keys again (warm),
    then after a bind and an unbind: each batch equals `Topology.route_message`; the same
    passes of a fresh matcher equal ``reference``."""
    bindings, queues, keys = _sample(name)
    keys = list(keys)
    topology = _topology(bindings, queues)
    for key in keys[::7]:  # some keys the route cache holds, the others new
        topology.route(EXCHANGE, key)
    router = BatchRouter(topology)
    for _ in range(3):  # new, seen once (kept), warm
        _check_router(router, topology, keys)
    pattern = bindings[len(bindings) // 2][0]
    topology.declare_queue("churn")
    topology.bind(EXCHANGE, "churn", pattern)
    _check_router(router, topology, keys)
    topology.unbind(EXCHANGE, bindings[0][1], bindings[0][0])
    _check_router(router, topology, keys[::-1])
    truth, matcher = TopicMatcher(engine="reference"), TopicMatcher()
    for pattern, queue in bindings:
        truth.add(pattern, queue)
        matcher.add(pattern, queue)
    for _ in range(3):
        _check_matcher(matcher, truth, keys)


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(CONTACT_SHAPES), data=st.data())
def test_batches_mixed_with_changes_equal_single_routes(name, data):
    """Batches of keys drawn from a shape (new, repeated within and across batches), each
    followed maybe by a bind or an unbind of one of its patterns: every batch equals
    `Topology.route_message`."""
    bindings, queues, keys = _sample(name)
    topology = _topology(bindings, queues)
    topology.declare_queue("churn")
    router = BatchRouter(topology)
    bound: set[str] = set()
    for _ in range(data.draw(st.integers(1, 4))):
        batch = data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=300))
        _check_router(router, topology, batch)
        change = data.draw(st.sampled_from(["none", "bind", "unbind"]))
        pattern = data.draw(st.sampled_from(bindings))[0]
        if change == "bind" and pattern not in bound:
            topology.bind(EXCHANGE, "churn", pattern)
            bound.add(pattern)
        elif change == "unbind" and bound:
            topology.unbind(EXCHANGE, "churn", bound.pop())


def _topology_with_detours(bindings, queues, engine: str = "auto") -> Topology:
    """A shape's topology whose exchange has an alternate exchange (fanout to queue
    ``unrouted``) and a fanout exchange ``e`` (to queue ``via-e``) that patterns may be
    bound to: an unrouted key takes the alternate's walk, and a key matched by a binding to
    ``e`` the full walk, on a batch's first pass as on a single first route."""
    topology = Topology(engine)
    topology.declare_exchange("alt", "fanout")
    topology.declare_exchange("e", "fanout")
    for queue in ("unrouted", "via-e", "churn"):
        topology.declare_queue(queue)
    topology.bind("alt", "unrouted")
    topology.bind("e", "via-e")
    topology.declare_exchange(EXCHANGE, "topic", "alt")
    for queue in queues:
        topology.declare_queue(queue)
    for pattern, queue in bindings:
        topology.bind(EXCHANGE, queue, pattern)
    return topology


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(CONTACT_SHAPES), data=st.data())
def test_first_passes_through_detours_equal_single_routes(name, data):
    """A batch's first pass over keys new to the topology (`Topology.first_route_reader`),
    with an alternate exchange and bindings to an exchange made and removed between batches
    (a pattern of the shape, or a key of the batch as a literal pattern): every batch equals
    `Topology.route_message`, and the ``reference`` engine's topology routes alike."""
    bindings, queues, keys = _sample(name)
    topology = _topology_with_detours(bindings, queues)
    truth = _topology_with_detours(bindings, queues, "reference")
    router = BatchRouter(topology)
    bound: list[tuple[str, str, str]] = []
    for _ in range(data.draw(st.integers(1, 4))):
        batch = data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=200))
        routes = router.route(EXCHANGE, pa.array(batch, pa.string()))
        assert not routes.errors
        for i, key in enumerate(batch):
            expected = truth.route_message(EXCHANGE, key)
            assert topology.route_message(EXCHANGE, key) == expected, key
            assert routes.queues(i) == expected, key
        change = data.draw(st.sampled_from(["none", "bind", "unbind"]))
        pattern = data.draw(st.sampled_from([data.draw(st.sampled_from(bindings))[0],
                                             data.draw(st.sampled_from(batch))]))
        destination = data.draw(st.sampled_from([("queue", "churn"), ("exchange", "e")]))
        if change == "bind" and (pattern, *destination) not in bound:
            for each in (topology, truth):
                each.bind(EXCHANGE, destination[1], pattern, None, destination[0])
            bound.append((pattern, *destination))
        elif change == "unbind" and bound:
            pattern, kind, target = bound.pop(data.draw(st.integers(0, len(bound) - 1)))
            for each in (topology, truth):
                each.unbind(EXCHANGE, target, pattern, None, kind)


@settings(max_examples=15, deadline=None)
@given(name=st.sampled_from(CONTACT_SHAPES), data=st.data())
def test_fresh_matcher_batches_with_changes_equal_reference(name, data):
    """A fresh matcher's `match_many_ids` (first passes over new keys, then repeats) with
    bindings made and removed between batches equals the ``reference`` engine."""
    bindings, _, keys = _sample(name)
    truth, matcher = TopicMatcher(engine="reference"), TopicMatcher()
    for pattern, queue in bindings:
        truth.add(pattern, queue)
        matcher.add(pattern, queue)
    for _ in range(data.draw(st.integers(1, 4))):
        _check_matcher(matcher, truth, data.draw(
            st.lists(st.sampled_from(keys), min_size=1, max_size=300)))
        pattern = data.draw(st.sampled_from(bindings))[0]
        if data.draw(st.booleans()) and not truth.has(pattern, "churn"):
            truth.add(pattern, "churn")
            matcher.add(pattern, "churn")
        elif truth.has(pattern, "churn"):
            truth.remove(pattern, "churn")
            matcher.remove(pattern, "churn")
