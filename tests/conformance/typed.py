"""Field values with an exact AMQP type, for the conformance tests: py-amqp picks one type per
Python type (str and bytes both go as longstr, every small int as a 32-bit signedint), so the
cases that need binary, other integer widths or a raw decimal wrap the value in `Typed`, or use
xroute's own typed values (`xroute.core.values`), which are sent in their type by xroute's encoder.

`patched_encoder` teaches py-amqp's encoder to write them, for the duration of a block.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import amqp.serialization

from tests.rabbitmq_cases import Typed
from xroute.core.field_table import encode_value
from xroute.core.values import PY_AMQP, TYPE_CLASSES, TYPE_CODES, TypedValue, as_sent_by

# RabbitMQ's type letters (rabbit_binary_generator) and how each value is packed.
_PACK = {
    "x": None,  # binary: a 32-bit length and the bytes
    "S": None,  # longstr: the same, for text
    "b": ">b",  # signed 8-bit
    "s": ">h",  # signed 16-bit (RabbitMQ's letter; the spec's 'U')
    "I": ">i",  # signed 32-bit
    "l": ">q",  # signed 64-bit (RabbitMQ's letter)
    "f": ">f",  # 32-bit float
    "d": ">d",  # 64-bit float
    "T": ">Q",  # timestamp: seconds since the epoch
}


@contextlib.contextmanager
def patched_encoder() -> Iterator[None]:
    """py-amqp writes `Typed` values with their own type letter inside this block."""
    original = amqp.serialization._write_item

    def write_item(v, write, bits):
        if isinstance(v, TypedValue):  # xroute.core.values: in its own type, by xroute's encoder
            write(encode_value(v))
            return None
        if not isinstance(v, Typed):
            return original(v, write, bits)
        code = v.code
        if code in ("x", "S"):
            data = v.value.encode("utf-8") if isinstance(v.value, str) else bytes(v.value)
            write(struct.pack(">cI", code.encode(), len(data)))
            write(data)
        elif code == "D":
            scale, unscaled = v.value
            write(struct.pack(">cBi", b"D", scale, unscaled))
        else:
            write(struct.pack(">c" + _PACK[code][1:], code.encode(), v.value))
        return None

    amqp.serialization._write_item = write_item
    try:
        yield
    finally:
        amqp.serialization._write_item = original


def plain(value: Any) -> Any:
    """``value`` as xroute is to read what py-amqp sent: each `Typed` becomes its typed value
    (`xroute.core.values`; a timestamp a datetime, a decimal a Decimal), and plain bytes a longstr,
    as py-amqp sends them (`xroute.core.values.as_sent_by`)."""
    return as_sent_by(_decoded(value), PY_AMQP)


def _decoded(value: Any) -> Any:
    if isinstance(value, Typed):
        if value.code == "T":
            return datetime.fromtimestamp(value.value, tz=timezone.utc).replace(tzinfo=None)
        if value.code == "D":
            scale, unscaled = value.value
            return Decimal(unscaled).scaleb(-scale)
        # The typed value of xroute.core.values the broker was sent (a binary stays a binary).
        return TYPE_CLASSES[TYPE_CODES[value.code.encode()]](value.value)
    if isinstance(value, dict):
        return {name: _decoded(item) for name, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_decoded(item) for item in value]
    return value
