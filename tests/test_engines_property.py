"""Every engine equals the reference matcher on random bindings and keys (hypothesis)."""

from __future__ import annotations

from operator import itemgetter
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import (
    apply_binding_step,
    binding_sessions,
    bindings,
    destinations,
    keys,
    patterns,
)
from xroute import InvalidPattern, TopicMatcher
from xroute.engines import shapes

SETTINGS = settings(max_examples=150, deadline=None)


def build(engine: str, pairs) -> TopicMatcher:
    matcher = TopicMatcher(engine=engine)
    for pattern, destination in pairs:
        matcher.add(pattern, destination)
    return matcher


def assert_same(engine: str, pairs, probe_keys) -> None:
    expected = build("reference", pairs)
    actual = build(engine, pairs)
    for key in probe_keys:
        assert actual.match(key) == expected.match(key), (
            f"engine {engine}: patterns {pairs!r}, key {key!r}: "
            f"expected {sorted(expected.match(key))}, got {sorted(actual.match(key))}"
        )
    assert actual.match_many(probe_keys) == expected.match_many(probe_keys)


@SETTINGS
@given(pairs=bindings, probe_keys=st.lists(keys, min_size=1, max_size=12))
def test_engine_equals_reference(engine, pairs, probe_keys):
    assert_same(engine, pairs, probe_keys)


# Random sessions of binding steps, matches and small batches.
operations = binding_sessions(6)


@SETTINGS
@given(ops=operations)
def test_engine_equals_reference_through_adds_and_removes(engine, ops):
    expected, actual = TopicMatcher(engine="reference"), TopicMatcher(engine=engine)
    live: list[tuple[str, str]] = []
    for op in ops:
        apply_binding_step(op, [expected, actual], live)
        if op[0] == "match":
            assert actual.match(op[1]) == expected.match(op[1]), (
                f"engine {engine}: bindings {live!r}, key {op[1]!r}"
            )
        elif op[0] == "batch":
            # Sets and ids, in the engine's batch paths (memo, DFA states, kernel).
            truth = expected.match_many(op[1])
            assert actual.match_many(op[1]) == truth, f"engine {engine}: bindings {live!r}"
            offsets, ids = actual.match_many_ids(op[1])
            names = actual.destinations()
            got = [frozenset(names[j] for j in ids[offsets[i] : offsets[i + 1]])
                   for i in range(len(op[1]))]
            assert got == truth, f"engine {engine}: bindings {live!r}, keys {op[1]!r}"
        assert len(actual) == len(expected) == len(live)


@SETTINGS
@given(adds=st.lists(st.tuples(st.just("add"), patterns, destinations), min_size=4,
                    max_size=20),
       ops=operations, wildcards=st.lists(keys, min_size=1, max_size=4))
def test_auto_for_a_topology_equals_reference_through_adds_and_removes(adds, ops, wildcards):
    """``auto`` as a topology's exchange makes it (``shared_destinations=False``): answers
    of one destination kept bare, shape entries dropped and rebuilt, the DFA's edge index
    made late; every path, and the wildcard function `Topology.route` reads, stays exact."""
    expected = TopicMatcher(engine="reference")
    actual = TopicMatcher(engine="auto", shared_destinations=False)
    live: list[tuple[str, str]] = []
    # bounds that random sessions cross both ways: entries dropped and made again often
    with mock.patch.object(shapes, "MAX_SHAPES", 2), mock.patch.object(shapes, "DROP_SHAPES", 3):
        _topology_steps(adds + ops, expected, actual, live)
        literal = {(p, d) for p, d in live if "*" not in p.split(".") and "#" not in p.split(".")}
        only_wild = TopicMatcher(engine="reference")
        for pattern, destination in set(live) - literal:
            only_wild.add(pattern, destination)
        wildcard = actual.wildcard_matcher()
        for key in wildcards:
            assert wildcard(key) == only_wild.match(key), f"bindings {live!r}, key {key!r}"
        while live:  # down to nothing: the entries are made again on the way
            _topology_steps([("remove", len(live) // 2)], expected, actual, live)
            for key in wildcards:
                assert actual.match(key) == expected.match(key), f"bindings {live!r}"


def _topology_steps(ops, expected, actual, live) -> None:
    for op in ops:
        apply_binding_step(op, [expected, actual], live)
        if op[0] == "match":
            assert actual.match(op[1]) == expected.match(op[1]), f"bindings {live!r}"
        elif op[0] == "batch":
            truth = expected.match_many(op[1])
            assert actual.match_many(op[1]) == truth, f"bindings {live!r}"
            offsets, ids = actual.match_many_ids(op[1])
            names = actual.destinations()
            got = [frozenset(names[j] for j in ids[offsets[i] : offsets[i + 1]])
                   for i in range(len(op[1]))]
            assert got == truth, f"bindings {live!r}, keys {op[1]!r}"


@SETTINGS
@given(pairs=bindings)
def test_removing_everything_leaves_an_empty_matcher(engine, pairs):
    matcher = build(engine, pairs)
    for pattern, destination in set(pairs):
        matcher.remove(pattern, destination)
    assert len(matcher) == 0
    assert matcher.match_many(["", "a", "a.b", "#", "*.*"]) == [frozenset()] * 5


def test_trie_prunes_nodes_it_no_longer_needs():
    matcher = TopicMatcher(engine="trie")
    before = matcher.stats()["nodes"]
    for pattern in ("a.b.c", "a.*.#.d", "#.#.x", ""):
        matcher.add(pattern, "q")
    assert matcher.stats()["nodes"] > before
    for pattern in ("a.b.c", "a.*.#.d", "#.#.x", ""):
        matcher.remove(pattern, "q")
    assert matcher.stats()["nodes"] == before


@pytest.mark.parametrize("bad", [None, 3, "x" * 256, "\ud800"])
def test_bad_patterns_are_refused_and_leave_nothing_behind(engine, bad):
    matcher = TopicMatcher(engine=engine)
    with pytest.raises(InvalidPattern) as caught:
        matcher.add(bad, "q")
    assert caught.value.pattern is bad
    assert len(matcher) == 0


@settings(max_examples=60, deadline=None)
@given(wide=st.integers(0, 150), singles=st.integers(0, 40),
       probe=st.lists(st.sampled_from(["fan.x", "dev.1", "dev.7", "dev.39", "none", "fan.dev"]),
                      max_size=80),
       arrow=st.booleans(), engine=st.sampled_from(["auto", "dfa", "trie"]))
def test_batch_ids_of_small_and_wide_answers_equal_reference(wide, singles, probe, arrow, engine):
    """`match_many_ids`' generic path (`TopicMatcher._flatten`: ids of a set of one, of a few
    and of many destinations shared by several keys, in any order within a batch) and a
    fresh ``auto`` matcher's first batch (kept off the kernel while the batch keys are fewer
    than its literal bindings) give what ``reference`` matches."""
    import pyarrow as pa

    pairs = [(f"dev.{i}", f"d{i}") for i in range(singles)]
    pairs += [("fan.*", f"w{i}") for i in range(wide)] + [("*.dev", "w0"), ("#", "all")]
    truth, tested = TopicMatcher(engine="reference"), TopicMatcher(engine=engine)
    for pattern, destination in pairs:
        truth.add(pattern, destination)
        tested.add(pattern, destination)
    offsets, ids = tested.match_many_ids(pa.array(probe, pa.string()) if arrow else probe)
    names = tested.destinations()
    got = [frozenset(names[j] for j in ids[offsets[i]:offsets[i + 1]].tolist())
           for i in range(len(probe))]
    assert got == [truth.match(key) for key in probe]
    assert all(len(set(ids[offsets[i]:offsets[i + 1]].tolist())) == offsets[i + 1] - offsets[i]
               for i in range(len(probe)))


@settings(max_examples=80, deadline=None)
@given(answers=st.lists(st.frozensets(st.integers(0, 30), max_size=12), max_size=40),
       copies=st.lists(st.booleans(), max_size=40))
def test_flatten_of_sets_equal_apart_or_shared(answers, copies):
    """`TopicMatcher._flatten` on keys whose sets are shared, made apart with equal content
    (numbered once by content), empty or of one destination: each key's ids are its set's."""
    matcher = TopicMatcher()
    for d in range(31):
        matcher.add(f"k.{d}", f"d{d}")
    matcher._keep_ids()
    names = matcher.destinations()
    results = []
    for i, answer in enumerate(answers):
        found = frozenset(f"d{d}" for d in answer)
        # a copy made apart (equal, not the same object), or the earlier object itself
        same = next((r for r in results if r == found), None)
        results.append(found if same is None or (i < len(copies) and copies[i]) else same)
    # enough destinations a key for the path of shared sets, whatever ``answers`` holds
    results += [frozenset(f"d{d}" for d in range(31)),
                frozenset(f"d{d}" for d in range(31))] * (len(results) + 1)
    offsets, ids = matcher._flatten(results)
    got = [frozenset(names[j] for j in ids[offsets[i]:offsets[i + 1]].tolist())
           for i in range(len(results))]
    assert got == results
    assert list(offsets[1:] - offsets[:-1]) == [len(r) for r in results]


# Mostly literal patterns over few words (keys bound to one destination, to two, to none;
# now and then a wildcard over them), with unbinds: `auto`'s ids of keys of one literal
# destination (`AutoEngine.single_literal_ids`) must follow every change.
literal_words = st.lists(st.sampled_from(["a", "b", "c", "a", "b", "*", "#"]), min_size=1,
                         max_size=3)
literal_sessions = st.lists(
    st.one_of(
        st.tuples(st.just("add"), literal_words.map(".".join), destinations),
        st.tuples(st.just("remove"), st.integers(0, 30)),
        st.tuples(st.just("batch"), st.lists(literal_words.map(".".join), min_size=1,
                                             max_size=40)),
    ),
    max_size=40,
)


@SETTINGS
@given(ops=literal_sessions)
def test_auto_ids_of_one_literal_destination_follow_every_change(ops):
    import pyarrow as pa

    expected, actual = TopicMatcher(engine="reference"), TopicMatcher(engine="auto")
    live: list[tuple[str, str]] = []
    for op in ops:
        apply_binding_step(op, [expected, actual], live)
        if op[0] == "batch":
            batch = [key.replace("*", "x").replace("#", "y") for key in op[1]]
            truth = expected.match_many(batch)
            # The keys it answers by id alone: one literal destination, no wildcard match.
            wildcards = TopicMatcher(engine="reference")
            for pattern, destination in live:
                if "*" in pattern or "#" in pattern:
                    wildcards.add(pattern, destination)
            single = sum(len({d for p, d in live if p == key}) == 1 and not wildcards.match(key)
                         for key in batch)
            before = actual.stats()["auto_literal_id_keys"]
            for keys_given in (batch, pa.array(batch, pa.string())):
                offsets, ids = actual.match_many_ids(keys_given)
                names = actual.destinations()
                got = [frozenset(names[j] for j in ids[offsets[i] : offsets[i + 1]])
                       for i in range(len(batch))]
                assert got == truth, f"bindings {live!r}, keys {batch!r}"
                if keys_given is batch:  # a list: every key reaches the engine
                    assert actual.stats()["auto_literal_id_keys"] - before == single


# Literal patterns beside '#' (the only wildcard kind: a queue taking everything, as every
# queue of seed-100k), over up to 12 queues (a key bound to more than 8 is kept STALE until
# read), with unbinds: `AutoEngine._catch_all_ids` answers every batch while each wildcard
# pattern is '#'s only, and must follow every change; other wildcards send it elsewhere.
catch_all_patterns = st.one_of(
    st.sampled_from(["#", "#.#", "a.#"]),
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=2).map(".".join),
)
catch_all_sessions = st.lists(
    st.one_of(
        st.tuples(st.just("add"), catch_all_patterns,
                  st.sampled_from([f"q{i}" for i in range(12)])),
        st.tuples(st.just("remove"), st.integers(0, 40)),
        st.tuples(st.just("batch"), st.lists(
            st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=3).map(".".join),
            min_size=1, max_size=40)),
    ),
    max_size=50,
)


@SETTINGS
@given(ops=catch_all_sessions, named=st.booleans())
def test_auto_ids_beside_catch_alls_follow_every_change(ops, named):
    import pyarrow as pa

    expected = TopicMatcher(engine="reference")
    # ``named``: destinations of one binding each, kept bare (a topology's kind of matcher)
    actual = (TopicMatcher(engine="auto", pattern_of=itemgetter(0)) if named
              else TopicMatcher(engine="auto"))
    live: list[tuple[str, str]] = []
    for op in ops:
        if op[0] == "add":
            _, pattern, queue = op
            actual.add(pattern, (pattern, queue) if named else queue)
            expected.add(pattern, queue)
            if (pattern, queue) not in live:
                live.append((pattern, queue))
            continue
        if op[0] == "remove":
            if live:
                pattern, queue = live.pop(op[1] % len(live))
                actual.remove(pattern, (pattern, queue) if named else queue)
                expected.remove(pattern, queue)
            continue
        batch = list(op[1])
        truth = expected.match_many(batch)
        wildcards = [pattern for pattern, _ in live if "#" in pattern]
        # (a pattern of two '#' sends the engine off its shapes: '#.#' is not taken)
        fast = bool(wildcards) and all(pattern == "#" for pattern in wildcards)
        for keys_given in (batch, pa.array(batch, pa.string())):
            before = actual.stats()["auto_catch_all_keys"]
            offsets, ids = actual.match_many_ids(keys_given)
            names = actual.destinations()
            answers = [ids[offsets[i] : offsets[i + 1]].tolist() for i in range(len(batch))]
            got = [frozenset(names[j][1] if named else names[j] for j in answer)
                   for answer in answers]
            assert got == truth, f"bindings {live!r}, keys {batch!r}"
            assert all(len(set(answer)) == len(answer) for answer in answers)  # no repeats
            if keys_given is batch:  # a list: no key memo before the engine
                assert (actual.stats()["auto_catch_all_keys"] - before
                        == (len(batch) if fast else 0))


def test_a_first_pass_beside_catch_alls_makes_no_kernel_tables():
    """Every queue bound with '#' and to literal keys (seed-100k): a fresh matcher's first
    pass over new keys is answered by the literal index and the catch-all's ids, exactly,
    without the shape kernel's tables (20-25 ms at 20k literal keys, made within the pass)."""
    import pyarrow as pa

    queues = frozenset(f"q{i}" for i in range(20))
    matcher = TopicMatcher()
    for queue in sorted(queues):
        matcher.add("#", queue)
    for i in range(6_000):
        matcher.add(f"k.{i}", f"q{i % 20}")
        if i % 7 == 0:
            matcher.add(f"k.{i}", "extra")
    keys = [f"k.{i}" for i in range(0, 12_000, 2)] + ["other", ""]
    for start in range(0, len(keys), 2_048):
        batch = keys[start : start + 2_048]
        offsets, ids = matcher.match_many_ids(pa.array(batch, pa.string()))
        names = matcher.destinations()
        for i, key in enumerate(batch):
            number = int(key[2:]) if key.startswith("k.") else -1
            assert sorted(names[j] for j in ids[offsets[i] : offsets[i + 1]].tolist()) == \
                sorted(queues | ({"extra"} if 0 <= number < 6_000 and number % 7 == 0 else set()))
    stats = matcher.stats()
    assert stats["auto_kernel_batches"] == 0
    assert stats["auto_catch_all_keys"] == len(keys)
