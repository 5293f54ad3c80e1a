"""Unbinding while wildcard patterns wait for the trie (`AutoEngine._unbind_pending`).

Past `MAX_SHAPES` shapes a topology's topic exchange keeps its later wildcard patterns in
two lists until something reads them. An unbind then takes its binding out of those lists
(or out of the shapes, for one bound before any waited) without making the trie: on the
seed mix at 100k bindings the first wildcard unbind after a bulk bind made the trie of 68k
waiting patterns (2.2 s). Every reader afterwards still sees exactly the bindings left."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import keys
from xroute.core.batch import BatchRouter
from xroute.core.keys import split_words
from xroute.core.topology import Topology
from xroute.engines import TopicMatcher, shapes
from xroute.engines.reference import pattern_matches

QUEUES = ["q0", "q1", "q2"]
# Patterns of many shapes (one per length), so that a few binds pass the shape bound.
wildcard_patterns = st.builds(
    lambda length, star, tail: ".".join(["a"] * length + [star] + (["#"] if tail else [])),
    st.integers(0, 8), st.sampled_from(["*", "b"]), st.booleans(),
).filter(lambda p: "*" in p or "#" in p)


def _truth(live: list[tuple[str, str]], key: str) -> frozenset[str]:
    words = split_words(key)
    return frozenset(q for p, q in live if pattern_matches(split_words(p), words))


def _topology() -> tuple[Topology, object]:
    topology = Topology()
    topology.declare_exchange("x", "topic")
    for queue in QUEUES:
        topology.declare_queue(queue)
    return topology, topology.exchanges["x"].kind.matcher._engine


def _check_every_reader(topology: Topology, live: list[tuple[str, str]]) -> None:
    probe = ["a", "a.b", "a.a.z", "a.a.a.a.b", "a.a.a.a.a.a.a.a.z.q", "z", ""]
    for key in probe:
        assert topology.route("x", key) == _truth(live, key), (live, key)
    routes = BatchRouter(topology).route("x", probe)
    assert [routes.queues(i) for i in range(len(probe))] == [_truth(live, k) for k in probe]
    for key in probe:  # the bindings' own matcher: the trie, made now from what is left
        matched: list = []
        topology.route_message("x", key, observer=lambda x, m, via: matched.extend(m))
        assert sorted((b.routing_key, b.destination.name) for b in matched) == sorted(
            (p, q) for p, q in live if pattern_matches(split_words(p), split_words(key)))
    assert sorted((b.routing_key, b.destination.name) for b in topology.bindings()) == sorted(
        live)


def test_an_unbind_while_patterns_wait_does_not_make_the_trie():
    topology, engine = _topology()
    live = [(".".join(["a"] * i + ["*"]), QUEUES[i % 3]) for i in range(1, 12)]
    for pattern, queue in live:
        topology.bind("x", queue, pattern)
    waiting = list(engine._pending_patterns)
    assert len(waiting) == len(live) - shapes.MAX_SHAPES  # the rest are in the shapes
    # one that waits (the middle of the lists), one that waits last, one in the shapes
    gone = [live[8], live[-1], live[0]]
    for pattern, queue in gone:
        topology.unbind("x", queue, pattern)
        live.remove((pattern, queue))
        assert engine._trie_deferred  # no trie made
    assert sorted(engine._pending_patterns) == sorted(set(waiting) - {p for p, _ in gone})
    # a bind after the unbinds waits too, at the place kept for it
    topology.bind("x", "q0", "a.a.a.a.a.a.a.a.a.*")
    live.append(("a.a.a.a.a.a.a.a.a.*", "q0"))
    assert "a.a.a.a.a.a.a.a.a.*" in engine._pending_patterns
    topology.unbind("x", "q0", "a.a.a.a.a.a.a.a.a.*")
    live.remove(("a.a.a.a.a.a.a.a.a.*", "q0"))
    assert engine._trie_deferred
    _check_every_reader(topology, live)


def test_when_the_last_waiting_pattern_goes_the_shapes_serve_again():
    topology, engine = _topology()
    live = [(".".join(["a"] * i + ["*"]), "q1") for i in range(1, 9)]
    for pattern, queue in live:
        topology.bind("x", queue, pattern)
    assert engine._pending_patterns
    for pattern, queue in live[shapes.MAX_SHAPES:]:
        topology.unbind("x", queue, pattern)
    live = live[:shapes.MAX_SHAPES]
    assert engine._pending_patterns is None
    assert engine._trie_deferred  # never made: the shapes hold every wildcard binding
    assert engine._by_shape is not None and engine._by_shape != engine._pending_match
    _check_every_reader(topology, live)


def test_an_unbind_with_arguments_asks_whether_a_waiting_binding_is_held_without_the_trie():
    """`Topology.unbind`'s full path checks the binding is held (`AutoEngine.holds`)."""
    topology, engine = _topology()
    live = [(".".join(["a"] * i + ["*"]), "q2") for i in range(1, 10)]
    for pattern, queue in live:
        topology.bind("x", queue, pattern, arguments={"k": 1})
    topology.unbind("x", "q2", "a.a.a.a.a.a.a.a.*", arguments={"k": 1})
    live.remove(("a.a.a.a.a.a.a.a.*", "q2"))
    assert engine._trie_deferred and engine._pending_patterns
    matcher = topology.exchanges["x"].kind.matcher
    binding = next(b for b in topology.bindings() if b.routing_key == "a.a.a.a.a.a.a.a.a.*")
    assert matcher.has("a.a.a.a.a.a.a.a.a.*", binding)
    assert engine._trie_deferred
    _check_every_reader(topology, live)


@pytest.mark.parametrize("max_shapes", [1, 2])
@settings(max_examples=120, deadline=None)
@given(binds=st.lists(st.tuples(wildcard_patterns, st.sampled_from(QUEUES)), max_size=25),
       unbinds=st.lists(st.integers(0, 40), max_size=25),
       rebinds=st.lists(st.tuples(wildcard_patterns, st.sampled_from(QUEUES)), max_size=5),
       extra=st.lists(keys, max_size=5))
def test_any_unbinds_while_patterns_wait_leave_every_reader_exact(
        max_shapes, binds, unbinds, rebinds, extra):
    """Binds past the shape bound, unbinds in any order (waiting or in the shapes), binds
    again, and only then any reader: all equal the reference."""
    with mock.patch.object(shapes, "MAX_SHAPES", max_shapes), \
            mock.patch.object(shapes, "DROP_SHAPES", max_shapes + 1):
        topology, engine = _topology()
        live: list[tuple[str, str]] = []
        for pattern, queue in binds:
            topology.bind("x", queue, pattern)
            if (pattern, queue) not in live:
                live.append((pattern, queue))
        for index in unbinds:
            if live:
                pattern, queue = live.pop(index % len(live))
                topology.unbind("x", queue, pattern)
        for pattern, queue in rebinds:
            topology.bind("x", queue, pattern)
            if (pattern, queue) not in live:
                live.append((pattern, queue))
        assert engine._trie_deferred  # nothing read the wildcards: no trie made
        for key in extra:
            assert topology.route("x", key) == _truth(live, key), (live, key)
        _check_every_reader(topology, live)


@settings(max_examples=150, deadline=None)
@given(binds=st.lists(st.tuples(wildcard_patterns, st.sampled_from(QUEUES)), max_size=25),
       unbinds=st.lists(st.integers(0, 40), max_size=25),
       probe=st.lists(keys, max_size=5))
def test_a_matcher_whose_destinations_have_several_patterns_unbinds_the_right_pair(
        binds, unbinds, probe):
    """`TopicMatcher(shared_destinations=False)` may bind one destination to several
    patterns (a topology's bindings never do): the waiting pair, not the destination, is
    taken out."""
    with mock.patch.object(shapes, "MAX_SHAPES", 1), \
            mock.patch.object(shapes, "DROP_SHAPES", 2):
        matcher = TopicMatcher(engine="auto", shared_destinations=False)
        live: list[tuple[str, str]] = []
        for pattern, queue in binds:
            if (pattern, queue) not in live:
                matcher.add(pattern, queue)
                live.append((pattern, queue))
        for index in unbinds:
            if live:
                pattern, queue = live.pop(index % len(live))
                matcher.remove(pattern, queue)
                assert matcher.has(pattern, queue) is False
        assert all(matcher.has(pattern, queue) for pattern, queue in live)
        assert matcher._engine._trie_deferred  # no reader yet: nothing made the trie
        for key in probe + ["a", "a.b", "a.a.a.z", "a.a.a.a.a.a.a.a.b.c"]:
            assert matcher.match(key) == _truth(live, key), (live, key)
        assert sorted(matcher.bindings()) == sorted(live)
