"""x-jms-topic (rabbitmq_jms_topic_exchange): each binding's ``rjms_erlang_selector`` argument
is an Erlang term, written as text by the JMS client from an SQL selector; a message goes to
the bindings whose selector is true over its headers, evaluated as ``sjx_evaluator`` does.

- Three-valued logic: an absent header is ``undefined``; ``NOT``/``AND``/``OR`` as SQL; a
  binding matches only when the result is ``true``.
- Comparisons use Erlang's term order (a number < an atom < a binary: a string is greater
  than any number); ``=`` is Erlang's ``==`` (``1 = 1.0``); ``IN`` is exact (``=:=``).
- ``LIKE`` becomes a byte regular expression (``_`` one byte, ``%`` any bytes, neither
  across a newline) with an optional escape character, and must match the whole value.
- The headers read are strings, integers, floats and booleans. RabbitMQ crashes on an
  identifier whose header has another type (a timestamp, a table...), on arithmetic or
  ``LIKE`` over the wrong types, and on a float that overflows: it closes the publisher's
  connection and the message reaches no queue. xroute raises `RoutingFailed` for them.
- A selector that does not parse (or a binding without one) fails the binding (RabbitMQ:
  541, the connection closes): `SelectorError`.
- Bindings are keyed by (binding key, destination): a second binding with the same pair
  replaces the first one's selector, and removing either leaves the other matching nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from xroute.core.errors import RoutingFailed, SelectorError
from xroute.core.keys import check_pattern
from xroute.core.model import Binding
from xroute.erlang import UNDEFINED, Atom, TermSyntaxError, parse_term, term_key
from xroute.exchanges.terms import typed

SELECTOR = "rjms_erlang_selector"
TRUE, FALSE, ERROR = Atom("true"), Atom("false"), Atom("error")
_READ_TYPES = ("longstr", "signedint", "float", "double", "byte", "short", "long", "bool")


class _Crash(Exception):
    """Where sjx_evaluator itself fails (badarith, function_clause, case_clause...)."""


def compile_selector(text: Any) -> Any:
    """The selector term of a binding's ``rjms_erlang_selector`` text; `SelectorError` when
    RabbitMQ would fail the binding."""
    if isinstance(text, (bytes, bytearray)):
        raw = bytes(text)
    elif isinstance(text, str):
        raw = text.encode("utf-8")
    else:
        raise SelectorError(
            f"x-jms-topic: the binding needs a {SELECTOR} string argument, got {text!r}; "
            "RabbitMQ fails the binding (541)",
            text,
        )
    try:
        # binary_to_list: erl_scan reads the selector's bytes as Latin-1 characters.
        return parse_term(raw.decode("latin-1"))
    except (TermSyntaxError, ValueError, IndexError) as error:
        raise SelectorError(
            f"x-jms-topic: cannot parse selector {text!r} ({error}); RabbitMQ fails the "
            "binding (541)",
            text,
        ) from None


# ------------------------------------------------------------------------- evaluation


def _value(headers: Mapping[str, Any], name: Any) -> Any:
    # lookup_value: the header's value for the types it reads; a crash for any other type.
    # The identifier is a binary; header names are compared as their UTF-8 bytes.
    for header, value in headers.items():
        if header.encode("utf-8") == name:
            kind, found = typed(value)
            if kind not in _READ_TYPES:
                raise _Crash(
                    f"header {header!r} has type {kind}, which the selector evaluator cannot read"
                )
            return (TRUE if found else FALSE) if kind == "bool" else found
    return UNDEFINED


def _number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _checked(value: Any) -> Any:
    if type(value) is float and not math.isfinite(value):
        raise _Crash("float overflow")
    return value


def _equal(left: Any, right: Any) -> bool:
    if _number(left) and _number(right):
        return left == right
    return term_key(left) == term_key(right)


def _exactly(left: Any, right: Any) -> bool:
    return type(left) is type(right) and term_key(left) == term_key(right)


def _atom(flag: bool) -> Atom:
    return TRUE if flag else FALSE


def _not3(value: Any) -> Any:
    if _is(value, TRUE):
        return FALSE
    return TRUE if _is(value, FALSE) else UNDEFINED


def _is(value: Any, atom: Atom) -> bool:
    return type(value) is Atom and value == atom


def _and3(left: Any, right: Any) -> Any:
    if _is(left, TRUE) and _is(right, TRUE):
        return TRUE
    if _is(left, FALSE) or _is(right, FALSE):
        return FALSE
    return UNDEFINED


def _or3(left: Any, right: Any) -> Any:
    if _is(left, FALSE) and _is(right, FALSE):
        return FALSE
    if _is(left, TRUE) or _is(right, TRUE):
        return TRUE
    return UNDEFINED


def _unary(op: Any, value: Any) -> Any:
    if _is(value, UNDEFINED):
        return UNDEFINED
    if _is(op, Atom("-")) or _is(op, Atom("+")):
        if not _number(value):
            raise _Crash(f"{op}{value!r}: not a number")
        return -value if op == "-" else value
    return ERROR


def _arith(op: str, left: Any, right: Any) -> Any:
    if not (_number(left) and _number(right)):
        raise _Crash(f"{left!r} {op} {right!r}: not numbers")
    if op == "+":
        return _checked(left + right)
    if op == "-":
        return _checked(left - right)
    return _checked(left * right)


def _divide(left: Any, right: Any) -> Any:
    if not _equal(right, 0):
        if not (_number(left) and _number(right)):
            raise _Crash(f"{left!r} / {right!r}: not numbers")
        return _checked(float(left) / float(right))
    if term_key(left) > term_key(0):
        return Atom("plus_infinity")
    if term_key(left) < term_key(0):
        return Atom("minus_infinity")
    return Atom("nan")


def _binary(op: Any, left: Any, right: Any) -> Any:
    if _is(left, UNDEFINED) or _is(right, UNDEFINED):
        return UNDEFINED
    name = str(op) if type(op) is Atom else None
    if name == "=":
        return _atom(_equal(left, right))
    if name == "<>":
        return _atom(not _equal(left, right))
    if name in (">", "<", ">=", "<="):
        lk, rk = term_key(left), term_key(right)
        return _atom({">": lk > rk, "<": lk < rk, ">=": lk >= rk, "<=": lk <= rk}[name])
    if name in ("in", "not_in"):
        if not isinstance(right, list):
            raise _Crash(f"IN over {right!r}, not a list")
        found = any(_exactly(left, item) for item in right)
        return _atom(found if name == "in" else not found)
    if name in ("+", "-", "*"):
        return _arith(name, left, right)
    if name == "/":
        return _divide(left, right)
    return ERROR


def _like(value: Any, pattern: Any, escape: Any) -> Any:
    if _is(value, UNDEFINED):
        return UNDEFINED
    if not isinstance(pattern, (bytes, bytearray)):
        raise _Crash(f"LIKE pattern {pattern!r} is not a string")
    if isinstance(escape, (bytes, bytearray)) and len(escape) == 1:
        esc: int | None = escape[0]
    elif _is(escape, Atom("no_escape")):
        esc = None
    else:
        raise _Crash(f"LIKE escape {escape!r} is not one character")
    if not isinstance(value, (bytes, bytearray)):
        raise _Crash(f"LIKE over {value!r}, not a string")
    regex = _like_regex(bytes(pattern), esc)
    found = regex.match(value)
    return _atom(found is not None and found.end() == len(value))


def _like_regex(pattern: bytes, esc: int | None) -> re.Pattern[bytes]:
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if esc is not None and ch == esc and i + 1 < len(pattern):
            out.append(re.escape(bytes([pattern[i + 1]])))
            i += 2
            continue
        if ch == ord("_"):
            out.append(b".")
        elif ch == ord("%"):
            out.append(b".*")
        else:
            out.append(re.escape(bytes([ch])))
        i += 1
    try:
        return re.compile(b"".join(out))
    except re.error as error:
        raise _Crash(f"LIKE pattern does not compile: {error}") from None


def _lookup(term: Any, headers: Mapping[str, Any]) -> Any:
    # val_of: an identifier's header value; any other term is its own value.
    if type(term) is tuple and len(term) == 2 and _is(term[0], Atom("ident")):
        return _value(headers, term[1])
    return term


def evaluate(term: Any, headers: Mapping[str, Any]) -> Any:
    """``sjx_evaluator:evaluate(Term, Headers)``; `_Crash` where it crashes."""
    if type(term) is not tuple or not term:
        return term
    op, size = term[0], len(term)
    if size == 2:
        if op == "not":
            return _not3(evaluate(term[1], headers))
        if op == "ident":
            return _value(headers, term[1])
        if op == "is_null":
            return _atom(_is(_lookup(term[1], headers), UNDEFINED))
        if op == "not_null":
            return _atom(not _is(_lookup(term[1], headers), UNDEFINED))
        return _unary(op, evaluate(term[1], headers))
    if size == 3:
        if op == "and":
            return _and3(evaluate(term[1], headers), evaluate(term[2], headers))
        if op == "or":
            return _or3(evaluate(term[1], headers), evaluate(term[2], headers))
        bound = term[2]
        if type(bound) is tuple and len(bound) == 3 and _is(bound[0], Atom("range")):
            return evaluate((op, term[1], bound[1], bound[2]), headers)
        return _binary(op, evaluate(term[1], headers), evaluate(term[2], headers))
    if size == 4:
        if op in ("like", "not_like"):
            found = _like(_lookup(term[1], headers), term[2], term[3])
            return found if op == "like" else _not3(found)
        if op in ("between", "not_between"):
            value, low, high = (evaluate(t, headers) for t in term[1:])
            if any(_is(v, UNDEFINED) for v in (value, low, high)):
                found: Any = UNDEFINED
            else:
                found = _atom(term_key(low) <= term_key(value) <= term_key(high))
            return found if op == "between" else _not3(found)
    return term


def selector_matches(term: Any, headers: Mapping[str, Any], where: str = "") -> bool:
    """Whether a compiled selector is true for ``headers``; `RoutingFailed` where RabbitMQ's
    evaluator crashes."""
    try:
        return _is(evaluate(term, headers), TRUE)
    except (_Crash, ArithmeticError, RecursionError) as error:
        raise RoutingFailed(
            f"x-jms-topic{where}: evaluating the selector fails ({error}); RabbitMQ closes the "
            "publisher's connection and the message reaches no queue",
            where,
        ) from None


class JmsTopicExchange:
    """The bindings of an x-jms-topic exchange and their compiled selectors."""

    type_name = "x-jms-topic"

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._bindings: set[Binding] = set()
        self._selectors: dict[tuple[str, Any], Any] = {}

    def validate_binding(self, routing_key: str, arguments: Mapping[str, Any]) -> None:
        check_pattern(routing_key)
        compile_selector(arguments.get(SELECTOR))

    # selectors by (key, `Binding.target`): a queue's name or a `Destination`, read without
    # making a `Destination` a binding a route
    def bind(self, binding: Binding) -> None:
        self._bindings.add(binding)
        selector = compile_selector(binding.arguments.get(SELECTOR))
        self._selectors[(binding.routing_key, binding.target)] = selector

    def unbind(self, binding: Binding) -> None:
        self._bindings.discard(binding)
        self._selectors.pop((binding.routing_key, binding.target), None)

    def route(self, keys: Sequence[str], headers: Mapping[str, Any]) -> Iterable[Binding]:
        selectors = self._selectors
        where = f" exchange {self.name!r}"
        matched = []
        for binding in self._bindings:
            selector = selectors.get((binding.routing_key, binding.target))
            if selector is not None and selector_matches(selector, headers, where):
                matched.append(binding)
        return matched


__all__ = ["JmsTopicExchange", "compile_selector", "evaluate", "selector_matches"]
