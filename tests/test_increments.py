"""Incremental reads that do not grow with a table's age: what changed since a commit is
found from the commit log, the newest value stored from the last commit's version, and
a raw batch is taken only once its ledger entry is committed (upsert/increments.py,
landing/batches.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynamic_ddl import steps
from dynamic_ddl.catalog import spark_sql
from dynamic_ddl.landing.batches import unseen_batches_filter
from dynamic_ddl.upsert import commit_log
from dynamic_ddl.upsert.commit_log import read_log
from dynamic_ddl.upsert.increments import changed_since_filter, greatest_value
from dynamic_ddl.upsert.protocol import rollback_last_commit, upsert
from dynamic_ddl.upsert.spec import UpsertSpec
from tests.test_hostile_inbox import ingest, write_lines

SCHEMA = "increments"


@pytest.fixture
def schema(spark):
    spark.sql(f"drop database if exists {SCHEMA} cascade")
    spark.sql(f"create database {SCHEMA}")
    return SCHEMA


def _commit(spark, spec: UpsertSpec, rows: list[tuple[str, int, str]]) -> str:
    values = ", ".join(f"('{key}', {ts}, '{day}')" for key, ts, day in rows)
    spark.sql(f"create or replace temporary view batch (id, ts, day) as values {values}")
    return upsert(spark_sql(spark), spec, "batch").commit_id


def _recording(spark):
    statements: list[str] = []
    run = spark_sql(spark)

    def sql(statement: str):
        statements.append(statement)
        return run(statement)

    return sql, statements


def test_changed_since_lists_only_the_changed_partitions(spark, schema, monkeypatch):
    spec = UpsertSpec(f"{schema}.up", ("id",), "ts", ("day",))
    seen = _commit(spark, spec, [(f"k{d}", 1, f"d{d}") for d in range(1, 6)])
    monkeypatch.setattr(commit_log, "COMPACT_AFTER", 3)  # later commits compact the log
    _commit(spark, spec, [("k2", 2, "d2"), ("k6", 2, "d6")])
    _commit(spark, spec, [("k4", 3, "d4"), ("k1", 0, "d1")])  # k1 loses: d1 is unchanged
    assert read_log(spark_sql(spark), spec).entries <= 3, "the log was not compacted"

    where = changed_since_filter(spark_sql(spark), spec, spec.target, seen)
    assert "'d2'" in where and "'d4'" in where and "'d6'" in where
    assert "'d1'" not in where and "'d3'" not in where and "'d5'" not in where
    pulled = spark.sql(f"select id from {spec.target} where {where}").collect()
    everything = spark.sql(f"select id from {spec.target} where _commit_id > '{seen}'").collect()
    assert sorted(r.id for r in pulled) == sorted(r.id for r in everything) == ["k2", "k4", "k6"]


def test_the_newest_value_is_read_from_the_last_commit_only(spark, schema):
    spec = UpsertSpec(f"{schema}.up", ("id",), "ts", ("day",))
    _commit(spark, spec, [("a", 5, "d1"), ("b", 9, "d2")])
    _commit(spark, spec, [("c", 12, "d3")])
    sql, statements = _recording(spark)
    assert greatest_value(sql, spec, "ts") == 12
    (read,) = [s for s in statements if "max(" in s]
    assert "__versions" in read and "_version =" in read  # not the whole table

    rollback_last_commit(spark_sql(spark), spec)  # no last commit: read whole, still right
    assert greatest_value(spark_sql(spark), spec, "ts") == 9


def test_a_batch_still_being_written_is_not_taken(spark, schema, tmp_path: Path):
    inbox = tmp_path / "inbox"
    write_lines(inbox, "a.json", ['{"id": 1, "ts": "2026-11-01T00:00:00Z"}'])
    ingest(spark, schema, inbox)
    write_lines(inbox, "b.json", ['{"id": 2, "ts": "2026-11-01T00:00:00Z"}'])

    def stop_before_commit(step: str) -> None:
        if step == "raw.write_registry":
            raise steps.Interrupted(step)

    with pytest.raises(steps.Interrupted), steps.hooked(stop_before_commit):
        ingest(spark, schema, inbox)
    raw = spark.table(f"{schema}.raw_feed")
    assert raw.count() == 2  # the second batch's rows are visible, its ledger entry pending
    where = unseen_batches_filter(spark_sql(spark), "_batch_id", None, f"{schema}.raw_feed")
    assert [row.id for row in raw.where(where).collect()] == [1]

    ingest(spark, schema, inbox)  # the rerun commits it: now it is taken
    where = unseen_batches_filter(spark_sql(spark), "_batch_id", None, f"{schema}.raw_feed")
    assert sorted(row.id for row in raw.where(where).collect()) == [1, 2]
