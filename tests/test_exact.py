"""The one rule for "this JSON value fits this column exactly", against hostile values."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from dynamic_ddl.schema.exact import JSON_NUMBER, exact_value, fits, misfit_text

CASES = {
    "bigint": {
        "12": True,
        "-7": True,
        "9223372036854775807": True,
        "9223372036854775808": False,  # beyond bigint
        "012": False,
        "-0": False,
        "1.0": False,
        "1e2": False,
        "2.5": False,
        "x-3": False,
        "true": False,
        " 1": False,
        "": False,
    },
    "double": {
        "2.5": True,
        "12": True,
        "-0.0": True,
        "1.5e3": True,
        "9007199254740992": True,  # 2^53: exact
        "9007199254740993": False,  # 2^53 + 1: a double rounds it
        # Found by review: spelled with a fraction, the same integer was rounded.
        "9007199254740993.0": False,
        "0.10000000000000000001": False,
        "0.30000000000000004": True,  # how the double 0.1 + 0.2 writes itself
        "2.50": True,
        "1.0E20": True,
        "123456789012345678901234567890123456789012": False,
        "1e400": False,  # beyond double
        "NaN": False,
        "Infinity": False,
        "0x10": False,
        "abc": False,
    },
    "boolean": {"true": True, "false": True, "1": False, "True": False},
    "string": {"anything": True, "": True, '{"a":1}': True},
    "array<bigint>": {"[1,2]": True, "[]": True, "[1.5]": False, '["a"]': False, "1": False},
}


@pytest.mark.parametrize("data_type", sorted(CASES))
def test_a_value_fits_only_when_its_type_holds_it_exactly(spark, data_type):
    cases = CASES[data_type]
    texts = spark.createDataFrame([(text,) for text in cases], "text string")
    text = F.col("text")
    rows = texts.select(
        "text",
        fits(text, data_type_of(data_type)).alias("fits"),
        exact_value(text, data_type_of(data_type)).cast("string").alias("value"),
        misfit_text(text, data_type_of(data_type)).alias("kept"),
    ).collect()
    assert {row.text: row.fits for row in rows} == cases
    for row in rows:
        # A value goes to exactly one place: the column or its text companion.
        assert (row.value is None) != (row.kept is None), row
        assert row.kept in (None, row.text)
    # NULL is no value: it fits nowhere and is kept nowhere.
    (null,) = (
        spark.createDataFrame([(None,)], "text string")
        .select(
            exact_value(text, data_type_of(data_type)).alias("value"),
            misfit_text(text, data_type_of(data_type)).alias("kept"),
        )
        .collect()
    )
    assert (null.value, null.kept) == (None, None)


def data_type_of(name: str):
    from dynamic_ddl.schema.registry import spark_type

    return spark_type(name)


DECIMALS = st.decimals(allow_nan=False, allow_infinity=False, places=None).map(str)
FLOATS = st.floats(allow_nan=False, allow_infinity=False).map(repr)


@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(st.one_of(DECIMALS, FLOATS), min_size=1, max_size=40))
def test_a_number_fits_a_double_only_when_the_double_is_exactly_it(spark, texts):
    """Generated decimal text: a value that fits reads back as exactly the number it
    spells (never rounded), and a double's own spelling always fits."""
    frame = spark.createDataFrame([(text,) for text in texts], "text string")
    double = data_type_of("double")
    rows = frame.select("text", fits(F.col("text"), double).alias("fits")).collect()
    for row in rows:
        if not re.fullmatch(JSON_NUMBER, row.text):
            continue
        if row.fits:  # the double reads back (shortest, as Spark writes it) as the text
            assert Decimal(row.text) == Decimal(repr(float(row.text))), row.text
        digits = re.sub(r"^0+|0+$", "", re.sub(r"[^0-9]", "", row.text.split("e")[0].split("E")[0]))
        number = abs(float(row.text))
        few_digits = len(digits) <= 15 and (number == 0 or 2.3e-308 < number < 2**53)
        assert row.fits or not few_digits, row.text
