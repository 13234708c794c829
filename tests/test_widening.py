"""The widening policy for raw column types."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    NullType,
    StringType,
    StructType,
    VariantType,
)

from dynamic_ddl.schema.widening import widen


@pytest.mark.parametrize(
    ("current", "incoming", "expected"),
    [
        (LongType(), LongType(), LongType()),
        (NullType(), BooleanType(), BooleanType()),
        (DoubleType(), NullType(), DoubleType()),
        (IntegerType(), LongType(), LongType()),
        (LongType(), DoubleType(), DoubleType()),
        (DecimalType(10, 2), LongType(), DoubleType()),
        (LongType(), StringType(), StringType()),
        (BooleanType(), LongType(), StringType()),
        (StructType([]), LongType(), StringType()),
        (LongType(), VariantType(), StringType()),
        (ArrayType(LongType()), ArrayType(DoubleType()), ArrayType(DoubleType())),
        (ArrayType(LongType()), LongType(), StringType()),
    ],
)
def test_widen(current, incoming, expected):
    assert widen(current, incoming) == expected
    assert widen(incoming, current) == expected
