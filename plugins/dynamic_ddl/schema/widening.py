"""The type-widening policy for raw columns when a provider changes a type.

    same type                   -> unchanged
    never-null-yet (VOID)       -> the other type
    int -> bigint -> double     (decimal joins at double)
    array<a> + array<b>         -> array<widen(a, b)>
    anything else that differs  -> string (bool vs number, number vs string,
                                   object vs scalar, a VARIANT conflict ...)

Parquet cannot read files written with the old type through the new one
(bigint files as double or as string both fail in Spark 4.3), so a widened
column costs its table one rewrite (ingest/tables.py, rewrite_widened).
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NullType,
    StringType,
)

_NUMERIC_LADDER = (IntegerType, LongType, DoubleType)


def _rung(data_type: DataType) -> int | None:
    if isinstance(data_type, FloatType | DecimalType):
        return _NUMERIC_LADDER.index(DoubleType)
    for index, kind in enumerate(_NUMERIC_LADDER):
        if isinstance(data_type, kind):
            return index
    return None


def widen(current: DataType, incoming: DataType) -> DataType:
    """The narrowest type that holds values of both types, by the policy above.

    Example:
        >>> widen(LongType(), DoubleType()).simpleString()
        'double'
    """
    if current == incoming:
        return current
    if isinstance(current, NullType):
        return incoming
    if isinstance(incoming, NullType):
        return current
    current_rung, incoming_rung = _rung(current), _rung(incoming)
    if current_rung is not None and incoming_rung is not None:
        return _NUMERIC_LADDER[max(current_rung, incoming_rung)]()
    if isinstance(current, ArrayType) and isinstance(incoming, ArrayType):
        return ArrayType(widen(current.elementType, incoming.elementType), True)
    return StringType()
