"""Which batch types parse straight into a column, and which are conflicts."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    NullType,
    StringType,
    StructType,
    VariantType,
)

from dynamic_ddl.schema.type_conflicts import parses_into
from tests.test_hostile_inbox import assert_every_line_accounted_for, ingest, write_lines


@pytest.mark.parametrize(
    ("column", "incoming", "straight"),
    [
        (LongType(), LongType(), True),
        (DoubleType(), NullType(), True),
        (StringType(), LongType(), True),  # a string column holds any value's text
        (StringType(), StructType([]), True),
        (ArrayType(StringType()), ArrayType(LongType()), True),
        (LongType(), DoubleType(), False),
        (DoubleType(), LongType(), False),  # integers beyond 2^53 would round
        (LongType(), StringType(), False),
        (BooleanType(), LongType(), False),
        (LongType(), StructType([]), False),
        (LongType(), VariantType(), False),
        (ArrayType(LongType()), ArrayType(DoubleType()), False),
        (ArrayType(LongType()), LongType(), False),
    ],
)
def test_only_types_the_column_holds_as_such_parse_straight_into_it(column, incoming, straight):
    assert parses_into(column, incoming) is straight


FLIPS = [  # (JSON text of n, how a reader gets it back: the bigint, or the kept text)
    ("1", 1),
    ('"two"', "two"),
    ("2.5", "2.5"),
    ("9007199254740993", 9007199254740993),  # 2^53 + 1 fits bigint: never through a double
    ("true", "true"),
    ('"42"', 42),  # a string spelling a bigint exactly is that bigint
    ("-0", 0),  # the integer -0 is 0
    ('{"x": 1}', None),  # an object: its leaves get columns (n.x), n has no value here
]


def table_files(spark, table: str) -> dict[str, tuple[int, int]]:
    """Every data file of a table: path -> (size, modification time in ns)."""
    from dynamic_ddl.ingest.tables import table_location

    location = urlparse(table_location(spark, table)).path
    return {
        str(path): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in Path(location).rglob("*.parquet")
    }


def test_a_key_that_flips_type_every_batch_loses_no_value_and_rewrites_no_old_file(spark, tmp_path):
    """`n` starts as bigint and then changes type with every batch: the column keeps
    its type, each value is in it or, as its exact text, in `n__text`, and every batch
    writes new files only, leaving every earlier file as it was."""
    schema = "type_flips"
    seen: dict[str, tuple[int, int]] = {}
    for number, (text, _) in enumerate(FLIPS, start=1):
        write_lines(
            tmp_path,
            f"{number}.json",
            [f'{{"id": {number}, "ts": "2026-11-0{number % 9 + 1}", "n": {text}}}'],
        )
        ingest(spark, schema, tmp_path)
        files = table_files(spark, f"{schema}.raw_feed")
        assert {path: files.get(path) for path in seen} == seen, f"batch {number} rewrote"
        seen = files
    raw = spark.table(f"{schema}.raw_feed")
    assert dict(raw.dtypes)["n"] == "bigint"
    got = {
        row.id: row.n if row.n is not None else row.n__text
        for row in raw.select("id", "n", "n__text").collect()
    }
    assert got == {number: expected for number, (_, expected) in enumerate(FLIPS, start=1)}
    assert raw.where("id = 8").first().n_x == 1
    assert_every_line_accounted_for(spark, schema)


# Lines holding a number beyond a double, each where Spark's reader would make it
# +-Infinity: a new double path, a bigint column's conflict (parsed as text), an
# element of an array of numbers, a child table's element, an array of arrays (JSON
# text), a digit run beyond 308 digits. The last lines are kept: the string "Infinity"
# beside a big but finite number, and 1e-400 (rounds to 0.0, as every double rounds).
# (A string whose text is "Infinity" with its quotes, beside such a number, is the one
# line quarantined in error: parse.beyond_double.)
BEYOND_DOUBLE = [
    '{"id": 2, "ts": "2026-11-02", "n": 1e400}',
    '{"id": 3, "ts": "2026-11-02", "d": -1E+400}',
    '{"id": 4, "ts": "2026-11-02", "xs": [1.5, 2e999]}',
    '{"id": 5, "ts": "2026-11-02", "items": [{"v": 1.5}, {"v": 1e400}]}',
    '{"id": 6, "ts": "2026-11-02", "grid": [[1], [1e400]]}',
    '{"id": 7, "ts": "2026-11-02", "n": 1' + "0" * 400 + ".5}",
]
KEPT = [
    '{"id": 8, "ts": "2026-11-02", "n": 1.5e300, "s": "Infinity"}',
    '{"id": 9, "ts": "2026-11-02", "d": 1e-400, "xs": [1.5], "items": [{"v": 2.5}]}',
]


def test_a_number_beyond_double_is_quarantined_never_stored_as_infinity(spark, tmp_path):
    write_lines(tmp_path, "1.json", ['{"id": 1, "ts": "2026-11-01", "n": 1}'])
    ingest(spark, "beyond_double", tmp_path)
    write_lines(tmp_path, "2.json", BEYOND_DOUBLE + KEPT)
    ingest(spark, "beyond_double", tmp_path)
    quarantined = spark.table("beyond_double.raw_quarantine")
    assert {row.raw_text: row.reason for row in quarantined.collect()} == dict.fromkeys(
        BEYOND_DOUBLE, "number_out_of_range"
    )
    raw = spark.table("beyond_double.raw_feed")
    assert sorted(row.id for row in raw.collect()) == [1, 8, 9]
    kept = {row.id: row for row in raw.where("id >= 8").collect()}
    assert kept[8].n__text == "1.5E300" and kept[8].s == "Infinity"
    assert kept[9].d == 0.0
    children = spark.table("beyond_double.raw_feed__items").collect()
    assert [row.items_v for row in children] == [2.5]
    # No number anywhere reads as Infinity.
    for table in ("raw_feed", "raw_feed__items"):
        rows = spark.table(f"beyond_double.{table}").drop("s")
        as_json = rows.select(F.to_json(F.struct("*")).alias("row")).collect()
        assert not [row for row in as_json if "Infinity" in row.row]
    assert_every_line_accounted_for(spark, "beyond_double")
