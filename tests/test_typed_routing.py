"""Typed header values (xroute.core.values) through every exchange type: the fixed cases of issue
34, each rule as RabbitMQ's source has it (cited), and a property that every routing path
(`Topology.route`, `BatchRouter`, explain) agrees with `Topology.route_message`."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import typed_values
from xroute import (
    BrokerCrash,
    InvalidHeaders,
    PreconditionFailed,
    RoutingFailed,
    Topology,
    XRouteError,
)
from xroute.core.batch import BatchRouter
from xroute.core.values import (
    binary,
    double,
    float32,
    long,
    longstr,
    short,
    timestamp,
    unsignedint,
)
from xroute.erlang import UNDEFINED, Atom
from xroute.exchanges.consistent_hash import jump_consistent_hash
from xroute.exchanges.jms_sql import sql_selector
from xroute.tools.explain import explain

QUEUES = [f"q{i}" for i in range(4)]


def hashing(rabbitmq: str | None, **arguments) -> Topology:
    t = Topology(rabbitmq=rabbitmq)
    t.declare_exchange("chx", "x-consistent-hash", arguments=arguments)
    for queue in QUEUES:
        t.declare_queue(queue)
        t.bind("chx", queue, "5")
    return t


def hashed(t: Topology, headers: dict) -> object:
    return t.exchanges["chx"].kind.hashed_value(["k"], headers)


# ------------------------------------------------------------------ consistent hash


def test_consistent_hash_3x_hashes_the_type_of_each_value():
    # rabbit_exchange_type_consistent_hash (3.10.8): value_to_hash({header, H}) is
    # rabbit_misc:table_lookup, {Type, Value}.
    t = hashing("3.10", **{"hash-header": "h"})
    assert hashed(t, {"h": b""}) == (Atom("binary"), b"")  # pika sends bytes as binary
    assert hashed(t, {"h": longstr(b"")}) == (Atom("longstr"), b"")
    assert hashed(t, {"h": ""}) == (Atom("longstr"), b"")
    assert hashed(t, {"h": short(1)}) == (Atom("short"), 1)
    assert hashed(t, {"h": 1}) == (Atom("signedint"), 1)
    assert hashed(t, {"h": float32(1.5)}) == (Atom("float"), 1.5)
    assert hashed(t, {"h": [short(1), b"x"]}) == (
        Atom("array"), [(Atom("short"), 1), (Atom("binary"), b"x")]
    )
    assert hashed(t, {"h": None}) == (Atom("void"), UNDEFINED)
    assert hashed(t, {}) == UNDEFINED
    assert type(hashed(t, {"h": short(1)})[1]) is int  # a builtin term, hashed as Erlang's


@pytest.mark.parametrize("rabbitmq", ["3.13", "4.0", None])
def test_consistent_hash_from_3_13_hashes_the_bare_value(rabbitmq):
    # mc_amqpl:routing_headers: the value without its type; a timestamp in milliseconds
    # (routing_value(timestamp, V) -> V * 1000); maps:get/3 gives undefined when absent.
    t = hashing(rabbitmq, **{"hash-header": "h"})
    assert hashed(t, {"h": b"abc"}) == hashed(t, {"h": "abc"}) == b"abc"
    assert hashed(t, {"h": short(7)}) == hashed(t, {"h": long(7)}) == 7
    assert hashed(t, {"h": timestamp(2)}) == 2000
    assert hashed(t, {"h": datetime(1970, 1, 1, 0, 0, 2, tzinfo=timezone.utc)}) == 2000
    assert hashed(t, {"h": [short(1)]}) == [(Atom("short"), 1)]  # arrays keep their types
    assert hashed(t, {"h": None}) == hashed(t, {}) == UNDEFINED


def test_binary_and_longstr_of_the_same_bytes_land_apart_on_3x_only():
    old, new = hashing("3.10", **{"hash-header": "h"}), hashing(None, **{"hash-header": "h"})
    as_binary, as_longstr = (old.route("chx", "k", {"h": v}) for v in (b"a", longstr(b"a")))
    for kind, routed in (("binary", as_binary), ("longstr", as_longstr)):
        bucket = jump_consistent_hash((Atom(kind), b"a"), 4 * 5)
        assert routed == {QUEUES[bucket // 5]}
    assert as_binary != as_longstr
    assert new.route("chx", "k", {"h": b"a"}) == new.route("chx", "k", {"h": longstr(b"a")})


@pytest.mark.parametrize("bad", [b"h", binary(b"h"), 1, short(1), ["h"]])
def test_a_hash_header_that_is_not_a_longstr_crashes_rabbitmq(bad):
    # hash_args has clauses for undefined and {longstr, V} only: a case_clause, 541.
    with pytest.raises(BrokerCrash) as caught:
        hashing(None, **{"hash-header": bad})
    assert caught.value.reply == (541, "") and caught.value.value == bad
    t = hashing(None, **{"hash-header": longstr(b"h")})
    assert t.exchanges["chx"].kind.hash_on == ("header", "h")


# ------------------------------------------------------------------ JMS selectors


def jms(selector: str) -> Topology:
    t = Topology()
    t.declare_exchange("j", "x-jms-topic")
    t.declare_queue("q")
    t.bind("j", "q", "", {"rjms_erlang_selector": sql_selector(selector)})
    return t


@pytest.mark.parametrize("value", [b"v", binary(b"v"), unsignedint(1), timestamp(1), None,
                                   [1], {"a": 1}])
def test_a_selector_over_a_header_the_evaluator_cannot_read_closes_the_connection(value):
    # sjx_evaluator:lookup_value reads longstr, signedint, float, double, byte, short, long
    # and bool; any other type is a case_clause: RabbitMQ closes the publisher's connection.
    with pytest.raises(RoutingFailed) as caught:
        jms("k = 'v'").route("j", "", {"k": value})
    assert caught.value.reply == (541, "")


@pytest.mark.parametrize(
    "selector,value,routed",
    [("k = 'v'", longstr(b"v"), True), ("k = 'v'", "v", True), ("k = 1", short(1), True),
     ("k = 1", long(1), True), ("k > 1", float32(1.5), True), ("k = 1.5", double(1.5), True),
     ("k = 'w'", longstr(b"v"), False)],
)
def test_a_selector_reads_the_types_the_evaluator_reads(selector, value, routed):
    assert (jms(selector).route("j", "", {"k": value}) == {"q"}) is routed


# ------------------------------------------------------------------ x-delimiter, CC/BCC


def test_x_delimiter_splits_on_the_first_byte():
    # rabbitmq-delimiter-exchange: <<Delim:1/binary, Route/binary>>, binary:split global.
    t = Topology()
    t.declare_exchange("d", "x-delimiter")
    for queue, key in (("qa", "éa"), ("qb", "b"), ("raw", "\udca9a")):
        t.declare_queue(queue)
        t.bind("d", queue, key)
    assert t.route("d", "éaéb") == {"raw"}  # pieces \xa9a and \xa9b: no text key equals them
    assert t.route("d", ":éa:b") == {"qa", "qb"}  # an ASCII delimiter splits as before
    assert t.route("d", "é") == frozenset()


def test_a_bcc_of_type_void_is_refused_with_rabbitmqs_reason():
    # rabbit_basic:header_routes: {Type, _} -> {unacceptable_type_in_header, "BCC", Type}: 406
    t = Topology()
    t.declare_queue("q")
    for value, kind in ((None, "void"), (b"q", "binary"), ("q", "longstr"), (short(1), "short")):
        with pytest.raises(InvalidHeaders) as caught:
            t.route("", "q", {"BCC": value})
        assert caught.value.erlang_reason == f'{{unacceptable_type_in_header,"BCC",{kind}}}'


def test_only_longstr_elements_of_cc_are_keys():
    t = Topology()
    t.declare_queue("q")
    assert t.route("", "z", {"CC": [longstr(b"q")]}) == {"q"}
    assert t.route("", "z", {"CC": [binary(b"q"), b"q", short(1)]}) == frozenset()


# ------------------------------------------------------------------ arguments


def test_recent_history_length_takes_the_signed_integer_types():
    # rabbit_exchange_type_recent_history: INTEGER_ARG_TYPES = [byte, short, signedint, long]
    t = Topology()
    for number, good in enumerate((5, short(5), long(5))):
        t.declare_exchange(f"r{number}", "x-recent-history",
                           arguments={"x-recent-history-length": good})
    for bad in (unsignedint(5), timestamp(5), True, 0, "5"):
        with pytest.raises(PreconditionFailed, match="x-recent-history-length"):
            t.declare_exchange("bad", "x-recent-history",
                               arguments={"x-recent-history-length": bad})


def test_bindings_whose_arguments_differ_in_type_are_two_bindings():
    # RabbitMQ compares binding argument tables as [{Name, Type, Value}] terms.
    t = Topology()
    t.declare_exchange("h", "headers")
    t.declare_queue("q")
    t.bind("h", "q", "", {"k": 1})
    t.bind("h", "q", "", {"k": short(1)})
    t.bind("h", "q", "", {"k": "v"})
    t.bind("h", "q", "", {"k": b"v"})
    t.bind("h", "q", "", {"k": 1})  # the same binding again
    assert len(t.bindings("h")) == 4
    t.unbind("h", "q", "", {"k": short(1)})
    assert [b.arguments for b in t.bindings("h")].count({"k": 1}) == 1


@pytest.mark.parametrize(
    "bound,sent,routed",
    [([1], [short(1)], False), ([1], [long(1)], False), ([1.5], [float32(1.5)], False),
     (["abc"], [binary(b"abc")], False), (["abc"], [longstr(b"abc")], True),
     ([short(1)], [short(1)], True), ({"a": short(1)}, {"a": 1}, False),
     (1, short(1), True), ("abc", binary(b"abc"), True), (1.5, float32(1.5), True),
     (0.1, float32(0.1), False)],
)
def test_widths_count_inside_arrays_and_tables_only(bound, sent, routed):
    t = Topology()
    t.declare_exchange("h", "headers")
    t.declare_queue("q")
    t.bind("h", "q", "", {"k": bound})
    assert (t.route("h", "", {"k": sent}) == {"q"}) is routed


# ------------------------------------------------------------------ explain


def test_explain_says_which_types_it_assumed():
    t = Topology(rabbitmq="3.10")
    t.declare_exchange("h", "headers")
    t.declare_queue("q")
    t.bind("h", "q", "", {"k": [1]})
    notes = explain(t, "h", "", {"k": [1, b"x", short(2)], "top": 5}).type_notes
    assert notes == [
        "header 'k'[0]: int taken as signedint (pika's rule; a client may send another width);"
        " say it with a typed value of xroute.core.values",
        "header 'k'[1]: bytes taken as binary, as pika sends them (py-amqp sends a longstr);"
        " say it with a typed value of xroute.core.values",
        "binding of queue 'q' to 'h', argument 'k'[0]: int taken as signedint (pika's rule;"
        " a client may send another width); say it with a typed value of xroute.core.values",
    ]  # the short says its type; a top-level int's width does not count here
    t.unbind("h", "q", "", {"k": [1]})
    t.bind("h", "q", "", {"k": [short(1)]})
    assert explain(t, "h", "", {"k": [short(1)]}).type_notes == []


# ------------------------------------------------------------------ every path agrees

EXCHANGES = {
    "headers": ("headers", {}),
    "chx-header": ("x-consistent-hash", {"hash-header": "k"}),
    "jms": ("x-jms-topic", {}),
    "direct": ("direct", {}),
}


def every_type(rabbitmq: str | None, bound: list) -> Topology:
    t = Topology(rabbitmq=rabbitmq)
    for queue in QUEUES:
        t.declare_queue(queue)
    for name, (kind, arguments) in EXCHANGES.items():
        t.declare_exchange(name, kind, arguments=arguments)
    for number, value in enumerate(bound):
        queue = QUEUES[number % len(QUEUES)]
        t.bind("headers", queue, "", {"x-match": "any", "k": value})
        t.bind("chx-header", queue, str(number + 1))
        t.bind("jms", queue, "", {"rjms_erlang_selector": sql_selector("k = 'a' OR k > 0")})
        t.bind("direct", queue, queue)
    return t


def outcome(call) -> object:
    try:
        return call()
    except XRouteError as error:
        return type(error).__name__


@settings(max_examples=150, deadline=None)
@given(
    bound=st.lists(typed_values, min_size=1, max_size=4),
    messages=st.lists(typed_values, min_size=1, max_size=6),
    cc=st.lists(st.sampled_from(["q0", longstr(b"q1"), binary(b"q2"), b"q3", short(1)]),
                max_size=3),
    rabbitmq=st.sampled_from(["3.10", "3.13", None]),
)
def test_every_path_routes_typed_values_as_route_message(bound, messages, cc, rabbitmq):
    t = every_type(rabbitmq, bound)
    router = BatchRouter(t)
    for exchange in EXCHANGES:
        tables = [{"k": value, **({"CC": cc} if cc else {})} for value in messages]
        want = [outcome(lambda h=h: t.route_message(exchange, "q0", h)) for h in tables]
        got = [outcome(lambda h=h: t.route(exchange, "q0", h)) for h in tables]
        assert got == want, (exchange, tables)
        batch = router.route(exchange, ["q0"] * len(tables), tables)
        for i, expected in enumerate(want):
            if isinstance(expected, str):
                assert type(batch.errors[i]).__name__ == expected, (exchange, tables[i])
            else:
                assert batch.queues(i) == expected, (exchange, tables[i])
                assert explain(t, exchange, "q0", tables[i]).queues == expected
