"""`BatchRouter` equals `Topology.route_message`, message by message: queues, errors, hits."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xroute import InvalidHeaders, InvalidRoutingKey, Topology, UnknownExchange, XRouteError
from xroute.core.batch import BatchRouter

TYPES = ["direct", "fanout", "topic", "headers", "x-delimiter"]
EXCHANGES = ["x0", "x1", "x2", "x3"]
QUEUES = ["a", "b", "q2", "a.b"]  # queues named like keys, for the default exchange
WORDS = ["a", "b", ""]
key_text = st.lists(st.sampled_from(WORDS + ["c"]), max_size=4).map(".".join)
pattern_text = st.lists(st.sampled_from(WORDS + ["*", "#"]), max_size=4).map(".".join)
delimited = st.lists(st.sampled_from(["a", "b", "a.b", ""]), max_size=3).map(
    lambda parts: ":" + ":".join(parts) if parts else ""
)
# Few names and values, so that message headers meet binding criteria often.
header_values = st.sampled_from(["v", "v", "v", 1, 1.0, True, None, b"v"])
header_names = st.sampled_from(["h1", "h1", "h2", "x-h"])
binding_arguments = st.one_of(
    st.just({}),
    st.dictionaries(header_names, header_values, max_size=2).flatmap(
        lambda d: st.sampled_from(["all", "any", "all-with-x", "any-with-x"]).map(
            lambda mode: {**d, "x-match": mode}
        )
    ),
)


@st.composite
def topologies(draw: Any, engine: str = "trie") -> Topology:
    t = Topology(engine=engine)
    for q in QUEUES:
        t.declare_queue(q)
    for name in EXCHANGES:
        alternate = draw(st.sampled_from([None, None, *EXCHANGES, "dangling"]))
        t.declare_exchange(
            name,
            draw(st.sampled_from(TYPES)),
            alternate_exchange=alternate,
            internal=name == "x3" and draw(st.integers(0, 3)) == 0,
        )
    for _ in range(draw(st.integers(0, 20))):
        source = draw(st.sampled_from(EXCHANGES))
        to_exchange = draw(st.integers(0, 4)) == 0  # e2e bindings, cycles included
        destination = draw(st.sampled_from(EXCHANGES if to_exchange else QUEUES))
        t.bind(
            source,
            destination,
            draw(pattern_text),
            draw(binding_arguments) if t.exchanges[source].type == "headers" else {},
            destination_type="exchange" if to_exchange else "queue",
        )
    return t


good_headers = st.one_of(
    st.dictionaries(header_names, header_values, max_size=3),
    st.fixed_dictionaries({"CC": st.lists(key_text, max_size=2)}),
    st.fixed_dictionaries({"BCC": st.lists(key_text, max_size=2), "h1": header_values}),
)
bad_headers = st.one_of(
    st.fixed_dictionaries({"CC": st.sampled_from(["a.b", 7, ["a", 3]])}),  # bad CC types
    st.just({"h1": object()}),  # a value no AMQP table carries
)
# None half the time, bad one time in ten.
headers_tables = st.tuples(st.integers(0, 9), good_headers, bad_headers).map(
    lambda t: None if t[0] < 5 else t[1] if t[0] < 9 else t[2]
)
# Mostly good keys (plain, or for x-delimiter), now and then one that is too long or missing.
any_key = st.tuples(st.integers(0, 9), key_text, delimited).map(
    lambda t: t[1] if t[0] < 6 else t[2] if t[0] < 8 else "a" * 256 if t[0] == 8 else None
)
messages = st.integers(1, 30).flatmap(
    lambda n: st.lists(st.tuples(any_key, headers_tables), min_size=n, max_size=n)
)


def expected_routes(t: Topology, exchange: str, batch: list[tuple[Any, Any]]):
    """What route_message says, message by message, and its observer's hit counts."""
    results: list[Any] = []
    hits: Counter = Counter()
    for key, headers in batch:
        matched: set = set()
        try:
            if key is None:
                raise InvalidRoutingKey(None, "the message has no routing key")
            found = t.route_message(
                exchange, key, headers, observer=lambda _x, m, _v, seen=matched: seen.update(m)
            )
        except XRouteError as error:
            results.append((type(error), str(error)))
            continue
        hits.update(matched)
        results.append(found)
    return results, hits


def actual_routes(router: BatchRouter, exchange: str, batch: list[tuple[Any, Any]], arrow: bool):
    keys: Any = [key for key, _ in batch]
    if arrow:
        keys = pa.array(keys, type=pa.string())
    routes = router.route(exchange, keys, [headers for _, headers in batch])
    results: list[Any] = []
    for i in range(len(batch)):
        ids = routes.queue_ids[routes.offsets[i] : routes.offsets[i + 1]]
        assert len(set(ids.tolist())) == len(ids), f"message {i}: a queue twice: {ids}"
        if i in routes.errors:
            error = routes.errors[i]
            results.append((type(error), str(error)))
        else:
            results.append(routes.queues(i))
    hits = Counter({router.bindings[b]: int(n) for b, n in enumerate(routes.hits) if n})
    return results, hits


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    t=topologies(),
    exchange=st.sampled_from(EXCHANGES + [""]),
    batch=messages,
    arrow=st.booleans(),
)
def test_batch_router_equals_route_message(t, exchange, batch, arrow):
    router = BatchRouter(t)
    try:
        t.route_message(exchange, "")
    except XRouteError as error:  # the exchange itself is refused: the whole batch is
        with pytest.raises(type(error)) as raised:
            router.route(exchange, [key for key, _ in batch])
        assert str(raised.value) == str(error)
        return
    expected = expected_routes(t, exchange, batch)
    actual = actual_routes(router, exchange, batch, arrow)
    assert actual[0] == expected[0], f"topology {t.to_definitions()}\nbatch {batch}"
    assert actual[1] == expected[1], f"hits differ; topology {t.to_definitions()}"


@pytest.mark.parametrize("engine", ["trie", "compiled", "reference"])
def test_batch_router_equals_route_message_on_every_engine(engine):
    from xroute import ENGINES

    if engine not in ENGINES:
        pytest.skip(f"engine {engine!r} is not registered in this build")
    t = Topology(engine=engine)
    for q in ("q1", "q2", "q3", "spill"):
        t.declare_queue(q)
    t.declare_exchange("spill", "fanout")
    t.declare_exchange("home", "topic", alternate_exchange="spill")
    t.declare_exchange("more", "topic")
    t.bind("spill", "spill")
    t.bind("home", "q1", "floor_1.#")
    t.bind("home", "q2", "*.bedroom.*")
    t.bind("home", "q2", "#.temperature")  # a second path to q2: one delivery
    t.bind("home", "more", "#.alarm", destination_type="exchange")
    t.bind("more", "q3", "#")
    keys = ["floor_1.bedroom.temperature", "garage", "floor_2.bedroom.alarm", "", "floor_1"]
    router = BatchRouter(t)
    routes = router.route("home", pa.array(keys))
    assert [routes.queues(i) for i in range(len(keys))] == [t.route("home", k) for k in keys]
    assert routes.counts().tolist() == [2, 1, 2, 1, 1]


def test_refused_messages_keep_the_library_error():
    t = Topology()
    t.declare_queue("q")
    t.declare_exchange("x", "topic")
    t.bind("x", "q", "#")
    routes = BatchRouter(t).route(
        "x", ["ok", None, "a" * 300, "fine"], [None, None, None, {"CC": "not-a-list"}]
    )
    assert routes.queues(0) == {"q"}
    assert isinstance(routes.errors[1], InvalidRoutingKey)
    assert isinstance(routes.errors[2], InvalidRoutingKey) and "300 bytes" in str(routes.errors[2])
    assert isinstance(routes.errors[3], InvalidHeaders) and "'CC'" in str(routes.errors[3])
    assert routes.counts().tolist() == [1, 0, 0, 0]
    assert routes.hits.tolist() == [1]


def test_unknown_exchange_refuses_the_batch():
    with pytest.raises(UnknownExchange, match="nope"):
        BatchRouter(Topology()).route("nope", ["a"])


def test_large_batch_of_arrow_keys_matches_one_by_one():
    from xroute.bench.workload import seed_keys, seed_patterns

    patterns = seed_patterns(300, seed=3)
    t = Topology()
    t.declare_exchange("x", "topic", alternate_exchange="ae")
    t.declare_exchange("ae", "fanout")
    t.declare_queue("lost")
    t.bind("ae", "lost")
    for i, pattern in enumerate(patterns):
        t.declare_queue(f"q{i % 17}")
        t.bind("x", f"q{i % 17}", pattern)
    keys = seed_keys(patterns, 2000, seed=4) + ["w1.nothing.here", "zzz"]
    routes = BatchRouter(t).route("x", pa.array(keys))
    assert all(routes.queues(i) == t.route("x", k) for i, k in enumerate(keys))
    assert np.all(np.diff(routes.offsets) >= 1)  # the alternate catches the rest


@settings(max_examples=100, deadline=None)
@given(
    arguments=st.lists(binding_arguments, max_size=8),
    batch=st.lists(st.tuples(key_text, headers_tables), max_size=20),
    arrow=st.booleans(),
)
def test_batch_router_equals_route_message_on_headers(arguments, batch, arrow):
    # The general property reaches a headers exchange with matching headers too rarely to
    # be trusted with it alone.
    t = Topology()
    t.declare_exchange("front", "topic")
    t.declare_exchange("h", "headers")
    t.bind("front", "h", "#", destination_type="exchange")
    for i, args in enumerate(arguments):
        t.declare_queue(f"q{i % 3}")
        t.bind("h", f"q{i % 3}", "", args)
    router = BatchRouter(t)
    for exchange in ("h", "front"):
        assert actual_routes(router, exchange, batch, arrow) == expected_routes(t, exchange, batch)


def test_hits_are_each_batchs_own_whether_few_or_many_bindings_match():
    # 2,000 literal bindings and two wildcards: a batch of a few keys matches few of them (the
    # kernel carries its counts over match by match), a batch of every key most of them (by a
    # pass over every id). Each batch counts its own messages, none left from the batch
    # before, and so do threads sharing one router (the kernel runs without the GIL).
    from concurrent.futures import ThreadPoolExecutor

    t = Topology()
    t.declare_exchange("x", "topic")
    keys = [f"dev.{i}.cmd" for i in range(2000)]
    for i, key in enumerate(keys):
        t.declare_queue(f"q{i % 50}")
        t.bind("x", f"q{i % 50}", key)
    t.bind("x", "q0", "dev.*.cmd")
    t.bind("x", "q1", "#")
    router = BatchRouter(t)
    batches = [[(key, None) for key in batch]
               for batch in (keys[:3], keys * 2, ["dev.7.cmd", "none", "dev.7.cmd"], keys[::7])]
    expected = [expected_routes(t, "x", batch) for batch in batches]
    for batch, truth in zip(batches, expected):
        assert actual_routes(router, "x", batch, arrow=True) == truth
    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda batch: actual_routes(router, "x", batch, arrow=True),
                              batches * 6))
    assert found == expected * 6
