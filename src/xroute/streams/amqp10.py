"""AMQP 1.0 messages as RabbitMQ stores them in a stream, decoded with each value's type.

A stream holds every message as AMQP 1.0 sections (header, message annotations, properties,
application properties, data...). A message published with AMQP 0-9-1 into a stream queue
(``rabbit_msg_record:from_amqp091``, 3.10) carries its headers as application properties in
their own types (a short stays a ``short``), its exchange and routing key as the message
annotations ``x-exchange`` and ``x-routing-key``, and the basic properties that AMQP 1.0 lacks
as ``x-basic-*`` annotations and properties.

Values come back as the 0-9-1 field values RabbitMQ turns them into when it reads the message
back (``rabbit_msg_record:to_091``), with `xroute.core.values`' classes: ``ubyte`` is an
`unsignedbyte`, ``float`` a `float32`, ``timestamp`` (milliseconds) a `timestamp` in seconds,
``utf8`` and ``symbol`` a ``str``, ``binary`` ``bytes``; lists, arrays and maps (4.x keeps
nested tables so) are lists and dicts. `rstream`'s own decoder drops these types (every
integer is an ``int``), which is why xroute decodes the bytes itself.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import Any

from xroute.core.errors import XRouteError
from xroute.core.values import (
    byte,
    float32,
    long,
    short,
    timestamp,
    unsignedbyte,
    unsignedint,
    unsignedshort,
)

# Section descriptors (smallulong codes of the AMQP 1.0 message format).
HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS = 0x70, 0x71, 0x72
PROPERTIES, APPLICATION_PROPERTIES = 0x73, 0x74
DATA, AMQP_SEQUENCE, AMQP_VALUE, FOOTER = 0x75, 0x76, 0x77, 0x78
# The fields of the properties section, in order.
PROPERTY_NAMES = (
    "message_id", "user_id", "to", "subject", "reply_to", "correlation_id", "content_type",
    "content_encoding", "absolute_expiry_time", "creation_time", "group_id", "group_sequence",
    "reply_to_group_id",
)


class AMQP10Error(XRouteError, ValueError):
    """Bytes that are not an AMQP 1.0 message (a truncated or foreign entry)."""


@dataclass
class Message10:
    """The sections of one message (absent sections are empty)."""

    annotations: dict[str, Any] = field(default_factory=dict)
    properties: dict[str, Any] = field(default_factory=dict)
    application_properties: dict[str, Any] = field(default_factory=dict)
    body: bytes | None = None
    header: list[Any] | None = None


_U16, _U32, _U64 = struct.Struct(">H"), struct.Struct(">I"), struct.Struct(">Q")
_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_F32, _F64 = struct.Struct(">f"), struct.Struct(">d")

# Fixed-width scalars: code -> (width, how to read the value at an offset).
_FIXED: dict[int, tuple[int, Any]] = {
    0x50: (1, lambda b, i: unsignedbyte(b[i])),
    0x51: (1, lambda b, i: byte(_I8.unpack_from(b, i)[0])),
    0x52: (1, lambda b, i: unsignedint(b[i])),
    0x53: (1, lambda b, i: _ulong(b[i])),
    0x54: (1, lambda b, i: _I8.unpack_from(b, i)[0]),
    0x55: (1, lambda b, i: long(_I8.unpack_from(b, i)[0])),
    0x56: (1, lambda b, i: b[i] != 0),
    0x60: (2, lambda b, i: unsignedshort(_U16.unpack_from(b, i)[0])),
    0x61: (2, lambda b, i: short(_I16.unpack_from(b, i)[0])),
    0x70: (4, lambda b, i: unsignedint(_U32.unpack_from(b, i)[0])),
    0x71: (4, lambda b, i: _I32.unpack_from(b, i)[0]),
    0x72: (4, lambda b, i: float32(_F32.unpack_from(b, i)[0])),
    0x73: (4, lambda b, i: chr(_U32.unpack_from(b, i)[0])),
    0x80: (8, lambda b, i: _ulong(_U64.unpack_from(b, i)[0])),
    0x81: (8, lambda b, i: long(_I64.unpack_from(b, i)[0])),
    0x82: (8, lambda b, i: _F64.unpack_from(b, i)[0]),
    0x83: (8, lambda b, i: _timestamp(_I64.unpack_from(b, i)[0])),
    0x98: (16, lambda b, i: str(uuid.UUID(bytes=bytes(b[i : i + 16])))),
    # Decimals have no exact 0-9-1 counterpart: kept as their raw bytes.
    0x74: (4, lambda b, i: bytes(b[i : i + 4])),
    0x84: (8, lambda b, i: bytes(b[i : i + 8])),
    0x94: (16, lambda b, i: bytes(b[i : i + 16])),
}
_CONSTANTS: dict[int, Any] = {0x40: None, 0x41: True, 0x42: False, 0x43: unsignedint(0), 0x44: long(0), 0x45: []}


def _ulong(value: int) -> Any:
    # 0-9-1 has no unsigned 64 bits; a long holds every ulong RabbitMQ itself writes.
    return long(value) if value < 2**63 else value


def _timestamp(millis: int) -> Any:
    # RabbitMQ hands a timestamp back to 0-9-1 as whole seconds (``V div 1000``).
    seconds = int(millis / 1000)
    return timestamp(seconds) if seconds >= 0 else seconds


def decode_message(data: bytes | memoryview) -> Message10:
    """The sections of one stream entry; `AMQP10Error` when the bytes are not a message."""
    view = memoryview(data)
    message = Message10()
    position, end = 0, len(view)
    body: list[bytes] = []
    try:
        while position < end:
            if view[position] != 0x00:
                raise AMQP10Error(f"a section must be described (byte {position} is {view[position]:#x})")
            descriptor, position = _value(view, position + 1)
            if descriptor == DATA:
                chunk, position = _value(view, position)
                body.append(bytes(chunk))
                continue
            value, position = _value(view, position)
            if descriptor == MESSAGE_ANNOTATIONS:
                message.annotations = _keyed(value)
            elif descriptor == PROPERTIES:
                message.properties = {
                    name: item for name, item in zip(PROPERTY_NAMES, value) if item is not None
                }
            elif descriptor == APPLICATION_PROPERTIES:
                message.application_properties = _keyed(value)
            elif descriptor == HEADER:
                message.header = value
            elif descriptor == AMQP_VALUE:
                body.append(value if isinstance(value, bytes) else str(value).encode())
            elif descriptor == AMQP_SEQUENCE:
                body.append(repr(value).encode())
            # delivery annotations and the footer say nothing about routing: skipped.
    except (IndexError, struct.error) as error:
        raise AMQP10Error(f"truncated AMQP 1.0 message at byte {position}: {error}") from None
    if body:
        message.body = body[0] if len(body) == 1 else b"".join(body)
    return message


def _keyed(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise AMQP10Error(f"an annotations or properties section must be a map, not {type(value).__name__}")
    return {k.decode() if isinstance(k, bytes) else str(k): v for k, v in value.items()}


def _value(view: memoryview, position: int) -> tuple[Any, int]:
    """The value whose constructor is at ``position``, and the position after it."""
    code = view[position]
    position += 1
    if code == 0x00:  # described: the descriptor, then the value (the descriptor is dropped)
        _, position = _value(view, position)
        return _value(view, position)
    fixed = _FIXED.get(code)
    if fixed is not None:
        width, read = fixed
        return read(view, position), position + width
    if code in _CONSTANTS:
        constant = _CONSTANTS[code]
        return (list(constant) if isinstance(constant, list) else constant), position
    if code in (0xA0, 0xA1, 0xA3, 0xB0, 0xB1, 0xB3):
        if code < 0xB0:
            size, position = view[position], position + 1
        else:
            size, position = _U32.unpack_from(view, position)[0], position + 4
        raw = view[position : position + size]
        if len(raw) != size:
            raise AMQP10Error(f"a value of {size} bytes is cut at byte {position}")
        position += size
        if code in (0xA0, 0xB0):
            return bytes(raw), position
        return str(raw, "utf-8"), position
    if code in (0xC0, 0xD0, 0xC1, 0xD1):  # list and map
        if code in (0xC0, 0xC1):
            count, position = view[position + 1], position + 2
        else:
            count, position = _U32.unpack_from(view, position + 4)[0], position + 8
        items = []
        for _ in range(count):
            item, position = _value(view, position)
            items.append(item)
        if code in (0xC0, 0xD0):
            return items, position
        return {_key(items[i]): items[i + 1] for i in range(0, len(items), 2)}, position
    if code in (0xE0, 0xF0):  # array: one constructor for every element
        if code == 0xE0:
            count, position = view[position + 1], position + 2
        else:
            count, position = _U32.unpack_from(view, position + 4)[0], position + 8
        return _array(view, position, count)
    raise AMQP10Error(f"unknown AMQP 1.0 type code {code:#x} at byte {position - 1}")


def _key(key: Any) -> Any:
    return key if isinstance(key, (str, int)) else str(key)


def _array(view: memoryview, position: int, count: int) -> tuple[list[Any], int]:
    constructor = position
    code = view[position]
    if code == 0x00:
        _, after = _value(view, position + 1)
        constructor = after
        code = view[constructor]
    body = constructor + 1
    items = []
    for _ in range(count):
        # Re-read each element as if it had its own constructor byte in front.
        element = bytes([code]) + bytes(view[body : body + _element_size(view, code, body)])
        value, used = _value(memoryview(element), 0)
        items.append(value)
        body += used - 1
    return items, body


def _element_size(view: memoryview, code: int, position: int) -> int:
    fixed = _FIXED.get(code)
    if fixed is not None:
        return fixed[0]
    if code in _CONSTANTS:
        return 0
    if code in (0xA0, 0xA1, 0xA3):
        return 1 + view[position]
    if code in (0xB0, 0xB1, 0xB3):
        return 4 + _U32.unpack_from(view, position)[0]
    if code in (0xC0, 0xC1, 0xE0):
        return 1 + view[position]
    if code in (0xD0, 0xD1, 0xF0):
        return 4 + _U32.unpack_from(view, position)[0]
    raise AMQP10Error(f"unknown AMQP 1.0 array element type {code:#x}")
