"""Header values and binding arguments: the types RabbitMQ carries (timestamps, decimals, nested
tables), how they compare, and what is refused with a typed error naming the value."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xroute import InvalidArguments, InvalidHeaders, PreconditionFailed, Topology
from xroute.core.headers import MAX_FIELDS, canonical
from xroute.core.values import (
    TypedValue,
    binary,
    byte,
    double,
    float32,
    long,
    longstr,
    short,
    timestamp,
    unsignedbyte,
    unsignedint,
)


def headers_topology(arguments: dict, rabbitmq: str | None = None) -> Topology:
    t = Topology(rabbitmq=rabbitmq)
    t.declare_exchange("h", "headers")
    t.declare_queue("q")
    t.bind("h", "q", "", arguments)
    return t


def routes(arguments: dict, headers: dict, rabbitmq: str | None = None) -> bool:
    return "q" in headers_topology(arguments, rabbitmq).route("h", "", headers)


# ------------------------------------------------------------------ timestamps


def test_a_timestamp_is_its_seconds_at_the_top_of_a_table():
    epoch = datetime(1970, 1, 1)
    assert canonical(epoch + timedelta(seconds=90)) == canonical(90)
    # An aware datetime is converted to UTC; a naive one is UTC already, as clients send it.
    aware = datetime(1970, 1, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=1)))
    assert canonical(aware) == canonical(30)
    # The fraction of a second is dropped, as the clients encode it.
    assert canonical(epoch + timedelta(seconds=5, microseconds=999_999)) == canonical(5)


def test_a_timestamp_is_not_an_integer_inside_an_array():
    one = datetime(1970, 1, 1, 0, 0, 1)
    assert canonical([one]) != canonical([1])
    assert canonical([one]) == canonical([one])
    assert canonical({"a": one}) != canonical({"a": 1})
    assert routes({"k": one}, {"k": 1}, "3.10") and routes({"k": 1}, {"k": one}, "3.10")
    assert not routes({"k": [one]}, {"k": [1]})


@pytest.mark.parametrize("rabbitmq", ["3.13", "4.0", "4.3", None])
def test_a_timestamp_header_routes_as_its_milliseconds_from_3_13(rabbitmq):
    # mc_amqpl:routing_value(timestamp, V) -> V * 1000: a message's top-level timestamp is
    # compared in milliseconds, a binding argument's as it was sent (seconds).
    one = datetime(1970, 1, 1, 0, 0, 1)
    assert routes({"k": one}, {"k": 1}, rabbitmq)
    assert not routes({"k": 1}, {"k": one}, rabbitmq)
    assert routes({"k": 1000}, {"k": one}, rabbitmq)
    assert routes({"k": timestamp(1000)}, {"k": timestamp(1)}, rabbitmq)
    assert not routes({"k": one}, {"k": one}, rabbitmq)
    # inside arrays a timestamp keeps its seconds and its type
    assert routes({"k": [one]}, {"k": [timestamp(1)]}, rabbitmq)
    assert routes({"k": one}, {"k": one}, "3.12")


def test_a_timestamp_is_not_a_float():
    # RabbitMQ 4.x compares exactly: a timestamp's integer is not 1.0 (3.10.8 says it is).
    assert not routes({"k": 1.0}, {"k": datetime(1970, 1, 1, 0, 0, 1)})


def test_a_timestamp_before_1970_is_refused():
    with pytest.raises(InvalidHeaders, match="1969") as caught:
        canonical(datetime(1969, 12, 31), "k")
    assert caught.value.name == "k"


# ------------------------------------------------------------------ decimals


@pytest.mark.parametrize(
    "a,b,equal",
    [
        ("1.5", "1.5", True),
        ("1.5", "1.50", False),  # another scale: (1, 15) is not (2, 150)
        ("1", "1.0", False),
        ("-0.25", "-0.25", True),
        ("1E+2", "100", True),  # a positive exponent goes as scale 0, as pika sends it
        ("0", "-0", True),
    ],
)
def test_decimals_compare_scale_and_digits(a, b, equal):
    assert (canonical(Decimal(a)) == canonical(Decimal(b))) is equal
    assert routes({"k": Decimal(a)}, {"k": Decimal(b)}) is equal


def test_a_decimal_is_neither_a_number_nor_text():
    assert not routes({"k": 1}, {"k": Decimal("1")})
    assert not routes({"k": 1.5}, {"k": Decimal("1.5")})
    assert not routes({"k": "1.5"}, {"k": Decimal("1.5")})


@pytest.mark.parametrize(
    "value,what",
    [
        (Decimal("NaN"), "finite"),
        (Decimal("-Infinity"), "finite"),
        (Decimal("12345678901"), "32-bit"),
        (Decimal(1).scaleb(-300), "scale"),
    ],
)
def test_decimals_an_amqp_decimal_cannot_carry_are_refused(value, what):
    with pytest.raises(InvalidHeaders, match=what) as caught:
        headers_topology({}).route("h", "", {"d": value})
    assert caught.value.value is value
    with pytest.raises(InvalidHeaders, match=what):
        headers_topology({"d": value})


# ------------------------------------------------------------------ nested tables and arrays


def test_nested_tables_compare_in_field_order():
    assert routes({"k": {"a": 1, "b": 2}}, {"k": {"a": 1, "b": 2}})
    assert not routes({"k": {"a": 1, "b": 2}}, {"k": {"b": 2, "a": 1}})
    # The top level is a set of criteria: its order never matters.
    assert routes({"a": 1, "b": 2}, {"b": 2, "a": 1})


def test_an_empty_table_equals_an_empty_array_at_the_top_only():
    assert canonical({}) == canonical([])
    # Inside arrays and tables the AMQP type counts (measured on RabbitMQ 3.10.8).
    assert canonical([{}]) != canonical([[]])
    assert canonical({"a": []}) != canonical({"a": {}})
    assert canonical({"a": 1}) != canonical([1])


def test_binding_identity_keeps_nested_order():
    t = headers_topology({"k": {"a": 1, "b": 2}})
    t.bind("h", "q", "", {"k": {"b": 2, "a": 1}})
    assert len(t.bindings()) == 2
    t.bind("h", "q", "", {"k": {"a": 1, "b": 2}})
    assert len(t.bindings()) == 2


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, [1.0, math.nan], {"a": math.inf}])
def test_non_finite_floats_are_refused(value):
    # RabbitMQ closes the connection (541) on such a header, and on such a binding argument.
    with pytest.raises(InvalidHeaders, match="finite") as caught:
        headers_topology({}).route("h", "", {"n": value})
    assert caught.value.name == "n"
    t = Topology()
    t.declare_exchange("h", "headers")
    t.declare_queue("q")
    with pytest.raises(InvalidHeaders, match="finite"):
        t.bind("h", "q", "", {"n": value})
    assert t.bindings() == []


@pytest.mark.parametrize("mode", [b"any", bytearray(b"all"), 1, None])
def test_x_match_must_be_text(mode):
    t = Topology()
    t.declare_exchange("h", "headers")
    t.declare_queue("q")
    with pytest.raises(InvalidArguments, match="x-match"):
        t.bind("h", "q", "", {"x-match": mode, "k": 1})
    assert t.bindings() == []


@pytest.mark.parametrize(
    "flag", [{"durable": False}, {"auto_delete": True}, {"internal": True}]
)
def test_redeclare_with_other_flags_is_refused(flag):
    t = Topology()
    t.declare_exchange("x", "fanout")
    name = next(iter(flag))
    with pytest.raises(PreconditionFailed, match=name):
        t.declare_exchange("x", "fanout", **flag)
    assert getattr(t.exchanges["x"], name) is not flag[name]


def test_redeclare_compares_only_the_alternate_exchange_argument():
    t = Topology()
    t.declare_exchange("x", "fanout", arguments={"x-other": 1})
    t.declare_exchange("x", "fanout", arguments={"x-other": 2})  # accepted, as by RabbitMQ
    t.declare_exchange("x", "fanout")
    assert t.exchanges["x"].arguments == {"x-other": 1}
    with pytest.raises(PreconditionFailed, match="alternate-exchange"):
        t.declare_exchange("x", "fanout", alternate_exchange="ae")


def test_the_default_exchange_is_never_an_alternate():
    t = Topology()
    t.declare_exchange("x", "direct", alternate_exchange="")
    t.declare_queue("q")
    assert t.exchanges["x"].alternate_exchange is None
    assert t.exchanges["x"].arguments == {"alternate-exchange": ""}  # kept for the round trip
    assert t.route("x", "q") == frozenset()
    assert t.route("", "q") == {"q"}


# ------------------------------------------------------------------ hostile structures


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def test_deep_nesting_is_accepted_and_compared_as_rabbitmq_does():
    # RabbitMQ 3.10.8 takes headers nested 10,000 deep (issue 35); so does xroute, without
    # recursion, and the value still compares exactly.
    deep = nested(10_000)
    assert canonical(deep)[0] == "array"
    t = headers_topology({"deep": nested(10_000)})
    assert t.route("h", "", {"deep": deep}) == {"q"}
    assert t.route("h", "", {"deep": nested(9_999)}) == frozenset()


def test_cyclic_values_are_refused():
    loop: list = [1]
    loop.append(loop)
    table: dict = {}
    table["self"] = table
    for value in (loop, table, [[loop]]):
        with pytest.raises(InvalidHeaders, match="contains itself"):
            headers_topology({}).route("h", "", {"c": value})


def test_shared_values_are_not_cycles_but_their_size_is_bounded():
    shared = [1, 2]
    assert canonical([shared, shared]) == canonical([[1, 2], [1, 2]])
    # A value that repeats itself exponentially is refused when it passes the field budget,
    # instead of being walked 2**30 times.
    value: list = [0]
    for _ in range(30):
        value = [value, value]
    with pytest.raises(InvalidHeaders, match=str(MAX_FIELDS)):
        canonical(value, "wide")


def test_explain_follows_cc_keys_of_any_shape_and_typed_headers():
    from xroute.tools.explain import explain

    t = Topology()
    t.declare_exchange("t", "topic")
    t.declare_queue("q")
    t.bind("t", "q", "a.*")
    t.declare_queue("long")
    t.bind("t", "long", "b.#")
    headers = {
        # A longstr that is not UTF-8 is a key; a binary (plain bytes, as pika sends them) is
        # not, as in RabbitMQ's header_routes.
        "CC": [longstr(b"a.\xff"), "b." + "x" * 300, 1, b"z.x"],
        "at": datetime(2020, 1, 1),
        "d": Decimal("1.5"),
    }
    assert explain(t, "t", "z", headers).queues == t.route("t", "z", headers) == {"q", "long"}
    assert t.route("t", "z", {"CC": [b"a.x"]}) == frozenset()


# ------------------------------------------------------------------ against a model of RabbitMQ
#
# An independent model of rabbit_exchange_type_headers (RabbitMQ 4.x): each value becomes what
# py-amqp puts on the wire, (AMQP type, Erlang term); the top level compares terms only, with
# =:= (so integers and timestamps are numbers, floats another kind); inside arrays and tables
# the (type, term) pairs are compared whole, tables as ordered lists of (name, type, term).


def wire(value):
    """(AMQP type, term) as pika encodes ``value`` (typed values in their own type) and
    RabbitMQ decodes it."""
    if isinstance(value, bool):
        return "bool", value
    if isinstance(value, TypedValue):
        kind = value.amqp_type
        if isinstance(value, int):
            return kind, ("number", int(value))
        if isinstance(value, float):
            return kind, ("float", float(value))
        return kind, ("binary", bytes(value))
    if isinstance(value, int):
        return ("signedint" if -(2**31) <= value <= 2**31 - 1 else "long"), ("number", value)
    if isinstance(value, float):
        return "double", ("float", value)
    if isinstance(value, str):
        return "longstr", ("binary", value.encode())
    if isinstance(value, bytes):
        return "binary", ("binary", value)
    if isinstance(value, datetime):
        return "timestamp", ("number", int((value - datetime(1970, 1, 1)).total_seconds()))
    if isinstance(value, Decimal):
        sign, digits, exponent = value.as_tuple()
        unscaled = int("".join(map(str, digits))) * (-1 if sign else 1)
        return "decimal", ("decimal", -exponent, unscaled % 2**32)
    if value is None:
        return "void", None
    if isinstance(value, dict):
        return "table", ("list", tuple((k, *wire(v)) for k, v in value.items()))
    return "array", ("list", tuple(wire(v) for v in value))


def _top_equal(binding, header, rabbitmq: str | None) -> bool:
    """RabbitMQ's comparison of two top-level values: ``==`` up to 3.12 (``1 == 1.0``), ``=:=``
    from 3.13, where a message's timestamp header is its milliseconds."""
    (_, a), (kind, b) = wire(binding), wire(header)
    if rabbitmq == "3.10":
        numbers = {"number", "float"}
        if isinstance(a, tuple) and isinstance(b, tuple) and {a[0], b[0]} <= numbers:
            return a[1] == b[1]
    elif kind == "timestamp":  # ("number", seconds)
        b = ("number", b[1] * 1000)
    return a == b


def model_matches(arguments: dict, headers: dict, rabbitmq: str | None = None) -> bool:
    mode = arguments.get("x-match", "all")
    with_x = mode.endswith("-with-x")
    wanted = {
        k: v for k, v in arguments.items() if k != "x-match" and (with_x or not k.startswith("x-"))
    }
    results = []
    for name, value in wanted.items():
        if name not in headers:
            results.append(False)
        elif value is None:
            results.append(True)
        else:
            # Erlang holds [] for both an empty table and an empty array: at the top only the
            # terms are compared.
            results.append(_top_equal(value, headers[name], rabbitmq))
    return any(results) if mode.startswith("any") else all(results)


_scalars = st.one_of(
    st.sampled_from([0, 1, 2, -1, 2**40, 1.5, -0.5, 2.0, True, False, "1", "a", b"a", "", None]),
    st.sampled_from([short(1), long(1), unsignedint(1), byte(-1), long(2**40), float32(1.5),
                     double(1.5), float32(0.1), binary(b"a"), longstr(b"a"), longstr(b"\xff"),
                     timestamp(1), unsignedbyte(2)]),
    st.sampled_from([datetime(1970, 1, 1, 0, 0, s) for s in (0, 1, 2)]),
    st.sampled_from([Decimal(x) for x in ("1", "1.0", "1.5", "1.50", "-2", "0.00")]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
    max_leaves=5,
) | st.sampled_from([[], {}, [[]], [{}], {"a": []}, {"a": {}}])
_names = st.sampled_from(["k1", "k2", "x-k"])


@settings(max_examples=300, deadline=None)
@given(
    mode=st.sampled_from(["all", "any", "all-with-x", "any-with-x"]),
    arguments=st.dictionaries(_names, _values, max_size=3),
    headers=st.dictionaries(_names, _values, max_size=3),
    rabbitmq=st.sampled_from(["3.10", None]),
)
def test_headers_exchange_equals_the_model(mode, arguments, headers, rabbitmq):
    arguments = {"x-match": mode, **arguments}
    want = model_matches(arguments, headers, rabbitmq)
    got = routes(arguments, headers, rabbitmq)
    assert got == want, (
        f"{rabbitmq}: arguments {arguments!r} headers {headers!r}: model {want}, xroute {got}"
    )
