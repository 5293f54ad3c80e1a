"""AMQP 0-9-1 field values with their types: what a header or an argument is on the wire.

A Python value does not say which of AMQP's field types it travels as: ``1`` may be a byte, a
short, a signed int or a long, ``b"abc"`` a binary or a longstr, ``1.5`` a float or a double.
RabbitMQ keeps the type, and it counts: inside arrays and tables the headers exchange compares
``{Type, Value}`` pairs, and the consistent-hash exchange of 3.x hashes them. The classes here
name the type explicitly; each is a subclass of the builtin it holds, so code that does not care
sees an ordinary ``int``, ``float`` or ``bytes``::

    from xroute.core.values import short, float32, binary, longstr
    topology.route("h", "", {"ids": [short(1), float32(1.5), binary(b"abc")]})

Their names are RabbitMQ's (``rabbit_binary_parser``), with the type code each travels as:

=============  ====  ==========================  =============================================
class          code  holds                       plain Python value that travels so (`PIKA`)
=============  ====  ==========================  =============================================
byte           b     int, signed 8 bits          -
unsignedbyte   B     int, 0..255                 -
short          s     int, signed 16 bits         -
unsignedshort  u     int, 0..65535               -
signedint      I     int, signed 32 bits         int in -2**31..2**31-1
unsignedint    i     int, 0..2**32-1             -
long           l     int, signed 64 bits         int beyond 32 bits
float32        f     float, single precision     -
double         d     float                       float
longstr        S     bytes (text as UTF-8)       str
binary         x     bytes                       bytes, bytearray
timestamp      T     int, seconds since 1970     datetime
=============  ====  ==========================  =============================================

Booleans (``t``), decimals (``D``, `decimal.Decimal`), void (``V``, ``None``), arrays (``A``,
``list``/``tuple``) and tables (``F``, ``dict``) need no class: Python's own say it exactly.

**Plain values, one rule per client family.** A plain Python value has the type the client
that sent it gives it. `PIKA` (the default everywhere in xroute) is pika's encoding: ``bytes``
is ``binary`` (pika 1.4's ``data.encode_value``; where pika has no answer or loses what the
value says, py-amqp's is taken: a ``float`` is a double, which pika cannot send, and a
``Decimal`` keeps its own scale, which pika normalises). `PY_AMQP` is py-amqp's, which kombu and Celery use: ``bytes`` is a ``longstr``
like ``str``, and ``-2**31`` goes as a long. `xroute.kombu` follows `PY_AMQP`; `as_typed`
turns values into explicit types by either rule, and `as_sent_by` wraps only the values whose
type differs from `PIKA`'s (so that a table sent by py-amqp routes in xroute's core, which reads
plain values by `PIKA`, with py-amqp's types, and its plain values keep their fast path).

`decimal_parts` gives a `Decimal` as the pair RabbitMQ holds, ``{Scale, Digits}``.
"""

from __future__ import annotations

import calendar
import math
import struct
from collections.abc import Mapping
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, ClassVar

from xroute.core.errors import InvalidFieldValue

__all__ = [
    "PIKA",
    "PY_AMQP",
    "RULES",
    "TYPE_CLASSES",
    "TYPE_CODES",
    "TypedValue",
    "binary",
    "byte",
    "double",
    "field_type",
    "float32",
    "long",
    "longstr",
    "as_sent_by",
    "as_typed",
    "decimal_parts",
    "short",
    "signedint",
    "timestamp",
    "unsignedbyte",
    "unsignedint",
    "unsignedshort",
]

PIKA = "pika"
PY_AMQP = "py-amqp"
RULES = (PIKA, PY_AMQP)


class TypedValue:
    """Mixin of the typed classes: ``amqp_type`` is RabbitMQ's name of the type, ``code`` the
    octet it travels as."""

    __slots__ = ()
    amqp_type: ClassVar[str]
    code: ClassVar[bytes]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({super().__repr__()})"

    def __reduce__(self) -> tuple:
        # Pickled (Spark ships values to workers) as the class and the builtin value.
        return (type(self), (self._builtin(self),))

    _builtin: ClassVar[type]


class _Integer(TypedValue, int):
    __slots__ = ()
    _builtin = int
    low: ClassVar[int]
    high: ClassVar[int]

    def __new__(cls, value: Any = 0) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidFieldValue(
                f"{cls.__name__} holds an integer, not {type(value).__name__} ({value!r})",
                cls.__name__, value,
            )
        if not cls.low <= value <= cls.high:
            raise InvalidFieldValue(
                f"{value} does not fit an AMQP {cls.__name__} ({cls.low}..{cls.high})",
                cls.__name__, value,
            )
        return int.__new__(cls, value)


class byte(_Integer):  # noqa: N801 - named as AMQP's type
    """A signed 8-bit integer (``b``)."""

    __slots__ = ()
    amqp_type, code, low, high = "byte", b"b", -(2**7), 2**7 - 1


class unsignedbyte(_Integer):  # noqa: N801
    """An unsigned 8-bit integer (``B``)."""

    __slots__ = ()
    amqp_type, code, low, high = "unsignedbyte", b"B", 0, 2**8 - 1


class short(_Integer):  # noqa: N801
    """A signed 16-bit integer (``s`` in RabbitMQ; the 0-9-1 spec's ``s`` is a short string,
    which RabbitMQ does not take in tables)."""

    __slots__ = ()
    amqp_type, code, low, high = "short", b"s", -(2**15), 2**15 - 1


class unsignedshort(_Integer):  # noqa: N801
    """An unsigned 16-bit integer (``u``)."""

    __slots__ = ()
    amqp_type, code, low, high = "unsignedshort", b"u", 0, 2**16 - 1


class signedint(_Integer):  # noqa: N801
    """A signed 32-bit integer (``I``): a plain ``int`` that fits travels so."""

    __slots__ = ()
    amqp_type, code, low, high = "signedint", b"I", -(2**31), 2**31 - 1


class unsignedint(_Integer):  # noqa: N801
    """An unsigned 32-bit integer (``i``)."""

    __slots__ = ()
    amqp_type, code, low, high = "unsignedint", b"i", 0, 2**32 - 1


class long(_Integer):  # noqa: N801
    """A signed 64-bit integer (``l``; RabbitMQ reads ``L`` as the same)."""

    __slots__ = ()
    amqp_type, code, low, high = "long", b"l", -(2**63), 2**63 - 1


class timestamp(_Integer):  # noqa: N801
    """Seconds since 1970 (``T``, unsigned 64 bits): any timestamp a frame can carry, the
    years past 9999 that `datetime` cannot hold included. A `datetime` travels as one too."""

    __slots__ = ()
    amqp_type, code, low, high = "timestamp", b"T", 0, 2**64 - 1

    def to_datetime(self) -> datetime:
        """The timestamp as an aware UTC `datetime` (ValueError past the year 9999)."""
        return datetime.fromtimestamp(int(self), tz=timezone.utc)


class _Float(TypedValue, float):
    __slots__ = ()
    _builtin = float


_single = struct.Struct(">f")


class float32(_Float):  # noqa: N801
    """A single-precision float (``f``): the value is rounded to single precision, as the
    receiver reads it (``float32(0.1) != 0.1``)."""

    __slots__ = ()
    amqp_type, code = "float", b"f"

    def __new__(cls, value: Any = 0.0) -> Any:
        number = _checked_float(cls, value)
        try:
            rounded = _single.unpack(_single.pack(number))[0]
        except OverflowError:
            raise InvalidFieldValue(
                f"{value!r} is beyond a single-precision float ({cls.__name__})", cls.__name__,
                value,
            ) from None
        return float.__new__(cls, rounded)


class double(_Float):  # noqa: N801
    """A double-precision float (``d``): a plain ``float`` travels so."""

    __slots__ = ()
    amqp_type, code = "double", b"d"

    def __new__(cls, value: Any = 0.0) -> Any:
        return float.__new__(cls, _checked_float(cls, value))


def _checked_float(cls: type, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidFieldValue(
            f"{cls.__name__} holds a number, not {type(value).__name__} ({value!r})",
            cls.__name__, value,
        )
    number = float(value)
    if not math.isfinite(number):
        # Erlang has no NaN or infinity: RabbitMQ cannot decode such a table (541).
        raise InvalidFieldValue(
            f"{cls.__name__} {value!r} is not a finite number; RabbitMQ cannot read it",
            cls.__name__, value,
        )
    return number


class _Bytes(TypedValue, bytes):
    __slots__ = ()
    _builtin = bytes

    def __new__(cls, value: Any = b"") -> Any:
        if isinstance(value, str):
            value = value.encode("utf-8")
        elif not isinstance(value, (bytes, bytearray, memoryview)):
            raise InvalidFieldValue(
                f"{cls.__name__} holds bytes or text, not {type(value).__name__} ({value!r})",
                cls.__name__, value,
            )
        if len(value) > 2**32 - 1:
            raise InvalidFieldValue(f"{cls.__name__} longer than 2**32-1 bytes", cls.__name__)
        return bytes.__new__(cls, value)


class longstr(_Bytes):  # noqa: N801
    """A long string (``S``): bytes that need not be UTF-8. A ``str`` travels as one, and a
    longstr that is UTF-8 routes exactly as that ``str``."""

    __slots__ = ()
    amqp_type, code = "longstr", b"S"


class binary(_Bytes):  # noqa: N801
    """Binary data (``x``): plain ``bytes`` travel so by the `PIKA` rule."""

    __slots__ = ()
    amqp_type, code = "binary", b"x"


TYPE_CODES: dict[bytes, str] = {
    b"t": "bool",
    b"b": "byte",
    b"B": "unsignedbyte",
    b"s": "short",
    b"u": "unsignedshort",
    b"I": "signedint",
    b"i": "unsignedint",
    b"l": "long",
    b"L": "long",
    b"f": "float",
    b"d": "double",
    b"D": "decimal",
    b"S": "longstr",
    b"x": "binary",
    b"T": "timestamp",
    b"V": "void",
    b"A": "array",
    b"F": "table",
}
"""Each type code RabbitMQ 3.10 reads in a table, and its name for the type."""

_INT32 = (-(2**31), 2**31 - 1)


def field_type(value: Any, rule: str = PIKA) -> str:
    """RabbitMQ's name of the AMQP type ``value`` travels as (``"short"``, ``"longstr"``...):
    a typed value's own, a plain one's by ``rule`` (`PIKA` or `PY_AMQP`).

    Raises `InvalidFieldValue` for a value no AMQP table can carry."""
    kind = type(value)
    if kind is str:
        return "longstr"
    if kind is bool:
        return "bool"
    if kind is int:
        low = _INT32[0] if rule == PIKA else _INT32[0] + 1  # py-amqp sends -2**31 as a long
        return "signedint" if low <= value <= _INT32[1] else "long"
    if kind is float:
        return "double"
    if value is None:
        return "void"
    if isinstance(value, TypedValue):
        return value.amqp_type
    if kind is bytes or kind is bytearray:
        return "binary" if rule == PIKA else "longstr"
    if isinstance(value, datetime):
        return "timestamp"
    if isinstance(value, Decimal):
        return "decimal"
    if kind is list or kind is tuple:
        return "array"
    if isinstance(value, Mapping):
        return "table"
    raise InvalidFieldValue(
        f"a value of type {kind.__name__} ({value!r:.60}) cannot be carried in an AMQP table",
        None, value,
    )


TYPE_CLASSES: dict[str, type] = {
    cls.amqp_type: cls
    for cls in (byte, unsignedbyte, short, unsignedshort, signedint, unsignedint, long,
                float32, double, longstr, binary, timestamp)
}
"""Each typed class by RabbitMQ's name of its type (``"float"`` is `float32`)."""


def as_typed(value: Any, rule: str = PIKA) -> Any:
    """``value`` with every plain scalar inside it replaced by its explicit typed value, as
    ``rule`` says the client sends it (arrays and tables walked; booleans, decimals and None
    kept, being exact already). Typed values are kept as they are."""
    if rule not in RULES:
        raise InvalidFieldValue(f"unknown client rule {rule!r}; known: {', '.join(RULES)}")
    return _as_typed(value, rule, 0)


def _as_typed(value: Any, rule: str, depth: int) -> Any:
    if depth > 1000:
        raise InvalidFieldValue("arrays and tables nest deeper than 1000 levels", None)
    if isinstance(value, TypedValue) or isinstance(value, (bool, Decimal)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {name: _as_typed(item, rule, depth + 1) for name, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_typed(item, rule, depth + 1) for item in value]
    kind = field_type(value, rule)
    if kind == "timestamp":
        return timestamp(datetime_seconds(value))
    return TYPE_CLASSES[kind](value)


def datetime_seconds(value: datetime) -> int:
    """A `datetime` as the clients send it in a timestamp: seconds since 1970, a naive value
    taken as UTC, the fraction of a second dropped."""
    return calendar.timegm(value.utctimetuple())


def as_sent_by(value: Any, rule: str) -> Any:
    """``value`` as xroute's default rule (`PIKA`) must read it to see the types ``rule``'s
    client sends: for `PY_AMQP`, ``bytes`` become `longstr` and ``-2**31`` a `long`, in arrays
    and tables too; every other value is returned as it is (the same object when nothing in
    it changes). For `PIKA`, ``value`` itself."""
    if rule not in RULES:
        raise InvalidFieldValue(f"unknown client rule {rule!r}; known: {', '.join(RULES)}")
    if rule == PIKA:
        return value
    return _py_amqp(value, 0)


def _py_amqp(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind is bytes or kind is bytearray:
        return longstr(value)
    if kind is int and value == _INT32[0]:
        return long(value)
    if kind is list or kind is tuple or (isinstance(value, Mapping) and value):
        if depth > 1000:
            raise InvalidFieldValue("arrays and tables nest deeper than 1000 levels", None)
        if isinstance(value, Mapping):
            new = {name: _py_amqp(item, depth + 1) for name, item in value.items()}
            same = all(new[name] is item for name, item in value.items())
        else:
            new = [_py_amqp(item, depth + 1) for item in value]
            same = all(a is b for a, b in zip(new, value))
        return value if same else new
    return value


def decimal_parts(value: Decimal) -> tuple[int, int]:
    """A `Decimal` as RabbitMQ holds an AMQP decimal, ``{Scale, Digits}``: ``1.50`` is
    ``(2, 150)``; a positive exponent goes at scale 0 (``1E+2`` is ``(0, 100)``, as pika sends
    it); negative digits as the clients send them, 32-bit two's complement, which RabbitMQ
    reads unsigned (``-1`` arrives as 4294967295). `InvalidFieldValue` for a decimal no AMQP
    decimal carries (not finite, a scale above 255, digits beyond 32 bits)."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise InvalidFieldValue(f"decimal {value} is not a finite number", "decimal", value)
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    scale = -exponent
    if scale < 0:
        unscaled, scale = unscaled * 10 ** (-scale), 0
    if scale > 255 or not -(2**31) <= unscaled <= 2**32 - 1:
        raise InvalidFieldValue(
            f"decimal {str(value)[:40]} does not fit an AMQP decimal (a scale of at most 255 "
            "and 32-bit digits)",
            "decimal",
            value,
        )
    return scale, unscaled & 0xFFFFFFFF
