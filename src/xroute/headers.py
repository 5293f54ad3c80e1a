"""Message headers and binding arguments as Python values: validation, and the typed equality
that the headers exchange uses, measured against RabbitMQ (docs/semantics.md).

A header table arrives as an AMQP client decodes it (pika, py-amqp): longstr as ``str`` (or
``bytes`` when it is not UTF-8), binary as ``bytes``, timestamp as ``datetime``, decimal as
``Decimal``, array as ``list``, table as ``dict``. `canonical` turns each value into a hashable
form that is equal exactly when RabbitMQ's comparison is:

- at the top of a table, RabbitMQ compares values, not types: integers of any width are equal,
  a timestamp equals the integer of its seconds, ``str`` and ``bytes`` holding the same UTF-8
  are equal; a float never equals an integer (RabbitMQ 4.x), a decimal only a decimal of the
  same scale and digits (``1.0`` is not ``1``);
- an empty table equals an empty array at the top, and only there;
- inside arrays and tables RabbitMQ also compares the AMQP type: a timestamp is no longer an
  integer; nested tables compare field by field in order. The integer and float widths and
  longstr/binary, which Python values do not keep, are compared by value (the one known
  difference, docs/semantics.md).
"""

from __future__ import annotations

import calendar
import math
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from xroute.errors import InvalidHeaders
from xroute.errors import short_repr as _short
from xroute.keys import MAX_KEY_BYTES

Canonical = tuple
VOID: Canonical = ("void",)
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1  # an AMQP long-long
_TIMESTAMP_MAX = 2**64 - 1  # an AMQP timestamp: unsigned 64-bit seconds since the epoch
_DECIMAL_SCALE_MAX = 255  # an AMQP decimal: an octet of scale ...
_DECIMAL_MIN, _DECIMAL_MAX = -(2**31), 2**31 - 1  # ... and a signed 32-bit unscaled value
# Arrays and tables may nest, and RabbitMQ sets no depth of its own; no real header comes near
# this, and it keeps validation far below Python's recursion limit (Spark workers included).
MAX_NESTING = 32
# A content header fits in one frame (frame_max, 128 KiB by default) and every value takes at
# least a byte: no value of a real message holds more fields than this.
MAX_FIELDS = 131_072


class _Walk:
    """One validation of one top-level value: its name (for errors), the fields left in its
    budget, and the containers on the current path (to name a cycle)."""

    __slots__ = ("name", "budget", "path")

    def __init__(self, name: Any) -> None:
        self.name = name
        self.budget = MAX_FIELDS
        self.path: set[int] = set()


def canonical(value: Any, name: str = "?") -> Canonical:
    """A hashable form of a top-level field value, equal exactly when RabbitMQ's comparison is.

    Raises `InvalidHeaders`, naming the value, for what an AMQP table cannot carry or RabbitMQ
    refuses: an unsupported type, an integer beyond 64 bits, NaN or infinity, a timestamp before
    1970, a decimal beyond its scale octet or 32-bit digits, nesting deeper than `MAX_NESTING`,
    more than `MAX_FIELDS` fields, or a structure that contains itself.
    """
    kind = type(value)
    # Scalars first, without the walk's bookkeeping: the hot path of every headers route.
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
    return _value(value, _Walk(name), 0)


def _value(value: Any, walk: _Walk, depth: int) -> Canonical:
    kind = type(value)
    if kind is str:
        return ("str", value)
    if kind is bool:
        return ("bool", value)
    if kind is int:
        return ("int", _checked_int(value, walk.name))
    if kind is float:
        if not math.isfinite(value):
            # RabbitMQ closes the connection (541) on a NaN or infinite header.
            raise InvalidHeaders(
                f"header {walk.name!r}: {value!r} is not a finite number; RabbitMQ refuses it",
                walk.name,
                value,
            )
        return ("float", value)
    if value is None:
        return VOID
    if kind is bytes or kind is bytearray:
        try:
            return ("str", bytes(value).decode("utf-8"))
        except UnicodeDecodeError:
            return ("bytes", bytes(value))
    if isinstance(value, datetime):  # pandas' Timestamp too
        # Inside arrays and tables the type counts: a timestamp is not an integer there.
        seconds = _timestamp(value, walk.name)
        return ("int", seconds) if depth == 0 else ("timestamp", seconds)
    if kind is Decimal:
        return _decimal(value, walk.name)
    if kind is list or kind is tuple or isinstance(value, Mapping):
        return _container(value, walk, depth)
    raise InvalidHeaders(
        f"header {walk.name!r}: a value of type {kind.__name__} ({_short(value)}) cannot be "
        "carried in an AMQP table; use str, bytes, int, float, bool, None, datetime, Decimal, "
        "list or dict",
        walk.name,
        value,
    )


def _container(value: Any, walk: _Walk, depth: int) -> Canonical:
    if depth >= MAX_NESTING:
        raise InvalidHeaders(
            f"header {walk.name!r}: arrays and tables nest deeper than {MAX_NESTING} levels",
            walk.name,
            value,
        )
    walk.budget -= len(value)
    if walk.budget < 0:
        raise InvalidHeaders(
            f"header {walk.name!r}: more than {MAX_FIELDS} fields, more than an AMQP frame "
            "carries",
            walk.name,
            value,
        )
    marker = id(value)
    if marker in walk.path:
        raise InvalidHeaders(
            f"header {walk.name!r}: the value contains itself (a cyclic structure)",
            walk.name,
            value,
        )
    walk.path.add(marker)
    try:
        if isinstance(value, Mapping):
            if not value and depth == 0:
                # At the top RabbitMQ compares the bare terms, an empty list for both: {} equals
                # []. Inside arrays and tables their types differ, so they do not.
                return ("array", ())
            # Nested tables compare field by field in their order, as RabbitMQ's do.
            return (
                "table",
                tuple(
                    (check_field_name(k), _value(v, walk, depth + 1)) for k, v in value.items()
                ),
            )
        return ("array", tuple(_value(item, walk, depth + 1) for item in value))
    finally:
        walk.path.discard(marker)


def _checked_int(value: int, name: Any) -> int:
    if not _INT_MIN <= value <= _INT_MAX:
        raise InvalidHeaders(
            f"header {name!r}: integer {_short(value)} does not fit in 64 bits", name, value
        )
    return value


def _timestamp(value: datetime, name: Any) -> int:
    # As the clients encode it: a naive datetime is UTC, and the fraction of a second is dropped.
    seconds = calendar.timegm(value.utctimetuple())
    if not 0 <= seconds <= _TIMESTAMP_MAX:
        raise InvalidHeaders(
            f"header {name!r}: timestamp {value.isoformat()} is before 1970; an AMQP timestamp "
            "is unsigned seconds since the epoch",
            name,
            value,
        )
    return seconds


def _decimal(value: Decimal, name: Any) -> Canonical:
    # An AMQP decimal is (scale, unscaled): 1.50 is (2, 150); RabbitMQ compares both, so 1.5,
    # 1.50 and 1 are three different values. A positive exponent (1E+2) is sent at scale 0.
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise InvalidHeaders(
            f"header {name!r}: decimal {value} is not a finite number", name, value
        )
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    scale = -exponent
    if scale < 0:
        unscaled, scale = unscaled * 10 ** (-scale), 0
    if scale > _DECIMAL_SCALE_MAX or not _DECIMAL_MIN <= unscaled <= _DECIMAL_MAX:
        raise InvalidHeaders(
            f"header {name!r}: decimal {_short(value)} does not fit an AMQP decimal (a scale of "
            f"at most {_DECIMAL_SCALE_MAX} and 32-bit digits)",
            name,
            value,
        )
    return ("decimal", scale, unscaled)


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
    """The routing keys in a ``CC`` or ``BCC`` header, as RabbitMQ reads them.

    The header must be an array (else `InvalidHeaders`, as RabbitMQ refuses the message); only
    its text (longstr) elements are keys, of any length; other elements are skipped. A ``bytes``
    element that is UTF-8 is binary and skipped; one that is not UTF-8 is a longstr a client
    could not decode: it is a key, its bytes kept as surrogate escapes (matching only
    wildcards, and no text binding key).
    """
    keys = headers.get(name)
    if keys is None and name not in headers:
        return []
    if not isinstance(keys, (list, tuple)):
        raise InvalidHeaders(
            f"header {name!r} must be an array of routing keys, got {type(keys).__name__} "
            f"({_short(keys)})",
            name,
            keys,
        )
    out = []
    for key in keys:
        if type(key) is str:
            out.append(key)
        elif type(key) is bytes or type(key) is bytearray:
            try:
                bytes(key).decode("utf-8")
            except UnicodeDecodeError:
                out.append(bytes(key).decode("utf-8", "surrogateescape"))
    return out
