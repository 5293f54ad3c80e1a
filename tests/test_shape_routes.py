"""First routes where the wildcard bindings go by shape and one binding's answer is handed
over bare (`ShapeIndex.match_bare`, `TopicMatcher.wildcard_matcher(bare=True)`), and the
route cache's count of large shared routes: equal to the reference walk."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import check_route_steps
from xroute import Topology
from xroute.bench.shapes import broadcast, emqx, literal, mqtt, seed_mix, unicast
from xroute.core.route_cache import SHARED_NAMES, TopologyRouteCache
from xroute.engines.shapes import ShapeIndex

SITES = ["s0", "s1", "s2"]
FLOORS = ["floor0", "floor1"]
# The MQTT recipe's families over a small vocabulary: few shapes, so the shape index answers.
mqtt_patterns = st.one_of(
    st.sampled_from(SITES).map(lambda s: f"{s}.*.temp"),
    st.tuples(st.sampled_from(SITES), st.sampled_from(FLOORS)).map(lambda t: f"{t[0]}.{t[1]}.#"),
    st.sampled_from(["0", "1"]).map(lambda k: f"*.*.alarm.{k}"),
    st.tuples(st.sampled_from(SITES), st.sampled_from(FLOORS), st.sampled_from(["room0", "room1"])
              ).map(lambda t: f"{t[0]}.{t[1]}.{t[2]}.temp"),
)
words = st.sampled_from([*SITES, *FLOORS, "room0", "room1", "temp", "alarm", "0", "1", "x"])
# The recipe's keys (`xroute.bench.shapes.mqtt`), and any words besides.
mqtt_keys = st.one_of(
    st.tuples(st.sampled_from(SITES), st.sampled_from([*FLOORS, "x"]), words,
              st.sampled_from(["temp", "0", "1"]), st.sampled_from(["", ".temp", ".temp.v"])
              ).map(lambda t: ".".join(t[:4]) + t[4]),
    st.tuples(st.sampled_from(SITES), words).map(lambda t: f"{t[0]}.{t[1]}.temp"),
    st.lists(words, min_size=1, max_size=6).map(".".join),
)
steps = st.lists(
    st.tuples(st.sampled_from(["bind", "bind", "bind", "unbind"]), mqtt_patterns,
              st.sampled_from(["c0", "c1", "watch", "e"]),
              st.sampled_from([None, None, {"x": 1}])),
    max_size=30)


@settings(max_examples=200, deadline=None)
@given(steps=steps, probes=st.lists(mqtt_keys, min_size=1, max_size=8))
def test_first_routes_by_shape_equal_the_reference_walk(steps, probes):
    """Random binds and unbinds of the MQTT families (to queues, to an exchange, repeats
    with other arguments): after each, every probe's first route (and its cached repeat)
    equals the reference engine's uncached walk."""
    check_route_steps(["c0", "c1", "watch"], steps, probes)


def test_every_bench_shape_routes_its_first_keys_as_the_reference():
    """The bench's shapes, small: each first key's route equals the reference walk, and the
    MQTT shape's wildcard bindings go by shape with answers handed over bare."""
    for shape in [unicast(200, 200), broadcast(600, 20), emqx(4, 30, 100), literal(300, 100),
                  seed_mix(400, 200), mqtt(2_000, 600)]:
        fast, truth = Topology(), Topology("reference", False)
        for topology in (fast, truth):
            topology.declare_exchange("x", "topic")
            for queue in shape.queues:
                topology.declare_queue(queue)
            for pattern, queue in shape.bindings:
                topology.bind("x", queue, pattern)
        keys = shape.first_keys + shape.repeat_keys[:100]
        assert [fast.route("x", key) for key in keys] == [truth.route("x", k) for k in keys], (
            shape.name)
        if shape.name == "mqtt":
            assert fast.exchanges["x"].kind.matcher.stats()["auto_by_shape"]


def test_match_bare_answers_one_destination_itself_and_several_as_a_frozenset():
    index = ShapeIndex(bare_singletons=True)
    index.add(("s1", "*", "temp"), "c1")
    index.add(("s1", "floor0", "#"), "c1f")
    index.add(("*", "*", "alarm", "7"), "w7")
    bare = index.matcher(bare=True)
    assert bare is index.matcher(bare=True)  # kept while the shapes stay
    assert bare("s1.floor0.room1.temp") == "c1f"
    assert index.match("s1.floor0.room1.temp") == frozenset({"c1f"})
    several = bare("s1.floor0.alarm.7")  # the parts, for the caller to unite
    assert sorted(several) == ["c1f", "w7"] and several.__class__ is list
    assert index.match("s1.floor0.alarm.7") == frozenset({"c1f", "w7"})
    assert bare("s1.x.temp") == "c1" and bare("s2.x.temp") == frozenset()
    index.add(("s1", "floor0", "#"), "c2")  # two destinations: a frozenset
    assert bare("s1.floor0.room1.temp") == frozenset({"c1f", "c2"})
    index.remove(("*", "*", "alarm", "7"), "w7")  # a shape went: the functions are made again
    index.remove(("s1", "*", "temp"), "c1")
    one = index.matcher(bare=True)
    assert one is not bare and one("s1.floor0.alarm.7") == frozenset({"c1f", "c2"})
    index.add(("*", "*", "alarm", "7"), "w7")
    parts = index.matcher(bare=True)("s1.floor0.alarm.7")  # a set and a bare destination
    assert frozenset({"c1f", "c2"}) in parts and "w7" in parts
    assert index.match("s1.floor0.alarm.7") == frozenset({"c1f", "c2", "w7"})
    index.remove(("*", "*", "alarm", "7"), "w7")
    index.remove(("s1", "floor0", "#"), "c2")
    assert one("s1.floor0.alarm.7") == "c1f" and index.matcher()("s1.floor0.x") == {"c1f"}


def test_the_cache_counts_a_large_shared_route_once():
    """A frozenset of more than `SHARED_NAMES` names kept by many routes counts once; it
    stays held (and counted) when they go, until a sweep finds no route keeping it."""
    cache = TopologyRouteCache(max_size=1_000, sweep_to=500, max_cells=4 * SHARED_NAMES)
    wide = frozenset(f"q{i}" for i in range(SHARED_NAMES + 1))
    for i in range(100):
        cache.keep("x", f"k{i}", wide)
    assert len(cache) == 100 and cache.stats()["route_cache_cells"] == len(wide)
    assert cache.stats()["route_cache_evictions"] == 0
    other = frozenset(f"r{i}" for i in range(2 * SHARED_NAMES))
    cache.keep("x", "other", other)
    assert cache.stats()["route_cache_cells"] == len(wide) + len(other)
    for i in range(100):
        cache.binding_changed("x", "topic", f"k{i}")
    assert len(cache) == 1 and cache.stats()["route_cache_cells"] == len(wide) + len(other)
    third = frozenset(f"s{i}" for i in range(SHARED_NAMES + 1))
    cache.keep("x", "third", third)  # past the bound: a sweep lets go of the set none keeps
    assert cache.stats()["route_cache_cells"] == len(other) + len(third)
    assert cache.get("x", "other") is other and cache.get("x", "third") is third
    for i in range(10):  # past the bound with every set kept: the oldest routes go
        cache.keep("x", f"w{i}", frozenset(f"w{i}.{j}" for j in range(SHARED_NAMES + 1)))
        assert cache.stats()["route_cache_cells"] <= 4 * SHARED_NAMES
    assert cache.get("x", "w9") is not None and cache.stats()["route_cache_evictions"] > 0
    small = TopologyRouteCache(max_size=1_000, sweep_to=500, max_cells=2 * SHARED_NAMES)
    for i in range(3):
        small.keep("x", f"k{i}", wide)
    small.keep("x", "last", third)  # the sweep drops the three routes keeping `wide`, then it
    assert [small.get("x", f"k{i}") for i in range(3)] == [None] * 3
    assert small.get("x", "last") is third and small.stats()["route_cache_cells"] == len(third)


def test_an_exchange_of_literal_bindings_alone_matches_no_wildcard_until_one_is_bound():
    """With no wildcard pattern the shape index's function answers nothing without reading
    the key; the first wildcard binding makes it match again, and the last one's removal
    makes it answer nothing again."""
    index = ShapeIndex(bare_singletons=True)
    nothing = index.matcher(bare=True)
    assert nothing("a.b") == frozenset() and index.matcher() is nothing
    index.add(("a", "*"), "q")
    assert index.matcher(bare=True)("a.b") == "q" and index.matcher()("a.b") == {"q"}
    index.remove(("a", "*"), "q")
    assert index.matcher(bare=True)("a.b") == frozenset()
    topology = Topology()
    topology.declare_exchange("x", "topic")
    topology.declare_queue("q")
    topology.declare_queue("w")
    topology.bind("x", "q", "a.b")
    assert topology.route("x", "a.b") == {"q"} and topology.route("x", "a.c") == frozenset()
    topology.bind("x", "w", "a.*")
    assert topology.route("x", "a.b") == {"q", "w"} and topology.route("x", "a.c") == {"w"}
    topology.unbind("x", "w", "a.*")
    assert topology.route("x", "a.c") == frozenset()
