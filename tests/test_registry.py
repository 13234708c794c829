"""Registry planning across batches: new columns, type conflicts, stale columns, the cap."""

from __future__ import annotations

from pyspark.sql.types import DoubleType, LongType, StringType

from dynamic_ddl.schema.flatten import Leaf
from dynamic_ddl.schema.registry import STALE, add_columns_sql, plan_schema


def test_first_batch_adds_every_leaf():
    plan = plan_schema(
        [], [Leaf(("id",), LongType()), Leaf(("Name",), StringType())], "t", "raw_t", "b1", 10
    )
    assert [(e.column_name, e.data_type, e.first_seen_batch) for e in plan.added] == [
        ("name", "string", "b1"),
        ("id", "bigint", "b1"),
    ]
    assert (
        add_columns_sql("raw.t", plan.added)
        == "alter table raw.t add columns (`name` string, `id` bigint)"
    )


def test_drift_adds_columns_flags_conflicts_and_marks_stale_without_changing_a_type():
    first = plan_schema(
        [],
        [Leaf(("id",), LongType()), Leaf(("alt",), DoubleType()), Leaf(("n",), LongType())],
        "t",
        "raw_t",
        "b1",
        10,
    )
    second = plan_schema(
        first.entries,
        [Leaf(("id",), StringType()), Leaf(("n",), DoubleType()), Leaf(("new",), LongType())],
        "t",
        "raw_t",
        "b2",
        10,
        misfits={("id",): 3, ("n",): 0},  # every n fits bigint (2.0, say); some ids do not
    )
    by_name = {e.column_name: e for e in second.entries}
    assert by_name["id"].data_type == "bigint" and by_name["id"].first_seen_batch == "b1"
    assert by_name["n"].data_type == "bigint" and by_name["n"].last_seen_batch == "b2"
    assert by_name["alt"].status == STALE and by_name["alt"].last_seen_batch == "b1"
    assert [e.column_name for e in second.added] == ["new"]
    assert sorted((e.column_name, seen) for e, seen in second.conflicts) == [
        ("id", "string"),
        ("n", "double"),
    ]
    assert second.text_paths() == {("id",), ("n",)}
    assert second.text_columns() == [("id__text", "string")]
    assert add_columns_sql("raw.t", []) is None


def test_cap_sends_new_paths_to_overflow_but_keeps_known_columns():
    first = plan_schema(
        [], [Leaf(("a",), LongType()), Leaf(("b",), LongType())], "t", "raw_t", "b1", 2
    )
    second = plan_schema(
        first.entries, [Leaf(("a",), LongType()), Leaf(("c",), LongType())], "t", "raw_t", "b2", 2
    )
    assert second.added == [] and [leaf.path for leaf in second.overflow] == [("c",)]
    assert {e.column_name for e in second.entries} == {"a", "b"}
