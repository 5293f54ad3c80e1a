"""The bulk bind of a wildcard-heavy mix (issue 36, seed-10k): a shape index past
`DROP_SHAPES` shapes with patterns of two '#' counts no shapes (no `shape_of` a change) and
counts them again when the last such pattern goes; the trie makes a new path without
looking up below its first new node. Every answer stays the reference's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import apply_binding_step, keys
from tests.test_engines_tuple_space import assert_batches_equal
from xroute import TopicMatcher
from xroute.core.keys import split_words
from xroute.engines import shapes as shapes_module
from xroute.engines.reference import pattern_matches
from xroute.engines.shapes import DROP_SHAPES, MAX_SHAPES, ShapeIndex, shape_of
from xroute.engines.trie import TrieEngine

SETTINGS = settings(max_examples=120, deadline=None)

# Many shapes (a word then 0-29 stars), patterns of two '#', and a few of few shapes: enough
# to pass `DROP_SHAPES` and come back under `MAX_SHAPES` as they are removed.
wide_patterns = st.integers(0, DROP_SHAPES + 5).map(lambda i: "w." + ".".join(["*"] * i))
patterns = st.one_of(
    wide_patterns,
    st.sampled_from(["#.#", "a.#.b.#", "#.*.#", "a.#", "*.b", "a.*", "#", "*.#", "b.*.#"]),
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), patterns, st.sampled_from(["q1", "q2", "q3"])),
        st.tuples(st.just("remove"), st.integers(0, 60)),
    ),
    min_size=1,
    max_size=80,
)


def _index(live: list[tuple[str, str]]) -> ShapeIndex:
    """A shape index whose source is ``live`` (as a matcher's trie is its source)."""
    return ShapeIndex(lambda: [(split_words(p), d) for p, d in live])


def _counted(live: list[tuple[str, str]]) -> tuple[int, int]:
    """(shapes, patterns without a shape) of ``live``, from the definition."""
    found = [shape_of(split_words(pattern)) for pattern, _ in live]
    return len({key for key in found if key is not None}), found.count(None)


# Bound first: more shapes than `DROP_SHAPES`, and a pattern of two '#'.
WIDE = [("#.#", "q0")] + [(f"v{i}." + ".".join(["*"] * i), "q0") for i in range(DROP_SHAPES + 2)]


def _steps(ops: list[tuple]) -> list[tuple]:
    """``ops`` after `WIDE` is bound, then `WIDE`'s removal one by one (so that the index
    goes past `DROP_SHAPES`, stops counting, and comes back)."""
    return ([("add", p, d) for p, d in WIDE] + ops
            + [("remove-pair", p, d) for p, d in WIDE])


def _apply(step: tuple, matchers: list, live: list[tuple[str, str]]) -> None:
    if step[0] == "remove-pair":
        pair = (step[1], step[2])
        if pair in live:
            live.remove(pair)
            for matcher in matchers:
                matcher.remove(*pair)
    else:
        apply_binding_step(step, matchers, live)


class _IndexAsMatcher:
    """`ShapeIndex.add` and ``remove`` by pattern, as `apply_binding_step` calls them."""

    def __init__(self, index: ShapeIndex) -> None:
        self.index = index

    def add(self, pattern: str, destination: str) -> None:
        self.index.add(split_words(pattern), destination)

    def remove(self, pattern: str, destination: str) -> None:
        self.index.remove(split_words(pattern), destination)


@SETTINGS
@given(ops=operations, probe=st.lists(keys, min_size=1, max_size=8))
def test_a_shape_index_that_stops_counting_shapes_stays_exact(ops, probe):
    live: list[tuple[str, str]] = []
    index = _index(live)
    held: list[tuple[str, str]] = []  # what the index was given (a pair once)
    for step in _steps(ops):
        if step[0] == "add" and (step[1], step[2]) in live:
            continue  # a matcher binds a pair once: the index is given it once
        _apply(step, [_IndexAsMatcher(index)], held)
        live[:] = held
        shapes, unshaped = _counted(live)
        usable = not unshaped and shapes <= MAX_SHAPES
        match = index.matcher()
        assert (match is not None) == usable == index.usable, live
        assert index.stats()["shapes"] == shapes and index.stats()["unshaped_bindings"] == unshaped
        if match is not None:
            for key in probe:
                words = split_words(key)
                assert match(key) == {d for p, d in live if pattern_matches(split_words(p), words)}


@SETTINGS
@given(ops=operations, probe=st.lists(keys, min_size=1, max_size=8),
       shared=st.booleans())
def test_auto_through_uncounted_shapes_equals_reference(ops, probe, shared):
    expected = TopicMatcher(engine="reference")
    actual = TopicMatcher(engine="auto", shared_destinations=shared)
    live: list[tuple[str, str]] = []
    for step in _steps(ops):
        _apply(step, [expected, actual], live)
        truth = expected.match_many(probe)
        assert [actual.match(key) for key in probe] == truth, f"bindings {live!r}"
        assert actual.match_many(probe) == truth
        assert_batches_equal(actual, probe, truth)
    assert actual.stats()["shapes"] >= 0  # the counts made again if they were not kept


def test_a_seed_mix_bind_past_the_dropped_shapes_splits_no_shape(monkeypatch):
    """Past `DROP_SHAPES` shapes with a pattern of two '#', adds and removes count only the
    patterns of two '#' (no `shape_of`); the shapes are counted again, once, when the last
    of those goes, and the index is then usable again if they are few."""
    live: list[tuple[str, str]] = []
    index = _index(live)
    for pattern in ["#.#"] + [f"w{i}." + ".".join(["*"] * (i + 1)) for i in range(DROP_SHAPES + 2)]:
        live.append((pattern, "q"))
        index.add(split_words(pattern), "q")
    calls = []
    monkeypatch.setattr(shapes_module, "shape_of", lambda words: calls.append(words) or
                        shape_of(words))
    extra = [(f"x{i}.*.#", "q") for i in range(50)] + [("a.#.#", "q")]
    for pattern, destination in extra:
        live.append((pattern, destination))
        index.add(split_words(pattern), destination)
    for pattern, destination in extra[:25]:
        live.remove((pattern, destination))
        index.remove(split_words(pattern), destination)
    assert calls == [] and index.matcher() is None
    assert index.stats()["unshaped_bindings"] == 2
    # the wide shapes and the patterns of two '#' go: counted again, usable
    for pattern, destination in [p for p in live if p[0].startswith("w") or p[0].count("#") > 1]:
        live.remove((pattern, destination))
        index.remove(split_words(pattern), destination)
    assert index.matcher() is not None and index.stats()["shapes"] == 1
    assert index.matcher()("x30.a.b") == {"q"}


@SETTINGS
@given(words=st.lists(st.lists(st.sampled_from(["a", "b", "*", "#"]), max_size=5), max_size=12))
def test_trie_insert_returns_the_path_and_its_first_new_node(words):
    trie = TrieEngine()
    for i, pattern in enumerate(map(tuple, words)):
        node, existing = trie._root, 0
        for word in pattern:  # the prefix already there, from the definition
            node = node.child(word)
            if node is None:
                break
            existing += 1
        nodes = trie._nodes
        path, created = trie.insert(pattern, i)
        assert created == existing + 1  # ``len(pattern) + 1`` where no node is new
        assert trie._nodes == nodes + len(pattern) - existing
        assert len(path) == len(pattern) + 1 and path[0] is trie._root
        for depth, word in enumerate(pattern, 1):
            assert path[depth - 1].child(word) is path[depth]
            assert path[depth].is_hash == (word == "#")
        assert i in path[-1].destinations
    assert sorted(d for _, d in trie.patterns()) == list(range(len(words)))


# Destinations with floors, and enough shapes (and a pattern of two '#') for the trie.
waiting_patterns = st.one_of(
    st.sampled_from(["#", "*.#", "#.*", "*.*.#", "a.#", "*.a", "a.*.b", "#.b.#", "c.*", "*"]),
    wide_patterns)
waiting_steps = st.lists(
    st.one_of(
        st.tuples(st.just("add"), waiting_patterns, st.sampled_from(["q1", "q2", "q3", "q4"])),
        st.tuples(st.just("remove"), st.integers(0, 40)),
        st.tuples(st.just("match"), st.lists(keys, min_size=1, max_size=6)),
    ),
    min_size=1,
    max_size=50,
)


@SETTINGS
@given(steps=waiting_steps, waits=st.integers(1, 4), most=st.integers(1, 6))
def test_auto_with_destinations_waiting_outside_the_trie_equals_reference(steps, waits, most):
    """Where destinations are shared, a destination's patterns wait outside the trie for its
    first `AUTO_WAIT_BINDS` wildcard bindings or until it has a floor (at most
    `AUTO_WAIT_MAX` over all): every read, bind and unbind answers as `reference`."""
    from unittest import mock

    from xroute.engines import auto

    with mock.patch.object(auto, "AUTO_WAIT_BINDS", waits), \
            mock.patch.object(auto, "AUTO_WAIT_MAX", most):
        expected = TopicMatcher(engine="reference")
        actual = TopicMatcher(engine="auto")
        live: list[tuple[str, str]] = []
        for pattern in ["#.#", *[p for p, _ in WIDE[1:8]]]:  # the trie is made: q0 binds
            apply_binding_step(("add", pattern, "q0"), [expected, actual], live)
        for step in steps:
            if step[0] == "match":
                truth = expected.match_many(step[1])
                assert [actual.match(key) for key in step[1]] == truth, f"bindings {live!r}"
                assert actual.match_many(step[1]) == truth
                assert_batches_equal(actual, step[1], truth)
                continue
            apply_binding_step(step, [expected, actual], live)
            assert sorted(actual.bindings()) == sorted(live)
            for pattern, destination in live[-3:]:
                assert actual.has(pattern, destination)
        probe = ["a", "a.b", "c.d.e", "a.x.b", "w", "x.b.y"]
        assert [actual.match(key) for key in probe] == expected.match_many(probe)


def test_a_queue_bound_with_a_floor_early_never_puts_its_patterns_in_the_trie(monkeypatch):
    """A destination's first wildcard patterns wait outside the trie: once it is bound with
    ``#`` (which covers them all), they never enter it, and none leaves it (main put each
    in the trie and took it out again)."""
    from xroute.engines.trie import TrieEngine as Trie

    matcher = TopicMatcher(engine="auto")
    matcher.add("#.#", "first")  # two '#': the shapes cannot serve, the trie is made
    made: list[tuple[str, ...]] = []
    gone: list[tuple[str, ...]] = []
    insert, delete = Trie.insert, Trie.delete
    monkeypatch.setattr(Trie, "insert", lambda self, w, d: made.append(w) or insert(self, w, d))
    monkeypatch.setattr(Trie, "delete", lambda self, w, d: gone.append(w) or delete(self, w, d))
    specific = [f"w{i}.*.x{i}" for i in range(20)] + ["a.#", "*.b.*"]
    for pattern in specific:
        matcher.add(pattern, "q")
    matcher.add("#", "q")
    assert made == [("#",)] and gone == []
    assert matcher.match("w3.k.x3") == {"first", "q"} and matcher.match("") == {"first", "q"}
    matcher.remove("#", "q")  # its patterns count again
    assert matcher.match("w3.k.x3") == {"first", "q"} and matcher.match("z") == {"first"}


def test_destinations_that_waiting_spares_nothing_stop_waiting(monkeypatch):
    """Queues of one wildcard pattern each, never covered by a floor: once the patterns put
    in for the bound pass `AUTO_WAIT_MAX` (and four times those spared), no destination
    waits, so a first read puts nothing into the trie at once."""
    from xroute.engines import auto
    from xroute.engines.trie import TrieEngine as Trie

    monkeypatch.setattr(auto, "AUTO_WAIT_MAX", 16)
    matcher, expected = TopicMatcher(engine="auto"), TopicMatcher(engine="reference")
    for i in range(200):
        pattern = "#.#" if not i else f"w{i % 7}." + ".".join(["*"] * (i % 9)) + f".x{i}"
        matcher.add(pattern, f"q{i}")
        expected.add(pattern, f"q{i}")
    made = []
    insert = Trie.insert
    monkeypatch.setattr(Trie, "insert", lambda self, w, d: made.append(w) or insert(self, w, d))
    keys = ["w3.a.b.c.x3", "w1.x1", "w5.a.b.c.d.e.x194", "z"]
    assert [matcher.match(key) for key in keys] == expected.match_many(keys)
    assert made == []
