"""Wildcard bindings that wait where their answers are read rarely
(`AutoEngine.wildcards_read_rarely`, `TopicMatcher.defer_wildcards`).

Once a topology's topic exchange has its queue-name index (`xroute.core.wildcard_queues`),
first routes ask that index, not the exchange's own matcher; the matcher's wildcard bindings
then wait in its pending lists until something reads them (a walk with an observer, a batch,
`has`, stats...), which indexes them first: into the shapes while they serve, else the trie.
Every reader must see exactly the bindings bound, in any interleaving of binds, unbinds and
reads, with the shape bounds low enough that the flush crosses them."""

from __future__ import annotations

from operator import itemgetter
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import keys, patterns
from xroute.core.batch import BatchRouter
from xroute.core.keys import split_words
from xroute.core.topology import Topology
from xroute.engines import TopicMatcher, shapes
from xroute.engines.reference import pattern_matches

QUEUES = ["q0", "q1", "q2"]


def _truth(live: list[tuple[str, str]], key: str) -> frozenset[str]:
    words = split_words(key)
    return frozenset(q for p, q in live if pattern_matches(split_words(p), words))


def _matched(live: list[tuple[str, str]], key: str) -> list[tuple[str, str]]:
    words = split_words(key)
    return sorted((p, q) for p, q in live if pattern_matches(split_words(p), words))


def _unicast(queues: int) -> Topology:
    """RabbitMQ 4.3's unicast shape, small: a key per queue and ``broadcast.#`` on each."""
    topology = Topology()
    topology.declare_exchange("x", "topic")
    for i in range(queues):
        topology.declare_queue(f"q{i}")
        topology.bind("x", f"q{i}", f"devices.dev{i}.cmd")
    for i in range(queues):
        topology.bind("x", f"q{i}", "broadcast.#")
    return topology


def test_a_broadcast_pattern_waits_in_the_exchange_matcher_and_every_reader_sees_it():
    """Past the fan-out bound the exchange's own matcher keeps its ``broadcast.#`` bindings
    unindexed (first routes go by the queue-name index, and do not flush them); a walk with
    an observer, `has`, a batch and an unbind all see each of them."""
    queues = 1_000  # past `FANOUT_QUEUES`: the index is made midway
    topology = _unicast(queues)
    kind = topology.exchanges["x"].kind
    engine = kind.matcher._engine
    assert kind.wildcard_queues is not None
    assert engine._pending_lazy and len(engine._pending_patterns) > queues // 4
    everyone = frozenset(f"q{i}" for i in range(queues))
    assert topology.route("x", "broadcast.a.b") == everyone
    assert topology.route("x", "devices.dev7.cmd") == {"q7"}
    assert engine._pending_patterns  # first routes asked the index, not the matcher
    routes = BatchRouter(topology).route("x", ["broadcast.z", "devices.dev3.cmd", "none"])
    assert [routes.queues(i) for i in range(3)] == [everyone, {"q3"}, frozenset()]
    waiting = engine._pending_destinations[-1]
    assert kind.matcher.has("broadcast.#", waiting)  # a waiting binding, found there
    topology.unbind("x", "q999", "broadcast.#")  # the last to wait: out of the lists
    topology.unbind("x", "q0", "broadcast.#")  # bound before any waited: in the shapes
    left = everyone - {"q0", "q999"}
    assert topology.route("x", "broadcast.y") == left
    matched: list = []
    walked = topology.route_message("x", "broadcast.q", observer=lambda x, m, via: matched.extend(m))
    assert walked == left
    assert sorted(b.target for b in matched) == sorted(left)
    assert engine._pending_patterns is None  # the walk read them: indexed now
    assert len(kind.matcher.match("broadcast.q")) == len(left)
    topology.bind("x", "q0", "broadcast.#")  # after a read: it waits again
    assert engine._pending_patterns
    assert topology.route("x", "broadcast.w") == left | {"q0"}
    assert len(kind.matcher.match("broadcast.w")) == len(left) + 1


def test_a_matcher_of_its_own_destinations_defers_and_answers_exactly():
    """`TopicMatcher.defer_wildcards` on a matcher whose destinations name their pattern:
    `add` (which asks whether the pair is bound), `has`, `match`, `match_many_ids` and
    `bindings` see the waiting bindings; a matcher of shared destinations ignores it."""
    matcher = TopicMatcher(pattern_of=itemgetter(0))
    matcher.defer_wildcards()
    bound = [("a.*", "q1"), ("a.#", "q2"), ("b.c", "q3"), ("*.c", "q4")]
    for pattern, queue in bound:
        matcher.add(pattern, (pattern, queue))
        matcher.add(pattern, (pattern, queue))  # again: nothing changes
    assert matcher._engine._pending_patterns == ["a.*", "a.#", "*.c"]
    assert matcher.has("a.#", ("a.#", "q2")) and not matcher.has("a.#", ("a.#", "q9"))
    assert len(matcher) == 4
    assert sorted(matcher.bindings()) == sorted((p, (p, q)) for p, q in bound)
    offsets, ids = matcher.match_many_ids(["a.c", "b.c", "z"])
    named = matcher.destinations()
    found = [{named[i][1] for i in ids[offsets[k]:offsets[k + 1]]} for k in range(3)]
    assert found == [{"q1", "q2", "q4"}, {"q3", "q4"}, set()]
    assert {q for _, q in matcher.match("a.c")} == {"q1", "q2", "q4"}
    shared = TopicMatcher()
    shared.defer_wildcards()  # destinations shared (a shadow kept): nothing waits
    shared.add("a.*", "q1")
    assert shared._engine._pending_patterns is None
    assert shared.match("a.b") == {"q1"}


session_steps = st.lists(
    st.one_of(
        st.tuples(st.just("bind"), patterns, st.sampled_from(QUEUES)),
        st.tuples(st.just("unbind"), st.integers(0, 30)),
        st.tuples(st.just("route"), keys),
        st.tuples(st.just("walk"), keys),  # the bindings' own matcher (`route_message`)
        st.tuples(st.just("has"), st.integers(0, 30)),
        st.tuples(st.just("batch"), st.lists(keys, min_size=1, max_size=6)),
    ),
    max_size=40,
)


def _session(ops: list) -> None:
    topology = Topology()
    topology.declare_exchange("x", "topic")
    for queue in [*QUEUES, "all"]:
        topology.declare_queue(queue)
    topology.bind("x", "all", "#")  # a catch-all: the queue-name index from the start
    live: list[tuple[str, str]] = [("#", "all")]
    kind = topology.exchanges["x"].kind
    assert kind.wildcard_queues is not None
    for op in ops:
        if op[0] == "bind":
            _, pattern, queue = op
            topology.bind("x", queue, pattern)
            if (pattern, queue) not in live:
                live.append((pattern, queue))
        elif op[0] == "unbind" and len(live) > 1:
            pattern, queue = live.pop(1 + op[1] % (len(live) - 1))
            topology.unbind("x", queue, pattern)
        elif op[0] == "route":
            assert topology.route("x", op[1]) == _truth(live, op[1]), (live, op[1])
        elif op[0] == "walk":
            matched: list = []
            found = topology.route_message("x", op[1],
                                           observer=lambda x, m, via: matched.extend(m))
            assert found == _truth(live, op[1]), (live, op[1])
            assert sorted((b.routing_key, b.target) for b in matched) == _matched(live, op[1])
        elif op[0] == "has":
            pattern, queue = live[op[1] % len(live)]
            (binding,) = [b for b in topology.bindings()
                          if b.routing_key == pattern and b.target == queue]
            assert kind.matcher.has(pattern, binding)
        elif op[0] == "batch":
            routes = BatchRouter(topology).route("x", op[1])
            assert [routes.queues(i) for i in range(len(op[1]))] == [
                _truth(live, key) for key in op[1]]
    for key in ("", "a", "a.b", "a.b.c", "b..c", "a.b.c.a.b"):
        assert topology.route("x", key) == _truth(live, key), (live, key)
        assert sorted((b.routing_key, b.target) for b in kind.matcher.match(key)) == (
            _matched(live, key))
    assert sorted((b.routing_key, b.target) for b in topology.bindings()) == sorted(live)
    assert kind.matcher.stats()["bindings"] == len(live)


@settings(max_examples=150, deadline=None)
@given(ops=session_steps)
def test_sessions_with_the_queue_name_index_equal_the_reference(ops):
    _session(ops)


@pytest.mark.parametrize("max_shapes", [1, 2])
@settings(max_examples=100, deadline=None)
@given(ops=session_steps)
def test_flushes_that_cross_the_shape_bounds_stay_exact(max_shapes, ops):
    """A flush offers each waiting pattern to the shapes; the first they refuse makes the
    rest wait for the trie (`AutoEngine._flush_pending`), and later ones, after the trie is
    made, go into it on the next read."""
    with mock.patch.object(shapes, "MAX_SHAPES", max_shapes), \
            mock.patch.object(shapes, "DROP_SHAPES", max_shapes + 1):
        _session(ops)
