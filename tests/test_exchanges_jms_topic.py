"""x-jms-topic: selectors evaluated as sjx_evaluator does, on fixed cases written from its rules."""

from __future__ import annotations

from datetime import datetime

import pytest

from xroute import RoutingFailed, SelectorError, Topology
from xroute.erlang import parse_term
from xroute.exchanges.jms_topic import selector_matches


def matches(selector: str, headers: dict) -> bool:
    return selector_matches(parse_term(selector + "."), headers)


ID = "{'ident', <<\"%s\">>}"


@pytest.mark.parametrize(
    "selector, headers, expected",
    [
        # comparisons: Erlang's == for '=', term order for the others
        (f"{{'=', {ID % 'n'}, 1}}", {"n": 1.0}, True),
        (f"{{'=', {ID % 'n'}, <<\"1\">>}}", {"n": 1}, False),
        (f"{{'>', {ID % 's'}, 1000}}", {"s": "a"}, True),  # a binary is above any number
        (f"{{'<', {ID % 'b'}, <<\"a\">>}}", {"b": True}, True),  # an atom is below a binary
        (f"{{'<>', {ID % 'n'}, 2}}", {}, False),  # unknown is not true
        # three-valued logic
        (f"{{'not', {{'=', {ID % 'n'}, 1}}}}", {}, False),
        (f"{{'or', {{'=', {ID % 'n'}, 1}}, true}}", {}, True),
        (f"{{'and', {{'=', {ID % 'n'}, 1}}, false}}", {}, False),
        (f"{{'not', {{'and', {{'=', {ID % 'n'}, 1}}, false}}}}", {}, True),
        # IN is exact, BETWEEN in term order, IS NULL on the header
        (f"{{'in', {ID % 'n'}, [1, 2]}}", {"n": 1}, True),
        (f"{{'in', {ID % 'n'}, [1, 2]}}", {"n": 1.0}, False),
        (f"{{'not_in', {ID % 's'}, [<<\"x\">>]}}", {"s": "y"}, True),
        (f"{{'between', {ID % 'n'}, 1, 3}}", {"n": 2.5}, True),
        (f"{{'not_between', {ID % 'n'}, 1, 3}}", {"n": 4}, True),
        (f"{{'is_null', {ID % 'n'}}}", {}, True),
        (f"{{'not_null', {ID % 'n'}}}", {"n": 0}, True),
        # LIKE: whole value, _ one byte, % any, escapes, no match across a newline
        (f"{{'like', {ID % 's'}, <<\"bl_e\">>, no_escape}}", {"s": "blue"}, True),
        (f"{{'like', {ID % 's'}, <<\"bl%\">>, no_escape}}", {"s": "bl\nue"}, False),
        (f"{{'like', {ID % 's'}, <<\"a!%\">>, <<\"!\">>}}", {"s": "a%"}, True),
        (f"{{'like', {ID % 's'}, <<\"a!%\">>, <<\"!\">>}}", {"s": "ab"}, False),
        (f"{{'like', {ID % 's'}, <<\"_\">>, no_escape}}", {"s": "é"}, False),  # two bytes
        (f"{{'like', {ID % 's'}, <<\"a.c\">>, no_escape}}", {"s": "abc"}, False),
        # arithmetic
        (f"{{'=', {{'+', {ID % 'n'}, 1}}, 3}}", {"n": 2}, True),
        (f"{{'>', {{'/', {ID % 'n'}, 0}}, 5}}", {"n": 2}, True),  # plus_infinity, an atom
        (f"{{'=', {{'-', {ID % 'n'}}}, -2}}", {"n": 2}, True),
    ],
)
def test_fixed_cases(selector, headers, expected):
    assert matches(selector, headers) is expected


@pytest.mark.parametrize(
    "selector, headers",
    [
        (f"{{'=', {{'+', {ID % 's'}, 1}}, 3}}", {"s": "x"}),
        (f"{{'like', {ID % 'n'}, <<\"1\">>, no_escape}}", {"n": 1}),
        (f"{{'=', {ID % 't'}, 1}}", {"t": datetime(2020, 1, 1)}),  # a timestamp is not read
        (f"{{'=', {{'*', {ID % 'n'}, 1.0e308}}, 1}}", {"n": 10.0}),  # overflow
    ],
)
def test_where_rabbitmq_crashes_the_message_fails(selector, headers):
    with pytest.raises(RoutingFailed):
        matches(selector, headers)


def test_bindings_and_their_selectors():
    t = Topology()
    t.declare_exchange("j", "x-jms-topic")
    t.declare_queue("q")
    for bad in ({}, {"rjms_erlang_selector": "{'=', x"}, {"rjms_erlang_selector": "true"}):
        with pytest.raises(SelectorError):
            t.bind("j", "q", "k", bad)
    t.bind("j", "q", "k", {"rjms_erlang_selector": f"{{'=', {ID % 'n'}, 1}}."})
    assert t.route("j", "", {"n": 1}) == {"q"}
    # a second binding with the same key and destination replaces the selector...
    t.bind("j", "q", "k", {"rjms_erlang_selector": f"{{'=', {ID % 'n'}, 2}}."})
    assert t.route("j", "", {"n": 1}) == frozenset() and t.route("j", "", {"n": 2}) == {"q"}
    # ...and removing either leaves the other matching nothing
    t.unbind("j", "q", "k", {"rjms_erlang_selector": f"{{'=', {ID % 'n'}, 2}}."})
    assert len(t.bindings("j")) == 1 and t.route("j", "", {"n": 1}) == frozenset()


@pytest.mark.parametrize(
    "sql, headers, expected",
    [
        ("colour = 'blue' AND weight > 2", {"colour": "blue", "weight": 3}, True),
        ("colour = 'blue' AND weight > 2", {"colour": "blue"}, False),
        ("NOT (colour = 'blue') OR weight IS NULL", {"colour": "red", "weight": 1}, True),
        ("n NOT BETWEEN 1 AND 3", {"n": 4}, True),
        ("s LIKE 'a!%' ESCAPE '!'", {"s": "a%"}, True),
        ("s NOT IN ('x', 'it''s')", {"s": "it's"}, False),
        ("-n * 2 + 1 = -5", {"n": 3}, True),
        ("flag = TRUE AND price / 2 >= 1.5", {"flag": True, "price": 3}, True),
    ],
)
def test_sql_selectors_compile_to_the_same_terms(sql, headers, expected):
    from xroute.exchanges.jms_sql import sql_selector

    t = Topology()
    t.declare_exchange("j", "x-jms-topic")
    t.declare_queue("q")
    t.bind("j", "q", "", {"rjms_erlang_selector": sql_selector(sql)})
    assert (t.route("j", "", headers) == {"q"}) is expected


def test_bad_sql_is_named():
    from xroute.exchanges.jms_sql import sql_selector

    for bad in ("colour =", "a NOT = 1", "x IN (1)", "(a = 1", "a = 1 b"):
        with pytest.raises(SelectorError):
            sql_selector(bad)
