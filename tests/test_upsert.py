"""Copy-on-write upserts on a real Spark: latest wins, only changed partitions move,
reruns change nothing, a killed commit is finished, the last commit rolls back."""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlparse

import pytest
from dbt.adapters.spark.session import Connection as SessionConnection
from dbt_common.exceptions import CompilationError

from dynamic_ddl import sql_text, steps
from dynamic_ddl.adapter.connections import EscapingSessionConnectionWrapper
from dynamic_ddl.adapter.impl import upsert_spec
from dynamic_ddl.catalog import spark_sql, table_columns
from dynamic_ddl.upsert import merge as upsert_merge
from dynamic_ddl.upsert.protocol import UpsertError, UpsertSpec, rollback_last_commit, upsert
from dynamic_ddl.upsert.spec import is_reserved
from dynamic_ddl.upsert.tables import refuse_missing_columns

SCHEMA = "upsert_tests"
COLUMNS = "day string, device string, state string, log_ts bigint, gone boolean"


@pytest.fixture(scope="module")
def sql(spark):
    spark.sql(f"drop schema if exists {SCHEMA} cascade")
    spark.sql(f"create schema {SCHEMA}")
    return spark_sql(spark)


def _spec(name: str, **overrides) -> UpsertSpec:
    settings = {
        "target": f"{SCHEMA}.{name}",
        "unique_key": ("device",),
        "ordering_field": "log_ts",
        "partition_by": ("day",),
        "delete_marker": "gone",
    }
    return UpsertSpec(**{**settings, **overrides})


def _batch(spark, rows: list[tuple]) -> str:
    """A batch as a temp view (day, device, state, log_ts, gone)."""
    spark.createDataFrame(rows, COLUMNS).createOrReplaceTempView("batch")
    return "batch"


def _rows(spark, table: str) -> list[tuple]:
    rows = spark.sql(f"select day, device, state, log_ts from {table}").collect()
    return sorted((tuple(r) for r in rows), key=lambda row: tuple(map(str, row)))


def _files(spark, table: str, day: str) -> dict[str, float]:
    """The data files a partition reads, with their modification times."""
    rows = spark.sql(f"describe table extended {table} partition (day = '{day}')").collect()
    location = urlparse(next(r[1] for r in rows if r[0] == "Location")).path
    return {
        entry.name: entry.stat().st_mtime
        for entry in os.scandir(location)
        if entry.name.endswith(".parquet")
    }


def test_another_key_than_the_table_was_built_with_is_refused(spark, sql):
    """Found by review: a model whose unique_key was made coarser kept one row per new key
    in the partitions a commit touched, and duplicates in the others, silently."""
    spec = _spec("rekeyed", unique_key=("device", "state"))
    upsert(sql, spec, _batch(spark, [("d1", "a", "on", 1, False), ("d1", "a", "off", 1, False)]))
    batch = _batch(spark, [("d1", "a", "on", 2, False)])
    for other in (replace(spec, unique_key=("device",)), replace(spec, global_key=True)):
        with pytest.raises(UpsertError, match="holds rows unique by device,state.*full-refresh"):
            upsert(sql, other, batch)
    assert len(_rows(spark, spec.target)) == 2
    # A table built before keys were recorded takes the model's.
    spark.sql(f"alter table {spec.target} unset tblproperties ('dynamic_ddl.unique_key')")
    upsert(sql, spec, batch)
    with pytest.raises(UpsertError, match="holds rows unique by device,state"):
        upsert(sql, replace(spec, unique_key=("device",)), batch)


def test_a_key_spark_would_redact_is_recorded_and_read_back(spark, sql):
    """Found by review: `show tblproperties` redacts a value holding `url` or `token`, so a
    table keyed by `page_url` read its key back as `*********(redacted)`, and every run
    after the first was refused."""
    spec = _spec("redacted_key", unique_key=("page_url",), delete_marker=None)
    for row in ("'/a' as page_url, 1L as log_ts", "'/a' as page_url, 2L as log_ts"):
        spark.sql(f"select 'd1' as day, {row}").createOrReplaceTempView("urls")
        upsert(sql, spec, "urls")
    assert spark.sql(f"select page_url, log_ts from {spec.target}").collect() == [("/a", 2)]


def test_a_null_key_is_one_key_and_the_latest_wins(spark, sql):
    """Decided (docs/decisions/0006, "NULL keys"): keys compare null-safely, as the pivot's
    group by does, so rows without a device are one key: the latest row wins, in a batch
    and across commits (dbt's MERGE would insert one more row at every run)."""
    spec = _spec("null_keys", unique_key=("device", "state"), delete_marker=None)
    rows = [("d1", None, None, 1, False), ("d1", None, None, 3, False), ("d1", "a", None, 2, False)]
    upsert(sql, spec, _batch(spark, rows))
    assert _rows(spark, spec.target) == [("d1", None, None, 3), ("d1", "a", None, 2)]
    upsert(sql, spec, _batch(spark, [("d1", None, None, 5, False), ("d1", None, "on", 4, False)]))
    expected = [("d1", None, None, 5), ("d1", None, "on", 4), ("d1", "a", None, 2)]
    assert _rows(spark, spec.target) == expected


def test_a_column_named_with_a_hash_is_stored_like_any(spark, sql):
    """Found by review: `describe` lists sections as `# Partition Information`; a column
    `#events` was taken for one, and it and the columns after it were never stored."""
    spec = _spec("hashed", delete_marker=None)
    spark.sql(
        "select 'd1' as day, 'a' as device, 3 as `#events`, 'x' as city, 1L as log_ts"
    ).createOrReplaceTempView("hashed_batch")
    upsert(sql, spec, "hashed_batch")
    row = spark.sql(f"select `#events`, city, log_ts, day from {spec.target}").first()
    assert tuple(row) == (3, "x", 1, "d1")


def test_a_struct_whose_field_names_need_quotes_is_stored_whole(spark, sql):
    """Found by review: `describe` writes a struct's field names bare
    (`struct<a-b:int,c:d:...>`), and the version store's DDL made from that text failed.
    A struct of plain names keeps `describe`'s text."""
    spec = _spec("hostile_fields", delete_marker=None)
    fields = "'a-b', 1, 'c:d', array(named_struct('x y', 'z')), 'e,f<g>', map('k', 1.5)"
    for log_ts in (1, 2):  # the second commit rewrites the partition through the store
        spark.sql(
            f"select 'd1' as day, 'a' as device, named_struct({fields}) as s,"
            f" named_struct('plain', 1) as p, {log_ts}L as log_ts"
        ).createOrReplaceTempView("hostile_fields_batch")
        upsert(sql, spec, "hostile_fields_batch")
    row = spark.sql(
        f"select s.`a-b`, s.`c:d`[0].`x y`, s.`e,f<g>`['k'], p.plain, log_ts from {spec.target}"
    ).first()
    assert tuple(row) == (1, "z", Decimal("1.5"), 1, 2)
    written = dict(tuple(r)[:2] for r in spark.sql(f"describe {spec.target}").collect())
    assert dict(table_columns(sql, spec.target))["p"] == written["p"] == "struct<plain:int>"


def test_a_struct_of_many_fields_is_stored_whole(spark, sql):
    """Found by review: `describe` cut a struct's type past 25 fields, and the DDL made
    from it failed."""
    spec = _spec("wide_struct", delete_marker=None)
    fields = ", ".join(f"'f{i}', {i}" for i in range(30))
    spark.sql(
        f"select 'd1' as day, 'a' as device, named_struct({fields}) as s, 1L as log_ts"
    ).createOrReplaceTempView("wide_batch")
    upsert(sql, spec, "wide_batch")
    assert spark.sql(f"select s.f29 from {spec.target}").first()[0] == 29


def test_the_greatest_ordering_value_wins_within_and_across_batches(spark, sql):
    spec = _spec("latest")
    upsert(
        sql,
        spec,
        _batch(
            spark,
            [
                ("d1", "a", "old", 1, False),
                ("d1", "a", "new", 2, False),  # same batch, later: wins
                ("d1", "b", "on", 5, False),
            ],
        ),
    )
    assert _rows(spark, spec.target) == [("d1", "a", "new", 2), ("d1", "b", "on", 5)]

    upsert(
        sql,
        spec,
        _batch(
            spark,
            [
                ("d1", "a", "late", 1, False),  # older update arriving late: ignored
                ("d1", "b", "fixed", 5, False),  # same ordering value: the correction wins
            ],
        ),
    )
    assert _rows(spark, spec.target) == [("d1", "a", "new", 2), ("d1", "b", "fixed", 5)]


def test_a_table_named_in_another_case_keeps_its_history(spark, sql):
    """Spark's catalog keeps one table whatever the case of its name: a model renamed
    from `Cased` to `cased` commits into the same table and log (found by review: the
    log was keyed by the name as spelled, the next commit read it empty and dropped
    every version the table read). A log kept under another case is refused."""
    upsert(sql, _spec("Cased"), _batch(spark, [("d1", "a", "on", 1, False)]))
    upsert(sql, _spec("Cased"), _batch(spark, [("d2", "b", "on", 1, False)]))
    upsert(sql, _spec("cased"), _batch(spark, [("d3", "c", "on", 1, False)]))
    expected = [("d1", "a", "on", 1), ("d2", "b", "on", 1), ("d3", "c", "on", 1)]
    assert _rows(spark, f"{SCHEMA}.cased") == expected
    log = f"{SCHEMA}.upsert_commits"
    spark.sql(
        f"alter table {log} partition (table_name = 'cased')"
        " rename to partition (table_name = 'CASED')"
    )
    with pytest.raises(UpsertError, match="table_name = 'CASED'"):
        upsert(sql, _spec("cased"), _batch(spark, [("d4", "d", "on", 1, False)]))
    assert _rows(spark, f"{SCHEMA}.cased") == expected


def test_ties_within_a_batch_resolve_the_same_whatever_the_input_order(spark, sql):
    tied = [("d1", "a", "x", 1, False), ("d1", "a", "y", 1, False)]
    upsert(sql, _spec("tie_1"), _batch(spark, tied))
    upsert(sql, _spec("tie_2"), _batch(spark, list(reversed(tied))))
    assert _rows(spark, f"{SCHEMA}.tie_1") == _rows(spark, f"{SCHEMA}.tie_2")


def test_a_delete_marker_removes_the_key_and_an_emptied_partition(spark, sql):
    spec = _spec("deletes", tombstone_days=0)
    upsert(sql, spec, _batch(spark, [("d1", "a", "on", 1, False), ("d2", "b", "on", 1, False)]))
    upsert(sql, spec, _batch(spark, [("d1", "a", None, 2, True), ("d2", "b", None, 0, True)]))
    # b's delete is older than b's row: b stays; a's partition is left empty (it reads an
    # empty version, so readers of changes see it changed).
    assert _rows(spark, spec.target) == [("d2", "b", "on", 1)]
    assert [r[0] for r in sql(f"show partitions {spec.target}")] == ["day=d1", "day=d2"]
    # Without tombstones a late, older update brings a back (what tombstones prevent).
    upsert(sql, spec, _batch(spark, [("d1", "a", "late", 1, False)]))
    assert ("d1", "a", "late", 1) in _rows(spark, spec.target)


def test_a_delete_beats_older_updates_that_arrive_later(spark, sql):
    spec = _spec("tombstones")
    upsert(sql, spec, _batch(spark, [("d1", "a", "on", 5, False), ("d1", "b", "on", 5, False)]))
    upsert(sql, spec, _batch(spark, [("d1", "a", None, 10, True)]))  # delete at t=10
    assert _rows(spark, spec.target) == [("d1", "b", "on", 5)]
    # A late update at t=7, and a delete repeated: nothing changes, no commit.
    late = [("d1", "a", "late", 7, False), ("d1", "a", None, 10, True)]
    assert upsert(sql, spec, _batch(spark, late)).commit_id is None
    assert _rows(spark, spec.target) == [("d1", "b", "on", 5)]
    # An update newer than the delete brings the key back.
    upsert(sql, spec, _batch(spark, [("d1", "a", "back", 11, False)]))
    assert _rows(spark, spec.target) == [("d1", "a", "back", 11), ("d1", "b", "on", 5)]


def test_another_ranking_than_the_table_kept_rows_by_is_refused(spark, sql):
    """Stop 50's list: a tombstone keeps its key, ordering and partition values only, so
    after ordering_field or tie_break changed an old delete ranked NULL, and any older
    update brought its key back. Without deletes too (review): the rows kept so far won
    under the old ranking, so incremental runs would differ from a build from scratch."""

    def batch(rows: list[tuple]) -> str:
        spark.createDataFrame(rows, f"{COLUMNS}, seq bigint").createOrReplaceTempView("ranked")
        return "ranked"

    spec = _spec("reranked")
    upsert(sql, spec, batch([("d1", "a", "on", 5, False, 5), ("d1", "b", "on", 5, False, 5)]))
    upsert(sql, spec, batch([("d1", "a", None, 10, True, 10)]))  # a deleted at 10
    late = batch([("d1", "a", "late", 7, False, 7)])
    for other in (replace(spec, ordering_field="seq"), replace(spec, tie_break=("seq",))):
        message = r"ranked by log_ts, but the model ranks by (seq|log_ts,seq) .* remembered"
        with pytest.raises(UpsertError, match=message):
            upsert(sql, other, late)
    assert upsert(sql, spec, late).commit_id is None  # under its own ranking: still deleted
    assert _rows(spark, spec.target) == [("d1", "b", "on", 5)]
    plain = _spec("reranked_plain", delete_marker=None, tie_break=("seq", "state"))
    upsert(sql, plain, batch([("d1", "a", "on", 5, False, 1), ("d1", "a", "off", 5, False, 2)]))
    with pytest.raises(
        UpsertError, match=r"by log_ts,seq,state, but .* by log_ts,state,seq .*--full-refresh"
    ):
        upsert(sql, replace(plain, tie_break=("state", "seq")), late)
    assert _rows(spark, plain.target) == [("d1", "a", "off", 5)]


def test_rows_built_another_way_or_no_longer_noted_are_refused(spark, sql):
    """Decision 0007: a table records how its model built the rows (`built_with`, noted by
    the pivot and event time macros); a run that builds them another way, or no longer
    notes how, is refused before anything changes, naming the model's full refresh."""
    pivot = '[{"macro": "pivot_key_values", "max_columns": 1}]'
    spec = _spec("noted", delete_marker=None, built_with=pivot, model_name="lnd_noted")
    first = [("d1", "a", "on", 1, False)]
    upsert(sql, spec, _batch(spark, first))
    wider = pivot.replace("1", "2")
    for other, named in (
        (wider, r'with \{"macro": "pivot_key_values", "max_columns": 1\}; now .*"max_columns": 2'),
        ("", "which the model no longer notes"),
    ):
        with pytest.raises(UpsertError, match=f"{named}.*full-refresh -s lnd_noted\\+"):
            upsert(
                sql, replace(spec, built_with=other), _batch(spark, [("d1", "a", "x", 2, False)])
            )
    assert _rows(spark, spec.target) == [("d1", "a", "on", 1)]
    assert upsert(sql, spec, _batch(spark, first)).commit_id is None  # as built: goes on


def test_a_delete_that_arrives_first_and_empties_a_partition_is_remembered(spark, sql):
    spec = _spec("early_delete")
    upsert(sql, spec, _batch(spark, [("d1", "a", "on", 1, False)]))
    upsert(sql, spec, _batch(spark, [("d1", "a", None, 2, True), ("d2", "z", None, 9, True)]))
    assert _rows(spark, spec.target) == []
    # Both partitions read an empty version and remember their delete, on both
    # sides of a rollback of a later commit.
    upsert(sql, spec, _batch(spark, [("d1", "a", "late", 1, False), ("d2", "z", "late", 8, False)]))
    upsert(sql, spec, _batch(spark, [("d3", "c", "on", 1, False)]))
    rollback_last_commit(sql, spec)
    upsert(sql, spec, _batch(spark, [("d1", "a", "late", 1, False), ("d2", "z", "late", 8, False)]))
    assert _rows(spark, spec.target) == []
    tombstones = spark.sql(
        f"select day, device, state, log_ts from {spec.versions} where _version like '%-tombstones'"
    ).collect()
    assert sorted(tuple(r) for r in tombstones) == [("d1", "a", None, 2), ("d2", "z", None, 9)]


def test_a_first_delete_without_an_ordering_value_gets_its_commit(spark, sql):
    """Found by review: a delete of a key never stored, with a NULL ordering value,
    matched the NULL of the stored delete it lacked, was kept as unchanged, and its
    tombstone was written with no commit id or time."""
    spec = _spec("null_ordered_delete")
    upsert(sql, spec, _batch(spark, [("d1", "a", "on", 1, False)]))
    upsert(sql, spec, _batch(spark, [("d1", "a", "off", 2, False), ("d1", "b", None, None, True)]))
    assert _rows(spark, spec.target) == [("d1", "a", "off", 2)]
    tombstones = spark.sql(
        f"select device, _commit_id, _commit_ts from {spec.versions}"
        " where _version like '%-tombstones'"
    ).collect()
    assert [row.device for row in tombstones] == ["b"]
    assert all(row._commit_id and row._commit_ts for row in tombstones), tombstones


def test_a_global_key_moves_between_partitions(spark, sql):
    spec = _spec("moves", global_key=True, tombstone_days=0)
    first = [("d1", "a", "on", 1, False), ("d1", "b", "on", 1, False), ("d2", "c", "on", 1, False)]
    upsert(sql, spec, _batch(spark, first))
    # a is corrected to d2: it leaves d1, which keeps b.
    result = upsert(sql, spec, _batch(spark, [("d2", "a", "moved", 2, False)]))
    assert result.changed_partitions == 2
    assert _rows(spark, spec.target) == [
        ("d1", "b", "on", 1),
        ("d2", "a", "moved", 2),
        ("d2", "c", "on", 1),
    ]
    # b moves too: d1 is left empty, and still listed (it changed).
    upsert(sql, spec, _batch(spark, [("d3", "b", "moved", 3, False)]))
    assert [r[0] for r in sql(f"show partitions {spec.target}")] == ["day=d1", "day=d2", "day=d3"]
    assert _rows(spark, spec.target) == [
        ("d2", "a", "moved", 2),
        ("d2", "c", "on", 1),
        ("d3", "b", "moved", 3),
    ]
    # An older row of a, arriving late in its first partition, loses: no commit.
    assert upsert(sql, spec, _batch(spark, [("d1", "a", "late", 1, False)])).commit_id is None
    # One key in two partitions of one batch: the newest row only.
    upsert(sql, spec, _batch(spark, [("d4", "x", "old", 1, False), ("d5", "x", "new", 2, False)]))
    assert [r for r in _rows(spark, spec.target) if r[1] == "x"] == [("d5", "x", "new", 2)]
    # A delete that arrives in another partition removes the key where it is stored.
    upsert(sql, spec, _batch(spark, [("d9", "c", None, 5, True)]))
    assert [r[1] for r in _rows(spark, spec.target)] == ["a", "b", "x"]
    # Without a global key, the same correction leaves the key in both partitions.
    local = _spec("moves_local", tombstone_days=0)
    upsert(sql, local, _batch(spark, first))
    upsert(sql, local, _batch(spark, [("d2", "a", "moved", 2, False)]))
    assert [r[:2] for r in _rows(spark, local.target) if r[1] == "a"] == [("d1", "a"), ("d2", "a")]


def test_a_global_key_meets_its_remembered_delete_in_another_partition(spark, sql):
    spec = _spec("moves_tombstones", global_key=True)
    upsert(sql, spec, _batch(spark, [("d1", "a", "on", 5, False), ("d1", "b", "on", 5, False)]))
    upsert(sql, spec, _batch(spark, [("d1", "a", None, 10, True)]))  # delete at t=10
    # A late update at t=7 in another partition loses to the delete; one at t=11 wins.
    assert upsert(sql, spec, _batch(spark, [("d2", "a", "late", 7, False)])).commit_id is None
    assert _rows(spark, spec.target) == [("d1", "b", "on", 5)]
    upsert(sql, spec, _batch(spark, [("d2", "a", "back", 11, False)]))
    assert _rows(spark, spec.target) == [("d1", "b", "on", 5), ("d2", "a", "back", 11)]
    # The same delete sent again, dated elsewhere, while its first partition is rewritten:
    # the delete is still remembered (in one of the two), so a late update loses.
    upsert(sql, spec, _batch(spark, [("d1", "c", None, 20, True)]))
    both = [("d3", "c", None, 20, True), ("d1", "b", "again", 6, False)]
    upsert(sql, spec, _batch(spark, both))
    assert upsert(sql, spec, _batch(spark, [("d4", "c", "late", 15, False)])).commit_id is None
    assert sorted(r[1] for r in _rows(spark, spec.target)) == ["a", "b"]


def test_a_global_key_refuses_what_cannot_find_a_key_whole():
    for option in ({"partial_updates": True, "delete_marker": None}, {"predicates": ("true",)}):
        with pytest.raises(UpsertError, match="global_key cannot be combined"):
            _spec("refused", global_key=True, **option).validate()


def test_a_delete_is_remembered_in_a_boolean_partition(spark, sql):
    # Spark names a boolean partition `flag=true` where Python says True.
    spec = UpsertSpec(f"{SCHEMA}.flagged", ("device",), "log_ts", ("flag",), "gone")

    def batch(rows: list[tuple]) -> str:
        spark.createDataFrame(
            rows, "flag boolean, device string, log_ts bigint, gone boolean"
        ).createOrReplaceTempView("batch")
        return "batch"

    upsert(sql, spec, batch([(True, "a", 1, False), (True, "b", 1, False)]))
    upsert(sql, spec, batch([(True, "a", 10, True)]))
    upsert(sql, spec, batch([(True, "a", 7, False)]))  # late, older than the delete
    rows = spark.sql(f"select device from {spec.target}").collect()
    assert [r.device for r in rows] == ["b"]


def test_a_delete_is_forgotten_after_its_horizon(spark, sql):
    from datetime import UTC, datetime

    spec = _spec("horizon", tombstone_days=3)
    day = datetime(2026, 1, 1, tzinfo=UTC)
    upsert(sql, spec, _batch(spark, [("d1", "a", "on", 1, False)]), now=day)
    upsert(sql, spec, _batch(spark, [("d1", "a", None, 10, True)]), now=day.replace(day=2))
    upsert(sql, spec, _batch(spark, [("d1", "a", "late", 7, False)]), now=day.replace(day=4))
    assert _rows(spark, spec.target) == []  # within 3 days of the delete's commit
    upsert(sql, spec, _batch(spark, [("d1", "a", "later", 8, False)]), now=day.replace(day=6))
    assert _rows(spark, spec.target) == [("d1", "a", "later", 8)]


def test_a_table_named_as_the_log_or_the_run_lock_is_refused():
    """Found by review: a model `upsert_commits` would be the schema's commit log (its
    swap drops the log), and a model `dbt_run`'s lock is the run lock (it waits on it)."""
    for name in ("upsert_commits", "DBT_RUN"):
        with pytest.raises(UpsertError, match="another name"):
            _spec(name).validate()


def test_bad_tombstone_settings_name_the_fix():
    for days in (-1, 10**8):  # 10**8: beyond Spark's intervals (found by review)
        with pytest.raises(UpsertError, match="whole number of days"):
            _spec("bad", tombstone_days=days).validate()
    with pytest.raises(UpsertError, match="cannot be combined"):
        _spec("bad", partial_updates=True).validate()


def test_only_partitions_with_a_changed_key_are_rewritten(spark, sql):
    spec = _spec("cow")
    days = [f"d{i}" for i in range(5)]
    upsert(sql, spec, _batch(spark, [(day, f"dev-{day}", "on", 1, False) for day in days]))
    before = {day: _files(spark, spec.target, day) for day in days}

    # d0 changes; d1 receives only an older update, which changes nothing.
    result = upsert(
        sql,
        spec,
        _batch(spark, [("d0", "dev-d0", "off", 2, False), ("d1", "dev-d1", "stale", 0, False)]),
    )
    assert (result.changed_partitions, result.affected_partitions) == (1, 2)
    after = {day: _files(spark, spec.target, day) for day in days}
    assert after["d0"] != before["d0"]
    assert all(after[day] == before[day] for day in days[1:])


def test_rerunning_a_batch_changes_nothing(spark, sql):
    spec = _spec("rerun")
    rows = [("d1", "a", "on", 1, False), ("d1", "b", "on", 1, False)]
    first = upsert(sql, spec, _batch(spark, rows))
    snapshot = sql(f"select *, input_file_name() from {spec.target} order by device")
    again = upsert(sql, spec, _batch(spark, rows))
    assert first.commit_id and again.commit_id is None
    assert sql(f"select *, input_file_name() from {spec.target} order by device") == snapshot


def test_map_columns_are_compared_by_value(spark, sql):
    """Maps cannot be ordered or compared in Spark SQL; the merge compares them as JSON."""
    spec = _spec("maps", delete_marker=None)
    schema = "day string, device string, tags map<string,string>, log_ts bigint"

    def commit(rows):
        spark.createDataFrame(rows, schema).createOrReplaceTempView("map_batch")
        return upsert(sql, spec, "map_batch")

    first = [("d1", "a", {"fw": "1.0"}, 1), ("d1", "b", {"fw": "1.0"}, 1)]
    assert commit(first).commit_id
    assert commit(first).commit_id is None  # the same maps: nothing changes
    # A changed map at the same log_ts is a correction; b's two rows tie, the greater wins.
    assert commit(
        [
            ("d1", "a", {"fw": "2.0"}, 1),
            ("d1", "b", {"fw": "0.9"}, 2),
            ("d1", "b", {"fw": "1.1"}, 2),
        ]
    ).commit_id
    tags = sql(f"select device, tags['fw'] from {spec.target} order by device")
    assert [tuple(r) for r in tags] == [("a", "2.0"), ("b", "1.1")]


def test_the_last_commit_rolls_back_once(spark, sql):
    spec = _spec("rollback")
    upsert(sql, spec, _batch(spark, [("d1", "a", "on", 1, False)]))
    upsert(sql, spec, _batch(spark, [("d1", "a", "off", 2, False), ("d2", "c", "on", 1, False)]))
    rollback_last_commit(sql, spec)
    assert _rows(spark, spec.target) == [("d1", "a", "on", 1)]
    with pytest.raises(UpsertError, match="no commit to roll back"):
        rollback_last_commit(sql, spec)
    # The table goes on from the restored state.
    upsert(sql, spec, _batch(spark, [("d1", "a", "again", 3, False)]))
    assert _rows(spark, spec.target) == [("d1", "a", "again", 3)]


def test_old_versions_are_dropped_once_no_rollback_needs_them(spark, sql):
    spec = _spec("cleanup")
    for ts in range(1, 5):
        upsert(sql, spec, _batch(spark, [("d1", "a", f"s{ts}", ts, False)]))
    versions = [r[0] for r in sql(f"show partitions {spec.versions}")]
    assert len(versions) == 2  # the current version and the one a rollback returns to


def test_an_unpartitioned_table_is_swapped_whole(spark, sql):
    spec = _spec("whole", partition_by=())
    upsert(sql, spec, _batch(spark, [("d1", "a", "on", 1, False), ("d2", "b", "on", 1, False)]))
    upsert(sql, spec, _batch(spark, [("d1", "a", None, 2, True)]))
    assert _rows(spark, spec.target) == [("d2", "b", "on", 1)]
    rollback_last_commit(sql, spec)
    assert _rows(spark, spec.target) == [("d1", "a", "on", 1), ("d2", "b", "on", 1)]


def test_a_missing_key_column_names_the_fix(spark, sql):
    with pytest.raises(UpsertError, match="unique_key, ordering_field, tie_break and partition_by"):
        upsert(
            sql, _spec("bad", unique_key=("serial",)), _batch(spark, [("d1", "a", "x", 1, False)])
        )


def test_a_delete_marker_the_result_lacks_is_refused_before_anything_changes():
    """Found by review: a misspelled delete_marker passed the check a full refresh makes
    before its drop, and failed the commit after it: the table was left empty."""
    columns = [("id", "int"), ("ts", "timestamp"), ("is_deleted", "boolean")]
    for marker in ("is_delted", "Is_Deleted"):
        spec = UpsertSpec("s.t", ("id",), "ts", delete_marker=marker)
        with pytest.raises(UpsertError, match=f"delete_marker '{marker}' is not a column"):
            refuse_missing_columns(spec, columns)
    refuse_missing_columns(UpsertSpec("s.t", ("id",), "ts", delete_marker="is_deleted"), columns)


def test_a_delete_marker_that_is_not_boolean_is_refused_before_anything_changes():
    """Found by review: a string marker failed the commit at its first value other than
    true or false (a cast under ANSI mode), and a number was read as "not 0" (a status
    code deleted its key). The error names the fix, before a full refresh drops anything."""
    spec = UpsertSpec("s.t", ("id",), "ts", delete_marker="gone")
    for marker_type in ("string", "int", "double"):
        columns = [("id", "int"), ("ts", "timestamp"), ("gone", marker_type)]
        with pytest.raises(UpsertError, match=f"'gone' is a {marker_type} column; it must be"):
            refuse_missing_columns(spec, columns)
    for marker_type in ("boolean", "void"):  # `null as gone` deletes nothing
        refuse_missing_columns(spec, [("id", "int"), ("ts", "timestamp"), ("gone", marker_type)])


def test_a_result_column_named_as_the_commits_own_is_refused_before_anything_changes():
    """Found by review: a model carrying its upstream's `_commit_id` passed the check a
    full refresh makes before its drop, then failed on a duplicate column: the table
    and its history were gone."""
    spec = UpsertSpec("s.t", ("id",), "ts")
    for name in ("_commit_id", "_COMMIT_TS", "_version", "_rank"):
        with pytest.raises(UpsertError, match=f"has {name}, a name the commit gives"):
            refuse_missing_columns(spec, [("id", "int"), ("ts", "timestamp"), (name, "string")])
    marked = UpsertSpec("s.t", ("id",), "ts", delete_marker="_deleted")  # read apart: fine
    refuse_missing_columns(marked, [("id", "int"), ("ts", "timestamp"), ("_deleted", "boolean")])


def test_a_delete_marker_named_as_the_merges_own_column_deletes(spark, sql):
    spec = _spec("underscore_marker", delete_marker="_deleted")
    batches = (
        [("d1", "a", "on", 1, False), ("d1", "b", "on", 1, False)],
        [("d1", "a", None, 2, True)],
    )
    for rows in batches:
        batch = spark.createDataFrame(rows, COLUMNS.replace("gone", "_deleted"))
        batch.createOrReplaceTempView("marked")
        upsert(sql, spec, "marked")
    assert [row[1] for row in _rows(spark, spec.target)] == ["b"]


def test_every_name_the_merge_gives_a_column_is_reserved():
    """The merge's own aliases (`... as _rank`, `... as _latest_{i}`) would clash with a
    result column."""
    merge = Path(upsert_merge.__file__).read_text()
    aliases = set(re.findall(r"\bas (_[a-z_]+)", merge))
    numbered = {alias + "0" for alias in aliases if alias.endswith("_")}
    named = {alias for alias in aliases if not alias.endswith("_")} | numbered
    assert len(named) > 10 and not {a for a in named if not is_reserved(a)}


def test_yes_no_options_given_as_text_mean_what_they_say():
    """Found by review: `global_key='false'` was read as true (a non-empty string), and
    a global key removes a key's rows from every other partition."""
    target = SimpleNamespace(schema="s", identifier="t")
    options = {"unique_key": "id", "ordering_field": "ts", "partition_by": "day"}
    for text, meant in (("false", False), ("True", True)):
        assert upsert_spec(target, {**options, "global_key": text}).global_key is meant
    with pytest.raises(CompilationError, match="global_key must be true or false, not 'no'"):
        upsert_spec(target, {**options, "global_key": "no"})


def test_partition_paths_match_sparks_escaping(spark, sql):
    spec = _spec("escaped")
    day = "2026/11:01 'q'"
    upsert(sql, spec, _batch(spark, [(day, "a", "on", 1, False)]))
    assert [r[0] for r in sql(f"show partitions {spec.target}")] == [
        "day=" + sql_text.partition_path(["day"], [day]).split("=", 1)[1]
    ]
    assert _rows(spark, spec.target) == [(day, "a", "on", 1)]


def test_a_reader_in_another_session_sees_each_partition_whole(spark, sql):
    spec = _spec("read_while_writing")
    days = ["d0", "d1", "d2"]
    before = [(day, f"{day}-{i}", "on", 1, False) for day in days for i in range(50)]
    upsert(sql, spec, _batch(spark, before))
    # Every partition grows from 50 to 80 rows in one commit.
    growth = [(day, f"{day}-{i}", "on", 2, False) for day in days for i in range(50, 80)]
    reader = spark.newSession()
    seen: list[dict] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            reader.sql(f"refresh table {spec.target}")
            counts = reader.sql(f"select day, count(*) from {spec.target} group by day").collect()
            seen.append(dict((r[0], r[1]) for r in counts))

    thread = threading.Thread(target=poll)
    thread.start()
    try:
        upsert(sql, spec, _batch(spark, growth))
    finally:
        done.set()
        thread.join()
    seen.append(
        dict((r[0], r[1]) for r in sql(f"select day, count(*) from {spec.target} group by day"))
    )
    assert len(seen) >= 3  # the reader polled while the commit ran
    assert all(set(counts) == set(days) for counts in seen)  # no partition ever missing
    assert all(count in (50, 80) for counts in seen for count in counts.values())
    assert seen[-1] == {day: 80 for day in days}


def test_a_null_partition_is_a_partition_like_any_other(spark, sql):
    # The stored-rows filter was `day in (null)`, which matches nothing: the second
    # upsert into the NULL partition wiped it (issue 21, finding 6).
    spec = _spec("null_day")
    upsert(sql, spec, _batch(spark, [(None, "a", "on", 1, False), ("d1", "b", "on", 1, False)]))
    upsert(sql, spec, _batch(spark, [(None, "c", "on", 1, False)]))
    assert _rows(spark, spec.target) == sorted(
        [(None, "a", "on", 1), (None, "c", "on", 1), ("d1", "b", "on", 1)],
        key=lambda row: tuple(map(str, row)),
    )
    upsert(sql, spec, _batch(spark, [(None, "a", "off", 2, False), (None, "c", None, 3, True)]))
    assert _rows(spark, spec.target) == sorted(
        [(None, "a", "off", 2), ("d1", "b", "on", 1)], key=lambda row: tuple(map(str, row))
    )
    rollback_last_commit(sql, spec)
    assert _rows(spark, spec.target) == sorted(
        [(None, "a", "on", 1), (None, "c", "on", 1), ("d1", "b", "on", 1)],
        key=lambda row: tuple(map(str, row)),
    )


def test_a_null_date_partition_too(spark, sql):
    spec = _spec("null_date")
    for rows in ([(None, "a", 1), ("2026-11-01", "b", 1)], [(None, "c", 1)], [(None, "a", 2)]):
        values = ", ".join(
            f"({'null' if day is None else repr(day)}, '{key}', 'on', {ts}, false)"
            for day, key, ts in rows
        )
        spark.sql(
            "create or replace temporary view batch as select cast(day as date) as day, device,"
            f" state, log_ts, gone from values {values} as t(day, device, state, log_ts, gone)"
        )
        upsert(sql, spec, "batch")
    got = spark.sql(f"select cast(day as string), device, log_ts from {spec.target}").collect()
    assert sorted(map(tuple, got), key=repr) == sorted(
        [(None, "a", 2), (None, "c", 1), ("2026-11-01", "b", 1)],
        key=lambda row: tuple(map(str, row)),
    )


def test_partial_updates_keep_the_latest_value_of_each_column(spark, sql):
    # Pivoted attributes of one (id, time) split across batches: the newer batch's row
    # carries only its keys; the latest value wins per column, not per row (issue 21,
    # finding 3). A NULL in a newer row keeps the stored value; a newer value wins.
    spec = UpsertSpec(f"{SCHEMA}.partial", ("id",), "batch", ("day",), partial_updates=True)

    def batch(rows: list[tuple]) -> str:
        spark.createDataFrame(
            rows, "id string, day string, batch int, city string, state string"
        ).createOrReplaceTempView("batch")
        return "batch"

    upsert(sql, spec, batch([("u1", "d1", 1, "Berlin", None), ("u2", "d1", 1, "Rome", "RM")]))
    upsert(sql, spec, batch([("u1", "d1", 2, None, "BE"), ("u2", "d1", 2, "Milan", None)]))
    upsert(sql, spec, batch([("u1", "d1", 0, "Hamburg", "HH")]))  # older: fills nothing stored
    rows = spark.sql(f"select id, batch, city, state from {spec.target} order by id").collect()
    assert [tuple(r) for r in rows] == [("u1", 2, "Berlin", "BE"), ("u2", 2, "Milan", "RM")]
    unchanged = upsert(sql, spec, batch([("u1", "d1", 2, "Berlin", None)]))
    assert unchanged.commit_id is None  # nothing new: no commit


def test_an_empty_string_partition_is_the_null_partition(spark, sql):
    # Spark stores '' as a partition value as the NULL partition (Hive's default
    # partition): the stored-rows filter `day in ('')` matched nothing there, so a
    # second upsert into it wrote the batch's rows alone and lost the stored ones.
    spec = _spec("empty_day")
    upsert(sql, spec, _batch(spark, [("", "a", "on", 1, False), (None, "b", "on", 1, False)]))
    upsert(sql, spec, _batch(spark, [("", "c", "on", 1, False)]))
    assert _rows(spark, spec.target) == [
        (None, "a", "on", 1),
        (None, "b", "on", 1),
        (None, "c", "on", 1),
    ]
    upsert(sql, spec, _batch(spark, [("", "a", None, 2, True)]))  # a delete finds its row
    assert [row[1] for row in _rows(spark, spec.target)] == ["b", "c"]


def test_a_timestamp_partition_outside_utc(spark, sql, monkeypatch):
    # Partition values collected into Python come back in the process's time zone:
    # written back as text they named another partition, and a second upsert into the
    # same hour lost the stored rows.
    spec = _spec("hourly")
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    try:
        for key in ("a", "b"):
            spark.sql(
                "create or replace temporary view batch as select"
                " timestamp'2026-11-01 10:00:00' as day, device, 'on' as state,"
                f" 1L as log_ts, false as gone from values ('{key}') as t(device)"
            )
            upsert(sql, spec, "batch")
        # dbt's embedded connection gives the session's UTC values too.
        dbt = EscapingSessionConnectionWrapper(SessionConnection()).cursor()
        dbt.execute(f"select day, device from {spec.target} order by device")
        hour = datetime(2026, 11, 1, 10)
        assert dbt.fetchall() == [(hour, "a"), (hour, "b")]
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    got = spark.sql(f"select cast(day as string), device from {spec.target}").collect()
    assert sorted(map(tuple, got)) == [("2026-11-01 10:00:00", "a"), ("2026-11-01 10:00:00", "b")]


def _refused_with_a_change_between_reads(spark, sql, spec, row: str, arriving: str) -> str:
    """An upsert of a Parquet source table holding `row` (SQL values) into `spec`'s target,
    during which `arriving` is inserted into the source as the versions are written (an
    upstream commit between the source's reads): it must commit nothing. The source."""
    source = f"{spec.target}_input"
    spark.sql(f"create table {source} ({COLUMNS}) using parquet")
    spark.sql(f"insert into {source} values {row}")
    versions = spark.sql(f"show partitions {spec.versions}").collect()

    def upstream_commit(step: str) -> None:
        if step == "upsert.write_versions":
            spark.sql(f"insert into {source} values {arriving}")

    with steps.listening(upstream_commit), pytest.raises(UpsertError, match="changed while"):
        upsert(sql, spec, source)
    # What it wrote is gone: a rerun under the same commit id must not add to it.
    assert spark.sql(f"show partitions {spec.versions}").collect() == versions
    return source


def test_a_source_that_changes_while_it_is_read_commits_nothing(spark, sql):
    # The source is read twice: once for the partitions it touches, once by the merge.
    # A row of another stored partition that appears between the two reads (an upstream
    # commit of a concurrent run) made that partition's new version of the incoming
    # rows alone: every stored row of it was gone.
    spec = _spec("moving_source")
    upsert(sql, spec, _batch(spark, [("d1", "a", "on", 1, False), ("d2", "b", "on", 1, False)]))
    source = _refused_with_a_change_between_reads(
        spark, sql, spec, "('d1', 'a', 'off', 2, false)", "('d2', 'c', 'on', 2, false)"
    )
    assert _rows(spark, spec.target) == [("d1", "a", "on", 1), ("d2", "b", "on", 1)]
    upsert(sql, spec, source)  # the rerun reads the source as it is now
    assert _rows(spark, spec.target) == [
        ("d1", "a", "off", 2),
        ("d2", "b", "on", 1),
        ("d2", "c", "on", 2),
    ]


def test_a_delete_that_appears_while_the_source_is_read_empties_no_unread_partition(spark, sql):
    # The same race, found by review where nothing is written: with a global key and
    # no remembered deletes, a delete of key a (stored in d1) dated d2 arrives between
    # the reads. The merge's delete wins, lands in d2 (whose stored rows were not read),
    # and d2 was taken for emptied: the old code left the table empty.
    spec = _spec("late_delete", global_key=True, tombstone_days=0)
    stored = [("d1", "a", "on", 1, False), ("d2", "b", "on", 1, False), ("d2", "x", "on", 1, False)]
    upsert(sql, spec, _batch(spark, stored))
    source = _refused_with_a_change_between_reads(
        spark, sql, spec, "('d1', 'a', 'off', 2, false)", "('d2', 'a', 'off', 3, true)"
    )
    assert _rows(spark, spec.target) == [
        ("d1", "a", "on", 1),
        ("d2", "b", "on", 1),
        ("d2", "x", "on", 1),
    ]
    upsert(sql, spec, source)  # the rerun: the delete wins, d2 keeps its other keys
    assert _rows(spark, spec.target) == [("d2", "b", "on", 1), ("d2", "x", "on", 1)]


def test_a_key_of_another_type_than_the_stored_one_is_refused_naming_the_fix(spark, sql):
    """Found by review: landing keys became text, while a table built before stored them
    as numbers. Compared through a cast and bucketed by another hash, a stored key was
    not found, and stayed beside its new row. Such a batch is refused; nothing changes."""
    spec = _spec("key_types", delete_marker=None)
    spark.createDataFrame(
        [("d1", 7, "on", 1)], "day string, device bigint, state string, log_ts bigint"
    ).createOrReplaceTempView("numbers")
    upsert(sql, spec, "numbers")
    spark.createDataFrame(
        [("d1", "7", "off", 2)], "day string, device string, state string, log_ts bigint"
    ).createOrReplaceTempView("texts")
    with pytest.raises(UpsertError, match=r"key device as bigint.*sends string.*--full-refresh"):
        upsert(sql, spec, "texts")
    assert _rows(spark, spec.target) == [("d1", 7, "on", 1)]


@pytest.mark.parametrize(
    ("name", "partition", "value"),
    [
        ("fraction", "timestamp", "timestamp'2026-11-01 10:00:00.5'"),
        ("exponent", "double", "1e20"),
        ("java_long", "double", "1e23"),  # Java 17 writes 9.999999999999999E22
    ],
)
def test_a_delete_beats_a_late_update_in_a_partition_spark_names_its_own_way(
    spark, sql, name, partition, value
):
    """Found by review: the upsert named a partition from its Python value
    (`10:00:00.500000`, `1e+20`) where Spark names it `10:00:00.5`, `1.0E20`: the
    partition's remembered deletes were not found, and a late, older update brought a
    deleted key back."""
    spec = _spec(f"named_{name}", partition_by=("p",))
    columns = f"cast({value} as {partition}) as p, 'a' as device"

    def commit(state: str | None, log_ts: int, gone: bool) -> None:
        spark.sql(
            f"select {columns}, {sql_text.sql_literal(state)} as state, {log_ts} as log_ts,"
            f" {str(gone).lower()} as gone"
        ).createOrReplaceTempView("batch")
        upsert(sql, spec, "batch")

    commit("on", 1, False)
    commit(None, 3, True)  # deleted: remembered, the partition left with no row
    commit("late", 2, False)  # older than the delete: must not bring `a` back
    assert spark.table(spec.target).count() == 0
