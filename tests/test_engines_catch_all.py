"""`auto` keeps the wildcard bindings of a destination bound with a catch-all (``#``, ``#.#``)
out of its trie, shapes and kernels (`xroute.engines.catch_all`): every answer stays equal to
`reference` through binds and unbinds that cover and uncover destinations, on single keys,
sets and id batches, and the bindings really leave the trie."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import apply_binding_step, keys, patterns
from tests.test_engines_tuple_space import assert_batches_equal
from xroute import TopicMatcher
from xroute.core.keys import split_words

SETTINGS = settings(max_examples=150, deadline=None)

# Catch-alls often, beside the shared strategy's patterns (literal, '*', '#', empty words).
# Floors too: '*.#' and '#.*' match every key of 1 word or more, '*.#.*' of 2 or more.
some_patterns = st.one_of(
    st.sampled_from(["#", "#.#", "#", "*.#", "#.*", "*.#.*", "*.*.#", "#.*.#", "a.#", "*.a"]),
    patterns)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), some_patterns, st.sampled_from(["q1", "q2", "q3"])),
        st.tuples(st.just("remove"), st.integers(0, 30)),
    ),
    min_size=1,
    max_size=30,
)


def shadowed(live: list[tuple[str, str]]) -> int:
    """How many live bindings a floor pattern of their destination (only '*' and '#', at
    least one '#': it matches every key of at least as many words as it has stars) makes
    redundant, counted here from the definition: the wildcard ones whose every match has at
    least that many words (its words other than '#'), but the floor's own patterns."""
    def floor_of(words: tuple[str, ...]) -> int | None:
        return words.count("*") if "#" in words and set(words) <= {"*", "#"} else None

    floors: dict[str, int] = {}
    for pattern, queue in live:
        floor = floor_of(split_words(pattern))
        if floor is not None:
            floors[queue] = min(floor, floors.get(queue, floor))
    count = 0
    for pattern, queue in live:
        words = split_words(pattern)
        least = sum(word != "#" for word in words)
        if queue in floors and ("*" in words or "#" in words) and (
                least > floors[queue]
                or least == floors[queue] and floor_of(words) is None):
            count += 1
    return count


@SETTINGS
@given(ops=operations, probe=st.lists(keys, min_size=1, max_size=10))
def test_auto_with_catch_all_destinations_equals_reference(ops, probe):
    expected, actual = TopicMatcher(engine="reference"), TopicMatcher(engine="auto")
    live: list[tuple[str, str]] = []
    for op in ops:
        apply_binding_step(op, [expected, actual], live)
        truth = expected.match_many(probe)
        assert [actual.match(key) for key in probe] == truth, f"bindings {live!r}"
        assert actual.match_many(probe) == truth
        assert_batches_equal(actual, probe, truth)
        assert actual.stats()["shadowed_bindings"] == shadowed(live)
        # `auto` keeps no set of pairs: its literal index and shadow answer for them
        assert sorted(actual.bindings()) == sorted(live) == sorted(expected.bindings())
        assert len(actual) == len(live)
        for pattern, destination in [*live, ("#", "q9"), ("a.#", "q1"), ("x.y", "q2")]:
            assert actual.has(pattern, destination) == ((pattern, destination) in live)
        if live:  # binding a pair again changes nothing
            actual.add(*live[0])
            assert len(actual) == len(live)


def audit_and_other(specific: list[str]) -> tuple[TopicMatcher, TopicMatcher]:
    """`reference` and `auto` matchers with ``specific`` bound to "audit" and "w1.*" to
    "other"."""
    expected, actual = TopicMatcher(engine="reference"), TopicMatcher(engine="auto")
    for matcher in (expected, actual):
        for pattern in specific:
            matcher.add(pattern, "audit")
        matcher.add("w1.*", "other")
    return expected, actual


def test_a_catch_all_takes_its_destinations_other_bindings_out_of_the_trie_until_it_goes():
    specific = [f"w{i}.*.w{i + 1}.#" for i in range(200)] + [f"*.w{i}" for i in range(200)]
    key_list = ["w3.x.w4.y", "x.w7", "nothing.here", "", "w3"]
    expected, actual = audit_and_other(specific)
    # While the shapes serve the trie waits (made from the shadow when read: `_make_trie`);
    # the nodes of the trie of every pattern, from a matcher bound alike whose trie is made:
    assert actual.stats()["auto_trie_deferred"]
    _, made = audit_and_other(specific)
    list(made._engine.patterns())  # noqa: SLF001
    alone = made.stats()["nodes"]
    for step in ("#", "#.#", "-#", "-#.#"):
        for matcher in (expected, actual):
            (matcher.remove if step[0] == "-" else matcher.add)(step.lstrip("-"), "audit")
        truth = expected.match_many(key_list)
        assert [actual.match(key) for key in key_list] == truth
        assert_batches_equal(actual, key_list, truth)
        stats = actual.stats()
        if step == "-#.#":  # the last catch-all went: every pattern is back in the trie
            assert stats["shadowed_bindings"] == 0
            assert stats["nodes"] == alone
        else:  # the root, '#', '#.#' and "w1.*": not 400 patterns
            assert stats["shadowed_bindings"] == 400
            assert stats["nodes"] < 10
    # Bound and unbound while covered, they never enter the trie.
    for matcher in (expected, actual):
        matcher.add("#", "audit")
        matcher.add("zz.*", "audit")
        matcher.remove("w3.*.w4.#", "audit")
    assert actual.stats()["shadowed_bindings"] == 400
    for matcher in (expected, actual):
        matcher.remove("#", "audit")
    assert [actual.match(key) for key in key_list + ["zz.a", "w3.x.w4"]] == expected.match_many(
        key_list + ["zz.a", "w3.x.w4"])


def test_a_matcher_whose_destinations_are_not_shared_keeps_every_binding_in_its_trie():
    """A topology's matcher binds each `Binding` object (no destination is shared): no index
    of patterns per destination is kept, and every answer is exact."""
    bindings = [("#", "q1"), ("a.*", "q1"), ("a.#", "q2"), ("#.b", "q2")]
    expected = TopicMatcher(engine="reference")
    actual = TopicMatcher(engine="auto", shared_destinations=False)
    for matcher in (expected, actual):
        for pattern, queue in bindings:
            matcher.add(pattern, queue)
    probe = ["", "a", "a.b", "c.b", "a.c.d"]
    assert [actual.match(key) for key in probe] == expected.match_many(probe)
    assert_batches_equal(actual, probe, expected.match_many(probe))
    assert "shadowed_bindings" not in actual.stats()
    # The shapes serve: the trie is made only when asked for (then with every binding).
    assert actual.stats()["nodes"] == 1
    assert len(list(actual._engine.patterns())) == len(bindings)  # noqa: SLF001
    assert actual.stats()["nodes"] == 6  # the root, "#", "a", "a.*", "a.#", "#.b"
    assert [actual.match(key) for key in probe] == expected.match_many(probe)


@SETTINGS
@given(ops=operations, reads=st.lists(st.booleans(), min_size=30, max_size=30),
       path=st.sampled_from(["match", "match_many", "batch", "wildcards"]),
       probe=st.lists(keys, min_size=1, max_size=10))
def test_bindings_uncovered_between_reads_go_back_in_lazily_and_answers_stay_exact(
        ops, reads, path, probe):
    """When a destination's last catch-all goes, its other wildcard bindings go back into the
    trie on the next read, not at once: many changes between two reads (a bulk unbind), on
    each read path (single keys, sets, id batches, the wildcard function a topology uses),
    still answer as ``reference``."""
    expected, actual = TopicMatcher(engine="reference"), TopicMatcher(engine="auto")
    live: list[tuple[str, str]] = []
    for op, read in zip(ops, reads):
        apply_binding_step(op, [expected, actual], live)
        if not read:
            continue  # the next change comes before any read
        truth = expected.match_many(probe)
        if path == "match":
            assert [actual.match(key) for key in probe] == truth, f"bindings {live!r}"
        elif path == "match_many":
            assert actual.match_many(probe) == truth
        elif path == "batch":
            assert_batches_equal(actual, probe, truth)
        else:
            wild = actual.wildcard_matcher()
            only = TopicMatcher(engine="reference")
            for pattern, queue in live:
                words = split_words(pattern)
                if "*" in words or "#" in words:
                    only.add(pattern, queue)
            assert [wild(key) for key in probe] == only.match_many(probe)
    truth = expected.match_many(probe)
    assert [actual.match(key) for key in probe] == truth
    assert actual.stats()["shadowed_bindings"] == shadowed(live)


def test_a_floor_takes_out_the_patterns_whose_keys_all_have_as_many_words():
    """``*.#`` matches every key of one word or more: its destination's patterns that need a
    word or more leave the trie, and a higher floor (``*.*.#``) with them; a lower floor
    (``#``) takes ``*.#`` too; as the floors go, what they covered comes back (on the next
    read), and the trie is as it was without them."""
    specific = [f"w{i}.*.w{i + 1}.#" for i in range(100)] + [f"#.w{i}" for i in range(100)]
    probe = ["w3.x.w4.y", "x.w7", "w7", "", "a.b.c"]
    expected, actual = audit_and_other(specific)
    _, made = audit_and_other(specific)  # bound alike, its trie made (it waits while unread)
    list(made._engine.patterns())  # noqa: SLF001
    alone = made.stats()["nodes"]
    # covered: the 200 by '*.#'; a higher floor itself; by '#' also '*.#'; by '*.*.#' alone
    # only the patterns of three words ('#.w1' needs one)
    steps = {"*.#": 200, "*.*.#": 201, "#": 202, "-#": 201, "-*.#": 100, "-*.*.#": 0}
    for step, covered in steps.items():
        for matcher in (expected, actual):
            (matcher.remove if step[0] == "-" else matcher.add)(step.lstrip("-"), "audit")
        assert [actual.match(key) for key in probe] == expected.match_many(probe), step
        assert_batches_equal(actual, probe, expected.match_many(probe))
        assert actual.stats()["shadowed_bindings"] == covered, step
    assert actual.stats()["nodes"] == alone
