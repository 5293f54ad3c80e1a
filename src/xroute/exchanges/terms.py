"""Message fields as the Erlang terms RabbitMQ holds them, for the types that hash or read them.

An AMQP 0-9-1 table value is ``{Type, Value}`` inside RabbitMQ 3.x (``rabbit_misc:table_lookup``
on the table ``rabbit_binary_parser`` made) and, at the top of a table, the bare value from
3.13 (message containers, ``mc_amqpl:routing_headers``). The type is the value's own when it
is typed (`xroute.core.values`), else the one pika gives it (`xroute.core.values.PIKA`: ``str`` a
longstr, ``bytes`` a binary, an int that fits 32 bits a signedint else a long, ``float`` a
double, ``datetime`` a timestamp, ``Decimal`` a decimal, ``list`` an array, ``dict`` a table,
``None`` void).

Values are already validated (`xroute.core.headers.check_headers`): nesting is walked without
recursion, and a cycle cannot reach here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from xroute.core.values import TypedValue, datetime_seconds, decimal_parts, field_type
from xroute.erlang import UNDEFINED, Atom

_ATOMS: dict[str, Atom] = {}  # one Atom per type name


def _binary(value: str | bytes) -> bytes:
    return value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)


def _scalar(value: Any, kind: str) -> Any:
    """The Erlang value of a scalar of AMQP type ``kind``, as a builtin (never a subclass)."""
    if kind == "longstr" or kind == "binary":
        return _binary(value)
    if kind == "bool":
        return bool(value)
    if kind == "void":
        return UNDEFINED
    if kind == "timestamp":
        return int(value) if isinstance(value, TypedValue) else datetime_seconds(value)
    if kind == "decimal":
        return decimal_parts(value)
    if kind == "double" or kind == "float":
        return float(value)
    return int(value)  # every integer width


def _atom(kind: str) -> Atom:
    atom = _ATOMS.get(kind)
    if atom is None:
        atom = _ATOMS[kind] = Atom(kind)
    return atom


def typed(value: Any) -> tuple[Atom, Any]:
    """``{Type, Value}``: a field value as RabbitMQ 3.x's ``table_lookup`` returns it (arrays
    hold ``{Type, Value}`` pairs, tables ``{Name, Type, Value}`` triples, in their order)."""
    out: list[Any] = [None]
    # (value, the list its term goes in, at which index, its field name inside a table)
    stack: list[tuple[Any, list[Any], int, Any]] = [(value, out, 0, None)]
    while stack:
        item, target, index, name = stack.pop()
        kind = field_type(item)
        if kind == "array" or kind == "table":
            term: Any = [None] * len(item)
            pairs = item.items() if kind == "table" else ((None, x) for x in item)
            stack.extend((x, term, i, k) for i, (k, x) in enumerate(pairs))
        else:
            term = _scalar(item, kind)
        atom = _atom(kind)
        target[index] = (atom, term) if name is None else (_binary(name), atom, term)
    return out[0]


def table(headers: dict[str, Any]) -> list[tuple[bytes, Atom, Any]]:
    """An AMQP table as RabbitMQ 3.x holds it: ``[{Name, Type, Value}]``."""
    return typed(headers)[1]


def plain(value: Any) -> Any:
    """A top-level header value as RabbitMQ 3.13 and later route on it
    (``mc_amqpl:routing_headers``): the value without its type (a longstr and a binary are
    the same binary, void is ``undefined``), a timestamp in milliseconds
    (``routing_value(timestamp, V) -> V * 1000``); arrays and tables keep their types."""
    kind, term = typed(value)
    return term * 1000 if kind == "timestamp" else term


def binary_or_undefined(value: Any) -> Any:
    """A string property (``message_id``...) as a binary; ``undefined`` when absent."""
    if value is None:
        return UNDEFINED
    if isinstance(value, (str, bytes, bytearray)):
        return _binary(value)
    return _binary(str(value))


def timestamp_seconds(value: Any) -> int | None:
    """The ``timestamp`` property in seconds (an int, or a datetime), None when absent."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return datetime_seconds(value)
    return int(value)


def routing_keys(keys: list[str]) -> list[bytes]:
    """The message's routing keys (the key, then CC, then BCC) as RabbitMQ's list of binaries."""
    return [_binary(key) for key in keys]
