"""A matcher whose destinations name their pattern (``pattern_of``, as a topology's `Binding`s
do) keeps them alone, not (pattern, destination) pairs, and keeps destination ids only from
the first call that reads them: every engine stays equal to the reference through adds and
removes, batches included."""

from __future__ import annotations

from operator import itemgetter
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import given, settings

from tests.strategies import apply_binding_step, binding_sessions
from xroute import BindingNotFound, TopicMatcher
from xroute.core.errors import InvalidArguments
from xroute.engines import shapes

steps = binding_sessions(40)


def _decode(matcher: TopicMatcher, offsets, ids) -> list[frozenset]:
    names = matcher.destinations()
    return [frozenset(names[j] for j in ids[offsets[i]:offsets[i + 1]])
            for i in range(len(offsets) - 1)]


class _Named:
    """A matcher holding (pattern, queue) destinations, the pair being the destination."""

    def __init__(self, engine: str) -> None:
        self.inner = TopicMatcher(engine=engine, pattern_of=itemgetter(0))

    def add(self, pattern: str, queue: str) -> None:
        self.inner.add(pattern, (pattern, queue))

    def remove(self, pattern: str, queue: str) -> None:
        self.inner.remove(pattern, (pattern, queue))


@settings(max_examples=100, deadline=None)
@given(ops=steps)
def test_pattern_of_equals_reference(engine, ops):
    _check_steps(engine, ops)


@settings(max_examples=150, deadline=None)
@given(ops=steps)
def test_auto_defers_its_trie_while_the_shapes_serve_and_stays_exact(ops):
    """``auto`` for a topology keeps wildcard patterns in its shape index alone and makes the
    trie from the matcher's store when a pattern would make the shapes unusable: bounds that
    random sessions cross both ways, every path checked on the way."""
    with mock.patch.object(shapes, "MAX_SHAPES", 2), mock.patch.object(shapes, "DROP_SHAPES", 3):
        _check_steps("auto", ops)


def _check_steps(engine: str, ops: list) -> None:
    expected = TopicMatcher(engine="reference")  # the plain matcher beside it, same steps
    named = _Named(engine)
    actual = named.inner
    live: list[tuple[str, str]] = []
    for op in ops:
        apply_binding_step(op, [expected, named], live)
        if op[0] == "match":
            found = {q for _, q in actual.match(op[1])}
            truth = _truth(live, op[1])
            assert found == truth == expected.match(op[1]), f"bindings {live!r}, key {op[1]!r}"
        elif op[0] == "batch":
            batch = op[1] if len(op[1]) % 2 else pa.array(op[1], pa.string())
            decoded = _decode(actual, *actual.match_many_ids(batch))
            assert [{q for _, q in d} for d in decoded] == [_truth(live, k) for k in op[1]]
            assert [{q for _, q in d} for d in actual.match_many(op[1])] == [
                _truth(live, k) for k in op[1]]
    assert sorted(actual.bindings()) == sorted((p, (p, q)) for p, q in live)
    assert len(actual) == len(live)
    for pattern, queue in live:
        assert actual.has(pattern, (pattern, queue))


def _truth(live: list[tuple[str, str]], key: str) -> set[str]:
    reference = TopicMatcher(engine="reference")
    for pattern, queue in live:
        reference.add(pattern, (pattern, queue))
    return {q for _, q in reference.match(key)}


def test_pattern_of_refuses_another_pattern_and_finds_only_the_named_one():
    matcher = TopicMatcher(pattern_of=itemgetter(0))
    with pytest.raises(InvalidArguments, match="names the pattern"):
        matcher.add("a.*", ("a.#", "q1"))
    matcher.add("a.#", ("a.#", "q1"))
    matcher.add("a.#", ("a.#", "q1"))  # the same binding again: one binding
    assert len(matcher) == 1
    assert not matcher.has("a.*", ("a.#", "q1"))
    with pytest.raises(BindingNotFound):
        matcher.remove("a.*", ("a.#", "q1"))
    with pytest.raises(BindingNotFound):
        matcher.remove("b", ("b", "q1"))
    matcher.remove("a.#", ("a.#", "q1"))
    assert len(matcher) == 0 and matcher.match("a.b") == frozenset()


@pytest.mark.parametrize("name", ["trie", "compiled", "auto"])
def test_ids_are_kept_from_the_first_read_on(name):
    """Key by key, no ids; the first batch numbers every destination bound so far."""
    matcher = TopicMatcher(engine=name, pattern_of=itemgetter(0))
    q1, q2, q3 = ("a.*", "q1"), ("a.b", "q2"), ("#", "q3")
    matcher.add("a.*", q1)
    matcher.add("a.b", q2)
    assert matcher.match("a.b") == {q1, q2}
    assert not matcher._id_of  # noqa: SLF001 - what the laziness saves
    offsets, ids = matcher.match_many_ids(["a.b", "a.c", "b"])
    assert _decode(matcher, offsets, ids) == [{q1, q2}, {q1}, set()]
    matcher.add("#", q3)
    matcher.remove("a.*", q1)
    assert matcher.match_many(["a.b", "c"]) == [{q2, q3}, {q3}]
    offsets, ids = matcher.match_many_ids(["a.b", "c"])
    assert _decode(matcher, offsets, ids) == [{q2, q3}, {q3}]


@pytest.mark.parametrize("name", ["trie", "compiled", "auto"])
def test_match_many_before_any_batch_numbers_what_the_engine_needs(name):
    """`compiled`'s `match_many` goes through its kernel, which writes ids: kept first."""
    matcher = TopicMatcher(engine=name, pattern_of=itemgetter(0))
    for pattern in ("a.*", "#.b", "c"):
        matcher.add(pattern, (pattern, "q"))
    assert matcher.match_many(["a.b", "c", "d"]) == [
        {("a.*", "q"), ("#.b", "q")}, {("c", "q")}, set()]
