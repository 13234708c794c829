"""When a batch's values at a path have another type than the path's column.

A column never changes type: Parquet cannot read old files through a new
type (bigint files as double or as string both fail in Spark 4.3), so a
change would rewrite the table's whole history, and `int -> double` would
round every integer above 2^53. Instead, a batch whose values at a path
have a type the column cannot hold as such parses them as text, and each
value goes to the column when it fits exactly, else to the column's text
companion `<column>__text` (schema/exact.py). Only the batch's own
partitions are written.

    same type, or the batch only has nulls there   -> parsed as the column's type
    a string column (it holds any value's text)     -> parsed as text, as always
    array<a> column, array<b> values                -> by the element types
    anything else (bigint column and 2.5, double
    column and integers, bool and number, ...)      -> a conflict: text, split
"""

from __future__ import annotations

from pyspark.sql.types import ArrayType, DataType, NullType, StringType


def parses_into(column: DataType, incoming: DataType) -> bool:
    """Whether values inferred as `incoming` parse straight into a `column` column, exactly.

    Example:
        >>> from pyspark.sql.types import DoubleType, LongType
        >>> parses_into(LongType(), LongType()), parses_into(DoubleType(), LongType())
        (True, False)
    """
    if incoming == column or isinstance(incoming, NullType) or isinstance(column, StringType):
        return True
    if isinstance(column, ArrayType) and isinstance(incoming, ArrayType):
        return parses_into(column.elementType, incoming.elementType)
    return False
