"""`BatchRouter`'s first pass over keys new to the topology (branch `router-first`): each key
routed by the single first-route path in one C loop, each answer numbered by the answer set
itself (`BatchRouter._one_queue`, made when the router is), equal to `Topology.route_message`
whatever the mix of new keys, repeats, walks and changes."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xroute import Topology
from xroute.core.batch import BatchRouter

QUEUES = [f"q{i}" for i in range(12)]
WORDS = ["a", "b", "c", "dé"]  # a non-ASCII word: the first-route path leaves it to the walk
key_text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(".".join)
literal_text = st.lists(st.sampled_from(WORDS[:3]), min_size=1, max_size=3).map(".".join)
pattern_text = st.lists(st.sampled_from([*WORDS[:3], "*", "#"]), min_size=1,
                        max_size=3).map(".".join)


class CountingIndex(dict):  # type: ignore[type-arg]
    """A queue-name table that counts its reads by name (`[]`)."""

    reads = 0

    def __getitem__(self, name: Any) -> Any:
        CountingIndex.reads += 1
        return super().__getitem__(name)


def _routes(router: BatchRouter, exchange: str, keys: list[str]) -> list[frozenset[str]]:
    routes = router.route(exchange, pa.array(keys, pa.string()))
    assert not routes.errors
    return [routes.queues(i) for i in range(len(keys))]


def test_a_first_pass_reads_no_queue_name_for_answers_the_topology_shares():
    """Keys new to a fresh topology whose answers are its shared one-queue sets (a literal
    binding a queue, as RabbitMQ 4.3's unicast shape): the router numbered those sets when
    it was made, so the pass reads the queue-name table for none of them (it read it once a
    key before)."""
    t = Topology()
    t.declare_exchange("x", "topic")
    for i in range(300):
        t.declare_queue(f"device{i}")
        t.bind("x", f"device{i}", f"dev.{i}.state")
    t.bind("x", "device0", "broadcast.#")
    router = BatchRouter(t)
    router._queue_index = CountingIndex(router._queue_index)
    CountingIndex.reads = 0
    keys = [f"dev.{i}.state" for i in range(300)]
    assert _routes(router, "x", keys) == [frozenset({f"device{i}"}) for i in range(300)]
    assert CountingIndex.reads == 0
    assert _routes(router, "x", keys) == [t.route_message("x", key) for key in keys]


def test_a_queue_deleted_before_the_router_is_made_keeps_routes_exact():
    """The topology's shared one-queue sets may name a queue deleted since (its set is kept
    until the table is swept): the router numbers the others."""
    t = Topology()
    t.declare_exchange("x", "topic")
    for name in ["a", "b", "c"]:
        t.declare_queue(name)
        t.bind("x", name, f"k.{name}")
        t.bind("x", name, f"k.{name}.more")
    t.delete_queue("b")
    router = BatchRouter(t)
    t.declare_queue("b")
    t.bind("x", "b", "k.b")
    keys = ["k.a", "k.b", "k.c", "k.b.more", "k.a.more", "k.z"]
    assert _routes(router, "x", keys) == [t.route_message("x", key) for key in keys]


@st.composite
def topologies(draw: Any) -> Topology:
    t = Topology()  # the default engine, `auto`: literal routes apart (the first-route path)
    for name in QUEUES:
        t.declare_queue(name)
    t.declare_exchange("x", "topic", alternate_exchange=draw(st.sampled_from([None, "alt"])))
    t.declare_exchange("alt", "fanout")
    t.declare_exchange("inner", "topic")
    t.bind("alt", QUEUES[0], "")
    for _ in range(draw(st.integers(0, 25))):
        queue = draw(st.sampled_from(QUEUES))
        pattern = draw(st.one_of(literal_text, literal_text, pattern_text))
        if draw(st.integers(0, 9)) == 0:  # now and then through another exchange
            t.bind("x", "inner", pattern, destination_type="exchange")
            t.bind("inner", queue, draw(pattern_text))
        else:
            t.bind("x", queue, pattern)
    return t


changes = st.lists(st.tuples(st.sampled_from(["bind", "unbind", "delete", "declare"]),
                             st.sampled_from(QUEUES), st.one_of(literal_text, pattern_text)),
                   max_size=3)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(t=topologies(), early=changes,
       steps=st.lists(st.tuples(changes, st.lists(key_text, min_size=1, max_size=40),
                                st.integers(0, 3)), min_size=1, max_size=4))
def test_first_passes_equal_route_message(t, early, steps):
    """Batches of new keys, few or many of them repeated (the two ways of `_first_routes`),
    keys the first-route path leaves to the walk (non-ASCII, through exchanges, an alternate),
    queues deleted before and after the router is made, bindings made and removed between
    batches: each message reaches what `Topology.route_message` says."""

    def change(what: str, queue: str, pattern: str) -> None:
        if what == "bind" and queue in t.queues:
            t.bind("x", queue, pattern)
        elif what == "unbind":
            for binding in t.bindings("x"):
                if binding.destination.name == queue:
                    t.unbind("x", queue, binding.routing_key)
                    break
        elif what == "delete" and queue in t.queues:
            t.delete_queue(queue)
        elif what == "declare" and queue not in t.queues:
            t.declare_queue(queue)

    for step in early:
        change(*step)
    router = BatchRouter(t)
    for edits, keys, repeats in steps:
        for step in edits:
            change(*step)
        batch = keys * (repeats + 1) if repeats else keys  # repeats: the key by key way
        assert _routes(router, "x", batch) == [t.route_message("x", key) for key in batch]
        # and once more: the memo's answers
        assert _routes(router, "x", batch) == [t.route_message("x", key) for key in batch]


def test_answers_by_id_keep_numbers_by_identity_and_start_again_past_their_bound():
    """`AnswersById`: a set's number by the set itself (an equal set made apart is not it),
    through growth, and empty again past the bound it is given."""
    from xroute.core.batch import AnswersById
    from xroute.engines.key_memo import MISSING, ONE_QUEUE

    table = AnswersById()
    sets = [frozenset((f"q{i}",)) for i in range(500)]
    for start in range(0, 500, 50):  # grown a few times
        table.add(sets[start:start + 50], [ONE_QUEUE - i for i in range(start, start + 50)],
                  1_000)
    assert len(table) == 500
    assert table.find(sets).tolist() == [ONE_QUEUE - i for i in range(500)]
    assert table.find([frozenset(("q3",)), None]).tolist() == [MISSING, MISSING]
    table.add(sets[:1], [ONE_QUEUE], 1_000)  # again: the same number
    assert table.find(sets[:2]).tolist() == [ONE_QUEUE, ONE_QUEUE - 1]
    more = [frozenset((f"r{i}",)) for i in range(600)]
    table.add(more, [ONE_QUEUE - 7] * 600, 1_000)  # past the bound: started again
    assert len(table) == 600
    assert table.find(sets[:1] + more[:1]).tolist() == [MISSING, ONE_QUEUE - 7]


def test_a_router_through_bind_and_unbind_churn_stays_exact():
    """Each unbind makes the topology drop its wildcard answer sets and make new ones; the
    router numbers the new ones (by identity) and still each route equals the topology's."""
    t = Topology()
    t.declare_exchange("x", "topic")
    for i in range(40):
        t.declare_queue(f"c{i}")
        t.bind("x", f"c{i}", f"s.{i}.*")
        t.bind("x", f"c{i}", f"s.{i}.lit")
    router = BatchRouter(t)
    for round_ in range(30):
        t.bind("x", "c0", f"extra.{round_}")
        t.unbind("x", "c0", f"extra.{round_}")
        keys = [f"s.{i}.k{round_}" for i in range(40)] + [f"s.{i}.lit" for i in range(0, 40, 3)]
        assert _routes(router, "x", keys) == [t.route_message("x", key) for key in keys]
    assert len(router._answer_ids) <= router._max_answer_sets()
