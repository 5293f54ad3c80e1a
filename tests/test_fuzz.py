"""Fuzzing the public entry points with hostile values (issue 12, item 5): whatever they are
given, `Topology.route`, `Topology.bind`, `Topology.from_definitions` and `TopicMatcher` either
work or raise an `XRouteError` subclass; never a TypeError, KeyError or RecursionError.

Examples are bounded, and the deadline is generous: a hang fails the test, a slow shared
machine does not (no timing is asserted).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xroute import ENGINES, DefinitionsError, InvalidHeaders, TopicMatcher, Topology, XRouteError
from xroute.core import values
from xroute.exchanges.jms_sql import sql_selector

FUZZ = settings(
    max_examples=150,
    deadline=timedelta(seconds=30),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"n": value}
    return value


def _cyclic(kind: str) -> Any:
    if kind == "list":
        loop: list = [1]
        loop.append(loop)
        return loop
    table: dict = {"a": 1}
    table["self"] = [table]
    return table


def _wide(levels: int) -> list:
    value: list = [0]
    for _ in range(levels):
        value = [value, value]  # 2**levels leaves, shared: a cheap value that is costly to walk
    return value


class Weird:
    """An object no AMQP table carries, with a long repr."""

    def __repr__(self) -> str:
        return "Weird" + "!" * 10_000


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**62, max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(st.characters(), max_size=8),  # lone surrogates included
    st.text(max_size=300),
    st.binary(max_size=8),
    st.datetimes(),
    st.dates(),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.decimals(places=3),
    st.complex_numbers(max_magnitude=10),
    st.builds(Weird),
    st.just(object()),
    st.frozensets(st.integers(), max_size=2),
    st.sampled_from([  # values of xroute.core.values, every AMQP type
        values.byte(-1), values.unsignedbyte(255), values.short(1), values.unsignedshort(2),
        values.signedint(3), values.unsignedint(2**32 - 1), values.long(-(2**63)),
        values.float32(1.5), values.double(-0.0), values.longstr(b"\xff"), values.binary(b""),
        values.timestamp(2**64 - 1),
    ]),
)
hostile = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(
            st.one_of(st.text(max_size=4), st.integers(), st.binary(max_size=2)), inner, max_size=4
        ),
    ),
    max_leaves=16,
) | st.builds(_nested, st.integers(0, 5_000), scalars) | st.sampled_from(["list", "dict"]).map(
    _cyclic
) | st.integers(10, 40).map(_wide)
names = st.one_of(
    st.sampled_from(["t", "d", "f", "h", "x", "c", "j", "", "q", "amq.topic"]), hostile
)
field_names = st.one_of(
    st.sampled_from(["x-match", "CC", "BCC", "k", "n"]),
    st.text(st.characters(), max_size=3),
    st.text(min_size=256, max_size=300),
    st.integers(),
    st.binary(max_size=2),
    st.none(),
)
tables = st.one_of(hostile, st.dictionaries(field_names, hostile, max_size=4))


def topology(rabbitmq: str | None = None) -> Topology:
    t = Topology(rabbitmq=rabbitmq)
    kinds = {"t": "topic", "d": "direct", "f": "fanout", "h": "headers", "x": "x-delimiter"}
    for name, kind in kinds.items():
        t.declare_exchange(name, kind, alternate_exchange="f" if name != "f" else None)
        t.declare_queue(f"q{name}")
    t.declare_queue("q")
    t.bind("t", "qt", "a.#")
    t.bind("t", "d", "#", destination_type="exchange")
    t.bind("d", "qd", "a")
    t.bind("f", "qf")
    t.bind("h", "qh", "", {"x-match": "any", "k": [1, {"a": 2}], "n": None})
    t.bind("x", "qx", "a")
    # Types that hash or read typed header values (xroute.exchanges.terms).
    t.declare_exchange("c", "x-consistent-hash", arguments={"hash-header": "k"})
    t.declare_exchange("j", "x-jms-topic")
    for name in ("c", "j"):
        t.declare_queue(f"q{name}")
    t.bind("c", "qc", "1")
    t.bind("j", "qj", "", {"rjms_erlang_selector": sql_selector("k > 1 OR k LIKE 'a%'")})
    return t


ROUTED = topology()
ROUTED_3X = topology("3.10")  # consistent hash on {Type, Value}, headers compared with ==


def only_xroute_errors(call, *args, **kwargs) -> Any:
    try:
        return call(*args, **kwargs)
    except XRouteError as error:
        assert str(error)  # every error reads as a sentence
        return error


@FUZZ
@given(exchange=names, key=st.one_of(st.text(max_size=40), hostile), headers=tables)
def test_route(exchange, key, headers):
    for routed in (ROUTED, ROUTED_3X):
        result = only_xroute_errors(routed.route, exchange, key, headers)
        assert isinstance(result, (frozenset, XRouteError))


@FUZZ
@given(
    source=names,
    destination=names,
    key=st.one_of(st.text(max_size=40), hostile),
    arguments=tables,
    destination_type=st.one_of(st.sampled_from(["queue", "exchange"]), hostile),
)
def test_bind(source, destination, key, arguments, destination_type):
    t = topology()
    before = len(t.bindings())
    result = only_xroute_errors(t.bind, source, destination, key, arguments, destination_type)
    if isinstance(result, XRouteError):
        assert len(t.bindings()) == before  # a refused bind changes nothing
    only_xroute_errors(t.unbind, source, destination, key, arguments, destination_type)


entries = st.dictionaries(
    st.sampled_from(["name", "vhost", "type", "source", "destination", "destination_type",
                     "routing_key", "arguments", "durable", "internal", "pattern", "definition",
                     "priority", "apply-to"]),
    st.one_of(st.sampled_from(["q", "t", "/", "topic", "queue", "exchange", ".*"]), hostile),
    max_size=8,
)
definitions = st.one_of(
    hostile,
    st.text(max_size=40),
    st.dictionaries(
        st.sampled_from(["queues", "exchanges", "bindings", "policies", "vhosts", "other"]),
        st.one_of(st.lists(entries, max_size=4), hostile),
        max_size=5,
    ),
)


@FUZZ
@given(source=definitions, vhost=st.one_of(st.none(), st.sampled_from(["/", "/absent"]), hostile))
def test_from_definitions(source, vhost):
    result = only_xroute_errors(Topology.from_definitions, source, vhost=vhost)
    assert isinstance(result, (Topology, XRouteError))


@pytest.mark.parametrize("engine", sorted(ENGINES))
@FUZZ
@given(
    pairs=st.lists(
        st.tuples(
            st.one_of(st.text(max_size=12), hostile),
            st.one_of(st.sampled_from(["q1", "q2"]), hostile),
        ),
        max_size=5,
    ),
    keys=st.lists(st.one_of(st.text(max_size=12), hostile), max_size=5),
)
def test_topic_matcher(engine, pairs, keys):
    m = TopicMatcher(engine=engine)
    for pattern, destination in pairs:
        only_xroute_errors(m.add, pattern, destination)
    for key in keys:
        only_xroute_errors(m.match, key)
    only_xroute_errors(m.match_many, keys)
    only_xroute_errors(m.match_many_ids, keys)
    for pattern, destination in pairs:
        only_xroute_errors(m.remove, pattern, destination)
    assert len(m) == 0


# ------------------------------------------------------------------ the cases issue 12 names


def test_definitions_given_a_list_name_what_they_expected():
    for source in ([], [{"queues": []}], 5, b"{}"):
        with pytest.raises(DefinitionsError, match="path, JSON text or a dict"):
            Topology.from_definitions(source)


def test_an_absent_vhost_is_refused_when_the_export_names_its_vhosts():
    listed = {"vhosts": [{"name": "/"}, {"name": "empty"}], "queues": [{"name": "q", "vhost": "/"}]}
    with pytest.raises(DefinitionsError, match="'/absent'"):
        Topology.from_definitions(listed, vhost="/absent")
    assert "q" not in Topology.from_definitions(listed, vhost="empty").queues
    # A vhost-less export (RabbitMQ's per-vhost /api/definitions/VHOST) does not say which
    # virtual host it is: vhost= names it, and nothing is refused.
    bare = {"queues": [{"name": "q"}]}
    assert "q" in Topology.from_definitions(bare, vhost="/absent").queues
    with pytest.raises(DefinitionsError, match="name"):
        Topology.from_definitions(bare, vhost=["/"])


def test_deep_and_cyclic_binding_arguments_and_headers_are_typed_errors():
    t = topology()
    # Deep nesting alone is no error: RabbitMQ takes it (issue 35), and so does xroute.
    t.route("h", "", {"k": _nested(5_000, 1)})
    for value in (_cyclic("list"), _cyclic("dict"), _wide(40)):
        with pytest.raises(InvalidHeaders):
            t.route("h", "", {"k": value})
        with pytest.raises(InvalidHeaders):
            t.bind("h", "q", "", {"k": value})
