"""AMQP 0-9-1 field tables as bytes, both ways, with every value's type kept (`xroute.core.values`).

`decode_table` reads a table as RabbitMQ's ``rabbit_binary_parser`` does (the same type codes,
``L`` read as a long, a decimal's digits unsigned) and gives each value in its *plain* Python
form when the `PIKA` rule would send that form back as the same type, else as its typed class:
a longstr is ``str`` (``longstr`` when it is not UTF-8), a binary ``bytes``, a signed int
``int``, a long ``int`` beyond 32 bits else ``long``, a double ``float``, a timestamp an aware
UTC ``datetime`` (``timestamp`` past the year 9999); byte, short, the unsigned types and float
keep their classes. So ``encode_table(decode_table(data))`` gives ``data`` back, byte for byte.

Neither direction recurses: arrays and tables nest as deep as a frame can hold them (RabbitMQ
reads 10,000 levels and more), and malformed bytes raise `FieldTableError`, never
`RecursionError` or `struct.error`.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from xroute.core.errors import FieldTableError, InvalidFieldValue
from xroute.core.values import (
    PIKA,
    TypedValue,
    byte,
    datetime_seconds,
    decimal_parts,
    field_type,
    float32,
    long,
    longstr,
    short,
    timestamp,
    unsignedbyte,
    unsignedint,
    unsignedshort,
)

__all__ = ["decode_table", "decode_value", "encode_table", "encode_value"]

_u8 = struct.Struct(">B")
_i8 = struct.Struct(">b")
_u16 = struct.Struct(">H")
_i16 = struct.Struct(">h")
_u32 = struct.Struct(">I")
_i32 = struct.Struct(">i")
_i64 = struct.Struct(">q")
_u64 = struct.Struct(">Q")
_f32 = struct.Struct(">f")
_f64 = struct.Struct(">d")
_decimal = struct.Struct(">BI")
_INT32_LOW, _INT32_HIGH = -(2**31), 2**31 - 1
_YEAR_9999_END = 253402300799  # 9999-12-31T23:59:59Z, the last second a datetime holds

# Fixed-size scalars: code -> (struct, what to build from the number read).
_SCALARS: dict[int, tuple[struct.Struct, Any]] = {
    ord("b"): (_i8, byte),
    ord("B"): (_u8, unsignedbyte),
    ord("s"): (_i16, short),
    ord("u"): (_u16, unsignedshort),
    ord("I"): (_i32, int),
    ord("i"): (_u32, unsignedint),
}


# ---------------------------------------------------------------------------------- decoding


def decode_table(data: bytes | memoryview, offset: int = 0) -> tuple[dict[str, Any], int]:
    """The table at ``offset`` of ``data`` (its 32-bit length first): (the table, the offset
    just past it)."""
    view = memoryview(data)
    size = _read(_u32, view, offset)
    end = offset + 4 + size
    if end > len(view):
        raise FieldTableError(
            f"table of {size} bytes at offset {offset} runs past the end ({len(view)} bytes)",
            offset,
        )
    return _decode(view, offset + 4, end, b"F"), end


def decode_value(data: bytes | memoryview, offset: int = 0) -> tuple[Any, int]:
    """One field value (its type code first) at ``offset``: (the value, the offset past it)."""
    view = memoryview(data)
    if offset >= len(view):
        raise FieldTableError("no field value: the data ends", offset)
    code = view[offset]
    value, end = _scalar(view, code, offset + 1, len(view))
    if value is not _CONTAINER:
        return value, end
    size = _read(_u32, view, offset + 1)
    end = offset + 5 + size
    if end > len(view):
        raise FieldTableError(f"value of {size} bytes runs past the end", offset)
    return _decode(view, offset + 5, end, bytes((code,))), end


_CONTAINER = object()


def _decode(view: memoryview, start: int, end: int, kind: bytes) -> Any:
    """The table (``F``) or array (``A``) in ``view[start:end]``, walked with a stack."""
    root: Any = {} if kind == b"F" else []
    # Each open container: (the container, where it ends, the offset to read next).
    stack: list[list[Any]] = [[root, end, start]]
    while stack:
        top = stack[-1]
        container, stop, offset = top
        if offset >= stop:
            if offset > stop:
                raise FieldTableError("a value runs past the end of its table or array", stop)
            stack.pop()
            continue
        name = None
        if type(container) is dict:
            length = view[offset]
            offset += 1
            if offset + length > stop:
                raise FieldTableError("a field name runs past the end of its table", offset)
            name = bytes(view[offset : offset + length]).decode("utf-8", "surrogateescape")
            offset += length
        if offset >= stop:
            raise FieldTableError(f"field {name!r} has no value", offset)
        code = view[offset]
        value, after = _scalar(view, code, offset + 1, stop)
        if value is _CONTAINER:
            size = _read(_u32, view, offset + 1)
            inner_start = offset + 5
            after = inner_start + size
            if after > stop:
                raise FieldTableError(
                    f"{'table' if code == 70 else 'array'} of {size} bytes runs past the end "
                    "of its container", offset,
                )
            value = {} if code == 70 else []
            top[2] = after
            _put(container, name, value)
            stack.append([value, after, inner_start])
            continue
        top[2] = after
        _put(container, name, value)
    return root


def _put(container: Any, name: str | None, value: Any) -> None:
    if name is None:
        container.append(value)
    else:
        container[name] = value


def _read(layout: struct.Struct, view: memoryview, offset: int) -> Any:
    try:
        return layout.unpack_from(view, offset)[0]
    except struct.error:
        raise FieldTableError("a value runs past the end of the data", offset) from None


def _scalar(view: memoryview, code: int, offset: int, stop: int) -> tuple[Any, int]:
    """The scalar of type ``code`` at ``offset`` (``_CONTAINER`` for A and F)."""
    known = _SCALARS.get(code)
    if known is not None:
        layout, build = known
        if offset + layout.size > stop:
            raise FieldTableError(f"a {chr(code)!r} value runs past its container", offset)
        return build(layout.unpack_from(view, offset)[0]), offset + layout.size
    if code == 83 or code == 120:  # S longstr, x binary
        size = _read(_u32, view, offset)
        start = offset + 4
        if start + size > stop:
            raise FieldTableError(f"a string of {size} bytes runs past its container", offset)
        raw = bytes(view[start : start + size])
        if code == 120:
            return raw, start + size
        try:
            return raw.decode("utf-8"), start + size
        except UnicodeDecodeError:
            return longstr(raw), start + size
    if code == 116:  # t
        if offset + 1 > stop:
            raise FieldTableError("a boolean runs past its container", offset)
        return view[offset] != 0, offset + 1
    if code == 108 or code == 76:  # l, L: both a signed 64-bit long in RabbitMQ
        if offset + 8 > stop:
            raise FieldTableError("a long runs past its container", offset)
        number = _i64.unpack_from(view, offset)[0]
        plain = not _INT32_LOW <= number <= _INT32_HIGH
        return (number if plain else long(number)), offset + 8
    if code == 100 or code == 102:  # d, f
        layout = _f64 if code == 100 else _f32
        if offset + layout.size > stop:
            raise FieldTableError("a float runs past its container", offset)
        number = layout.unpack_from(view, offset)[0]
        if not math.isfinite(number):
            raise FieldTableError(
                f"a {'double' if code == 100 else 'float'} that is not a finite number "
                "(RabbitMQ cannot read it)", offset,
            )
        return (number if code == 100 else float32(number)), offset + layout.size
    if code == 84:  # T
        if offset + 8 > stop:
            raise FieldTableError("a timestamp runs past its container", offset)
        seconds = _u64.unpack_from(view, offset)[0]
        if seconds <= _YEAR_9999_END:
            return datetime.fromtimestamp(seconds, tz=timezone.utc), offset + 8
        return timestamp(seconds), offset + 8
    if code == 68:  # D: a scale octet, then 32 bits of digits RabbitMQ reads unsigned
        if offset + 5 > stop:
            raise FieldTableError("a decimal runs past its container", offset)
        scale, digits = _decimal.unpack_from(view, offset)
        return Decimal(digits).scaleb(-scale), offset + 5
    if code == 86:  # V
        return None, offset
    if code == 65 or code == 70:  # A, F
        return _CONTAINER, offset
    raise FieldTableError(
        f"unknown field type {chr(code)!r} (0x{code:02x}); RabbitMQ reads "
        "t b B s u I i l L f d D S x T V A F", offset - 1,
    )


# ---------------------------------------------------------------------------------- encoding


def encode_table(table: Mapping[str, Any], rule: str = PIKA) -> bytes:
    """``table`` as a field table (its 32-bit length first). Typed values travel as their
    type, plain ones as ``rule`` says (`xroute.core.values.PIKA` by default)."""
    return _encode(table, rule)


def encode_value(value: Any, rule: str = PIKA) -> bytes:
    """One field value, its type code first."""
    return _encode([value], rule)[4:]


def _encode(root: Any, rule: str) -> bytes:
    # Post-order without recursion: a container's parts are gathered on its own frame of the
    # stack, then joined behind its code and length when its last item is written.
    out: list[bytes] = []
    stack: list[tuple[list[bytes], Any, bytes]] = []  # (parts, items left, code)
    stack.append((out, _items(root), b""))
    while stack:
        parts, items, code = stack[-1]
        item = next(items, _CONTAINER)
        if item is _CONTAINER:
            stack.pop()
            body = b"".join(parts)
            if not stack:
                return _u32.pack(len(body)) + body
            stack[-1][0].append(code + _u32.pack(len(body)) + body)
            continue
        name, value = item
        if name is not None:
            raw = name.encode("utf-8", "surrogateescape") if isinstance(name, str) else name
            if not isinstance(raw, bytes) or len(raw) > 255:
                raise InvalidFieldValue(f"field name {name!r:.60} is not text of 255 bytes or less")
            parts.append(_u8.pack(len(raw)) + raw)
        kind = field_type(value, rule)
        if kind == "table" or kind == "array":
            stack.append(([], _items(value), b"F" if kind == "table" else b"A"))
            continue
        parts.append(_encode_scalar(value, kind))
    raise AssertionError("unreachable")


def _items(container: Any) -> Any:
    if isinstance(container, Mapping):
        return iter(container.items())
    return ((None, value) for value in container)


def _encode_scalar(value: Any, kind: str) -> bytes:
    if kind == "longstr":
        raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)
        return b"S" + _u32.pack(len(raw)) + raw
    if kind == "binary":
        raw = bytes(value)
        return b"x" + _u32.pack(len(raw)) + raw
    if kind == "bool":
        return b"t\x01" if value else b"t\x00"
    if kind == "void":
        return b"V"
    if kind == "double":
        if not math.isfinite(value):
            raise InvalidFieldValue(f"{value!r} is not a finite number; RabbitMQ cannot read it")
        return b"d" + _f64.pack(value)
    if kind == "decimal":
        return b"D" + _decimal_bytes(value)
    if kind == "timestamp":
        seconds = int(value) if isinstance(value, TypedValue) else datetime_seconds(value)
        if seconds < 0:
            raise InvalidFieldValue(f"timestamp {value} is before 1970")
        return b"T" + _u64.pack(seconds)
    layout = _LAYOUTS[kind]
    if isinstance(value, TypedValue):
        return value.code + layout.pack(value)
    return (b"I" if kind == "signedint" else b"l") + layout.pack(value)


_LAYOUTS = {
    "byte": _i8, "unsignedbyte": _u8, "short": _i16, "unsignedshort": _u16,
    "signedint": _i32, "unsignedint": _u32, "long": _i64, "float": _f32,
}


def _decimal_bytes(value: Decimal) -> bytes:
    # Negative digits go as the clients send them, two's complement; RabbitMQ reads unsigned.
    return _decimal.pack(*decimal_parts(value))
