"""xroute.kombu.table, the pure part: kombu table rows to a kept Topology, and headers binding
arguments carried as text."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import bindings, keys
from xroute import InvalidArguments, InvalidPattern, Topology, UnknownExchangeType, XRouteError
from xroute.core.headers import typed_canonical
from xroute.core.values import PY_AMQP, as_sent_by, binary, float32, longstr, short, unsignedint
from xroute.kombu.table import TableRouter, decode_arguments, encode_arguments

field_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5) | st.binary(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@given(st.dictionaries(st.text(max_size=6).filter(lambda n: n != "x-match"), field_values, max_size=4),
       st.sampled_from([None, "all", "any", "all-with-x", "any-with-x"]))
def test_arguments_round_trip_with_their_types(arguments, mode):
    if mode is not None:
        arguments["x-match"] = mode
    text = encode_arguments(arguments)
    assert "\x06\x16" not in text  # kombu's Redis row separator cannot appear
    back = decode_arguments(text)
    # Each value keeps its AMQP type, the one py-amqp sends (bytes: a longstr).
    sent = as_sent_by(arguments, PY_AMQP)
    assert {n: typed_canonical(v) for n, v in back.items()} == {
        n: typed_canonical(v) for n, v in sent.items()
    }
    assert encode_arguments(back) == text  # the same arguments, the same row: unbind finds it


def test_typed_arguments_keep_their_types_and_bytes_are_longstr():
    typed = {"a": short(1), "b": float32(1.5), "c": binary(b"x"), "d": [unsignedint(2)],
             "e": b"y", "f": [b"z"], "x-match": b"any"}
    back = decode_arguments(encode_arguments(typed))
    assert [type(back[n]) for n in "abce"] == [short, float32, binary, longstr]
    assert type(back["d"][0]) is unsignedint and type(back["f"][0]) is longstr
    assert back["x-match"] == b"any"  # py-amqp sends it as a longstr, which RabbitMQ accepts
    with pytest.raises(InvalidArguments, match="x-match"):
        encode_arguments({"x-match": binary(b"any")})  # a binary x-match: RabbitMQ's 406


def test_arguments_keep_int_vs_float_and_refuse_non_finite_floats():
    back = decode_arguments(encode_arguments({"b": 1, "c": 1.0, "d": True}))
    assert [type(back[n]) for n in "bcd"] == [int, float, bool]
    # RabbitMQ refuses NaN and infinities in a table (541 for headers, a reset for arguments).
    for value in (math.inf, -math.inf, math.nan):
        with pytest.raises(XRouteError, match="not a finite number"):
            encode_arguments({"a": value})


def test_bad_rows_and_arguments_are_clear_errors():
    with pytest.raises(InvalidArguments, match="xroute-args"):
        decode_arguments("^a$")
    with pytest.raises(InvalidArguments, match="x-match"):
        encode_arguments({"x-match": "most"})
    with pytest.raises(UnknownExchangeType, match="x-made-up"):
        TableRouter("x-made-up")
    with pytest.raises(InvalidPattern):
        TableRouter("topic").route("x", [("a" * 300, None, "q")], "a")


@settings(max_examples=200)
@given(bindings, st.lists(keys, min_size=1, max_size=5))
def test_router_matches_topology_route(bound, routed):
    rows = [(pattern, None, queue) for pattern, queue in bound]
    topology = Topology()
    topology.declare_exchange("x", "topic")
    for pattern, queue in bound:
        topology.declare_queue(queue)
        topology.bind("x", queue, pattern)
    router = TableRouter("topic")
    for key in routed:
        assert router.route("x", rows, key) == topology.route("x", key), (bound, key)


def test_router_keeps_its_topology_until_the_rows_change():
    router = TableRouter("topic")
    rows = [("a.#", "^a\\..*?$", "q1"), ("*.b", "^[^\\.]+\\.b$", "q2")]
    assert router.route("x", rows, "a") == {"q1"}
    assert router.route("x", [tuple(r) for r in rows], "a.b") == {"q1", "q2"}  # equal, fresh
    assert router.route("x", list(reversed(rows)), "a.b") == {"q1", "q2"}  # Redis order
    assert (router.stats.builds, router.stats.hits, router.stats.reorders) == (1, 1, 1)
    rows.append(("#", None, "q3"))  # kombu edits its list in place
    assert router.route("x", rows, "z") == {"q3"}
    rows[:] = [r for r in rows if r[2] != "q1"]
    assert router.route("x", rows, "a") == {"q3"}
    assert router.stats.builds == 3
    assert router.route("y", [], "a") == frozenset()  # each exchange its own


def test_router_headers_and_sender_selected_keys():
    headers = TableRouter("headers")
    rows = [("b0", encode_arguments({"h": 1}), "q0"), ("b1", encode_arguments({"x-match": "any"}), "q1")]
    assert headers.route("x", rows, "", {"h": 1}) == {"q0"}
    assert headers.route("x", rows, "", {"h": 1.0}) == frozenset()
    topic = TableRouter("topic")
    rows = [("a", None, "qa"), ("b", None, "qb")]
    # Only CC/BCC count on a topic exchange: a header no AMQP table carries is no error there.
    assert topic.route("x", rows, "z", {"CC": ["a"], "BCC": ["b"], "when": object()}) == {"qa", "qb"}


def test_router_forgets_the_oldest_exchange_past_its_bound():
    router = TableRouter("direct", max_tables=2)
    for name in "abc":
        router.route(name, [("k", None, "q")], "k")
    router.route("a", [("k", None, "q")], "k")
    assert router.stats.builds == 4  # a was dropped to keep two


KOMBU_MODULES = "sorted(m for m in sys.modules if m.split('.')[0] == 'kombu')"


def test_the_routing_core_does_not_import_kombu():
    """kombu is optional: xroute and the table router (loaded alone: its package's __init__
    is the part that imports kombu) route without loading it."""
    code = (
        "import importlib.util, sys, xroute\n"
        "t = xroute.Topology(); t.declare_exchange('x', 'topic'); t.route('x', 'a')\n"
        "spec = importlib.util.spec_from_file_location('table', "
        "xroute.__path__[0] + '/kombu/table.py')\n"
        "table = sys.modules['table'] = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(table)\n"
        "assert table.TableRouter('topic').route('x', [('a.#', None, 'q')], 'a') == {'q'}\n"
        f"print({KOMBU_MODULES})\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def test_xroute_kombu_public_names():
    import xroute.kombu

    assert xroute.kombu.__all__ == [
        "EXCHANGE_TYPES", "Broker", "MemoryBroker", "MemoryTransport", "XRouteChannel",
        "DelimiterExchange", "DirectExchange", "FanoutExchange",
        "HeadersExchange", "NotAVirtualTransport", "RouterStats", "TableRouter",
        "TopicExchange", "XRouteExchangeType", "decode_arguments", "encode_arguments",
        "install", "installed", "transport_class", "uninstall",
    ]
    for name in xroute.kombu.__all__:
        assert getattr(xroute.kombu, name).__doc__, name
