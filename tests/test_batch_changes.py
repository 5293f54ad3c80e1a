"""A `BatchRouter` follows its topology's changes (issue 36): one router, used across binds,
unbinds and declarations, gives after each change what `Topology.route_message` gives, hits
included, and the hits of a batch routed before a change are those of the bindings it met."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_batch import (
    EXCHANGES,
    QUEUES,
    actual_routes,
    binding_arguments,
    expected_routes,
    headers_tables,
    key_text,
    pattern_text,
    topologies,
)
from xroute import Topology, XRouteError
from xroute.core.batch import BatchRouter

changes = st.lists(
    st.tuples(
        st.sampled_from(["bind", "bind", "unbind", "queue", "delete queue", "exchange"]),
        st.sampled_from(EXCHANGES),
        st.sampled_from(QUEUES + ["new"]),
        pattern_text,
        binding_arguments,
        st.integers(0, 4),
    ),
    min_size=1,
    max_size=6,
)
plain_batches = st.lists(st.tuples(key_text, st.none()), min_size=1, max_size=12)
any_batches = st.lists(st.tuples(key_text, headers_tables), min_size=1, max_size=12)


def apply(t: Topology, change: tuple) -> None:
    """One change; a refused one (unknown queue, no such binding) changes nothing."""
    what, exchange, queue, pattern, arguments, pick = change
    arguments = arguments if t.exchanges[exchange].type == "headers" else {}
    try:
        if what == "bind":
            to_exchange = pick == 0
            destination = EXCHANGES[(EXCHANGES.index(exchange) + 1) % 4] if to_exchange else queue
            t.bind(exchange, destination, pattern, arguments,
                   destination_type="exchange" if to_exchange else "queue")
        elif what == "unbind":
            bound = t.bindings(exchange)
            if bound:
                b = bound[pick % len(bound)]
                t.unbind(b.source, b.destination.name, b.routing_key, b.arguments,
                         destination_type=b.destination.kind)
        elif what == "queue":
            t.declare_queue(queue)
        elif what == "delete queue":
            t.delete_queue(queue)
        else:  # an exchange deleted and declared again, or a new one
            name = f"x{pick}"
            if name in t.exchanges and pick % 2:
                t.delete_exchange(name)
            t.declare_exchange(name, ["topic", "direct", "fanout"][pick % 3])
    except XRouteError:
        pass


def check(router: BatchRouter, t: Topology, exchange: str, batch: list, arrow: bool) -> None:
    try:
        t.route_message(exchange, "")
    except XRouteError:
        return  # the exchange itself is refused (deleted, internal): test_batch covers it
    assert actual_routes(router, exchange, batch, arrow) == expected_routes(t, exchange, batch)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(t=topologies(engine="auto"), steps=st.lists(st.tuples(changes, any_batches, st.booleans(),
                                                             st.sampled_from(EXCHANGES)),
                                                   min_size=1, max_size=4))
def test_a_router_follows_binds_unbinds_and_declarations(t, steps):
    router = BatchRouter(t)
    for change_list, batch, arrow, exchange in steps:
        check(router, t, exchange, batch, arrow)  # warms the router's memo for what follows
        for change in change_list:
            apply(t, change)
        check(router, t, exchange, batch, arrow)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(t=topologies(engine="auto"), change_list=changes, batch=plain_batches,
       exchange=st.sampled_from(EXCHANGES))
def test_hits_read_after_a_change_are_those_of_the_routes_before_it(t, change_list, batch,
                                                                      exchange):
    # Hits are counted when read; a change in between must not alter them.
    try:
        t.route_message(exchange, "")
    except XRouteError:
        return
    router = BatchRouter(t)
    expected = expected_routes(t, exchange, batch)
    routes = router.route(exchange, pa.array([key for key, _ in batch], pa.string()))
    bindings = list(router.bindings)
    for change in change_list:
        apply(t, change)
    hits = Counter({bindings[b]: int(n) for b, n in enumerate(routes.hits) if n})
    assert hits == expected[1]


def test_a_bind_reaches_keys_the_router_has_seen():
    t = Topology()
    t.declare_exchange("x", "topic")
    for q in ("a", "b"):
        t.declare_queue(q)
    t.bind("x", "a", "k.*")
    router = BatchRouter(t)
    keys = pa.array(["k.1", "k.2", "z"])
    assert [router.route("x", keys).queues(i) for i in range(3)] == [{"a"}, {"a"}, set()]
    t.bind("x", "b", "#")
    routes = router.route("x", keys)
    assert [routes.queues(i) for i in range(3)] == [{"a", "b"}, {"a", "b"}, {"b"}]
    assert routes.hits.tolist() == [2, 3]
    t.unbind("x", "a", "k.*")
    t.declare_queue("c")
    t.bind("x", "c", "z")
    routes = router.route("x", keys)
    assert [routes.queues(i) for i in range(3)] == [{"b"}, {"b"}, {"b", "c"}]
    assert routes.hits.tolist() == [0, 3, 1]
    assert [b.routing_key for b in router.bindings] == ["k.*", "#", "z"]


def test_the_default_exchange_follows_queues_declared_and_deleted():
    t = Topology()
    t.declare_queue("q")
    router = BatchRouter(t)
    assert router.route("", ["q", "r"]).counts().tolist() == [1, 0]
    t.declare_queue("r")
    t.delete_queue("q")
    routes = router.route("", ["q", "r"])
    assert routes.counts().tolist() == [0, 1] and routes.queues(1) == {"r"}
