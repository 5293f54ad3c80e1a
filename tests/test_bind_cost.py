"""What the bind-rate shortcuts (issue 36, goal 6: branch ``bind-cost``) must leave as it was:
a `Binding` made through its slots, queues declared without arguments, the second key check
a topic exchange no longer makes, literal routes of a new key, and the route cache skipped
while it holds nothing."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from xroute.core.errors import InvalidArguments, InvalidPattern, UnknownQueue
from xroute.core.model import NO_ARGUMENTS, Binding, Destination
from xroute.core.topology import Topology


def test_a_binding_made_through_its_slots_is_the_frozen_dataclass_it_was():
    target = Destination("queue", "q")
    made = Binding("x", target, "a.b", NO_ARGUMENTS)
    named = Binding(source="x", destination=target, routing_key="a.b", arguments=NO_ARGUMENTS)
    for binding in (made, named):
        assert (binding.source, binding.destination, binding.routing_key) == ("x", target, "a.b")
        assert binding.arguments is NO_ARGUMENTS
    assert made != named and made == made  # identity is equality
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.source = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Binding("x", target, "a.b")  # type: ignore[call-arg]
    changed = dataclasses.replace(made, routing_key="c")
    assert (changed.source, changed.routing_key) == ("x", "c")
    for copied in (copy.copy(made), pickle.loads(pickle.dumps(made))):
        assert (copied.source, copied.destination, copied.routing_key) == ("x", target, "a.b")
    assert repr(made) == "Binding('x' -> queue 'q', key='a.b')"


def test_a_queue_declared_without_arguments_is_the_one_declared_with_an_empty_table():
    topology = Topology()
    topology.declare_queue("plain")
    topology.declare_queue("empty", arguments={})
    topology.declare_queue("plain", arguments={"x-max-length": 5})  # a redeclare: no change
    for name in ("plain", "empty"):
        queue = topology.queues[name]
        assert (queue.durable, queue.auto_delete, queue.arguments) == (True, False, {})
        assert queue.arguments is NO_ARGUMENTS
    with pytest.raises(InvalidArguments):
        topology.declare_queue("plain", arguments=["not", "a", "table"])  # type: ignore[arg-type]
    with pytest.raises(InvalidArguments):
        topology.declare_queue(7)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["a" * 256, "é" * 128, 7, None, b"a.b"])
def test_a_bad_binding_key_is_refused_by_name_once_checked(key):
    topology = Topology()
    topology.declare_exchange("x", "topic")
    topology.declare_queue("q")
    with pytest.raises(InvalidPattern):
        topology.bind("x", "q", key)
    assert topology.bindings("x") == []
    with pytest.raises(UnknownQueue):
        topology.bind("x", "nowhere", "a")


def test_literal_routes_of_new_and_repeated_keys():
    topology = Topology()
    topology.declare_exchange("x", "topic")
    for name in ("q1", "q2"):
        topology.declare_queue(name)
    topology.bind("x", "q1", "a.b")
    topology.bind("x", "q1", "a.b", {"k": 1})  # the same key and queue: another binding
    topology.bind("x", "q2", "a.b")
    assert topology.route("x", "a.b") == {"q1", "q2"}
    topology.unbind("x", "q1", "a.b")
    assert topology.route("x", "a.b") == {"q1", "q2"}
    topology.unbind("x", "q1", "a.b", {"k": 1})
    assert topology.route("x", "a.b") == {"q2"}


def test_routes_cached_before_a_declare_or_a_bind_are_dropped_by_it():
    topology = Topology()
    topology.declare_exchange("x", "topic")
    assert topology.route("", "q") == frozenset()  # cached: the default exchange, no queue
    assert topology.route("x", "a.b") == frozenset()
    topology.declare_queue("q")
    assert topology.route("", "q") == {"q"}
    topology.bind("x", "q", "a.*")
    assert topology.route("x", "a.b") == {"q"}
    fresh = Topology()  # nothing cached: nothing to drop, the same routes
    fresh.declare_exchange("x", "topic")
    fresh.declare_queue("q")
    fresh.bind("x", "q", "a.*")
    assert fresh.route("x", "a.b") == {"q"} and fresh.route("", "q") == {"q"}


def _shape_as_it_was(words: tuple[str, ...]) -> tuple | None:
    # `shape_of` before its one-loop form (comprehensions), the reference here
    if "#" not in words:
        return len(words), True, tuple(i for i, word in enumerate(words) if word != "*")
    if words.count("#") > 1:
        return None
    cut = words.index("#")
    positions = [i for i in range(cut) if words[i] != "*"]
    positions += [i - len(words) for i in range(cut + 1, len(words)) if words[i] != "*"]
    return len(words) - 1, False, tuple(positions)


def test_shape_of_in_one_loop_is_the_shape_it_was():
    from itertools import product

    from xroute.engines.shapes import shape_of

    for size in range(6):
        for words in product(("a", "*", "#", ""), repeat=size):
            assert shape_of(words) == _shape_as_it_was(words), words


def test_a_shared_auto_matcher_whose_trie_waits_answers_as_the_reference():
    """`auto` over shared destinations (a topology's queue-name index) keeps its wildcard
    patterns in the shapes alone until they stop serving, then makes the trie from its
    catch-all shadow: floors that fall and rise while it waits, and a trie made midway (the
    shapes refuse a pattern, or a floor rises), must leave every answer as it was."""
    import random

    from xroute.engines import TopicMatcher

    rng = random.Random(36)
    words = ["a", "b", "c"]
    few = [f"{w}.*" for w in words] + [f"{w}.#" for w in words] + ["*.#", "#", "*.*.#"]
    many = ["a.*.b", "*.b.#.c", "#.a", "a.#.b.#", "*.*.*.c", "c.*.*.*.#", "b.*.#.a", "*.c"]
    keys = ["", "a", "b.c", "a.b.c", "c.a.b.a", "a.x.b", "x.b.y.c", "c.c.c.c.c", "b.q.z.a"]
    queues = ["q1", "q2", "q3"]
    for round_ in range(12):
        expected, actual = TopicMatcher(engine="reference"), TopicMatcher(engine="auto")
        live: set[tuple[str, str]] = set()
        patterns = few + (many if round_ % 2 else many[:2])
        for step in range(60):
            pattern, queue = rng.choice(patterns), rng.choice(queues)
            if (pattern, queue) in live:
                for matcher in (expected, actual):
                    matcher.remove(pattern, queue)
                live.discard((pattern, queue))
            else:
                for matcher in (expected, actual):
                    matcher.add(pattern, queue)
                live.add((pattern, queue))
            if step % 7 == 0:
                assert [actual.match(key) for key in keys] == expected.match_many(keys), step
        assert [actual.match(key) for key in keys] == expected.match_many(keys)
        assert sorted(actual.bindings()) == sorted(live)
        assert all(actual.has(pattern, queue) for pattern, queue in live)


def test_a_binding_reads_as_the_dataclass_it_was():
    target = Destination("queue", "q")
    made = Binding("x", target, "a.b", NO_ARGUMENTS)
    assert dataclasses.is_dataclass(made)
    assert [f.name for f in dataclasses.fields(made)] == [
        "source", "destination", "routing_key", "arguments"]
    assert dataclasses.asdict(made) == {"source": "x", "destination": ("queue", "q"),
                                        "routing_key": "a.b", "arguments": {}}
    match made:
        case Binding("x", ("queue", name), key, _):
            assert (name, key) == ("q", "a.b")
        case _:
            raise AssertionError("a binding matches its fields by position")
    to_exchange = Binding("x", Destination("exchange", "e"), "#", NO_ARGUMENTS)
    assert dataclasses.replace(to_exchange, routing_key="c").destination == ("exchange", "e")
