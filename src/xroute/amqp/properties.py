"""A message's basic properties (the content header's flags and values), both ways.

The headers table keeps its values' AMQP types (`xroute.core.field_table`); short strings that are
not UTF-8 stay surrogate escapes; a timestamp past the year 9999 stays an integer
(`xroute.core.values.timestamp`), which RabbitMQ takes and a `datetime` cannot hold. The attribute
names are pamqp's (``message_type`` for ``type``), which tests of the broker read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from typing import Any

from xroute.core.field_table import decode_table, encode_table
from xroute.core.values import TypedValue, datetime_seconds, timestamp

_u8 = struct.Struct(">B")
_u16 = struct.Struct(">H")
_u64 = struct.Struct(">Q")
_YEAR_9999_END = 253402300799


class MalformedProperties(ValueError):
    """Property bytes that do not parse (RabbitMQ's channel fails on them: 541)."""


@dataclass(slots=True)
class Properties:
    """The 14 basic properties of AMQP 0-9-1, None where absent."""

    content_type: str | None = None
    content_encoding: str | None = None
    headers: dict[str, Any] | None = None
    delivery_mode: int | None = None
    priority: int | None = None
    correlation_id: str | None = None
    reply_to: str | None = None
    expiration: str | None = None
    message_id: str | None = None
    timestamp: datetime | timestamp | None = None
    message_type: str | None = None
    user_id: str | None = None
    app_id: str | None = None
    cluster_id: str | None = None


# Each property in flag order (bit 15 first) and how it travels.
_LAYOUT = [(field.name, _kind) for field, _kind in zip(fields(Properties), (
    "shortstr", "shortstr", "table", "octet", "octet", "shortstr", "shortstr", "shortstr",
    "shortstr", "timestamp", "shortstr", "shortstr", "shortstr", "shortstr",
), strict=True)]


def decode_properties(data: bytes | memoryview) -> Properties:
    """Flags and values as received after a content header's class, weight and body size."""
    view = memoryview(data)
    try:
        flags = word = _u16.unpack_from(view, 0)[0]
        offset = 2
        while word & 1:  # continuation flag words: 0-9-1 defines no property past the 14th
            word = _u16.unpack_from(view, offset)[0]
            offset += 2
        properties = Properties()
        for bit, (name, kind) in zip(range(15, 1, -1), _LAYOUT, strict=True):
            if not flags & (1 << bit):
                continue
            if kind == "shortstr":
                size = view[offset]
                if offset + 1 + size > len(view):
                    raise MalformedProperties(f"property {name} runs past the header frame")
                value: Any = bytes(view[offset + 1 : offset + 1 + size]).decode(
                    "utf-8", "surrogateescape"
                )
                offset += 1 + size
            elif kind == "octet":
                value = view[offset]
                offset += 1
            elif kind == "timestamp":
                seconds = _u64.unpack_from(view, offset)[0]
                offset += 8
                value = (
                    datetime.fromtimestamp(seconds, tz=timezone.utc)
                    if seconds <= _YEAR_9999_END
                    else timestamp(seconds)
                )
            else:
                value, offset = decode_table(view, offset)
            setattr(properties, name, value)
    except (IndexError, struct.error):
        raise MalformedProperties("the content header ends inside its properties") from None
    return properties


def encode_properties(properties: Properties) -> bytes:
    """Flags and values, as a content header carries them."""
    flags = 0
    parts = []
    for bit, (name, kind) in zip(range(15, 1, -1), _LAYOUT, strict=True):
        value = getattr(properties, name)
        if value is None:
            continue
        flags |= 1 << bit
        if kind == "shortstr":
            raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
            parts.append(_u8.pack(len(raw)) + raw)
        elif kind == "octet":
            parts.append(_u8.pack(value))
        elif kind == "timestamp":
            seconds = int(value) if isinstance(value, (int, TypedValue)) else datetime_seconds(value)
            parts.append(_u64.pack(seconds))
        else:
            parts.append(encode_table(value))
    return _u16.pack(flags) + b"".join(parts)


def rewrite(data: bytes, changes: dict[str, Any]) -> bytes:
    """``data`` with the properties in ``changes`` set (None: removed), the others as they
    were: the broker changes only headers (BCC stripped, dead-lettering) and expiration."""
    properties = decode_properties(data)
    for name, value in changes.items():
        setattr(properties, name, value)
    return encode_properties(properties)
