"""xroute.core.field_table and xroute.core.values: AMQP field tables as bytes, both ways, every value's
type kept; the plain-value rules checked against the clients' own encoders (pika 1.4's
``pika.data``, py-amqp 5.4's ``amqp.serialization``); bounds that give typed errors."""

from __future__ import annotations

import struct
from datetime import datetime, timezone
from decimal import Decimal

import amqp.serialization
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pika import data as pika_data

from tests.strategies import typed_values
from xroute import FieldTableError, InvalidFieldValue, Topology, XRouteError
from xroute.core.field_table import decode_table, decode_value, encode_table, encode_value
from xroute.core.headers import typed_canonical
from xroute.core.values import (
    PIKA,
    PY_AMQP,
    TYPE_CLASSES,
    TYPE_CODES,
    as_sent_by,
    as_typed,
    binary,
    byte,
    decimal_parts,
    field_type,
    float32,
    long,
    longstr,
    short,
    signedint,
    timestamp,
    unsignedbyte,
    unsignedint,
    unsignedshort,
)

tables = st.dictionaries(st.sampled_from(["a", "b", "k", "é"]), typed_values, max_size=4)


@settings(max_examples=300, deadline=None)
@given(tables)
def test_a_table_round_trips_with_every_type(table):
    data = encode_table(table)
    back, end = decode_table(data)
    assert end == len(data)
    assert encode_table(back) == data  # byte for byte
    assert {k: typed_canonical(v) for k, v in back.items()} == {
        k: typed_canonical(v) for k, v in table.items()
    }


@settings(max_examples=200, deadline=None)
@given(tables, st.sampled_from(["3.10", "3.13", None]))
def test_decoded_headers_route_as_the_values_they_came_from(table, rabbitmq):
    # What the wire carries routes exactly as the typed values the sender meant.
    t = Topology(rabbitmq=rabbitmq)
    t.declare_exchange("h", "headers")
    for number, (name, value) in enumerate(table.items()):
        t.declare_queue(f"q{number}")
        t.bind("h", f"q{number}", "", {name: value})
    back, _ = decode_table(encode_table(table))
    assert t.route("h", "", back) == t.route("h", "", table)


def test_known_bytes_in_rabbitmqs_codes():
    assert encode_value(short(-2)) == b"s\xff\xfe"  # 's' is a signed short in RabbitMQ
    assert encode_value(unsignedshort(2)) == b"u\x00\x02"
    assert encode_value(byte(-1)) == b"b\xff" and encode_value(unsignedbyte(255)) == b"B\xff"
    assert encode_value(signedint(1)) == encode_value(1) == b"I\x00\x00\x00\x01"
    assert encode_value(unsignedint(2**32 - 1)) == b"i\xff\xff\xff\xff"
    assert encode_value(long(1)) == b"l" + struct.pack(">q", 1)
    assert encode_value(2**40) == b"l" + struct.pack(">q", 2**40)
    assert encode_value(float32(1.5)) == b"f" + struct.pack(">f", 1.5)
    assert encode_value(1.5) == b"d" + struct.pack(">d", 1.5)
    assert encode_value(b"ab") == encode_value(binary(b"ab")) == b"x\x00\x00\x00\x02ab"
    assert encode_value("ab") == encode_value(longstr(b"ab")) == b"S\x00\x00\x00\x02ab"
    assert encode_value(b"ab", PY_AMQP) == b"S\x00\x00\x00\x02ab"
    assert encode_value(timestamp(2**40)) == b"T" + struct.pack(">Q", 2**40)
    assert encode_value(Decimal("-1.50")) == b"D\x02" + struct.pack(">I", 2**32 - 150)
    assert encode_value(None) == b"V" and encode_value(True) == b"t\x01"
    assert encode_value([short(1), {}]) == b"A\x00\x00\x00\x08s\x00\x01F\x00\x00\x00\x00"
    # 'L' is read as a signed 64-bit long, as RabbitMQ reads it
    assert decode_value(b"L" + struct.pack(">q", -5)) == (long(-5), 9)
    assert type(decode_value(b"L" + struct.pack(">q", -5))[0]) is long


def test_every_code_rabbitmq_reads_has_a_class_or_a_python_type():
    for code, name in TYPE_CODES.items():
        assert name in TYPE_CLASSES or name in ("bool", "decimal", "void", "array", "table")
        if name in TYPE_CLASSES and code != b"L":
            assert TYPE_CLASSES[name].code == code


@pytest.mark.parametrize(
    "value",
    ["text", b"\x00bytes", True, 1, -(2**31), 2**31 - 1, 2**31, -(2**63), None,
     datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone.utc), [1, "a", [b"x"]], {"n": {"m": 2}},
     Decimal("1.5"), Decimal("-2"), Decimal("7E+1")],
)
def test_plain_values_encode_as_pika_does(value):
    pieces: list[bytes] = []
    pika_data.encode_value(pieces, value)
    # pika normalises a Decimal (1.50 goes as 1.5); xroute keeps the Decimal's own scale, as
    # py-amqp does: the cases here are already normal.
    assert encode_value(value) == b"".join(pieces)
    assert field_type(value, PIKA) == field_type(as_typed(value, PIKA), PIKA)


@pytest.mark.parametrize(
    "value",
    ["text", b"bytes", True, 1, -(2**31), -(2**31) + 1, 2**31, 1.5, None, [1, b"x"],
     {"n": b"m"}, Decimal("1.50"), datetime(2020, 1, 2, tzinfo=timezone.utc)],
)
def test_plain_values_encode_as_py_amqp_does(value):
    pieces: list[bytes] = []
    amqp.serialization._write_item(value, pieces.append, [])
    # py-amqp writes 'L' where RabbitMQ reads a long, and xroute writes 'l': the same type
    theirs = b"".join(pieces).replace(b"L", b"l", 1) if pieces[0][:1] == b"L" else b"".join(pieces)
    assert encode_value(value, PY_AMQP) == theirs
    # as_sent_by wraps only what differs from pika's rule: its pika encoding is py-amqp's
    assert encode_value(as_sent_by(value, PY_AMQP)) == encode_value(value, PY_AMQP)


def test_as_sent_by_keeps_objects_that_need_no_change():
    table = {"a": [1, "x"], "b": {"c": 2}}
    assert as_sent_by(table, PY_AMQP) is table
    changed = as_sent_by({"a": [b"x"], "b": -(2**31)}, PY_AMQP)
    assert type(changed["a"][0]) is longstr and type(changed["b"]) is long


@pytest.mark.parametrize(
    "cls,bad",
    [(short, 2**15), (byte, -129), (unsignedint, -1), (long, 2**63), (timestamp, -1),
     (float32, 1e39), (float32, float("nan")), (short, 1.0), (short, True), (binary, 1)],
)
def test_typed_values_refuse_what_their_type_cannot_hold(cls, bad):
    with pytest.raises(InvalidFieldValue, match=cls.__name__):
        cls(bad)


def test_float32_holds_the_single_precision_value_the_receiver_reads():
    assert float32(0.1) != 0.1 and float32(0.1) == struct.unpack(">f", struct.pack(">f", 0.1))[0]
    assert float32(1.5) == 1.5


def test_decimal_parts_are_rabbitmqs_scale_and_unsigned_digits():
    assert decimal_parts(Decimal("1.50")) == (2, 150)
    assert decimal_parts(Decimal("1E+2")) == (0, 100)
    assert decimal_parts(Decimal("-1")) == (0, 2**32 - 1)
    for bad in (Decimal("NaN"), Decimal("1E-300"), Decimal(2**32)):
        with pytest.raises(InvalidFieldValue):
            decimal_parts(bad)


def test_deep_nesting_decodes_and_encodes_without_recursion():
    depth = 20_000
    value: list = []
    for _ in range(depth):
        value = [value]
    data = encode_table({"deep": value})
    back, _ = decode_table(data)
    assert encode_table(back) == data


@pytest.mark.parametrize(
    "data,what",
    [
        (b"\x00\x00\x00\x05\x01aZ\x00\x00", "unknown field type"),
        (b"\x00\x00\x00\x09\x01aS\x00\x00\x00\x09", "runs past"),
        (b"\x00\x00\x00\x10", "runs past"),
        (b"\x00\x00", "past the end"),
        (b"\x00\x00\x00\x0b\x01ad\x7f\xf8\x00\x00\x00\x00\x00\x00", "finite"),
    ],
)
def test_malformed_tables_raise_field_table_error(data, what):
    with pytest.raises(FieldTableError, match=what):
        decode_table(data)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=60))
def test_any_bytes_decode_or_raise_a_typed_error(data):
    try:
        decode_table(struct.pack(">I", len(data)) + data)
    except XRouteError:
        pass
