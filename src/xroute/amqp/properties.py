"""A message's basic properties read from the bytes it was published with, and rewritten
field by field, so that what the broker does not change reaches consumers byte for byte.

The header table is decoded with its AMQP types (`decode_table`): a ``short`` stays a short,
``binary`` stays binary, and routing sees the values the frame carried. The ``timestamp``
property is its integer seconds (RabbitMQ takes any 64-bit value; a date past the year 9999
is not an error). Short strings are text when they are UTF-8, else their bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from pamqp import decode, encode

# The basic class's properties, in flag order (bit 15 first), with their AMQP types.
FIELDS = (
    ("content_type", "shortstr"),
    ("content_encoding", "shortstr"),
    ("headers", "table"),
    ("delivery_mode", "octet"),
    ("priority", "octet"),
    ("correlation_id", "shortstr"),
    ("reply_to", "shortstr"),
    ("expiration", "shortstr"),
    ("message_id", "shortstr"),
    ("timestamp", "timestamp"),
    ("type", "shortstr"),
    ("user_id", "shortstr"),
    ("app_id", "shortstr"),
    ("cluster_id", "shortstr"),
)
_BIT = {name: 1 << (15 - index) for index, (name, _) in enumerate(FIELDS)}
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


def decode_table(data: bytes, offset: int) -> tuple[dict[str, Any], int]:
    """The field table at ``offset`` (its 32-bit length first) and the offset after it."""
    size = _U32.unpack_from(data, offset)[0]
    _, table = decode.field_table(bytes(data[offset : offset + 4 + size]))
    return table, offset + 4 + size


def encode_table(table: Mapping[str, Any]) -> bytes:
    """A field table, its 32-bit length first (bytes as binary, as pika sends them)."""
    return encode.field_table(_binary(dict(table)))


def _binary(value: Any) -> Any:
    # pamqp writes a bytearray as binary ('x') and knows no bytes.
    if isinstance(value, bytes):
        return bytearray(value)
    if isinstance(value, dict):
        return {k: _binary(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_binary(v) for v in value]
    return value


def spans(data: bytes) -> dict[str, tuple[int, int]]:
    """Where each present property's value lies in ``data`` (flags, then values): name ->
    (start, end). `ValueError` when the bytes end before the flags say."""
    flags = (data[0] << 8) | data[1] if len(data) >= 2 else 0
    offset = 2
    out: dict[str, tuple[int, int]] = {}
    for name, kind in FIELDS:
        if not flags & _BIT[name]:
            continue
        if kind == "shortstr":
            end = offset + 1 + data[offset]
        elif kind == "octet":
            end = offset + 1
        elif kind == "timestamp":
            end = offset + 8
        else:
            end = offset + 4 + _U32.unpack_from(data, offset)[0]
        if end > len(data):
            raise ValueError(f"the content header ends inside property {name!r}")
        out[name] = (offset, end)
        offset = end
    return out


def _value(data: bytes, kind: str, start: int, end: int) -> Any:
    if kind == "shortstr":
        raw = bytes(data[start + 1 : end])
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    if kind == "octet":
        return data[start]
    if kind == "timestamp":
        return _U64.unpack_from(data, start)[0]
    return decode_table(data, start)[0]


def read_properties(data: bytes, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The present properties by name (only ``names`` when given)."""
    kinds = dict(FIELDS)
    return {
        name: _value(data, kinds[name], start, end)
        for name, (start, end) in spans(data).items()
        if names is None or name in names
    }


def rewrite(data: bytes, changes: Mapping[str, Any]) -> bytes:
    """``data`` with the properties in ``changes`` replaced (None: removed); every other
    property keeps its bytes. Only ``headers`` and ``expiration`` are rewritten by the broker
    (BCC stripped, dead-lettering)."""
    where = spans(data)
    flags = 0
    parts: list[bytes] = []
    for name, kind in FIELDS:
        if name in changes:
            value = changes[name]
            if value is None:
                continue
            if kind == "table":
                encoded = encode_table(value)
            elif kind == "shortstr":
                raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
                encoded = bytes((len(raw),)) + raw
            else:
                raise ValueError(f"the broker does not rewrite property {name!r}")
        elif name in where:
            start, end = where[name]
            encoded = bytes(data[start:end])
        else:
            continue
        flags |= _BIT[name]
        parts.append(encoded)
    return struct.pack(">H", flags) + b"".join(parts)
