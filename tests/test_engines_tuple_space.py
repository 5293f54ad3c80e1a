"""The shape index (`xroute.engines.shapes`) equals `reference`: patterns drawn from a few
shapes (where `auto` uses it), through adds and removes that make it usable and unusable."""

from __future__ import annotations

from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import WORDS, keys
from xroute import TopicMatcher
from xroute.bench.shapes import NATS_WILDCARDS
from xroute.core.keys import split_words
from xroute.engines import auto
from xroute.engines.shapes import MAX_SHAPES, ShapeIndex, shape_of

SETTINGS = settings(max_examples=150, deadline=None)

# A shape: a template of '*', '#' and slots that take a literal word.
templates = st.lists(st.sampled_from(["*", "#", "_", "_"]), max_size=5).map(tuple)
literal_words = st.sampled_from(WORDS + ["d"])


@st.composite
def shaped_bindings(draw):
    """Bindings whose patterns come from one to eight templates (so sometimes more than
    `MAX_SHAPES` shapes, and sometimes two '#')."""
    shapes = draw(st.lists(templates, min_size=1, max_size=MAX_SHAPES + 2))
    found = []
    for _ in range(draw(st.integers(1, 30))):
        template = draw(st.sampled_from(shapes))
        words = [draw(literal_words) if slot == "_" else slot for slot in template]
        found.append((".".join(words), draw(st.sampled_from(["q1", "q2", "q3"]))))
    return found


@SETTINGS
@given(pairs=shaped_bindings(), probe=st.lists(keys, min_size=1, max_size=15))
def test_auto_by_shape_equals_reference(pairs, probe):
    expected, actual = TopicMatcher(engine="reference"), TopicMatcher(engine="auto")
    for pattern, queue in pairs:
        expected.add(pattern, queue)
        actual.add(pattern, queue)
    assert [actual.match(key) for key in probe] == expected.match_many(probe)
    assert_batches_equal(actual, probe, expected.match_many(probe))
    # Removing bindings one by one crosses the index's bounds (shapes, two '#') both ways.
    for pattern, queue in dict.fromkeys(pairs):
        expected.remove(pattern, queue)
        actual.remove(pattern, queue)
        truth = expected.match_many(probe)
        assert [actual.match(key) for key in probe] == truth
        assert_batches_equal(actual, probe, truth)


def assert_batches_equal(matcher, keys, truth):
    """`match_many_ids` from the first key on (the shape kernel while the index is used, else
    the trie's), on a list and on Arrow strings and large strings."""
    with mock.patch.object(auto, "AUTO_BATCH_MIN", 1), mock.patch.object(
        auto, "AUTO_FLATTEN_AFTER", 1
    ), mock.patch.object(auto, "AUTO_FLATTEN_NODES_PER_KEY", 1 << 30):
        for batch in (keys, pa.array(keys, pa.string()), pa.array(keys, pa.large_string())):
            offsets, ids = matcher.match_many_ids(batch)
            names = matcher.destinations()
            bounds = list(zip(offsets.tolist(), offsets[1:].tolist()))
            assert [frozenset(names[j] for j in ids[a:b]) for a, b in bounds] == truth
            assert all(len(set(ids[a:b])) == b - a for a, b in bounds)  # no repeats


@SETTINGS
@given(pairs=shaped_bindings(), probe=st.lists(keys, min_size=1, max_size=15))
def test_the_index_alone_equals_reference_on_wildcard_patterns(pairs, probe):
    index, expected = ShapeIndex(), TopicMatcher(engine="reference")
    for pattern, queue in dict.fromkeys(pairs):
        words = split_words(pattern)
        if "*" in words or "#" in words:
            index.add(words, queue)
            expected.add(pattern, queue)
    if not index.usable:
        return
    assert [index.match(key) for key in probe] == expected.match_many(probe)


def test_a_shape_is_where_the_wildcards_stand():
    assert shape_of(("device", "s1", "*", "7", "#")) == (4, False, (0, 1, 3))
    assert shape_of(("a", "#", "b", "*")) == (3, False, (0, -2))
    assert shape_of(("*", "x")) == (2, True, (1,))
    assert shape_of(("#",)) == (0, False, ())
    assert shape_of(("#", "a", "#")) is None


def test_auto_leaves_the_index_when_patterns_have_too_many_shapes():
    matcher = TopicMatcher(engine="auto")
    matcher.add("device.*.#", "q")
    assert matcher.stats()["auto_by_shape"] is True
    for i in range(MAX_SHAPES):
        matcher.add("x." + ".".join(["*"] * (i + 1)), "q")
    assert matcher.stats()["auto_by_shape"] is False
    assert matcher.match("x.1.2") == {"q"}
    matcher.remove("x.*", "q")
    assert matcher.stats()["auto_by_shape"] is True
    assert matcher.match("x.1.2") == {"q"}
    assert matcher.match("device.1") == {"q"}


@pytest.mark.parametrize("shared", [True, False])
def test_too_many_shapes_drop_the_entries_and_they_come_back_from_the_trie(shared):
    """Past `DROP_SHAPES` shapes only counts are kept; back under `MAX_SHAPES` the entries
    are made again from the trie, and every answer stays the reference's (with bindings
    of one destination each, as a topology binds, kept bare too)."""
    from xroute.engines.shapes import DROP_SHAPES

    matcher = TopicMatcher(engine="auto", shared_destinations=shared)
    expected = TopicMatcher(engine="reference")
    wide = [f"w{i}." + ".".join(["*"] * (i + 1)) for i in range(DROP_SHAPES + 2)]
    steady = [("device.*.#", "q1"), ("device.a.#", "q2"), ("*.b", "q3"), ("a.b.c", "q4")]
    if not shared:
        steady = [(pattern, (pattern, queue)) for pattern, queue in steady]
    keys = ["device.a", "device.a.b", "x.b", "a.b.c", "w3.1.2.3.4", "w0.1", "device.z.b"]
    for pattern, destination in steady + [(p, ("wide", p)) for p in wide]:
        matcher.add(pattern, destination)
        expected.add(pattern, destination)
    assert matcher.stats()["shape_entries_dropped"] is True
    assert matcher.stats()["shapes"] == len(wide) + 3  # a.b.c is literal: no shape
    for key in keys:
        assert matcher.match(key) == expected.match(key), key
    for pattern in wide[1:]:
        matcher.remove(pattern, ("wide", pattern))
        expected.remove(pattern, ("wide", pattern))
        for key in keys:
            assert matcher.match(key) == expected.match(key), key
    stats = matcher.stats()
    assert stats["auto_by_shape"] is True and stats["shape_entries_dropped"] is False
    matcher.add("device.b.#", "q5")  # the rebuilt entries take changes as before
    expected.add("device.b.#", "q5")
    for key in keys + ["device.b.c"]:
        assert matcher.match(key) == expected.match(key), key


def test_a_pattern_bound_to_many_queues_stays_exact_through_binds_and_unbinds():
    """Past `FREEZE_NOW` destinations an entry keeps a set, frozen on its next lookup."""
    from xroute.engines.shapes import FREEZE_NOW

    matcher = TopicMatcher(engine="auto")
    queues = [f"q{i}" for i in range(3 * FREEZE_NOW)]
    bound: set[str] = set()
    for queue in queues:
        matcher.add("broadcast.#", queue)
        matcher.add("*.x", queue)
        bound.add(queue)
        assert matcher.match("broadcast.x") == bound
        assert matcher.match("broadcast.y.z") == bound
    for queue in reversed(queues):
        matcher.remove("broadcast.#", queue)
        bound.discard(queue)
        assert matcher.match("broadcast.y.z") == bound
        assert matcher.match("broadcast.x") == set(queues)
    assert matcher.stats()["auto_by_shape"] is True


def test_a_single_shape_with_its_words_before_the_hash_splits_keys_only_that_far():
    """EMQX's shape (`device.{s}.*.{n}.#`): the one-shape matcher splits a key at most at its
    first words; keys shorter, exactly as long, and longer, with a dot-free and dotted tail,
    equal reference, and so does `#` alone (no word to take)."""
    keys = ["", "device", "device.1.x", "device.1.x.7", "device.1.x.7.a.b", "device.1..7.",
            "device.2.x.7.a", "other.1.x.7", "device.1.x.8"]
    for patterns in (["device.1.*.7.#", "device.2.*.7.#"], ["#"], ["a.#"]):
        index, expected = ShapeIndex(), TopicMatcher(engine="reference")
        for number, pattern in enumerate(patterns):
            index.add(split_words(pattern), f"q{number}")
            expected.add(pattern, f"q{number}")
        match = index.matcher()
        assert match is not None and match.__name__ == "match_one_shape"
        assert [match(key) for key in keys] == expected.match_many(keys)


def test_keys_whose_first_word_no_pattern_begins_with_match_nothing_at_once():
    """NATS's wildcards all begin with ``cloud``: a key beginning otherwise is answered
    without a lookup per shape, and a pattern beginning with '*' or '#', bound and then
    removed, turns that shortcut off and on again; every answer equals reference."""
    patterns = list(NATS_WILDCARDS)
    keys = ["", "cloud", "api.imgr", "cloud.x.y.router.z", "cloud.continuum.component.a",
            "x.cloud", "auth.cloud.router"]
    index, expected = ShapeIndex(), TopicMatcher(engine="reference")
    for pattern in patterns:
        index.add(split_words(pattern), pattern)
        expected.add(pattern, pattern)
    assert [index.match(key) for key in keys] == expected.match_many(keys)
    for headless in ("*.cloud.router", "#.router"):
        index.add(split_words(headless), headless)
        expected.add(headless, headless)
        assert [index.match(key) for key in keys] == expected.match_many(keys)
        index.remove(split_words(headless), headless)
        expected.remove(headless, headless)
        assert [index.match(key) for key in keys] == expected.match_many(keys)
    for pattern in patterns:
        index.remove(split_words(pattern), pattern)
        expected.remove(pattern, pattern)
        assert [index.match(key) for key in keys] == expected.match_many(keys)


def test_the_shape_kernel_skips_shapes_by_first_word_and_stays_exact():
    """The shape kernel's first-word table (`FlatShapes.heads`): keys beginning with a word
    no pattern begins with still find their literal bindings; a pattern beginning with '*'
    or '#' empties the table, and its removal fills it again; every batch equals reference."""
    patterns = list(NATS_WILDCARDS)
    literals = ["api.imgr", "cloud", "cloud.x.y.router.z", "auth"]
    keys = ["", "cloud", "api.imgr", "api", "cloud.x.y.router.z", "cloud.continuum.component.a",
            "x.cloud", "auth", "auth.cloud.router", "clouds.x"]
    expected, actual = TopicMatcher(engine="reference"), TopicMatcher(engine="auto")
    for pattern in patterns + literals:
        expected.add(pattern, pattern)
        actual.add(pattern, pattern)
    assert_batches_equal(actual, keys, expected.match_many(keys))
    assert actual._engine._flat_shapes.heads[1].shape[0] == 2  # one word: "cloud"
    for headless in ("*.cloud.router", "#.router"):
        for matcher in (expected, actual):
            matcher.add(headless, headless)
        assert_batches_equal(actual, keys, expected.match_many(keys))
        assert actual._engine._flat_shapes.heads[1].shape[0] == 1  # empty: every shape tried
        for matcher in (expected, actual):
            matcher.remove(headless, headless)
        assert_batches_equal(actual, keys, expected.match_many(keys))


def test_patterns_alike_but_for_where_hash_stands_are_one_entry_counted_twice():
    """``*.#`` and ``#.*`` (``a.*.#`` and ``a.#.*``) match the same keys and are one entry of
    one shape: unbinding one of them must leave the other's answer."""
    expected, actual = TopicMatcher(engine="reference"), TopicMatcher(engine="auto")
    pairs = [("*.#", "q"), ("#.*", "q"), ("a.*.#", "q"), ("a.#.*", "q"), ("a.*.#", "r")]
    probe = ["", "a", "a.b", "b.c.d"]
    for matcher in (expected, actual):
        for pattern, queue in pairs:
            matcher.add(pattern, queue)
    for pattern, queue in pairs:
        for matcher in (expected, actual):
            matcher.remove(pattern, queue)
        truth = expected.match_many(probe)
        assert [actual.match(key) for key in probe] == truth
        assert_batches_equal(actual, probe, truth)
    assert actual.stats()["auto_by_shape"]
