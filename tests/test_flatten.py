"""Flattening nested records into leaf columns and child arrays, on a real Spark."""

from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from dynamic_ddl.schema.flatten import (
    field_at,
    max_depth,
    positional_type,
    split_schema,
    with_leaf_types,
)

RECORD = (
    '{"_data": {"record": {"id": 1, "State": "CA", "state": "ca"}, "a.b": 2, "a": {"b": 3},'
    ' "media": [{"t": "video"}], "tags": ["x", "y"]}}'
)


def test_leaves_are_read_by_position_so_similar_keys_stay_apart(spark):
    schema = StructType(
        [
            StructField(
                "_data",
                StructType(
                    [
                        StructField(
                            "record",
                            StructType(
                                [
                                    StructField("id", LongType()),
                                    StructField("State", StringType()),
                                    StructField("state", StringType()),
                                ]
                            ),
                        ),
                        StructField("a.b", LongType()),
                        StructField("a", StructType([StructField("b", LongType())])),
                        StructField("media", StringType()),
                        StructField("tags", StringType()),
                    ]
                ),
            )
        ]
    )
    leaves, children = split_schema(schema)
    parsed = spark.createDataFrame([(RECORD,)], "line string").select(
        F.from_json("line", schema).cast(positional_type(schema)).alias("r")
    )
    values = parsed.select([field_at(F.col("r"), leaf.ordinals) for leaf in leaves]).first()
    got = dict(zip([leaf.path for leaf in leaves], values, strict=True))
    assert got[("_data", "record", "State")] == "CA" and got[("_data", "record", "state")] == "ca"
    assert got[("_data", "a.b")] == 2 and got[("_data", "a", "b")] == 3
    assert children == []


def test_arrays_of_objects_become_children_and_can_be_retyped():
    element = StructType([StructField("qty", LongType())])

    schema = StructType([StructField("items", ArrayType(element)), StructField("id", LongType())])
    leaves, children = split_schema(schema)
    assert [leaf.path for leaf in leaves] == [("id",)]
    assert [child.path for child in children] == [("items",)]
    retyped = with_leaf_types(schema, {("items", "[]", "qty"): StringType(), ("id",): StringType()})
    assert retyped.simpleString() == "struct<items:array<struct<qty:string>>,id:string>"


def test_depth_counts_objects_and_arrays():
    inner = StructType([StructField("b", StringType())])
    assert max_depth(StructType([StructField("a", inner)])) == 2
