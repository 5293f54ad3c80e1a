"""Erlang term text as RabbitMQ prints it (read by `xroute.erlang.terms`): fixed cases from its logs and event headers, and
terms printed by a real Erlang (``erl``) from random values read back exactly."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xroute.core.errors import TraceFormatError
from xroute.erlang import Atom
from xroute.traces.erlang import parse_term, typed_table


def test_a_properties_table_from_a_tracing_log():
    text = """[{<<"timestamp">>,signedint,1795500000},
               {<<"headers">>,table,
                [{<<"n">>,signedint,1},{<<"v">>,void,undefined},{<<"b">>,longstr,<<255,0>>},
                 {<<"l">>,array,
                  [{signedint,1},{longstr,<<"x">>},{double,2.0}]},
                 {<<"dec">>,decimal,{2,125}},{<<"t">>,bool,true},
                 {<<"long">>,longstr,<<"first part "
                                       "second part">>}]}]"""
    table = typed_table(parse_term(text))
    assert table["timestamp"] == 1795500000
    headers = table["headers"]
    assert headers["n"] == 1 and headers["v"] is None and headers["b"] == b"\xff\x00"
    assert headers["l"] == [1, "x", 2.0] and isinstance(headers["l"][2], float)
    assert str(headers["dec"]) == "1.25" and headers["t"] is True
    assert headers["long"] == "first part second part"


def test_binding_arguments_as_the_event_exchange_sends_them():
    assert parse_term('{<<"x-match">>,longstr,<<"any">>}') == (b"x-match", Atom("longstr"), b"any")
    assert parse_term("[].") == []
    assert parse_term("'quoted atom'") == Atom("quoted atom")
    assert parse_term('"hi"') == [104, 105]  # erl prints a list of character codes as text


@pytest.mark.parametrize("bad", ["[1,", "{<<\"a\">>", "[1 2]", "<<\"a\">> extra", "#{}"])
def test_text_that_is_not_a_term_is_refused_with_its_place(bad):
    with pytest.raises(TraceFormatError):
        parse_term(bad)


ERL = shutil.which("erl")

leaves = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.binary(max_size=12),
    st.sampled_from(["true", "undefined", "longstr", "ok"]).map(Atom),
)
terms = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner, inner), st.lists(st.integers(32, 126), max_size=5)
    ),
    max_leaves=12,
)


def _erlang(term) -> str:
    """A term as Erlang source text, to hand to erl."""
    if isinstance(term, Atom):
        return str(term)
    if isinstance(term, bool):
        raise AssertionError("no booleans here")
    if isinstance(term, int):
        return str(term)
    if isinstance(term, float):
        return repr(term) if "e" not in repr(term) and "." in repr(term) else f"{term:.17e}"
    if isinstance(term, bytes):
        return "<<" + ",".join(str(b) for b in term) + ">>"
    if isinstance(term, list):
        return "[" + ",".join(_erlang(t) for t in term) + "]"
    return "{" + ",".join(_erlang(t) for t in term) + "}"


@pytest.mark.skipif(ERL is None, reason="erl (Debian's erlang-base) is not installed: no oracle")
@settings(max_examples=6, deadline=None)  # one erl start per example: many terms in each
@given(st.lists(terms, min_size=20, max_size=60))
def test_what_erlang_prints_reads_back_exactly(values):
    source = "[" + ",".join(_erlang(v) for v in values) + "]"
    program = (
        f"L = {source}, [io:format(\"~tp~n.~n\", [T]) || T <- L], halt()."
    )
    printed = subprocess.run(
        [ERL, "-noshell", "-eval", program], capture_output=True, timeout=60, check=True
    ).stdout.decode("latin-1")
    terms_printed = [t.strip() for t in printed.split("\n.\n") if t.strip()]
    assert [parse_term(t) for t in terms_printed] == [_expected(v) for v in values]


def _expected(term):
    if isinstance(term, list):
        return [_expected(t) for t in term]
    if isinstance(term, tuple):
        return tuple(_expected(t) for t in term)
    return term
