"""Whether a JSON value, as text, fits a column's type exactly: the one home of that rule.

A batch whose values at a path have another type than the path's column
parses them as text: `from_json` gives a value's JSON text as Jackson
writes it back (`12`, `2.5`, `x` for the string "x", `{"a":1}`; integers of
any size exactly, other numbers as a double: `2.50` is `2.5`, `1e2` is
`100.0`). Each value then goes to the column when its type holds it
exactly, else that text goes to the column's text companion
`<column>__text` (docs/decisions/0005, "Types"):

    bigint, int   an integer in canonical form that the type holds
                  (`12`; not `1.0`, `100.0`, nor beyond the type)
    double        a JSON number, finite, and for an integer within +-2^53,
                  where every integer is exact (beyond it a double rounds);
                  with more than 15 significant digits, only as the double
                  writes itself (`0.30000000000000004`), so text spelling
                  more (`"9007199254740993.0"`) is not rounded into it
    boolean       `true` or `false`
    date          `YYYY-MM-DD`
    timestamp     ISO 8601 that Spark reads (`2026-11-01T21:15:50Z`, with an
                  offset, or UTC when it has none), at most microseconds
    string        anything (the text is the value)
    arrays, ...   the text reads back to the same text through the type
                  (`[1,2]` in array<bigint>; not `[1.5]`)

The JSON text of a string and of a number cannot be told apart here, so a
string that spells a number exactly (`"42"` in a bigint column) is stored as
that number: exact, but no longer marked as text.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

TEXT_SUFFIX = "__text"  # column names from naming.py never hold "__": no collision
# The types a topic may declare for a path (`hints`): those the rules above know.
HINT_TYPES = ("string", "bigint", "int", "double", "boolean", "date", "timestamp")
JSON_NUMBER = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
JSON_INTEGER = r"^-?(0|[1-9][0-9]*)$"
EXACT_DOUBLE_INTEGER = 2**53  # every integer up to this is a double exactly
LARGEST_DOUBLE = 1.7976931348623157e308
DOUBLE_DIGITS = 15  # significant decimal digits every normal double reads back exactly
SMALLEST_NORMAL_DOUBLE = 2.2250738585072014e-308
ISO_DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
# A date, `T` or a space, a time to at most microseconds, then Z, an offset or nothing.
ISO_TIMESTAMP = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?"
    r"(Z|[+-][0-9]{2}:?[0-9]{2})?$"
)


# A time with digits beyond microseconds: no timestamp holds it, so never re-read as one.
BEYOND_MICROSECONDS = r"[0-9][.,][0-9]{7,}"
# ISO 8601 as `date_format` writes it: microseconds and the offset, `Z` in UTC. Text
# in this form is a timestamp that ISO_TIMESTAMP matches and `cast` reads back.
ISO_TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"


def text_column(column: str) -> str:
    """The name of a column's text companion.

    Example:
        >>> text_column("data_record_id")
        'data_record_id__text'
    """
    return column + TEXT_SUFFIX


def fits(text: Column, data_type: DataType) -> Column:
    """Whether `text` (a value's JSON text) is held exactly by `data_type`; never NULL."""
    return F.coalesce(_fits(text, data_type), F.lit(False))


def _fits(text: Column, data_type: DataType) -> Column:
    if isinstance(data_type, StringType):
        return F.lit(True)
    if isinstance(data_type, LongType | IntegerType | ShortType):
        as_number = text.try_cast(data_type)
        return text.rlike(JSON_INTEGER) & (as_number.cast("string") == text)
    if isinstance(data_type, DoubleType | FloatType):
        number = text.try_cast("double")
        integer = text.try_cast("decimal(38,0)")
        exact_integer = integer.isNotNull() & (F.abs(integer) <= EXACT_DOUBLE_INTEGER)
        finite = F.abs(number) <= LARGEST_DOUBLE
        # Up to 15 significant digits every decimal reads back from a (normal) double
        # exactly; beyond, only the double's own spelling does (a number token's is).
        mantissa = F.regexp_replace(F.regexp_extract(text, r"^-?([0-9.]+)", 1), r"\.", "")
        digits = F.length(F.regexp_replace(mantissa, r"^0+|0+$", ""))
        normal = (number == 0) | (F.abs(number) >= SMALLEST_NORMAL_DOUBLE)
        round_trips = ((digits <= DOUBLE_DIGITS) & normal) | (number.cast("string") == text)
        return (
            text.rlike(JSON_NUMBER)
            & finite
            & F.when(text.rlike(JSON_INTEGER), exact_integer).otherwise(round_trips)
        )
    if isinstance(data_type, BooleanType):
        return text.isin("true", "false")
    if isinstance(data_type, DateType):
        return text.rlike(ISO_DATE) & text.try_cast(data_type).isNotNull()
    if isinstance(data_type, TimestampType | TimestampNTZType):
        return text.rlike(ISO_TIMESTAMP) & text.try_cast(data_type).isNotNull()
    if isinstance(data_type, ArrayType | StructType | MapType):
        return F.to_json(F.from_json(text, data_type)) == text
    return text.try_cast(data_type).cast("string") == text


def exact_value(text: Column, data_type: DataType) -> Column:
    """The value of `text` in `data_type` when it fits exactly, else NULL."""
    if isinstance(data_type, ArrayType | StructType | MapType):
        typed = F.from_json(text, data_type)
    else:
        typed = text.try_cast(data_type)
    return F.when(fits(text, data_type), typed)


def misfit_text(text: Column, data_type: DataType) -> Column:
    """`text` when it does not fit `data_type` (for the text companion), else NULL."""
    return F.when(~fits(text, data_type), text)
