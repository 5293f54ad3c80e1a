"""AMQP values as RabbitMQ prints them in Erlang term text (`xroute.erlang.terms`): the
tracing plugin's ``text`` log format (routing keys, properties) and the event exchange's
binding arguments (``{<<"x-match">>,longstr,<<"all">>}``), each a ``{Name, Type, Value}``."""

from __future__ import annotations

from typing import Any

from xroute.erlang import terms
from xroute.errors import TraceFormatError


def parse_term(text: str) -> Any:
    """One term as RabbitMQ prints it (no full stop needed), `TraceFormatError` if it is not.

    Give text decoded as Latin-1 (one character a byte), as RabbitMQ writes a binary's UTF-8
    bytes as they are: a binary then holds exactly the bytes between its quotes."""
    try:
        return terms.parse_term(text, full_stop=False)
    except terms.TermSyntaxError as error:
        raise TraceFormatError(f"not Erlang term text ({error}): {text[:80]!r}") from None


def typed_value(kind: Any, value: Any) -> Any:
    """The Python value of one AMQP field as RabbitMQ's ``{Type, Value}`` pair holds it
    (``longstr`` binaries become `str` when they are UTF-8, `bytes` otherwise)."""
    kind = str(kind)
    if kind in ("longstr", "shortstr", "binary"):
        if kind != "binary":
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError:
                return bytes(value)
        return bytes(value)
    if kind == "bool":
        return value == "true"
    if kind == "void":
        return None
    if kind == "table":
        return typed_table(value)
    if kind == "array":
        return [typed_value(k, v) for k, v in value]
    if kind in ("double", "float"):
        return float(value)
    if kind == "decimal":
        from decimal import Decimal

        scale, digits = value
        return Decimal(digits).scaleb(-scale)
    if kind == "timestamp":
        from datetime import datetime, timezone

        return datetime.fromtimestamp(value, tz=timezone.utc)
    return int(value)  # signedint, long, short, byte, unsignedbyte, unsignedshort, unsignedint


def typed_table(fields: list[tuple[bytes, Any, Any]]) -> dict[str, Any]:
    """An AMQP table printed by RabbitMQ (``[{<<"name">>,type,value}, ...]``) as a dict."""
    return {name.decode("utf-8"): typed_value(kind, value) for name, kind, value in fields}
