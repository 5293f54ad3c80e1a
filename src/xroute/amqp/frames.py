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

from pamqp import base, commands, decode, encode
from pamqp.header import ContentHeader

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

_frame_header = struct.Struct(">BHI")
_method_index = struct.Struct(">I")
_content_prefix = struct.Struct(">HHQ")
_header_frame_prefix = struct.Struct(">BHIHHQ")


def decode_method(payload: bytes | memoryview) -> base.Frame:
    """A method frame's payload as a pamqp method (KeyError for an unknown method index)."""
    index = _method_index.unpack_from(payload)[0]
    method = commands.INDEX_MAPPING[index]()
    method.unmarshal(bytes(payload[4:]))
    return method


def encode_method_payload(method: base.Frame) -> bytes:
    """A method's payload as pamqp's ``marshal`` builds it, without its name validation."""
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


def split_content_header(payload: bytes) -> tuple[int, int, bytes]:
    """A content header frame's payload as (class id, body size, property bytes)."""
    class_id, _weight, body_size = _content_prefix.unpack_from(payload)
    return class_id, body_size, payload[12:]


def property_flags(properties: bytes) -> int:
    """The first flag word of ``properties`` (the only one AMQP 0-9-1 uses)."""
    return (properties[0] << 8) | properties[1] if len(properties) >= 2 else 0


def decode_properties(properties: bytes) -> commands.Basic.Properties:
    """``properties`` (flags and values) as pamqp's Basic.Properties."""
    header = ContentHeader()
    header.unmarshal(_content_prefix.pack(BASIC_CLASS, 0, 0) + properties)
    return header.properties


def decode_table(data: bytes) -> dict[str, Any]:
    """A field table without its length prefix (AMQPLAIN's response) as a dict."""
    return decode.field_table(struct.pack(">I", len(data)) + data)[1]


def _shortstr(text: str) -> bytes:
    data = text.encode("utf-8")
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
    exchange = payload[offset + 1 : offset + 1 + size].decode("utf-8")
    offset += 1 + size
    size = payload[offset]
    routing_key = payload[offset + 1 : offset + 1 + size].decode("utf-8")
    bits = payload[offset + 1 + size]
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
