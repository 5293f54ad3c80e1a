"""AMQP values as RabbitMQ prints them in Erlang term text (`xroute.erlang.terms`): the
tracing plugin's ``text`` log format (routing keys, properties) and the event exchange's
binding arguments (``{<<"x-match">>,longstr,<<"all">>}``), each a ``{Name, Type, Value}``.
Each value keeps its AMQP type (`xroute.core.values`): a short stays a short, a binary a binary."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from xroute.core import values
from xroute.core.errors import TraceFormatError
from xroute.core.field_table import decode_table, decode_value, encode_table, encode_value
from xroute.erlang import terms


def parse_term(text: str) -> Any:
    """One term as RabbitMQ prints it (no full stop needed), `TraceFormatError` if it is not.

    Give text decoded as Latin-1 (one character a byte), as RabbitMQ writes a binary's UTF-8
    bytes as they are: a binary then holds exactly the bytes between its quotes."""
    try:
        return terms.parse_term(text, full_stop=False)
    except terms.TermSyntaxError as error:
        raise TraceFormatError(f"not Erlang term text ({error}): {text[:80]!r}") from None


def _typed(kind: Any, value: Any) -> Any:
    """The explicit typed value of RabbitMQ's ``{Type, Value}`` (`xroute.core.values`)."""
    kind = str(kind)
    if kind in ("longstr", "shortstr"):
        return values.longstr(bytes(value))
    if kind == "binary":
        return values.binary(bytes(value))
    if kind == "bool":
        return value == "true"
    if kind == "void":
        return None
    if kind == "table":
        return {name.decode("utf-8", "surrogateescape"): _typed(k, v) for name, k, v in value}
    if kind == "array":
        return [_typed(k, v) for k, v in value]
    if kind == "decimal":
        scale, digits = value
        return Decimal(digits).scaleb(-scale)
    if kind == "float":  # RabbitMQ's name for the 32-bit float
        return values.float32(float(value))
    try:
        return _CLASSES[kind](value)
    except KeyError:
        raise TraceFormatError(f"unknown AMQP field type {kind!r} in a printed table") from None


def typed_value(kind: Any, value: Any) -> Any:
    """The value of one AMQP field as RabbitMQ's ``{Type, Value}`` pair holds it, with its
    type, in the form `xroute.core.field_table` decodes the same field to (a longstr that is UTF-8
    as ``str``, a short as `xroute.core.values.short`...)."""
    return decode_value(encode_value(_typed(kind, value)))[0]


def typed_table(fields: list[tuple[bytes, Any, Any]]) -> dict[str, Any]:
    """An AMQP table printed by RabbitMQ (``[{<<"name">>,type,value}, ...]``) as a dict of
    typed values (`typed_value`)."""
    table = _typed("table", fields)
    return decode_table(encode_table(table))[0]


_CLASSES = {
    name: getattr(values, name)
    for name in ("byte", "unsignedbyte", "short", "unsignedshort", "signedint", "unsignedint",
                 "long", "double", "timestamp")
}
