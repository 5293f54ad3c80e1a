"""Header values from Arrow columns (Parquet, Spark), each with the AMQP type its Arrow type
names (`xroute.core.values`).

A ``headers`` column of Arrow struct (or map) type carries typed header tables: each field's
Arrow type says the AMQP field type of its values, so a Spark ``ShortType`` header is a short,
not a plain ``int`` that would travel as a signed int.

============================  ===================================================
Arrow type                    AMQP field type (the Python value the router gets)
============================  ===================================================
int8, int16                   byte, short (`xroute.core.values.byte`, ``short``)
int32                         signedint (a plain ``int``)
int64                         long (`xroute.core.values.long`: Spark's LongType)
uint8, uint16, uint32         unsignedbyte, unsignedshort, unsignedint
uint64                        long (a value above 2**63-1 is refused)
float16, float32              float (`xroute.core.values.float32`)
float64                       double (a plain ``float``)
string, large_string          longstr (a plain ``str``)
binary, large_binary, fixed   binary (plain ``bytes``, `xroute.core.values.PIKA`)
bool                          bool
timestamp (any unit)          timestamp (a ``datetime``: whole seconds)
decimal128, decimal256        decimal (a ``Decimal`` at the column's scale)
list, large_list, fixed list  array, each element by its own type
struct, map                   table (a struct's fields in their order)
null                          void
============================  ===================================================

Other Arrow types (date, time, duration...) have no AMQP field type: the record is refused
with `xroute.core.errors.InvalidHeaders` naming the header. A null field at the top of a struct is
an absent header; inside an array or nested table, a void.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xroute.core.errors import XRouteError
from xroute.core.values import (
    byte,
    float32,
    long,
    short,
    unsignedbyte,
    unsignedint,
    unsignedshort,
)

Convert = Callable[[Any], Any]

# Arrow integer and float types whose values need an explicit typed value: a plain int or
# float would travel as a signedint (or long) and a double (`xroute.core.values.PIKA`).
_SCALARS: dict[str, Convert] = {
    "int8": byte,
    "int16": short,
    "int64": long,
    "uint8": unsignedbyte,
    "uint16": unsignedshort,
    "uint32": unsignedint,
    "uint64": long,
    "halffloat": float32,
    "float": float32,
}


def converter(arrow_type: Any) -> Convert | None:
    """What turns one Python value of ``arrow_type`` (``to_pylist``'s) into the value with
    its AMQP type, or None where the value is right as it is (nothing in it needs a type)."""
    import pyarrow as pa

    types = pa.types
    if types.is_dictionary(arrow_type):
        return converter(arrow_type.value_type)
    if types.is_integer(arrow_type) or types.is_floating(arrow_type):
        scalar = _SCALARS.get(str(arrow_type))
        return None if scalar is None else _maybe(scalar)
    if types.is_list(arrow_type) or types.is_large_list(arrow_type) or (
        types.is_fixed_size_list(arrow_type)
    ):
        element = converter(arrow_type.value_type)
        return None if element is None else _maybe(lambda items: [element(x) for x in items])
    if types.is_map(arrow_type):
        item = converter(arrow_type.item_type) or (lambda value: value)
        return _maybe(lambda pairs: {key: item(value) for key, value in pairs})
    if types.is_struct(arrow_type):
        fields = [(f.name, converter(f.type)) for f in arrow_type]
        if all(convert is None for _, convert in fields):
            return None
        return _maybe(
            lambda row: {
                name: value if convert is None else convert(value)
                for (name, convert), value in zip(fields, row.values())
            }
        )
    return None


def _maybe(convert: Convert) -> Convert:
    # Nulls stay None (void) wherever they are.
    return lambda value: None if value is None else convert(value)


def header_tables(column: Any, refused: Callable[[int, XRouteError], None]) -> list[Any]:
    """Each row of a struct or map ``headers`` column as a header table with typed values
    (None for a null row); a null top-level field is an absent header. A row whose value no
    AMQP type carries is None, and given to ``refused(row, error)``."""
    import pyarrow as pa

    rows = column.to_pylist()
    if pa.types.is_map(column.type):
        rows = [None if row is None else dict(row) for row in rows]
        item = converter(column.type.item_type)
        convert_of: Callable[[str], Convert | None] = lambda name: item  # noqa: E731
    else:
        convert_of = {f.name: converter(f.type) for f in column.type}.__getitem__
    out: list[Any] = []
    for number, row in enumerate(rows):
        try:
            out.append(None if row is None else {
                name: _typed(value, convert_of(name))
                for name, value in row.items()
                if value is not None
            })
        except XRouteError as error:  # a value out of its AMQP range: that record only
            refused(number, error)
            out.append(None)
    return out


def _typed(value: Any, convert: Convert | None) -> Any:
    return value if convert is None else convert(value)
