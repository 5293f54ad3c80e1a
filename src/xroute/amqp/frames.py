"""Codec glue over pamqp: frame boundaries, method frames, and content passed through as bytes.

pamqp decodes and encodes methods and properties. Two things are done here instead:

- outgoing methods are encoded without pamqp's ``validate()``, whose name patterns are the
  spec's, narrower than what RabbitMQ accepts (a queue named ``"a b"`` is fine on RabbitMQ);
- content headers travel as the bytes received: the broker keeps each message's property
  bytes and sends them back unchanged, decoding them only when routing needs a value.
"""

from __future__ import annotations

import struct
from typing import Any

from pamqp import base, commands, encode

from xroute.core.field_table import decode_table, encode_table

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_HEARTBEAT = 8
FRAME_END = 0xCE
FRAME_END_BYTE = b"\xce"
FRAME_HEADER_SIZE = 7  # type, channel, size
FRAME_OVERHEAD = 8  # the header and the end octet
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
HEARTBEAT_FRAME = struct.pack(">BHI", FRAME_HEARTBEAT, 0, 0) + FRAME_END_BYTE
BASIC_CLASS = 60

# Property flag bits (AMQP 0-9-1 basic properties) whose values the broker itself reads.
FLAG_HEADERS = 1 << 13
FLAG_PRIORITY = 1 << 11
FLAG_EXPIRATION = 1 << 8
FLAG_USER_ID = 1 << 4
FLAGS_READ = FLAG_HEADERS | FLAG_PRIORITY | FLAG_EXPIRATION | FLAG_USER_ID
# ... and those that exchanges route on: correlation_id, message_id, timestamp.
FLAGS_ROUTED_ON = 1 << 10 | 1 << 7 | 1 << 6

_frame_header = struct.Struct(">BHI")
_method_index = struct.Struct(">I")
_content_prefix = struct.Struct(">HHQ")
_header_frame_prefix = struct.Struct(">BHIHHQ")


def decode_method(payload: bytes | memoryview) -> base.Frame:
    """A method frame's payload as a pamqp method, decoded by xroute: short strings that are
    not UTF-8 kept as surrogate escapes (RabbitMQ takes any bytes in a name), tables with
    their values' AMQP types (`xroute.core.field_table`). KeyError for an unknown method index;
    `FieldTableError` or `MalformedFrame` for bytes that do not parse."""
    index = _method_index.unpack_from(payload)[0]
    kind = commands.INDEX_MAPPING[index]
    method = kind.__new__(kind)
    view = memoryview(payload)
    offset = 4
    bits = bit_index = 0
    # RabbitMQ checks that a method's short strings are UTF-8, except on the methods that
    # carry content ("for speed": so a routing key may be any bytes).
    decoders = _DECODERS if index in _CONTENT_METHODS else _CHECKED_DECODERS
    for name in kind.__slots__:
        field_kind = kind.amqp_type(name)
        if field_kind == "bit":
            if bit_index == 0:
                bits = _byte(view, offset)
                offset += 1
            setattr(method, name, bool(bits & (1 << bit_index)))
            bit_index = (bit_index + 1) % 8
            continue
        bit_index = 0
        value, offset = decoders[field_kind](view, offset)
        setattr(method, name, value)
    if offset != len(view):
        raise MalformedFrame(f"{len(view) - offset} bytes after the last field of {kind.name}")
    return method


class MalformedFrame(ValueError):
    """A method frame whose fields do not parse."""


class MalformedUTF8(MalformedFrame):
    """A short string that is not UTF-8 in a method that carries no content (RabbitMQ: 501
    "Malformed UTF-8 in shortstr")."""


def _byte(view: memoryview, offset: int) -> int:
    if offset >= len(view):
        raise MalformedFrame("the method frame ends inside its fields")
    return view[offset]


def _unpack(layout: struct.Struct) -> Any:
    def read(view: memoryview, offset: int) -> tuple[int, int]:
        try:
            return layout.unpack_from(view, offset)[0], offset + layout.size
        except struct.error:
            raise MalformedFrame("the method frame ends inside its fields") from None

    return read


def _decode_shortstr(view: memoryview, offset: int) -> tuple[str, int]:
    size = _byte(view, offset)
    end = offset + 1 + size
    if end > len(view):
        raise MalformedFrame("a short string runs past the end of the method frame")
    return bytes(view[offset + 1 : end]).decode("utf-8", "surrogateescape"), end


def _decode_checked_shortstr(view: memoryview, offset: int) -> tuple[str, int]:
    text, end = _decode_shortstr(view, offset)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise MalformedUTF8("Malformed UTF-8 in shortstr") from None
    return text, end


def _decode_longstr(view: memoryview, offset: int) -> tuple[bytes, int]:
    size, start = _unpack(_u32)(view, offset)
    if start + size > len(view):
        raise MalformedFrame("a long string runs past the end of the method frame")
    return bytes(view[start : start + size]), start + size


_u8 = struct.Struct(">B")
_u16 = struct.Struct(">H")
_u32 = struct.Struct(">I")
_u64 = struct.Struct(">Q")
_DECODERS: dict[str, Any] = {
    "octet": _unpack(_u8),
    "short": _unpack(_u16),
    "long": _unpack(_u32),
    "longlong": _unpack(_u64),
    "shortstr": _decode_shortstr,
    "longstr": _decode_longstr,
    "table": decode_table,
}
_CHECKED_DECODERS = {**_DECODERS, "shortstr": _decode_checked_shortstr}
# basic.publish, basic.return, basic.deliver, basic.get-ok
_CONTENT_METHODS = frozenset((0x003C0028, 0x003C0032, 0x003C003C, 0x003C0047))


def encode_method_payload(method: base.Frame) -> bytes:
    """A method's payload, encoded by xroute: no name validation (the spec's patterns are
    narrower than what RabbitMQ accepts: a queue named ``"a b"`` is fine), names that came in
    as surrogate escapes go out as the bytes they were, tables with their values' types."""
    out = [_method_index.pack(method.index)]
    bits = offset = 0
    in_bits = False
    for name in method.__slots__:
        kind = method.amqp_type(name)
        value = getattr(method, name, 0)
        if kind == "bit":
            if not in_bits:
                bits, offset, in_bits = 0, 0, True
            if value:
                bits |= 1 << offset
            offset += 1
            if offset == 8:
                out.append(bytes((bits,)))
                in_bits = False
            continue
        if in_bits:
            out.append(bytes((bits,)))
            in_bits = False
        if kind == "shortstr":
            out.append(_shortstr(value or ""))
        elif kind == "longstr":
            raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
            out.append(_u32.pack(len(raw or b"")) + (raw or b""))
        elif kind == "table":
            out.append(encode_table(value or {}))
        else:
            out.append(encode.by_type(value, kind))
    if in_bits:
        out.append(bytes((bits,)))
    return b"".join(out)


def method_frame(channel: int, method: base.Frame) -> bytes:
    """One method frame, ready to write."""
    payload = encode_method_payload(method)
    return _frame_header.pack(FRAME_METHOD, channel, len(payload)) + payload + FRAME_END_BYTE


def content_frames(channel: int, properties: bytes, body: bytes, frame_max: int) -> list[bytes]:
    """The header frame (``properties`` as received: flags and values) and the body frames."""
    parts = [
        _header_frame_prefix.pack(
            FRAME_HEADER, channel, 12 + len(properties), BASIC_CLASS, 0, len(body)
        ),
        properties,
        FRAME_END_BYTE,
    ]
    chunk = frame_max - FRAME_OVERHEAD if frame_max else len(body) or 1
    for start in range(0, len(body), chunk):
        piece = body[start : start + chunk]
        parts += [_frame_header.pack(FRAME_BODY, channel, len(piece)), piece, FRAME_END_BYTE]
    return parts


def split_content_header(payload: bytes) -> tuple[int, int, int, bytes]:
    """A content header frame's payload (at least 12 bytes) as (class id, weight, body size,
    property bytes)."""
    class_id, weight, body_size = _content_prefix.unpack_from(payload)
    return class_id, weight, body_size, payload[12:]


def property_flags(properties: bytes) -> int:
    """The first flag word of ``properties`` (the only one AMQP 0-9-1 uses)."""
    return (properties[0] << 8) | properties[1] if len(properties) >= 2 else 0


def decode_auth_table(data: bytes) -> dict[str, Any]:
    """A field table without its length prefix (AMQPLAIN's response) as a dict."""
    return decode_table(struct.pack(">I", len(data)) + data)[0]


def _shortstr(text: str) -> bytes:
    data = text.encode("utf-8", "surrogateescape")
    return bytes((len(data),)) + data


_deliver_prefix = struct.Struct(">BHIHH")
_long_long = struct.Struct(">Q")


def deliver_frame(
    channel: int,
    consumer_tag: str,
    delivery_tag: int,
    redelivered: bool,
    exchange: str,
    routing_key: str,
) -> bytes:
    """basic.deliver, encoded by hand: it is the one method sent per message delivered."""
    args = b"".join(
        (
            _shortstr(consumer_tag),
            _long_long.pack(delivery_tag),
            b"\x01" if redelivered else b"\x00",
            _shortstr(exchange),
            _shortstr(routing_key),
        )
    )
    return (
        _deliver_prefix.pack(FRAME_METHOD, channel, len(args) + 4, BASIC_CLASS, 60)
        + args
        + FRAME_END_BYTE
    )


# Basic.Publish arrives once per message: decoded by hand into the same pamqp method.
PUBLISH_INDEX = b"\x00\x3c\x00\x28"


def decode_publish(payload: bytes) -> c_Publish:
    """A basic.publish payload (index included) as pamqp's Basic.Publish, decoded by hand."""
    offset = 6  # index, then the deprecated ticket
    size = payload[offset]
    # Names and keys are any bytes to RabbitMQ: those that are not UTF-8 are kept as
    # surrogate escapes, which go out again as the same bytes (`_shortstr`).
    exchange = payload[offset + 1 : offset + 1 + size].decode("utf-8", "surrogateescape")
    offset += 1 + size
    size = payload[offset]
    routing_key = payload[offset + 1 : offset + 1 + size].decode("utf-8", "surrogateescape")
    bits = payload[offset + 1 + size]
    if len(payload) != offset + 2 + size:
        raise MalformedFrame("basic.publish has bytes after its last field")
    method = c_Publish.__new__(c_Publish)
    method.ticket = 0
    method.exchange = exchange
    method.routing_key = routing_key
    method.mandatory = bool(bits & 1)
    method.immediate = bool(bits & 2)
    return method


_ack_frame = struct.Struct(">BHIHHQB")


def ack_frame(channel: int, delivery_tag: int, multiple: bool = False) -> bytes:
    """basic.ack (a publisher confirm), encoded by hand: one per confirmed message."""
    return _ack_frame.pack(FRAME_METHOD, channel, 13, BASIC_CLASS, 80, delivery_tag,
                           multiple) + FRAME_END_BYTE


c_Publish = commands.Basic.Publish
