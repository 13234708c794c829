"""Flattening nested records into leaf columns and child arrays, on a real Spark."""

from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from dynamic_ddl.schema.flatten import flat_columns, max_depth, split_schema
from dynamic_ddl.schema.naming import assign_column_names
from dynamic_ddl.schema.variant_schema import parse_variant_type

RECORD = (
    '{"_data": {"record": {"id": 1, "State": "CA", "state": "ca"}, "a.b": 2, "a": {"b": 3},'
    ' "media": [{"t": "video"}], "tags": ["x", "y"], "empty": {}}}'
)


def parse_batch(spark, lines):
    """Parse lines once into VARIANT and infer the batch's schema in the same pass."""
    parsed = spark.createDataFrame([(line,) for line in lines], "value string").select(
        F.try_parse_json("value").alias("v")
    )
    schema = parse_variant_type(parsed.select(F.expr("schema_of_variant_agg(v)")).first()[0])
    return parsed, schema


def test_nested_fields_become_named_columns(spark):
    parsed, schema = parse_batch(spark, [RECORD])
    leaves, children = split_schema(schema)
    names = assign_column_names(leaf.path for leaf in leaves)
    flat = parsed.select(flat_columns(F.col("v"), leaves, names))

    # Collision suffixes are path hashes: look them up rather than spell them.
    a_b_key = names[("_data", "a.b")]
    state_lower = names[("_data", "record", "state")]
    assert names[("_data", "a", "b")] == "data_a_b" and a_b_key.startswith("data_a_b_")
    assert names[("_data", "record", "State")] == "data_record_state"
    assert state_lower.startswith("data_record_state_")
    expected = spark.createDataFrame(
        [(3, 2, 1, "CA", "ca", ["x", "y"])],
        f"data_a_b bigint, {a_b_key} bigint, data_record_id bigint, "
        f"data_record_state string, {state_lower} string, data_tags array<string>",
    )
    assertDataFrameEqual(
        flat.select(sorted(flat.columns)), expected.select(sorted(expected.columns))
    )
    assert [child.path for child in children] == [("_data", "media")]


def test_conflicting_types_come_back_as_variant(spark):
    _, schema = parse_batch(spark, ['{"id": 1}', '{"id": "abc"}'])
    assert schema.simpleString() == "struct<id:variant>"


def test_depth_counts_objects_and_arrays():
    assert max_depth(parse_variant_type("OBJECT<a: OBJECT<b: ARRAY<BIGINT>>>")) == 3
