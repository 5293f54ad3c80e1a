"""The fast engines (dfa, bitmap, compiled, auto), the route cache and the batch API
(`TopicMatcher.match_many_ids`), each checked against the `reference` engine."""

from __future__ import annotations

import random
import sys
import traceback

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import bindings, keys
from xroute import InvalidRoutingKey, TopicMatcher
from xroute.bench.workload import seed_keys, seed_patterns
from xroute.core.keys import split_words
from xroute.engines import DEFAULT_ENGINE, auto, compiled
from xroute.engines.bitmap import BitmapEngine
from xroute.engines.cache import ROUTE_CACHE_MAX, RouteCache
from xroute.engines.dfa import DfaEngine, _SelfLoop
from xroute.engines.reference import ReferenceEngine
from xroute.engines.trie import step, step_labelled, step_unlabelled

# Keys that stress the splitting of the batch kernel: empty words everywhere, multi-byte
# UTF-8, literal wildcards, a key of 255 bytes.
AWKWARD_KEYS = ["", ".", "..", "a.", ".a", "a..b", "é.ü", "日本.語", "*", "#", "a.*.#", "a" * 255]
AWKWARD_PATTERNS = ["#", "*", "", "*.*", "a.#", "#.a", "é.*", "日本.#", "a..b", "#.#", ".", "*.#.*"]


def decode(matcher: TopicMatcher, offsets: np.ndarray, ids: np.ndarray) -> list[frozenset]:
    names = matcher.destinations()
    return [
        frozenset(names[j] for j in ids[offsets[i] : offsets[i + 1]])
        for i in range(len(offsets) - 1)
    ]


def pair(engine: str, patterns: list[str], **options) -> tuple[TopicMatcher, TopicMatcher]:
    actual, expected = TopicMatcher(engine=engine, **options), TopicMatcher("reference")
    for i, pattern in enumerate(patterns):
        actual.add(pattern, f"q{i % 7}")
        expected.add(pattern, f"q{i % 7}")
    return actual, expected


def test_auto_is_the_default_engine():
    assert DEFAULT_ENGINE == "auto"
    assert TopicMatcher().engine == "auto"


# -- match_many_ids: the batch API, every engine, cache on and off ------------------------


def test_batch_ids_layout(engine):
    matcher, expected = pair(engine, AWKWARD_PATTERNS)
    offsets, ids = matcher.match_many_ids(AWKWARD_KEYS)
    assert offsets.dtype == np.int64 and ids.dtype == np.int32
    assert len(offsets) == len(AWKWARD_KEYS) + 1 and offsets[0] == 0 and offsets[-1] == len(ids)
    assert np.all(np.diff(offsets) >= 0)
    for i in range(len(AWKWARD_KEYS)):
        chunk = ids[offsets[i] : offsets[i + 1]].tolist()
        assert len(chunk) == len(set(chunk)), f"repeated ids for {AWKWARD_KEYS[i]!r}"
    assert decode(matcher, offsets, ids) == expected.match_many(AWKWARD_KEYS)


def test_batch_ids_of_no_keys(engine):
    matcher, _ = pair(engine, ["a.#"])
    for empty in ([], pa.array([], type=pa.string()), pa.array([], type=pa.large_string())):
        offsets, ids = matcher.match_many_ids(empty)
        assert offsets.tolist() == [0] and offsets.dtype == np.int64
        assert len(ids) == 0 and ids.dtype == np.int32


def test_batch_ids_from_arrow_equal_the_list(engine):
    matcher, expected = pair(engine, AWKWARD_PATTERNS)
    want = expected.match_many(AWKWARD_KEYS)
    inputs = [
        pa.array(AWKWARD_KEYS, type=pa.string()),
        pa.array(AWKWARD_KEYS, type=pa.large_string()),
        pa.chunked_array([AWKWARD_KEYS[:5], AWKWARD_KEYS[5:]], type=pa.string()),
        pa.array(["skip"] + AWKWARD_KEYS + ["skip"]).slice(1, len(AWKWARD_KEYS)),
    ]
    for keys_in in inputs:
        assert decode(matcher, *matcher.match_many_ids(keys_in)) == want, keys_in.type


@pytest.mark.parametrize(
    "bad,named",
    [
        (["ok", None], None),
        (["ok", "x" * 256], "x" * 256),
        (pa.array(["ok", None]), None),
        (pa.array(["ok", "é" * 128]), "é" * 128),
        (pa.array([1, 2]), None),
    ],
    ids=["list-none", "list-long", "arrow-null", "arrow-long", "arrow-ints"],
)
def test_batch_ids_validate_every_key(engine, bad, named):
    matcher, _ = pair(engine, ["#"])
    with pytest.raises(InvalidRoutingKey) as caught:
        matcher.match_many_ids(bad)
    if named is not None:
        assert caught.value.key == named


def test_destination_ids_stay_stable_while_bound(engine):
    matcher = TopicMatcher(engine=engine)
    matcher.add("a.*", "q1")
    matcher.add("#.b", "q2")
    matcher.add("a.b", "q3")
    before, version = matcher.destinations(), matcher.ids_version
    matcher.add("a.#", "q1")  # no new destination: the ids and their version stay
    assert matcher.ids_version == version
    matcher.add("x", "q4")
    matcher.remove("a.b", "q3")
    after = matcher.destinations()
    assert matcher.ids_version != version  # a table made from `before` is stale
    assert after.index("q1") == before.index("q1") and after.index("q2") == before.index("q2")
    assert "q3" not in after and after[before.index("q3")] in (None, "q4")
    version = matcher.ids_version
    matcher.add("c", "q5")
    assert None not in matcher.destinations()  # a freed id is reused
    assert matcher.ids_version != version  # the same number of ids, another destination
    offsets, ids = matcher.match_many_ids(["a.b", "x", "c", "zz"])
    assert decode(matcher, offsets, ids) == [{"q1", "q2"}, {"q4"}, {"q5"}, set()]


@settings(max_examples=60, deadline=None)
@given(pairs=bindings, probe=st.lists(keys, max_size=12), removed=st.integers(0, 30))
def test_batch_ids_equal_reference(engine, pairs, probe, removed):
    matcher, expected = TopicMatcher(engine=engine), TopicMatcher("reference")
    for pattern, destination in pairs:
        matcher.add(pattern, destination)
        expected.add(pattern, destination)
    if pairs:
        pattern, destination = pairs[removed % len(pairs)]
        matcher.remove(pattern, destination)
        expected.remove(pattern, destination)
    assert decode(matcher, *matcher.match_many_ids(probe)) == expected.match_many(probe)


# -- the route cache ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["reference", "trie", "dfa", "bitmap", "compiled", "auto"])
def test_route_cache_counts_hits_and_misses(name):
    matcher = TopicMatcher(engine=name, cache=True)
    matcher.add("a.*", "q1")
    assert matcher.match("a.b") == {"q1"}
    assert matcher.match("a.b") == {"q1"}
    assert matcher.match("c") == set()
    figures = matcher.stats()
    assert (figures["cache_hits"], figures["cache_misses"], figures["cache_entries"]) == (1, 2, 2)
    assert figures["cache_hit_rate"] == pytest.approx(1 / 3)
    assert "cache_hits" not in TopicMatcher(engine=name, cache=False).stats()


def test_route_cache_add_updates_only_the_keys_it_matches():
    matcher = TopicMatcher(engine="trie", cache=True)
    matcher.add("a.*", "q1")
    matcher.add("x.y", "q2")
    for key in ("a.b", "x.y", "a.c"):
        matcher.match(key)
    matcher.add("#.b", "q3")
    figures = matcher.stats()
    assert figures["cache_invalidations"] == 1  # only a.b changed; x.y and a.c untouched
    assert matcher.match("a.b") == {"q1", "q3"}
    assert matcher.match("x.y") == {"q2"}
    assert matcher.stats()["cache_misses"] == figures["cache_misses"]  # both were hits


def test_route_cache_remove_drops_only_the_keys_it_matched():
    matcher = TopicMatcher(engine="trie", cache=True)
    matcher.add("a.*", "q1")
    matcher.add("a.b", "q1")  # a second path to the same destination
    matcher.add("x.y", "q2")
    for key in ("a.b", "a.c", "x.y"):
        matcher.match(key)
    misses = matcher.stats()["cache_misses"]
    matcher.remove("a.*", "q1")
    assert matcher.match("x.y") == {"q2"}  # untouched: a hit
    assert matcher.stats()["cache_misses"] == misses
    assert matcher.match("a.b") == {"q1"}  # dropped, recomputed: still q1 through a.b
    assert matcher.match("a.c") == set()
    assert matcher.stats()["cache_misses"] == misses + 2


def test_route_cache_is_bounded():
    matcher = TopicMatcher(engine="trie", cache=True)
    matcher.add("#", "q")
    for i in range(3 * ROUTE_CACHE_MAX):
        assert matcher.match(f"k.{i}") == {"q"}
        assert matcher.stats()["cache_entries"] <= ROUTE_CACHE_MAX
    assert matcher.stats()["cache_evictions"] > 0


def test_route_cache_unit():
    cache = RouteCache(max_size=4, sweep_to=1)
    for i in range(4):
        cache.put(f"k{i}", frozenset({i}))
    assert cache.get("k0") == {0} and len(cache) == 4
    cache.put("k4", frozenset())
    assert len(cache) == 2 and cache.get("k0") is None and cache.get("k4") == frozenset()
    cache.added(split_words("k4"), "new")
    assert cache.get("k4") == {"new"}
    cache.removed(split_words("#"), "new")
    assert cache.get("k4") is None
    with pytest.raises(ValueError):
        RouteCache(max_size=4, sweep_to=4)


# -- dfa ----------------------------------------------------------------------------------


def equal_to_reference(engine, pairs, probe) -> None:
    reference = ReferenceEngine()
    for words, destination in pairs:
        reference.add(words, destination)
    for key in probe:
        assert engine.match(key) == reference.match(key), key


def test_dfa_memory_stays_under_its_caps_with_many_distinct_keys():
    patterns = seed_patterns(300, seed=3)
    pairs = [(split_words(p), i) for i, p in enumerate(patterns)]
    engine = DfaEngine(max_states=64, max_cells=4000)
    for words, destination in pairs:
        engine.add(words, destination)
    probe = seed_keys(patterns, 1500, seed=4)
    reference = ReferenceEngine()
    for words, destination in pairs:
        reference.add(words, destination)
    for key in probe:
        assert engine.match(key) == reference.match(key), key
        figures = engine.stats()
        assert figures["dfa_states"] <= 64 and figures["dfa_cells"] <= 4000 + 300
    assert engine.stats()["dfa_resets"] > 0


def test_dfa_warm_key_builds_nothing():
    engine = DfaEngine()
    for i, pattern in enumerate(("a.*.c", "#.c", "a.#")):
        engine.add(split_words(pattern), i)
    engine.match("a.b.c")
    built = engine.stats()["dfa_states_built"]
    assert engine.match("a.b.c") == {0, 1, 2}
    assert engine.match("a.zz.c") == {0, 1, 2}  # another unknown word: the shared transition
    assert engine.stats()["dfa_states_built"] == built


def test_dfa_binding_change_keeps_unrelated_states():
    engine = DfaEngine()
    engine.add(split_words("a.b"), "q1")
    engine.add(split_words("x.y.z"), "q2")
    assert engine.match("x.y.z") == {"q2"}
    assert engine.match("a.b") == {"q1"}
    built = engine.stats()["dfa_states_built"]
    engine.add(split_words("a.c"), "q3")  # path: root, a
    assert engine.stats()["dfa_states_invalidated"] > 0
    assert engine.match("x.y.z") == {"q2"}
    # Only the start state (it holds the root, on every path) is built again.
    assert engine.stats()["dfa_states_built"] == built + 1
    assert engine.match("a.c") == {"q3"}
    engine.remove(split_words("a.b"), "q1")
    assert engine.match("a.b") == set() and engine.match("a.c") == {"q3"}


def test_dfa_finds_doomed_states_by_scan_until_bindings_churn():
    engine = DfaEngine()
    reference = ReferenceEngine()
    for i, pattern in enumerate(("a.b", "x.y.z", "a.*.c", "#.z")):
        engine.add(split_words(pattern), i)
        reference.add(split_words(pattern), i)
    keys = ["a.b", "x.y.z", "a.q.c", "m.z", "x.y", "a.b.c"]
    for _ in range(20):  # many more walks than states: a later change is a rare one
        for key in keys:
            engine.match(key)
    built = engine.stats()["dfa_states_built"]
    change = (split_words("x.y.w"), 9)
    engine.add(*change)
    reference.add(*change)
    figures = engine.stats()
    assert not figures["dfa_reverse_index"] and figures["dfa_states_invalidated"] > 0
    assert [engine.match(k) for k in keys] == [reference.match(k) for k in keys]
    rebuilt = engine.stats()["dfa_states_built"] - built
    assert 0 < rebuilt < built  # the scan dropped only the states on the changed path
    engine.remove(*change)  # a second change right after the first: churn
    reference.remove(*change)
    assert engine.stats()["dfa_reverse_index"]
    for key in keys + ["x.y.w"]:
        assert engine.match(key) == reference.match(key), key
    engine.add(*change)
    reference.add(*change)
    for key in keys + ["x.y.w"]:
        assert engine.match(key) == reference.match(key), key


@settings(max_examples=150, deadline=None)
@given(bindings, keys, keys)
def test_a_step_is_the_unlabelled_step_united_with_the_labelled_one(bound, prefix, key):
    # The DFA builds its transitions from these two parts (`DfaEngine._advance`); a union
    # missing a node, or a chain of '#' children, would route some key wrong.
    engine = DfaEngine()
    engine.match("")  # the index of labelled edges is made on the first walk, then kept
    for pattern, destination in dict.fromkeys(bound):  # each binding once, as TopicMatcher does
        engine.add(split_words(pattern), destination)
    assert engine._parents == engine._edges_by_word()  # kept exact binding by binding
    live = engine.live_nodes(split_words(prefix))
    for word in split_words(key):
        parents = engine._parents.get(word, set())
        together = step_unlabelled(live) | step_labelled(frozenset(live), parents, word)
        assert together == step(live, word)
        live = together


def test_dfa_builds_in_two_parts_until_half_full_then_steps_whole():
    # The two-part build costs more cells (`DfaEngine._advance`): past half of its bound the
    # automaton steps every node again, so that it does not fill up and reset on keys it saw.
    patterns = list(dict.fromkeys(seed_patterns(3_000, seed=3)))
    keys = seed_keys(patterns, 800, seed=4, length=5)
    reference = ReferenceEngine()
    for i, pattern in enumerate(patterns):
        reference.add(split_words(pattern), f"q{i % 40}")
    unbounded = DfaEngine()
    for i, pattern in enumerate(patterns):
        unbounded.add(split_words(pattern), f"q{i % 40}")
    for key in keys:
        unbounded.match(key)
    engine = DfaEngine(max_cells=int(1.2 * unbounded._cells))  # half is crossed midway
    for i, pattern in enumerate(patterns):
        engine.add(split_words(pattern), f"q{i % 40}")
    built: list[tuple[bool, object]] = []  # (roomy when made, state)
    intern = engine._intern

    def recording_intern(nodes, base=None, entered=None):
        roomy, known = engine._roomy(), len(engine._states)
        state = intern(nodes, base, entered)
        if len(engine._states) > known:
            built.append((roomy, state))
        return state

    engine._intern = recording_intern
    for key in keys:
        assert engine.match(key) == reference.match(key), key
    assert engine.stats()["dfa_resets"] == 0
    assert any(state.base is not None for roomy, state in built if roomy)
    late = [state for roomy, state in built if not roomy]
    assert late and all(state.base is None for state in late)


def test_dfa_every_transition_built_leads_to_the_state_a_step_gives():
    # `_advance` sends a word that labels trie edges, but none of the state's nodes', to the
    # state's unlabelled transition without stepping; `_intern` makes states without
    # ``__init__`` and tests for '#' tails in a loop: every transition and unlabelled
    # transition must still be the state of `step` (of `step_unlabelled`), every answer exact.
    patterns = ["a.*.c", "b.x.#", "*.x", "a.#.x", "#.y.z", "c.c.c", "*.*.#", "x.#", "y.*"]
    engine, reference = DfaEngine(), ReferenceEngine()
    engine.small_state = 0  # built in two parts even from small states, as `auto`'s DFA
    for i, pattern in enumerate(patterns):
        engine.add(split_words(pattern), f"q{i}")
        reference.add(split_words(pattern), f"q{i}")
    words = ["a", "b", "c", "x", "y", "z", "q"]  # "q" labels no edge at all
    rng = random.Random(5)
    for _ in range(3_000):
        key = ".".join(rng.choice(words) for _ in range(rng.randint(1, 7)))
        assert engine.match(key) == reference.match(key), key
    assert engine.stats()["dfa_resets"] == 0
    states = list(engine._states.values())
    assert any(state.base is not None for state in states)
    for state in states:
        if state.next.__class__ is _SelfLoop:
            assert all(node.is_hash and not node.children and node.star is None
                       for node in state)
            continue
        for word, following in state.next.items():
            assert following is engine._states[frozenset(step(state, word))], word
        if state.other is not None:
            assert state.other is engine._states[frozenset(step_unlabelled(state))]
        if state.destinations is not None:
            assert state.destinations == frozenset(
                d for node in state for d in node.destinations)


def test_dfa_builds_long_chains_of_parts_without_recursing():
    # A state's parts chain down through bases (each a node smaller), 40 and more links on
    # long keys over '#'-heavy patterns: gathering along the chain must not recurse, or a
    # trie of thousands of nodes would exceed Python's recursion limit.
    rng = random.Random(2)
    words = [f"w{i}" for i in range(6)]
    engine, reference = DfaEngine(), ReferenceEngine()
    for i in range(3_000):
        pattern = split_words(".".join(rng.choice(words + ["#", "*", "#"])
                                       for _ in range(rng.randint(2, 9))))
        engine.add(pattern, f"q{i}")
        reference.add(pattern, f"q{i}")
    keys = [".".join(rng.choice(words + ["zz"]) for _ in range(rng.randint(30, 60)))
            for _ in range(150)]

    def links(state) -> int:
        count = 0
        while state.base is not None:
            state, count = state.base, count + 1
        return count

    longest = 0
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(traceback.extract_stack()) + 25)
    try:
        for i, key in enumerate(keys):
            assert engine.match(key) == reference.match(key), key
            if not i % 10:
                longest = max([longest, *map(links, engine._states.values())])
    finally:
        sys.setrecursionlimit(limit)
    assert longest > 25  # chains longer than the recursion room the test leaves


def test_dfa_states_keep_no_part_of_an_automaton_that_was_dropped():
    # A reset drops every state; a state made after it must not keep a base from before,
    # whose transitions would keep the whole dropped automaton alive (the memory bound).
    patterns = list(dict.fromkeys(seed_patterns(2_000, seed=13)))
    keys = seed_keys(patterns, 1_500, seed=14, length=5)
    engine, reference = DfaEngine(max_states=100, max_cells=10_000), ReferenceEngine()
    for i, pattern in enumerate(patterns):
        engine.add(split_words(pattern), f"q{i % 40}")
        reference.add(split_words(pattern), f"q{i % 40}")
    for key in keys:
        assert engine.match(key) == reference.match(key), key
        live = set(engine._states.values())
        for state in live:
            base = state.base
            while base is not None:
                assert base in live, key
                base = base.base
    assert engine.stats()["dfa_resets"] >= 3


def test_dfa_vocabulary_follows_bindings():
    engine = DfaEngine()
    engine.add(split_words("a.*"), "q1")
    assert engine.match("zz.b") == set()
    engine.add(split_words("zz.b"), "q2")  # 'zz' was an "other" word until now
    assert engine.match("zz.b") == {"q2"}
    engine.remove(split_words("zz.b"), "q2")
    assert engine.match("zz.b") == set()
    assert engine._parents == {"a": {engine._root}}  # 'zz' and 'b' left with their edges


# -- bitmap -------------------------------------------------------------------------------


def test_bitmap_add_sets_and_remove_clears_bits_of_known_keys():
    engine = BitmapEngine()
    engine.add(split_words("a.*"), "q1")
    assert engine.match("a.b") == {"q1"} and engine.match("c.d") == set()
    engine.add(split_words("#.b"), "q2")
    assert engine.stats()["bitmap_bits_set_on_add"] == 1  # a.b only
    assert engine.match("a.b") == {"q1", "q2"} and engine.match("c.d") == set()
    engine.add(split_words("#"), "q1")  # a second binding to q1
    engine.remove(split_words("a.*"), "q1")
    assert engine.stats()["bitmap_bits_cleared_on_remove"] == 1
    assert engine.match("a.b") == {"q1", "q2"}  # still q1, through '#'
    engine.remove(split_words("#"), "q1")
    assert engine.match("a.b") == {"q2"} and engine.match("c.d") == set()
    assert engine.stats()["bitmap_keys_compiled"] == 2  # never recompiled


def test_bitmap_known_keys_are_bounded():
    engine = BitmapEngine(max_keys=10, sweep_to=5)
    engine.add(split_words("#"), "q")
    for i in range(50):
        assert engine.match(str(i)) == {"q"}
        assert engine.stats()["bitmap_keys"] <= 10
    assert engine.stats()["bitmap_keys_evicted"] > 0


def test_bitmap_bits_are_bounded():
    engine = BitmapEngine(max_bits=40)
    for i in range(10):
        engine.add(split_words("#"), f"q{i}")  # every key matches 10 bindings
    for i in range(30):
        assert engine.match(str(i)) == {f"q{n}" for n in range(10)}
        assert engine.stats()["bitmap_bits"] <= 40 + 10
    engine.remove(split_words("#"), "q0")
    assert engine.stats()["bitmap_bits"] == 9 * engine.stats()["bitmap_keys"]


def test_bitmap_reuses_binding_numbers():
    engine = BitmapEngine()
    for round_ in range(5):
        engine.add(split_words("a.#"), f"q{round_}")
        assert engine.match("a.b") == {f"q{round_}"}
        engine.remove(split_words("a.#"), f"q{round_}")
    assert len(engine._destination) == 1


# -- compiled kernel ----------------------------------------------------------------------


def test_compiled_kernel_on_a_seed_batch():
    patterns = seed_patterns(400, seed=5)
    matcher, expected = pair("compiled", patterns)
    batch = seed_keys(patterns, 3000, seed=6) + AWKWARD_KEYS
    want = expected.match_many(batch)
    assert decode(matcher, *matcher.match_many_ids(pa.array(batch))) == want
    assert matcher.match_many(batch) == want  # the DFA is warm now: same answers
    figures = matcher.stats()
    assert figures["kernel_states"] > 0 and figures["kernel_plain_walks"] == 0


def test_compiled_dfa_tables_start_small_and_grow_when_full():
    # A large trie's DFA starts with hash tables at 1/16 of their size (random probes into
    # tables of several MB miss the cache); dropped for want of room, it starts again larger.
    patterns = seed_patterns(6_000, seed=11)
    matcher, trie = TopicMatcher("compiled"), TopicMatcher("trie")  # trie: checked elsewhere
    for i, pattern in enumerate(patterns):
        matcher.add(pattern, f"q{i % 7}")
        trie.add(pattern, f"q{i % 7}")
    batch = seed_keys(patterns, 8_000, seed=12)
    want = trie.match_many(batch)
    assert decode(matcher, *matcher.match_many_ids(pa.array(batch))) == want
    flat = matcher._engine._flat
    assert matcher.stats()["kernel_resets"] >= 1  # the first tables filled up
    assert flat._dfa_shrink < compiled.DFA_FIRST_SHRINK
    resets = matcher.stats()["kernel_resets"]
    for _ in range(2):
        assert decode(matcher, *matcher.match_many_ids(pa.array(batch))) == want
    assert matcher.stats()["kernel_resets"] == resets  # room enough now


def test_compiled_kernel_resets_and_falls_back_when_full(monkeypatch):
    # Tiny tables: the DFA fills up within a key, finishes it with the plain walk, resets.
    for limit, value in [
        ("COMPILED_MAX_STATES", 8),
        ("COMPILED_MAX_NODE_CELLS", 40),
        ("COMPILED_MAX_DESTINATION_CELLS", 30),
        ("COMPILED_MAX_TRANSITIONS", 8),
    ]:
        monkeypatch.setattr(compiled, limit, value)
    patterns = seed_patterns(200, seed=7)
    matcher, expected = pair("compiled", patterns)
    batch = seed_keys(patterns, 600, seed=8) + AWKWARD_KEYS
    want = expected.match_many(batch)
    for _ in range(2):
        assert decode(matcher, *matcher.match_many_ids(batch)) == want
    figures = matcher.stats()
    assert figures["kernel_resets"] > 0 and figures["kernel_plain_walks"] > 0
    assert figures["kernel_states"] <= 8


def test_compiled_kernel_stays_polynomial_on_hash_runs():
    matcher, expected = pair("compiled", [".".join(["#"] * n + ["a"]) for n in range(1, 31)])
    batch = [".".join(["x"] * 39 + ["a"]), ".".join(["x"] * 40), "a", "#.a"]
    assert decode(matcher, *matcher.match_many_ids(batch)) == expected.match_many(batch)


def test_compiled_kernel_follows_binding_changes():
    matcher = TopicMatcher(engine="compiled")
    expected = TopicMatcher("reference")
    rng = random.Random(9)
    patterns = seed_patterns(60, seed=9, vocabulary=8)
    batch = seed_keys(patterns, 200, seed=10)
    for i, pattern in enumerate(patterns):
        matcher.add(pattern, f"q{i % 5}")
        expected.add(pattern, f"q{i % 5}")
        if i % 10 == 9:
            victim = rng.choice(sorted(expected.bindings()))
            matcher.remove(*victim)
            expected.remove(*victim)
            assert decode(matcher, *matcher.match_many_ids(batch)) == expected.match_many(batch)
    assert matcher.stats()["flattened"] >= 6


# -- auto ---------------------------------------------------------------------------------


def test_auto_uses_the_kernel_for_large_id_batches_only(monkeypatch):
    monkeypatch.setattr(auto, "AUTO_BATCH_MIN", 50)
    monkeypatch.setattr(auto, "AUTO_FLATTEN_AFTER", 50)
    patterns = seed_patterns(100, seed=11)
    matcher, expected = pair("auto", patterns)
    small = seed_keys(patterns, 10, seed=12)
    large = seed_keys(patterns, 2000, seed=13)
    assert decode(matcher, *matcher.match_many_ids(small)) == expected.match_many(small)
    assert matcher.stats()["auto_kernel_batches"] == 0
    assert decode(matcher, *matcher.match_many_ids(large)) == expected.match_many(large)
    assert matcher.stats()["auto_kernel_batches"] == 1
    # Sets asked for: the memo and the DFA (shared frozensets), not the kernel.
    assert matcher.match_many(large) == expected.match_many(large)
    assert matcher.stats()["auto_kernel_batches"] == 1
    matcher.add("#", "new")
    expected.add("#", "new")
    assert matcher.match_many(large) == expected.match_many(large)
    assert matcher.match(large[0]) == expected.match(large[0])
    assert decode(matcher, *matcher.match_many_ids(large)) == expected.match_many(large)


def test_auto_memo_is_exact_under_change_and_bounded(monkeypatch):
    monkeypatch.setattr(auto, "AUTO_MEMO_MAX_KEYS", 8)
    patterns = seed_patterns(200, seed=21)
    matcher, expected = pair("auto", patterns)
    keys = seed_keys(patterns, 40, seed=22)
    for round_ in range(3):
        assert [matcher.match(k) for k in keys] == expected.match_many(keys)
        assert matcher.match_many(keys) == expected.match_many(keys)
        assert matcher.stats()["auto_memo_keys"] <= 8
        pattern = patterns[round_]
        matcher.remove(pattern, f"q{round_ % 7}")
        expected.remove(pattern, f"q{round_ % 7}")
        assert matcher.stats()["auto_memo_keys"] == 0  # dropped whole on a change
        assert matcher.match_many(keys) == expected.match_many(keys)
        matcher.add(keys[round_], "extra")
        expected.add(keys[round_], "extra")
    assert matcher.stats()["auto_memo_clears"] > 0


def test_auto_memo_stops_keeping_keys_that_never_repeat(monkeypatch):
    monkeypatch.setattr(auto, "AUTO_MEMO_PROBE", 16)
    monkeypatch.setattr(auto, "AUTO_MEMO_SKIP", 50)
    patterns = seed_patterns(200, seed=23)
    matcher, expected = pair("auto", patterns)
    keys = list(dict.fromkeys(seed_keys(patterns, 400, seed=24)))
    assert [matcher.match(k) for k in keys] == expected.match_many(keys)
    assert matcher.stats()["auto_memo_pauses"] > 0
    assert matcher.stats()["auto_memo_keys"] < len(keys)
    # Keys that repeat are kept again once the pause is over, and answers stay exact.
    repeated = keys[:10] * 30
    assert matcher.match_many(repeated) == expected.match_many(repeated)
    assert [matcher.match(k) for k in repeated] == expected.match_many(repeated)


def test_auto_memo_finds_a_repeating_working_set_again_after_a_pause():
    # A working set larger than one probe's worth of keys, routed pass after pass: the first
    # pass is all new keys, so the memo pauses; the sampled lookups of the next passes hit,
    # so it resumes and keeps the whole set (the sticky pause of the issue 12 bench).
    patterns = seed_patterns(300, seed=25)
    matcher, expected = pair("auto", patterns)
    keys = list(dict.fromkeys(seed_keys(patterns, 6000, seed=26)))[:3000]
    assert len(keys) > 2 * auto.AUTO_MEMO_PROBE
    answers = expected.match_many(keys)
    assert [matcher.match(k) for k in keys] == answers
    assert matcher.stats()["auto_memo_paused"]  # a first pass: nothing repeated
    for _ in range(3):
        assert [matcher.match(k) for k in keys] == answers
    stats = matcher.stats()
    assert not stats["auto_memo_paused"]
    assert stats["auto_memo_keys"] == len(keys)


def test_auto_counts_the_batch_keys_the_key_memo_answered_toward_its_kernel(monkeypatch):
    # Batches that repeat their keys are answered by the matcher's key memo before auto sees
    # them; they still count as batch traffic, so the new keys after them get the kernel.
    monkeypatch.setattr(auto, "AUTO_FLATTEN_AFTER", 200)
    patterns = seed_patterns(100, seed=18)
    matcher, expected = pair("auto", patterns)
    repeated = pa.array(seed_keys(patterns, 40, seed=19), pa.string())
    truth = expected.match_many(repeated.to_pylist())
    for _ in range(6):  # 2 batches reach auto (the second fills the memo), 4 do not
        assert decode(matcher, *matcher.match_many_ids(repeated)) == truth
    assert matcher.stats()["auto_kernel_batches"] == 0
    new = seed_keys(patterns, 40, seed=20)  # 80 + 160 + 40 keys: past the bar
    assert decode(matcher, *matcher.match_many_ids(pa.array(new, pa.string()))) == (
        expected.match_many(new))
    assert matcher.stats()["auto_kernel_batches"] == 1


def test_auto_flattens_a_trie_that_holds_its_literal_keys_after_the_plain_bar(monkeypatch):
    # The seed mix keeps its literal keys as paths of the flat trie (fewer than its nodes):
    # no exact-key table to pay for, so the bar is AUTO_FLATTEN_AFTER (100 here), not a key
    # per literal binding (135 here, above the batch's 120 keys).
    monkeypatch.setattr(auto, "AUTO_FLATTEN_AFTER", 100)
    monkeypatch.setattr(auto, "AUTO_FLATTEN_LITERALS_PER_KEY", 1)
    patterns = seed_patterns(500, seed=21)
    matcher, expected = pair("auto", patterns)
    stats = matcher.stats()
    assert not stats["auto_by_shape"] and 120 < stats["literal_keys"] < 1000
    batch = seed_keys(patterns, 120, seed=22)
    assert decode(matcher, *matcher.match_many_ids(batch)) == expected.match_many(batch)
    assert matcher.stats()["auto_kernel_batches"] == 1


def test_auto_warms_its_dfa_with_the_batch_that_flattens_the_trie(monkeypatch):
    monkeypatch.setattr(auto, "AUTO_BATCH_MIN", 10)
    monkeypatch.setattr(auto, "AUTO_FLATTEN_AFTER", 10)
    monkeypatch.setattr(auto, "AUTO_WARM_KEYS", 15)
    patterns = seed_patterns(100, seed=16)
    matcher, expected = pair("auto", patterns)
    batch = seed_keys(patterns, 40, seed=17)
    assert matcher.stats()["dfa_states_built"] == 0
    assert decode(matcher, *matcher.match_many_ids(batch)) == expected.match_many(batch)
    assert matcher.stats()["auto_kernel_batches"] == 1
    built = matcher.stats()["dfa_states_built"]
    assert built > 0  # the first 15 keys walked the DFA too
    assert [matcher.match(k) for k in batch[:15]] == expected.match_many(batch[:15])
    assert matcher.stats()["dfa_states_built"] == built  # ...so those keys find their states
    assert decode(matcher, *matcher.match_many_ids(batch)) == expected.match_many(batch)
    assert matcher.stats()["dfa_states_built"] == built  # a current flat trie: no warming


def test_auto_waits_before_flattening_a_changed_trie(monkeypatch):
    monkeypatch.setattr(auto, "AUTO_BATCH_MIN", 10)
    patterns = seed_patterns(100, seed=14)
    matcher, expected = pair("auto", patterns)
    batch = seed_keys(patterns, 20, seed=15)
    assert matcher.match_many(batch) == expected.match_many(batch)
    assert matcher.stats()["auto_kernel_batches"] == 0  # 20 keys < AUTO_FLATTEN_AFTER


def test_auto_counts_the_shape_entries_in_its_kernel_bar(monkeypatch):
    # While the wildcards go by shape, the shape kernel's table holds the shapes' entries
    # beside the literal keys: 200 sites' ``s{i}.*.temp`` (one shape, 200 entries) and 20
    # literal topics make the bar (220 // 2 = 110 keys) where the trie's nodes alone (about
    # 400 // 8 = 50) had the first 60-key batch of new keys make the arrays.
    monkeypatch.setattr(auto, "AUTO_BATCH_MIN", 10)
    monkeypatch.setattr(auto, "AUTO_FLATTEN_AFTER", 10)
    patterns = [f"s{i}.*.temp" for i in range(200)] + [f"s{i}.f0.temp" for i in range(20)]
    matcher, expected = pair("auto", patterns)
    assert matcher.stats()["auto_by_shape"]
    batches = [[f"s{n % 240}.f{n}.temp" if n % 3 else f"s{n % 20}.f0.temp"
                for n in range(60 * b, 60 * b + 60)] for b in range(2)]
    for batch in batches:
        arrow = pa.array(batch, pa.string())
        assert decode(matcher, *matcher.match_many_ids(arrow)) == expected.match_many(batch)
        if batch is batches[0]:
            assert matcher.stats()["auto_kernel_batches"] == 0  # 60 keys < 110
    assert matcher.stats()["auto_kernel_batches"] == 1  # 120 keys: the shape kernel
    assert matcher.stats()["auto_dfa_batches"] >= 1


def test_auto_answers_a_literal_key_with_the_larger_answer_where_one_holds_the_other():
    # A '#' answer of every queue holds a key's literal binding to one of them, and a key's
    # literal bindings may hold its wildcard answer: that answer is the larger set itself,
    # shared by every such key (a batch numbers it once), no union made per key.
    matcher, expected = TopicMatcher(), TopicMatcher("reference")
    for pattern, queue in [("#", "q1"), ("#", "q2"), ("a.b", "q2"), ("c.d", "q1"),
                           ("x.*", "q3"), ("x.z", "q5")] + [("x.y", f"q{i}") for i in range(1, 5)]:
        matcher.add(pattern, queue)
        expected.add(pattern, queue)
    keys = ["a.b", "c.d", "e.f", "x.y", "x.z", "x.w"]
    assert [matcher.match(k) for k in keys] == expected.match_many(keys)
    assert matcher.match("a.b") is matcher.match("c.d") is matcher.match("e.f")  # the '#' set
    assert matcher.stats()["literal_unions"] == 1  # x.z's alone: {q5} and {q1, q2, q3}
    batch = pa.array(keys * 6, pa.string())
    assert decode(matcher, *matcher.match_many_ids(batch)) == expected.match_many(keys * 6)


def test_auto_answers_keys_of_one_literal_destination_by_its_id():
    # A batch's generic path answers a key that one literal binding alone matches by the id
    # kept for it (no set read, no destination looked up); a key of two destinations, or
    # that a wildcard binding matches too, goes the generic way. Kept through unbinds, a
    # destination that leaves (its id freed) and a new one (that id again).
    matcher, expected = TopicMatcher(), TopicMatcher("reference")

    def both(change: str, pattern: str, destination: str) -> None:
        getattr(matcher, change)(pattern, destination)
        getattr(expected, change)(pattern, destination)

    for i in range(40):
        both("add", f"k.{i}", f"q{i % 10}")
    both("add", "k.3", "q99")  # two destinations
    both("add", "k.7.#", "w")  # a wildcard that matches k.7 too
    both("add", "z.*", "w")
    keys = [f"k.{i}" for i in range(45)] + ["z.1", "k.7.x"]

    def assert_batches_equal_reference() -> None:
        truth = expected.match_many(keys)
        assert decode(matcher, *matcher.match_many_ids(keys)) == truth
        assert decode(matcher, *matcher.match_many_ids(pa.array(keys, pa.string()))) == truth

    assert_batches_equal_reference()
    assert matcher.stats()["auto_literal_id_keys"] == 2 * 38  # 40 but k.3 and k.7, twice
    both("remove", "k.3", "q99")  # one destination again
    both("remove", "k.4", "q4")  # none
    for i in (5, 15, 25, 35):  # q5 leaves: its id is freed...
        both("remove", f"k.{i}", "q5")
    both("add", "k.5", "new")  # ...and taken by a new destination
    both("add", "k.15", "q1")
    before = matcher.stats()["auto_literal_id_keys"]
    assert_batches_equal_reference()
    # k.3 back, k.4 and q5's four gone, k.5 and k.15 bound again: 38 + 1 - 1 - 4 + 2 = 36
    assert matcher.stats()["auto_literal_id_keys"] - before == 2 * 36


def test_dfa_walks_the_trie_while_its_automaton_thrashes():
    # 40k distinct user keys against user_N.* bindings: every key is new to the automaton,
    # so it fills up in fewer matches than it holds states and the engine bypasses it for a
    # while; the answers stay those of the reference.
    from xroute.engines.dfa import DfaEngine

    engine = DfaEngine(max_states=16)
    reference = TopicMatcher(engine="reference")
    for n in range(60):
        engine.add(("user_%d" % n, "*"), n)
        reference.add(f"user_{n}.*", n)
    keys = [f"user_{n}.sent" for n in range(60)] * 3
    assert [engine.match(k) for k in keys] == reference.match_many(keys)
    stats = engine.stats()
    assert stats["dfa_resets"] >= 1
    assert stats["dfa_bypassed_matches"] > 0
    assert stats["dfa_states"] <= 16
