"""Message headers and binding arguments: validation, and the typed equality that the headers
exchange uses, measured against RabbitMQ (docs/semantics.md).

A value has the AMQP type it travels as (`xroute.core.values`): an explicit typed value
(``short(1)``, ``binary(b"x")``...) says it, a plain Python value has the type pika gives it
(`xroute.core.values.PIKA`: ``str`` a longstr, ``bytes`` a binary, ``int`` a signed int or a long,
``float`` a double, ``datetime`` a timestamp, ``Decimal`` a decimal, ``list`` an array,
``dict`` a table, ``None`` void). `canonical` turns a value into a hashable form that is equal
exactly when RabbitMQ's comparison (``==`` on its terms) is:

- at the top of a table RabbitMQ compares the values alone: integers of any width are equal, a
  timestamp equals the integer of its seconds (of its milliseconds for a message's header from
  RabbitMQ 3.13), a longstr and a binary holding the same bytes are equal, a float32 equals
  the double of its value; a float never equals an integer (RabbitMQ 3.13 and later), a
  decimal only a decimal of the same scale and digits (``1.0`` is not ``1``);
- an empty table equals an empty array at the top, and only there;
- inside arrays and tables each element is a ``{Type, Value}`` pair, so the type counts too:
  ``[short(1)]`` is not ``[1]`` (a signed int), ``[b"abc"]`` (binary) is not ``["abc"]``;
  nested tables compare field by field in their order.

`typed_canonical` keeps the type at the top too: two binding argument tables are the same
exactly when `frozen_arguments` (RabbitMQ compares the ``[{Name, Type, Value}]`` lists) are.

Nesting has no limit of its own, as in RabbitMQ (a frame holds tens of thousands of levels):
containers are walked without recursion, within `MAX_FIELDS` fields a value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from xroute.core.errors import InvalidFieldValue, InvalidHeaders
from xroute.core.errors import short_repr as _short
from xroute.core.keys import MAX_KEY_BYTES
from xroute.core.values import (
    TypedValue,
    datetime_seconds,
    decimal_parts,
    field_type,
    longstr,
    timestamp,
)

Canonical = tuple
VOID: Canonical = ("void",)
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1  # an AMQP long-long
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_TIMESTAMP_MAX = 2**64 - 1  # an AMQP timestamp: unsigned 64-bit seconds since the epoch
# A content header fits in one frame (frame_max, 128 KiB by default) and every value takes at
# least a byte: no value of a real message holds more fields than this.
MAX_FIELDS = 131_072


def canonical(value: Any, name: str = "?", timestamp_unit: int = 1) -> Canonical:
    """A hashable form of a top-level field value, equal exactly when RabbitMQ's comparison is.

    A timestamp is its seconds times ``timestamp_unit``: 1000 for a message's header in
    RabbitMQ 3.13 and later, which route a top-level timestamp as its milliseconds
    (`xroute.core.profiles.Profile.timestamp_header_millis`).

    Raises `InvalidHeaders`, naming the value, for what an AMQP table cannot carry or RabbitMQ
    refuses: an unsupported type, an integer beyond 64 bits, NaN or infinity, a timestamp before
    1970, a decimal beyond its scale octet or 32-bit digits, more than `MAX_FIELDS` fields, or
    a structure that contains itself.
    """
    kind = type(value)
    # Plain scalars first, without the walk's bookkeeping: the hot path of every headers route.
    if kind is str:
        return ("str", value)
    if kind is bool:
        return ("bool", value)
    if kind is int:
        return ("int", _checked_int(value, name))
    if kind is float and math.isfinite(value):
        return ("float", value)
    if value is None:
        return VOID
    if kind is list or kind is tuple or isinstance(value, Mapping):
        if not value and kind is not list and kind is not tuple:
            # At the top RabbitMQ compares the bare terms, an empty list for both: {} equals
            # []. Inside arrays and tables their types differ, so they do not.
            return ("array", ())
        return _container(value, name)
    if isinstance(value, TypedValue):
        if isinstance(value, int):  # every integer width, and timestamp: its seconds
            if type(value) is timestamp:
                return ("int", int(value) * timestamp_unit)
            return ("int", int(value))
        if isinstance(value, float):
            return ("float", float(value))
        return _text_or_bytes(bytes(value))
    if kind is bytes or kind is bytearray:
        # At the top a binary equals a longstr of the same bytes (both Erlang binaries).
        return _text_or_bytes(bytes(value))
    if isinstance(value, datetime):  # pandas' Timestamp too
        return ("int", _timestamp(value, name) * timestamp_unit)
    if kind is float:
        raise _not_finite(value, name)
    if kind is Decimal:
        return _decimal(value, name)
    raise _unsupported(value, name)


def typed_canonical(value: Any, name: Any = "?") -> Canonical:
    """A hashable form of a field value with its AMQP type at the top as well, equal exactly
    when RabbitMQ's ``{Type, Value}`` terms are: ``short(1)`` is not ``1``, ``b"a"`` (binary)
    is not ``"a"``, ``{}`` is not ``[]``. `InvalidHeaders` as for `canonical`."""
    if type(value) is list or type(value) is tuple or isinstance(value, Mapping):
        return _container(value, name)
    return _element(value, name)


def frozen_arguments(arguments: Mapping[str, Any]) -> tuple:
    """A binding's arguments as part of its identity: the names sorted, each value with its
    AMQP type (`typed_canonical`), as RabbitMQ compares two bindings' argument tables.
    `InvalidHeaders` for a name or value no table carries."""
    return tuple(
        sorted((check_field_name(name), typed_canonical(value, name))
               for name, value in arguments.items())
    )


def _text_or_bytes(raw: bytes) -> Canonical:
    try:
        return ("str", raw.decode("utf-8"))
    except UnicodeDecodeError:
        return ("bytes", raw)


def _element(value: Any, name: Any) -> Canonical:
    """An element of an array or table, as RabbitMQ's ``{Type, Value}`` pair."""
    kind = type(value)
    if kind is str:
        return ("longstr", value.encode("utf-8", "surrogateescape"))
    if kind is bool:
        return ("bool", value)
    if kind is int:
        _checked_int(value, name)
        return ("signedint" if _INT32_MIN <= value <= _INT32_MAX else "long", value)
    if kind is float:
        if not math.isfinite(value):
            raise _not_finite(value, name)
        return ("double", value)
    if value is None:
        return VOID
    if isinstance(value, TypedValue):
        builtin = value._builtin
        return (value.amqp_type, builtin(value))
    if kind is bytes or kind is bytearray:
        return ("binary", bytes(value))
    if isinstance(value, datetime):
        return ("timestamp", _timestamp(value, name))
    if kind is Decimal:
        return _decimal(value, name)
    raise _unsupported(value, name)


def _container(value: Any, name: Any) -> Canonical:
    """An array or table: its kind, and its contents flattened in order, each nested
    container marked by its kind and size, each table field preceded by its name. Flat, the
    form is built without recursion, and hashed and compared without it too (a nested tuple
    10,000 deep would overflow the interpreter's stack when hashed)."""
    budget = MAX_FIELDS - len(value)
    on_path = {id(value)}
    flat: list[Any] = []
    stack: list[tuple[Any, int]] = [(_items(value), id(value))]
    while stack:
        items, marker = stack[-1]
        item = next(items, _DONE)
        if item is _DONE:
            stack.pop()
            on_path.discard(marker)
            continue
        field, element = item
        if field is not None:
            flat.append(("=", check_field_name(field)))
        if type(element) is list or type(element) is tuple or isinstance(element, Mapping):
            budget -= len(element)
            if budget < 0:
                raise InvalidHeaders(
                    f"header {name!r}: more than {MAX_FIELDS} fields, more than an AMQP frame "
                    "carries", name, value,
                )
            if id(element) in on_path:
                raise InvalidHeaders(
                    f"header {name!r}: the value contains itself (a cyclic structure)",
                    name, value,
                )
            on_path.add(id(element))
            flat.append(("[", _kind(element), len(element)))
            stack.append((_items(element), id(element)))
            continue
        flat.append(_element(element, name))
    if budget < 0:
        raise InvalidHeaders(
            f"header {name!r}: more than {MAX_FIELDS} fields, more than an AMQP frame carries",
            name, value,
        )
    return (_kind(value), tuple(flat))


_DONE = object()


def _kind(container: Any) -> str:
    return "table" if isinstance(container, Mapping) else "array"


def _items(container: Any) -> Any:
    if isinstance(container, Mapping):
        return iter(container.items())
    return ((None, element) for element in container)


def _not_finite(value: float, name: Any) -> InvalidHeaders:
    # RabbitMQ closes the connection (541) on a NaN or infinite header.
    return InvalidHeaders(
        f"header {name!r}: {value!r} is not a finite number; RabbitMQ refuses it", name, value
    )


def _unsupported(value: Any, name: Any) -> InvalidHeaders:
    return InvalidHeaders(
        f"header {name!r}: a value of type {type(value).__name__} ({_short(value)}) cannot be "
        "carried in an AMQP table; use str, bytes, int, float, bool, None, datetime, Decimal, "
        "list, dict or a typed value of xroute.core.values",
        name,
        value,
    )


def _checked_int(value: int, name: Any) -> int:
    if not _INT_MIN <= value <= _INT_MAX:
        raise InvalidHeaders(
            f"header {name!r}: integer {_short(value)} does not fit in 64 bits", name, value
        )
    return value


def _timestamp(value: datetime, name: Any) -> int:
    # As the clients encode it: a naive datetime is UTC, and the fraction of a second is dropped.
    seconds = datetime_seconds(value)
    if not 0 <= seconds <= _TIMESTAMP_MAX:
        raise InvalidHeaders(
            f"header {name!r}: timestamp {value.isoformat()} is before 1970; an AMQP timestamp "
            "is unsigned seconds since the epoch",
            name,
            value,
        )
    return seconds


def _decimal(value: Decimal, name: Any) -> Canonical:
    # RabbitMQ compares scale and digits: 1.5, 1.50 and 1 are three different values.
    try:
        scale, digits = decimal_parts(value)
    except InvalidFieldValue as error:
        raise InvalidHeaders(f"header {name!r}: {error}", name, value) from None
    return ("decimal", scale, digits)


def check_field_name(name: Any) -> str:
    """Return a table field name if it is text of at most 255 bytes, else `InvalidHeaders`."""
    if not isinstance(name, str):
        raise InvalidHeaders(f"header name {_short(name)} is not text", name)
    if len(name.encode("utf-8", "replace")) > MAX_KEY_BYTES:
        raise InvalidHeaders(f"header name {name[:40]!r}... is longer than 255 bytes", name)
    return name


def check_headers(headers: Any) -> dict[str, Any]:
    """Validate a message's headers (``None`` is an empty table) and return them as a dict."""
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise InvalidHeaders(
            f"headers must be a dict, got {type(headers).__name__} ({_short(headers)})",
            None,
            headers,
        )
    for name, value in headers.items():
        canonical(value, check_field_name(name))
    return dict(headers)


def sender_selected_keys(headers: Mapping[str, Any], name: str) -> list[str]:
    """The routing keys in a ``CC`` or ``BCC`` header, as RabbitMQ reads them
    (``rabbit_basic:header_routes``).

    The header must be an array (else `InvalidHeaders`, as RabbitMQ refuses the message with
    406, void included); only its longstr elements are keys, of any length (a ``str``, or a
    `xroute.core.values.longstr`, whose bytes that are not UTF-8 are kept as surrogate escapes);
    elements of every other type, binary (``bytes``) included, are skipped.
    """
    if name not in headers:
        return []
    keys = headers[name]
    if type(keys) is not list and type(keys) is not tuple:
        kind = _field_type_name(keys)
        raise InvalidHeaders(
            f"header {name!r} must be an array of routing keys, got {kind} "
            f"({_short(keys)})",
            name,
            keys,
            erlang_reason=f'{{unacceptable_type_in_header,"{name}",{kind}}}',
        )
    out = []
    for key in keys:
        if type(key) is str:
            out.append(key)
        elif type(key) is longstr:
            out.append(bytes(key).decode("utf-8", "surrogateescape"))
    return out


def _field_type_name(value: Any) -> str:
    try:
        return field_type(value)
    except InvalidHeaders:
        return type(value).__name__
