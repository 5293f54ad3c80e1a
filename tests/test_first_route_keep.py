"""A first route's keep in the route cache, made inline by `Topology._route_literal` for the
usual case (a few names, room under both bounds, no index by first word), and the shape
index's lookups inlined in `ShapeIndex.match_bare`: routes equal the reference walk, and the
cache's bookkeeping (routes, cells) equals what `TopologyRouteCache.keep` keeps."""

from __future__ import annotations

from operator import itemgetter

from hypothesis import given, settings
from hypothesis import strategies as st

from xroute import Topology
from xroute.core.route_cache import SHARED_NAMES, TopologyRouteCache
from xroute.engines.shapes import ShapeIndex

QUEUES = [f"q{i}" for i in range(6)]
WORDS = ["a", "b", "c"]
patterns = st.one_of(
    st.lists(st.sampled_from([*WORDS, "*"]), min_size=1, max_size=4).map(".".join),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=2).map(lambda w: ".".join(w) + ".#"),
)
keys = st.lists(st.sampled_from([*WORDS, "d"]), min_size=1, max_size=4).map(".".join)


def _cells(cache: TopologyRouteCache, exchange: str) -> int:
    """The cells `keep` counts for ``exchange``'s own routes, worked out again."""
    own = cache.own.get(exchange, {})
    small = sum(len(names) for names in own.values() if len(names) <= SHARED_NAMES)
    return small + sum(map(len, cache._large.get(exchange, {}).values()))


@settings(max_examples=150, deadline=None)
@given(bindings=st.lists(st.tuples(patterns, st.sampled_from(QUEUES)), max_size=12),
       routes=st.lists(keys, max_size=40),
       bounds=st.sampled_from([(4, 2, 1_000), (8, 4, 6), (65_536, 49_152, 2_500_000)]),
       first_word_index=st.booleans())
def test_first_routes_keep_what_keep_keeps(bindings, routes, bounds, first_word_index):
    """Through small bounds (sweeps by routes and by cells) and with or without the index of
    routes by first word (`heads`, which the inline keep leaves to `keep`): every route
    equals the uncached walk, and the cache's cells are its kept sets' sizes."""
    cached, plain = Topology(), Topology(route_cache=False)
    max_size, sweep_to, max_cells = bounds
    cached._route_cache = TopologyRouteCache(max_size=max_size, sweep_to=sweep_to,
                                             max_cells=max_cells)
    if first_word_index:
        cached._route_cache.heads["t"] = {}
    for topology in (cached, plain):
        topology.declare_exchange("t", "topic")
        for queue in QUEUES:
            topology.declare_queue(queue)
        for pattern, queue in bindings:
            topology.bind("t", queue, pattern)
    cache = cached._route_cache
    for key in routes:
        assert cached.route("t", key) == plain.route("t", key)
        own = cache.own.get("t", {})
        assert len(own) <= max_size
        assert cache.own_cells.get("t", 0) == _cells(cache, "t")
        if own:
            assert own[key] == plain.route("t", key)  # the route just made is kept
        if "t" in cache.heads and key in own:  # (a sweep drops the index)
            assert key in cache.heads["t"].get(key.partition(".")[0], {})


def test_the_usual_first_route_is_kept_without_a_call_to_keep(monkeypatch):
    """The inline keep is taken (on the base it called `keep` on every first route), and a
    route past a bound still goes to `keep`, which sweeps."""
    topology = Topology()
    topology.declare_exchange("t", "topic")
    for queue in QUEUES:
        topology.declare_queue(queue)
        topology.bind("t", queue, f"{queue}.*.#")
        topology.bind("t", queue, f"{queue}.x")
    topology._route_cache = cache = TopologyRouteCache(max_size=4, sweep_to=2)
    assert topology.route("t", "q0.a") == {"q0"}  # the exchange's first: `keep` makes `own`
    calls = []
    keep = TopologyRouteCache.keep
    monkeypatch.setattr(TopologyRouteCache, "keep",
                        lambda self, *args: (calls.append(args), keep(self, *args))[1])
    for key in ("q1.a", "q2.x", "q3.b.c"):
        assert topology.route("t", key) == {key[:2]}
    assert not calls and cache.own_cells["t"] == 4 and len(cache.own["t"]) == 4
    assert topology.route("t", "q4.a") == {"q4"}  # past `max_size`: `keep` sweeps
    assert len(calls) == 1 and len(cache.own["t"]) <= 4


def test_match_bare_plans_its_lookups_without_a_python_function_a_shape():
    """Each planned shape's words are picked by `itemgetter` (a tuple, joined inline, for
    several literal words: `_Shape.take` was a Python function there), and answer as
    `match` does."""
    index = ShapeIndex()
    index.add(("s0", "*", "temp"), "a")
    index.add(("s0", "floor0", "#"), "b")
    index.add(("*", "*", "alarm", "1"), "c")
    index.add(("*", "*", "*", "*"), "d")
    for key, expected in [("s0.floor0.alarm.1", {"b", "c", "d"}), ("s0.x.temp", {"a"}),
                          ("s0.floor0", {"b"}), ("s1.floor0.alarm.1", {"c", "d"}),
                          ("s1.floor0.alarm.2", {"d"}), ("x", set())]:
        assert index.match(key) == expected, key
    plan = index._plans[4]
    for pick, joined, _, shape in plan:
        assert (pick.__class__ is itemgetter) == bool(shape.positions)
        assert joined == (len(shape.positions) > 1)


def test_a_key_two_patterns_of_queues_match_unites_their_shared_sets_without_of_binding(
        monkeypatch):
    """`MatchedDestinations.of_parts` reads a bare binding's shared set inline (on the base
    it called `of_binding` for each part); a new binding still goes through it."""
    from xroute.core.destinations import MatchedDestinations

    topology = Topology()
    topology.declare_exchange("t", "topic")
    for queue in ("site", "alarm", "other"):
        topology.declare_queue(queue)
    topology.bind("t", "site", "s0.floor0.#")
    topology.bind("t", "alarm", "*.*.alarm.1")
    topology.bind("t", "other", "*.*.alarm.2")
    assert topology.route("t", "s1.floor0.alarm.1") == {"alarm"}
    assert topology.route("t", "s0.floor0.x") == {"site"}
    calls = []
    real = MatchedDestinations.of_binding
    monkeypatch.setattr(MatchedDestinations, "of_binding",
                        lambda self, binding: (calls.append(binding), real(self, binding))[1])
    assert topology.route("t", "s0.floor0.alarm.1") == {"site", "alarm"}
    assert not calls
    assert topology.route("t", "s0.floor0.alarm.2") == {"site", "other"}  # "other": new
    assert [binding.target for binding in calls] == ["other"]
