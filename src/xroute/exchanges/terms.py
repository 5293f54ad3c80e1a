"""Message fields as the Erlang terms RabbitMQ holds them, for the types that hash them.

An AMQP 0-9-1 table value is ``{Type, Value}`` inside RabbitMQ 3.x (``rabbit_misc:table_lookup``)
and a plain value from 3.13 (message containers). Python values carry no AMQP width, so the
type is the one py-amqp (kombu's client) writes: str and bytes ``longstr``, an int that fits 32
bits ``signedint`` else ``long``, float ``double``, bool ``bool``, None ``void``, datetime
``timestamp``, Decimal ``decimal``, list ``array``, dict ``table``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from xroute.erlang import UNDEFINED, Atom


def _binary(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _seconds(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return int(value.timestamp())


def typed(value: Any) -> tuple[Atom, Any]:
    """``{Type, Value}``: a header value as RabbitMQ 3.x's ``table_lookup`` returns it."""
    if isinstance(value, bool):
        return Atom("bool"), value
    if isinstance(value, int):
        # py-amqp writes -(2**31) itself as a 64-bit long
        return (Atom("signedint") if abs(value) <= 2**31 - 1 else Atom("long")), value
    if isinstance(value, float):
        return Atom("double"), value
    if isinstance(value, (str, bytes, bytearray)):
        return Atom("longstr"), _binary(value)
    if value is None:
        return Atom("void"), UNDEFINED
    if isinstance(value, datetime):
        return Atom("timestamp"), _seconds(value)
    if isinstance(value, Decimal):
        sign, digits, exponent = value.as_tuple()
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        return Atom("decimal"), (-int(exponent), unscaled)
    if isinstance(value, (list, tuple)):
        return Atom("array"), [typed(item) for item in value]
    if isinstance(value, dict):
        return Atom("table"), table(value)
    raise TypeError(f"no AMQP field type for {type(value).__name__}")


def table(headers: dict[str, Any]) -> list[tuple[bytes, Atom, Any]]:
    """An AMQP table as RabbitMQ 3.x holds it: ``[{Name, Type, Value}]``."""
    return [(_binary(name), *typed(value)) for name, value in headers.items()]


def plain(value: Any) -> Any:
    """A header value as RabbitMQ 3.13 and later route on it: the value without its type
    (strings as binaries, a timestamp as its integer); arrays and tables keep their types."""
    return typed(value)[1]


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
        return _seconds(value)
    return int(value)


def routing_keys(keys: list[str]) -> list[bytes]:
    """The message's routing keys (the key, then CC, then BCC) as RabbitMQ's list of binaries."""
    return [_binary(key) for key in keys]
