"""Every engine equals `reference` on small copies of the shapes other brokers benchmark
(`xroute.bench.shapes`): literal bindings beside wildcards, long keys with ``#`` tails,
thousands of destinations on one node, with keys that match and keys that do not, through
binding changes, on every path (match, match_many, match_many_ids through the kernel,
Topology.route, BatchRouter.route)."""

from __future__ import annotations

import random
from unittest import mock

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import bindings as strategy_bindings
from tests.strategies import keys as strategy_keys
from xroute import TopicMatcher
from xroute.bench import shapes
from xroute.core.batch import BatchRouter
from xroute.core.topology import Topology
from xroute.engines import auto, compiled

ENGINES = ("trie", "dfa", "bitmap", "compiled", "auto")
SETTINGS = settings(max_examples=40, deadline=None)


def small_shape(name: str, seed: int) -> shapes.Shape:
    """A shape at a size the reference engine checks quickly."""
    if name == "unicast":
        return shapes.unicast(queues=40, keys=20, seed=seed)
    if name == "broadcast":
        return shapes.broadcast(queues=100, keys=5, seed=seed)  # over the kernel's GATHER_KEEP
    if name == "nats":
        subjects = shapes.nats_subjects(shapes.NATS_TOKENS[:3], depth=3)
        bindings = [(s, f"s{i}") for i, s in enumerate(subjects)]
        bindings += [(p.replace("continuum", "apcera"), f"w{i}")
                     for i, p in enumerate(shapes.NATS_WILDCARDS)]
        keys = subjects[:15] + [f"cloud.{s}" for s in subjects[:10]]
        return shapes.Shape("nats", "", bindings, keys, keys)
    if name == "emqx":
        return shapes.emqx(subscribers=3, filters=8, keys=20, seed=seed)
    if name == "fanout":
        return shapes.fanout(queues=120, seed=seed)
    if name == "literal":
        return shapes.literal(count=60, keys=20, seed=seed)
    return shapes.seed_mix(60, keys=20, seed=seed, queues=7)


def probe_keys(shape: shapes.Shape, rng: random.Random) -> list[str]:
    """Keys of the shape, and near misses: a word more, a word less, a word changed."""
    found = list(shape.first_keys[:20])
    for key in shape.first_keys[:10]:
        words = key.split(".")
        found.append(key + ".x")
        found.append(".".join(words[:-1]))
        words[rng.randrange(len(words))] = rng.choice(["zz", "", "cmd", "1"])
        found.append(".".join(words))
    return found + ["", "broadcast", "device", "events.all.more"]


def assert_engine_equals_reference(engine: str, bindings, keys) -> None:
    expected = TopicMatcher(engine="reference")
    actual = TopicMatcher(engine=engine)
    for pattern, destination in bindings:
        expected.add(pattern, destination)
        actual.add(pattern, destination)
    truth = expected.match_many(keys)
    assert [actual.match(key) for key in keys] == truth, engine
    assert actual.match_many(keys) == truth, engine
    # Through the kernel (auto takes it from the first batch here), on a list and on Arrow.
    with mock.patch.object(auto, "AUTO_BATCH_MIN", 1), mock.patch.object(
        auto, "AUTO_FLATTEN_AFTER", 1
    ):
        for batch in (keys, pa.array(keys, pa.string())):
            offsets, ids = actual.match_many_ids(batch)
            names = actual.destinations()
            bounds = list(zip(offsets.tolist(), offsets[1:].tolist()))
            decoded = [frozenset(names[j] for j in ids[a:b]) for a, b in bounds]
            assert decoded == truth, engine
            assert all(len(set(ids[a:b].tolist())) == b - a for a, b in bounds), "repeats"


shape_names = st.sampled_from(
    ["unicast", "broadcast", "nats", "emqx", "fanout", "literal", "seed"]
)


@SETTINGS
@given(name=shape_names, seed=st.integers(0, 1_000), engine=st.sampled_from(ENGINES))
def test_every_engine_equals_reference_on_every_shape(name, seed, engine):
    shape = small_shape(name, seed)
    keys = probe_keys(shape, random.Random(seed))
    assert_engine_equals_reference(engine, shape.bindings, keys)


@SETTINGS
@given(name=shape_names, seed=st.integers(0, 1_000), engine=st.sampled_from(ENGINES),
       removed=st.lists(st.integers(0, 10_000), max_size=30))
def test_engines_stay_equal_through_removes_and_re_adds(name, seed, engine, removed):
    """Bindings removed (literal ones from the exact-key index, wildcard ones from the trie)
    between routes, some added back, with the caches and kernel tables warm."""
    shape = small_shape(name, seed)
    keys = probe_keys(shape, random.Random(seed))
    expected, actual = TopicMatcher(engine="reference"), TopicMatcher(engine=engine)
    live = list(dict.fromkeys(shape.bindings))
    for pattern, destination in live:
        expected.add(pattern, destination)
        actual.add(pattern, destination)
    with mock.patch.object(auto, "AUTO_BATCH_MIN", 1), mock.patch.object(
        auto, "AUTO_FLATTEN_AFTER", 1
    ):
        actual.match_many_ids(keys)  # the flat trie and its DFA built
        for step, pick in enumerate(removed):
            if not live:
                break
            pattern, destination = live.pop(pick % len(live))
            expected.remove(pattern, destination)
            actual.remove(pattern, destination)
            if step % 3 == 0:  # some come back
                expected.add(pattern, destination + "b")
                actual.add(pattern, destination + "b")
                live.append((pattern, destination + "b"))
            key = keys[pick % len(keys)]
            assert actual.match(key) == expected.match(key), (engine, key)
        truth = expected.match_many(keys)
        assert actual.match_many(keys) == truth
        offsets, ids = actual.match_many_ids(pa.array(keys, pa.string()))
        names = actual.destinations()
        assert [frozenset(names[j] for j in ids[a:b])
                for a, b in zip(offsets.tolist(), offsets[1:].tolist())] == truth


@settings(max_examples=15, deadline=None)
@given(name=shape_names, seed=st.integers(0, 1_000), engine=st.sampled_from(ENGINES))
def test_topology_routes_equal_reference_on_every_shape(name, seed, engine):
    """`Topology.route` (route cache, matched sets leading to queues) and `BatchRouter`."""
    shape = small_shape(name, seed)
    keys = probe_keys(shape, random.Random(seed))
    topologies = []
    for spec in ("reference", engine):
        topology = Topology(engine=spec)
        topology.declare_exchange("x", "topic")
        for queue in shape.queues:
            topology.declare_queue(queue)
        for pattern, queue in shape.bindings:
            topology.bind("x", queue, pattern)
        topologies.append(topology)
    expected, actual = topologies
    truth = [expected.route("x", key) for key in keys]
    assert [actual.route("x", key) for key in keys] == truth
    assert [actual.route("x", key) for key in keys] == truth  # cached
    routed = BatchRouter(actual).route("x", keys)
    assert [routed.queues(i) for i in range(len(keys))] == truth
    # An unbind drops the matched sets and the cached routes it changes.
    pattern, queue = shape.bindings[seed % len(shape.bindings)]
    expected.unbind("x", queue, pattern)
    actual.unbind("x", queue, pattern)
    assert [actual.route("x", key) for key in keys] == [expected.route("x", key) for key in keys]


def test_no_engine_is_exponential_on_long_hash_tailed_keys():
    """40-word keys through EMQX-like filters with '#' tails and 30 '#'s, every engine:
    answers equal reference (the kernel's early stop on an absorbing '#' set included)."""
    bindings = [(f"device.{s}.*.{n}.#", f"sub{s}") for s in range(3) for n in range(5)]
    bindings.append((".".join(["#"] * 30), "all"))
    bindings.append(("device.#.#.x.#", "x"))
    # '#' nodes that are not absorbing: a literal or a '*' after them.
    bindings += [("a.#.x", "ax"), ("b.#.*", "bs"), ("c.#.y.#", "cy")]
    keys = [".".join(["device", str(s), "foo", str(n)] + ["w"] * 36)
            for s in range(3) for n in range(6)] + ["device.1.a.2." + "x." * 30 + "x"]
    keys += ["a.b.c.x", "a.b.c.d.x.y", "a.b.x", "a.x", "b.c", "b", "c.d.e.f.y", "c.y.z.z"]
    for engine in ENGINES:
        assert_engine_equals_reference(engine, bindings, keys)
        # Without the 30 '#'s (in every live set) the kernel's sets stay small: plain walks.
        assert_engine_equals_reference(engine, bindings[:15] + bindings[16:], keys)


def test_shapes_follow_their_recipes():
    """The generators give the sizes docs/benchmarks.md quotes from each anchor's recipe."""
    assert len(shapes.nats_subjects()) == 37_448  # 8 + 64 + 512 + 4,096 + 32,768
    nats = shapes.nats(keys=100)
    assert len(nats.bindings) == 37_451 and len(set(nats.first_keys)) == 100
    emqx = shapes.emqx(keys=100)
    assert len(emqx.bindings) == 80_000 and len(emqx.queues) == 80
    assert all(key.count(".") == 9 for key in emqx.first_keys)
    unicast = shapes.unicast()
    assert len(unicast.bindings) == 20_000 and len(unicast.queues) == 10_000
    assert len(shapes.fanout().queues) == 10_000
    literal = shapes.literal(keys=100)
    assert len({pattern for pattern, _ in literal.bindings}) == 100_000
    assert not any("*" in p or "#" in p for p, _ in literal.bindings)


def test_the_shapes_harness_checks_and_measures_every_engine():
    """`xroute bench engines --shapes` on a tiny shape: every measure, for every engine,
    after the answers were checked against reference (a wrong engine raises CheckFailed)."""
    from xroute.bench.shapes_bench import RATES, TIMES, gaps, markdown, one_shape, targets

    entry = one_shape(small_shape("unicast", 1), ("dfa", "auto"), report=lambda line: None)
    for spec in ("dfa", "auto"):
        assert set(RATES + TIMES) <= set(entry["engines"][spec])
        assert all(entry["engines"][spec][m] > 0 for m in RATES + TIMES)
    assert {t["measure"] for t in targets(entry)} >= {"route_first_per_s", "match_first_us"}
    results = {"meta": {"date": "d", "cpus": 2, "cpu_model": "m", "load_before": [1.0] * 3,
                        "load_after": [1.0] * 3}, "shapes": [entry]}
    results["gaps"] = gaps(results)
    assert "| unicast |" in markdown(results)


def test_the_shapes_harness_measures_again_where_auto_trails():
    """A gap of auto behind another engine is measured again, both in turn, each keeping its
    better figure per measure (rates the higher, times the lower); with no gap, no rounds."""
    from xroute.bench import shapes_bench

    shape = small_shape("unicast", 1)
    entry = shapes_bench.one_shape(shape, ("dfa", "auto"), report=lambda line: None)
    check = shape.first_keys[:5]
    truth = shapes_bench.build_matcher("reference", shape.bindings).match_many(check)
    planted = dict(entry["engines"]["auto"], route_repeat_per_s=1e-3, match_first_us=1e9)
    entry["engines"]["auto"] = planted
    assert not all(g["met"] for g in shapes_bench.shape_gaps(entry))
    rounds = shapes_bench._confirm_gaps(entry, shape, check, truth, report=lambda line: None)
    assert 1 <= rounds <= shapes_bench.CONFIRM_ROUNDS
    again = entry["engines"]["auto"]
    assert again["route_repeat_per_s"] > 1e-3 and again["match_first_us"] < 1e9
    assert shapes_bench._best_of({"ids_repeat_per_s": 5.0, "match_first_us": 2.0},
                                 {"ids_repeat_per_s": 7.0, "match_first_us": 3.0}) == {
        "ids_repeat_per_s": 7.0, "match_first_us": 2.0}
    fine = {"shape": "s", "engines": {"auto": again}}
    assert shapes_bench._confirm_gaps(fine, shape, check, truth, report=lambda line: None) == 0


def test_a_literal_key_grows_past_and_shrinks_below_its_frozen_size():
    """auto's exact-key index keeps a key's destinations as a frozenset up to 8 and as a set
    beyond: every step up to 12 and back down to none, with a wildcard beside, equals
    reference (single keys, and the kernel's flat trie)."""
    expected, actual = TopicMatcher(engine="reference"), TopicMatcher(engine="auto")
    for matcher in (expected, actual):
        matcher.add("a.*", "w")
    keys = ["a.b", "a.c", "a", "a.b.c"]
    queues = [f"q{i}" for i in range(12)]
    order = queues + queues[::-1]
    for step, queue in enumerate(order):
        change = "add" if step < len(queues) else "remove"
        for matcher in (expected, actual):
            getattr(matcher, change)("a.b", queue)
        assert [actual.match(k) for k in keys] == [expected.match(k) for k in keys], step
        if step % 5 == 0:
            assert_engine_equals_reference("auto", list(expected.bindings()), keys)
    assert actual.match("a.b") == frozenset({"w"})


@settings(max_examples=150, deadline=None)
@given(pairs=strategy_bindings, probe=st.lists(strategy_keys, min_size=1, max_size=12),
       engine=st.sampled_from(["compiled", "auto"]), table_over=st.sampled_from([0, 10**9]))
def test_the_kernel_unites_exact_key_and_wildcard_answers(pairs, probe, engine, table_over):
    """Random literal and wildcard bindings over a few words, sharing destinations, through the
    batch kernel: `auto`'s literal keys in the exact-key table (``table_over`` 0), united with
    the walk's answer without repeats, or laid into the trie as paths (10**9); `compiled`
    walks them all. Equal to reference, on keys that match and keys that do not."""
    with mock.patch.object(compiled, "LITERAL_TABLE_OVER", table_over):
        assert_engine_equals_reference(engine, pairs, probe)


def test_wildcard_entries_of_one_destination_share_its_set():
    """EMQX's shape in a plain matcher: filters of one queue each, many filters a queue. Every
    key a filter of queue ``q`` matches gets ``q``'s one frozenset (a batch numbers a set per
    queue, not a set per key read cold), through unbinds and re-binds, and answers stay exact."""
    matcher = TopicMatcher()
    for device in range(40):
        matcher.add(f"device.{device}.*.1.#", f"q{device % 4}")
    first, second = matcher.match("device.0.a.1"), matcher.match("device.4.b.1.x")
    assert first == {"q0"} and first is second
    matcher.add("device.4.*.1.#", "q1")  # two destinations: a set of its own
    assert matcher.match("device.4.c.1") == {"q0", "q1"}
    matcher.remove("device.4.*.1.#", "q0")  # one again: the queue's shared set
    assert matcher.match("device.4.d.1") is matcher.match("device.1.d.1")
    offsets, ids = matcher.match_many_ids(["device.8.a.1", "device.5.a.1", "device.9.a.2"])
    names = matcher.destinations()
    assert [names[i] for i in ids.tolist()] == ["q0", "q1"] and offsets.tolist() == [0, 1, 2, 2]
