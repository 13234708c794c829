"""An interruption at every step of every protocol: readers see whole tables, the rerun
converges to the uninterrupted result, and nothing is left behind.

Each protocol marks its steps (`steps.reached`); the statement-level
protocols (upserts, rollback, drop) also count every SQL statement as a
step. A clean run records the steps; then, for each step in turn, a fresh
schema is prepared the same way, the run is interrupted at that step (after
a reader looked at the tables), and rerun. Adding a step to a protocol adds
a case here without editing this file. Real SIGKILLs at a sample of these
steps are in test_upsert_kill.py.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from dynamic_ddl import steps
from dynamic_ddl.catalog import RETIRED_SUFFIX, local_path, spark_sql, table_location
from dynamic_ddl.ingest import bookkeeping, ledger
from dynamic_ddl.ingest.bookkeeping import (
    LEDGER_ENTRY_COLUMNS,
    BookkeepingTables,
    bookkeeping_ddl,
    newest_committed_batch,
    read_ledger_unlocked,
    unlocked_bookkeeping_ddl,
)
from dynamic_ddl.ingest.compaction import compact_topic, stored_partitions
from dynamic_ddl.ingest.job import ingest_topic
from dynamic_ddl.landing.batches import unseen_batches_filter
from dynamic_ddl.locks import LOCK_SUFFIX, Holder, lock_table, read_holder, this_host
from dynamic_ddl.sql_text import location_clause
from dynamic_ddl.upsert import commit_log
from dynamic_ddl.upsert.care import repartition, vacuum
from dynamic_ddl.upsert.commit_log import read_log
from dynamic_ddl.upsert.commits import kept_commits, versions_after
from dynamic_ddl.upsert.history import release_savepoint, rollback_to, savepoint
from dynamic_ddl.upsert.protocol import (
    drop_upsert_table,
    rollback_last_commit,
    stored_versions,
    upsert,
)
from dynamic_ddl.upsert.snapshots import changes_sql, stored_columns
from dynamic_ddl.upsert.spec import UpsertSpec

# `extra` discards what would change its schema: batch 2's value there is quarantined.
TOPIC = {
    "topic": "kills",
    "record_key": ["id"],
    "event_time": "ts",
    "schema_mode": {"extra": "discard_value"},
}
# Spark's line limit (ledger.READ_LINE_LIMIT, 16 MiB) made small for every case here:
# BATCH_1's second line is past it, so its file is read through a copy
# (inbox_links.copy_cutting_long_lines), which every raw step's kill then meets.
READ_LINE_LIMIT = 200
BATCH_1 = [
    '{"id": "1", "ts": "2026-11-01T08:00:00Z", "n": 1, "s": "a", "tags": [{"k": "w"}]}',
    '{"id": "2", "ts": "2026-11-02T08:00:00Z", "n": 2, "s": "' + "b" * READ_LINE_LIMIT + '"}',
    "not json",
]
# Brings text to n (a bigint column: its __text companion is added), adds a column,
# writes child rows, rejects a line, and quarantines a value (a new key under `extra`).
BATCH_2 = [
    '{"id": "3", "ts": "2026-11-02T09:00:00Z", "n": "three", "s": "c", "flag": true,'
    ' "tags": [{"k": "x"}, {"k": "y"}], "extra": {"new": 3}}',
    '{"id": "4", "ts": "2026-11-03T09:00:00Z", "n": 4, "tags": []}',
    '{"id": 5,',
]
# Times and ids a rerun gives anew, and the file times of an inbox written again.
VOLATILE = {
    "_ingested_at",
    "_batch_id",
    "_slot",
    "batch_id",
    "_commit_id",
    "_commit_ts",
    "_version",
    "recorded_at",
    "quarantined_at",
    "modified_at",
    "first_seen_batch",
    "last_seen_batch",
    "generation",
}


@pytest.fixture(autouse=True)
def small_read_line_limit(monkeypatch):
    monkeypatch.setattr(ledger, "READ_LINE_LIMIT", READ_LINE_LIMIT)


def _rows(spark, table: str) -> list[tuple]:
    """A table's columns and rows, volatile columns left out, in a stable order."""
    spark.sql(f"refresh table {table}")
    frame = spark.table(table)
    kept = [f for f in frame.schema.fields if f.name not in VOLATILE]
    rows = sorted((tuple(str(row[f.name]) for f in kept) for row in frame.collect()), key=str)
    return [tuple((f.name, f.dataType.simpleString()) for f in kept), *rows]


def _tables(spark, schema: str) -> list[str]:
    rows = spark.sql(f"show tables in {schema}").collect()
    return sorted(row[1] for row in rows if not row[2])  # temporary views are no tables


def _snapshot(spark, schema: str) -> dict[str, list[tuple]]:
    """Every table of the schema, as _rows gives it (the commit log by its content).

    A lock left behind (a release interrupted) must be one the next run takes
    over at once; it is not part of the result."""
    snapshot = {}
    for name in _tables(spark, schema):
        if name.endswith(LOCK_SUFFIX):
            holder = read_holder(spark_sql(spark), f"{schema}.{name}")
            assert holder is None or holder.is_stale(time.time()), f"{name} blocks: {holder}"
            continue
        if name == "upsert_commits":
            continue  # commit ids differ run to run; a pending entry is checked apart
        snapshot[name] = _rows(spark, f"{schema}.{name}")
    return snapshot


@dataclass
class Scenario:
    """One protocol run: `prepare` a schema, `act` (the run interrupted), `whole` checks
    what a reader sees at the moment of the interruption."""

    name: str
    prepare: Callable[[object, str, Path], None]
    act: Callable[[object, str, Path], None]
    whole: Callable[[object, str, dict], None]
    # Interrupt only at steps starting with these (the run's other steps are
    # enumerated by the scenario of their own protocol); all when empty.
    only: tuple[str, ...] = ()

    def boundaries(self, seen: list[str]) -> list[int]:
        """The indexes of the steps to interrupt at: a statement right after a named
        step is the same boundary (nothing changed between them)."""
        return [
            i
            for i, step in enumerate(seen)
            if not (step.startswith("sql:") and i and not seen[i - 1].startswith("sql:"))
            and (not self.only or step.startswith(self.only))
        ]


CHANGING = {"create", "alter", "insert", "drop"}


def _sql(spark):
    """Statements that change something as steps: an interruption can fall between any two
    changes (one before a read is one after the change before it)."""
    run = spark_sql(spark)

    def sql(statement: str):
        words = statement.split()
        if words[0].lower() in CHANGING:
            steps.reached("sql: " + " ".join(words)[:70])
        return run(statement)

    return sql


# --- raw batches --------------------------------------------------------------------


def _write(inbox: Path, name: str, lines: list[str]) -> None:
    folder = inbox / TOPIC["topic"] / "dt=2026-11-01"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("\n".join(lines) + "\n")


def _ingest(spark, schema: str, inbox: Path) -> None:
    ingest_topic(spark, {**TOPIC, "inbox_dir": str(inbox), "schema": schema, "table": "raw_kills"})


def _raw_history_visible(spark, schema: str, before: dict, after: dict) -> None:
    """A reader of committed batches (as landing models read raw) sees the rows committed
    before the run or those after it, whole, on their columns: a pending batch's rows
    are no history. Between a swap's two renames the name is empty for a moment, and
    the rows are under the retired name, which the next run puts back."""
    table = f"{schema}.raw_kills"
    _, newest = newest_committed_batch(spark_sql(spark), table)
    if not spark.catalog.tableExists(table):
        _hidden_and_named(spark, table)
        table += RETIRED_SUFFIX
        if not spark.catalog.tableExists(table):
            assert "raw_kills" not in before and newest is None, "the raw history is hidden"
            return
    spark.sql(f"refresh table {table}")
    committed = spark.table(table).where("false" if newest is None else f"_batch_id <= '{newest}'")
    seen = _rows_of(committed)
    assert _whole(seen, before.get("raw_kills"), after["raw_kills"]), (
        f"a reader of committed batches sees {seen[1:3]}"
    )


def _rows_of(frame) -> list[tuple]:
    """A frame's columns and rows as _rows gives a table's."""
    kept = [f for f in frame.schema.fields if f.name not in VOLATILE]
    rows = sorted((tuple(str(row[f.name]) for f in kept) for row in frame.collect()), key=str)
    return [tuple((f.name, f.dataType.simpleString()) for f in kept), *rows]


def _projected(rows: list[tuple] | None, columns: list[str]) -> list[tuple] | None:
    """`rows` (as _rows gives them) on `columns` only, sorted; None for no table. A
    reader between two ADD COLUMNS sees more columns than the table had before."""
    if not rows:
        return None
    names = [name for name, _ in rows[0]]
    picked = [dict(zip(names, row, strict=True)) for row in rows[1:]]
    return sorted((tuple(row.get(c, "-") for c in columns) for row in picked), key=str)


def _whole(seen: list[tuple], before: list[tuple] | None, after: list[tuple]) -> bool:
    """Whether `seen` holds the rows before the run or those after it (all as _rows
    gives them; `before` None for no table then, when no row is the state before)."""
    old_columns = [n for n, _ in before[0]] if before else []
    new_columns = [n for n, _ in after[0]]
    if before is None and len(seen) == 1:
        return True
    return _projected(seen, old_columns) == _projected(before, old_columns) or _projected(
        seen, new_columns
    ) == _projected(after, new_columns)


def _second_batch(spark, schema, inbox):
    _write(inbox, "a.json", BATCH_1)
    _ingest(spark, schema, inbox)
    _write(inbox, "b.json", BATCH_2)


# Lines without arrays: no child table, whose steps would repeat the raw table's.
FLAT_BATCHES = (
    ['{"id": "1", "ts": "2026-11-01T08:00:00Z", "n": 1}', "not json"],
    ['{"id": "2", "ts": "2026-11-01T09:00:00Z", "s": "b"}', '{"id": "3", "ts": "2026-11-02"}'],
)


def _two_batches(spark, schema, inbox):
    """Two batches that both wrote a day (two partitions to merge into one)."""
    for number, lines in enumerate(FLAT_BATCHES):
        _write(inbox, f"{number}.json", lines)
        _ingest(spark, schema, inbox)


def _compact(spark, schema, inbox):
    """Compact the raw table, every day old enough to merge; no folder is left that no
    partition read (those merged stay until the next compaction)."""
    sql, table = spark_sql(spark), f"{schema}.raw_kills"
    # A rerun after a kill between the swap's renames finds the table retired.
    found = table if spark.catalog.tableExists(table) else table + RETIRED_SUFFIX
    root = local_path(table_location(sql, found))
    read_before = {root / p.path for p in stored_partitions(sql, found)}
    compact_topic(_sql(spark), table, after_days=0)
    read = {root / p.path for p in stored_partitions(sql, table)}
    assert set(root.glob("*=*/*=*")) - read <= read_before, f"{table} left folders"


def _migrated_layout(spark, schema, inbox):
    """A raw table the next batch moved out of the layout before compaction: its old
    folder is left for the next compaction to remove."""
    _old_layout(spark, schema, inbox)
    _ingest(spark, schema, inbox)


def _raw_rows_unchanged(spark, schema, before, after):
    """The raw table holds the rows it held, under its name or under the retired name
    between a swap's two renames (which the next run puts back)."""
    for name in ("raw_kills",):
        table = f"{schema}.{name}"
        if not spark.catalog.tableExists(table):
            _hidden_and_named(spark, table)
            table += RETIRED_SUFFIX
        assert _rows(spark, table) == before[name], f"{name} changed"


def _hidden_and_named(spark, table: str) -> None:
    """A landing model reading a raw table hidden between a swap's renames names the raw
    model to run (which puts it back), when the rows are under the retired name."""
    if spark.catalog.tableExists(table + RETIRED_SUFFIX):
        with pytest.raises(ValueError, match=f"dbt run -s raw_{TOPIC['topic']}\\)"):
            unseen_batches_filter(spark_sql(spark), "_batch_id", None, table)


def _old_layout(spark, schema, inbox):
    """A raw table as the versions before compaction wrote it (partitioned by
    `_batch_id`), and a new file to ingest."""
    _write(inbox, "a.json", FLAT_BATCHES[0])
    _ingest(spark, schema, inbox)
    for name in ("raw_kills",):
        table, old = f"{schema}.{name}", f"{schema}.{name}_old"
        location = f"{local_path(table_location(spark_sql(spark), table)).parent}_old/v1"
        kept = ("_slot", "_event_date", "_batch_id")
        columns = ", ".join(c for c in spark.table(table).columns if c not in kept)
        spark.sql(
            f"create table {old} using parquet partitioned by (_event_date, _batch_id)"
            f" location '{location}' as select {columns}, _event_date, _batch_id from {table}"
        )
        spark.sql(f"drop table {table}")
        spark.sql(f"alter table {old} rename to {table}")
    _write(inbox, "b.json", BATCH_2)


# --- upserts ------------------------------------------------------------------------

SPEC = ("id",), "ts", ("day",)


def _batch(spark, rows: list[tuple], view: str = "batch", extra: str = "") -> None:
    values = ", ".join(
        "(" + ", ".join(repr(v) if v is not None else "null" for v in row) + ")" for row in rows
    )
    columns = "id, ts, day, state" + extra
    spark.sql(f"create or replace temporary view {view} ({columns}) as values {values}")


def _spec(schema: str, **options) -> UpsertSpec:
    key, ordering, partitions = SPEC
    return UpsertSpec(f"{schema}.target", key, ordering, partitions, **options)


def _first_commit(spark, schema, inbox):
    _batch(spark, [("a", 1, "d1", "on"), ("b", 1, "d2", "on")])


def _commit(spark, schema, inbox, **options):
    upsert(_sql(spark), _spec(schema, **options), "batch")


def _two_commits(spark, schema, inbox):
    _first_commit(spark, schema, inbox)
    _commit(spark, schema, inbox)
    # Changes d1, adds d3, deletes d2's only key, brings a new column.
    _batch(
        spark,
        [
            ("a", 2, "d1", "off", False, "x"),
            ("c", 2, "d3", "on", False, "y"),
            ("b", 2, "d2", None, True, None),
        ],
        extra=", gone, note",
    )


def _second_commit(spark, schema, inbox):
    _commit(spark, schema, inbox, delete_marker="gone", on_schema_change="append_new_columns")


def _replaced_once(spark, schema, inbox):
    """A `replace_partitions` table with three days, then a recompute of two of them (one
    loses a key, one gains one)."""
    _batch(spark, [("a", 1, "d1", "on"), ("b", 1, "d2", "on"), ("c", 1, "d3", "on")])
    _replace(spark, schema, inbox)
    _batch(spark, [("a", 2, "d1", "off"), ("d", 2, "d2", "on"), ("e", 2, "d2", "on")])


def _replace(spark, schema, inbox):
    """A recompute of d1 and d2 (of all three on the first commit) and of d3, which it
    finds empty on the second commit (d3 is emptied, not kept)."""
    upsert(
        _sql(spark),
        UpsertSpec(f"{schema}.target", partition_by=("day",), replace=True),
        "batch",
        recomputed=["day=d3"],
    )


GLOBAL = {"global_key": True, "delete_marker": "gone"}


def _moved_once(spark, schema, inbox):
    """A table whose key is global (a row may move to another partition), then a batch
    that moves a out of d1 (left empty) and deletes b, stored in d2, from d4."""
    _batch(spark, [("a", 1, "d1", "on", False), ("b", 1, "d2", "on", False)], extra=", gone")
    _commit(spark, schema, inbox, **GLOBAL)
    _batch(spark, [("a", 2, "d3", "moved", False), ("b", 2, "d4", None, True)], extra=", gone")


def _moving_commit(spark, schema, inbox):
    _commit(spark, schema, inbox, **GLOBAL)


def _rollback(spark, schema, inbox):
    """Roll the last commit back, as an operator does: unless the log shows it done (a
    second rollback_last_commit after a finished one fails, saying so)."""
    spec = UpsertSpec.of_table(spark_sql(spark), f"{schema}.target")
    if read_log(spark_sql(spark), spec).last_commit is not None:
        rollback_last_commit(_sql(spark), spec)


def _rollback_to_first(spark, schema, inbox):
    """Restore the table as it was after its first commit, as an operator does."""
    spec = UpsertSpec.of_table(spark_sql(spark), f"{schema}.target")
    first = read_log(spark_sql(spark), spec).history[0].commit_id
    rollback_to(_sql(spark), spec, first)


def _savepoint_first(spark, schema, inbox):
    """Pin the first commit, then release it, as an operator does."""
    spec = UpsertSpec.of_table(spark_sql(spark), f"{schema}.target")
    first = read_log(spark_sql(spark), spec).history[0].commit_id
    savepoint(_sql(spark), spec, first)
    assert first in read_log(spark_sql(spark), spec).savepoints
    release_savepoint(_sql(spark), spec, first)
    assert not read_log(spark_sql(spark), spec).savepoints


def _committed_twice(spark, schema, inbox):
    _two_commits(spark, schema, inbox)
    _second_commit(spark, schema, inbox)


ORPHAN_VERSION = "_version=20260101000000000000"


def _orphans_left(spark, schema, inbox):
    """A table after two commits, with what writes killed mid-job leave in its version
    store: a version folder no partition lists, and the jobs' own folders."""
    _committed_twice(spark, schema, inbox)
    store = local_path(table_location(spark_sql(spark), f"{schema}.target__versions"))
    version = next(store.glob("day=d1/_version=*"))
    shutil.copytree(version, version.with_name(ORPHAN_VERSION))
    for folder in ("_temporary/0", ".spark-staging-0a1b"):
        (store / folder).mkdir(parents=True)


def _repartition(spark, schema, inbox):
    """Repartition by the key, as the operation does (a rerun finds it done, or undone):
    b's remembered delete moves to a partition of its own, which holds no row."""
    sql = _sql(spark)
    existing = replace(UpsertSpec.of_table(sql, f"{schema}.target"), unique_key=SPEC[0])
    repartition(sql, existing, ["id"])


def _drop(spark, schema, inbox):
    """Drop the table, its version store and its log entries: none is left to come back."""
    drop_upsert_table(_sql(spark), _spec(schema, delete_marker="gone"))
    log = f"{schema}.upsert_commits where table_name = 'target'"
    assert spark.sql(f"select count(*) from {log}").first()[0] == 0


def _repartition_killed_before_swap(spark, schema, inbox):
    """Two commits, then a repartition killed as its swap begins: the interim copy, its
    deletes and the new definition are made; the table is untouched."""
    _committed_twice(spark, schema, inbox)

    def kill(step: str) -> None:
        if step.startswith("swap."):
            raise steps.Interrupted(step)

    with pytest.raises(steps.Interrupted), steps.hooked(kill):
        _repartition(spark, schema, inbox)


def _vacuum(spark, schema, inbox):
    """Vacuum, as the operation does with the model's retention; nothing orphaned is left."""
    vacuum(_sql(spark), _spec(schema, delete_marker="gone"))
    store = local_path(table_location(spark_sql(spark), f"{schema}.target__versions"))
    assert not [*store.glob(f"*/{ORPHAN_VERSION}"), *store.glob("_temporary"), *store.glob(".*")]


def _full_refresh(spark, schema, inbox):
    """What the incremental materialization does on --full-refresh, once the model's rows
    are built into a staging table."""
    spark.sql(f"drop table if exists {schema}.target__dbt_new")
    spark.sql(f"create table {schema}.target__dbt_new using parquet as select * from batch")
    sql = _sql(spark)
    drop_upsert_table(sql, UpsertSpec.of_table(sql, f"{schema}.target"))
    upsert(sql, _spec(schema, delete_marker="gone"), f"{schema}.target__dbt_new")
    spark.sql(f"drop table {schema}.target__dbt_new")


def _compacting_commit(spark, schema, inbox):
    """A commit after which the log is compacted (as every COMPACT_AFTER lines)."""
    compact_after, commit_log.COMPACT_AFTER = commit_log.COMPACT_AFTER, 2
    try:
        _second_commit(spark, schema, inbox)
    finally:
        commit_log.COMPACT_AFTER = compact_after


def _stale_lock(spark, schema, inbox):
    """A lock left by a killed process of this host (a pid that cannot run)."""
    _first_commit(spark, schema, inbox)
    holder = Holder(this_host(), 2**22 + 7, "f" * 32, 4e9)
    location = f"{spark.conf.get('spark.sql.warehouse.dir')}/{schema}_locks/target"
    spark.sql(
        f"create table {lock_table(f'{schema}.target')} (holder string) using parquet"
        f"{location_clause(location)} tblproperties ('holder.host' = '{holder.host}',"
        f" 'holder.pid' = '{holder.pid}', 'holder.run' = '{holder.token}',"
        f" 'lease.expires_at' = '{holder.expires_at}')"
    )


# What the snapshot materialization commits: dbt's snapshot rows, keyed by dbt_scd_id.
SNAPSHOT = {"unique_key": ("dbt_scd_id",), "ordering_field": "dbt_updated_at"}
SNAPSHOT_COLUMNS = "id, day, state, dbt_scd_id, dbt_updated_at, dbt_valid_from, dbt_valid_to"


def _snapshotted_once(spark, schema, inbox):
    """A snapshot (partitioned by day, which never changes for a key) of a and b, then
    dbt's staging rows of a run that closes a (changed) and b (deleted), and inserts a's
    new version and c."""
    t1, t2 = "timestamp'2026-11-01 00:00:00'", "timestamp'2026-11-02 00:00:00'"
    spark.sql(
        f"create or replace temporary view first_rows ({SNAPSHOT_COLUMNS}) as values"
        f" ('a', 'd1', 'on', 'a1', {t1}, {t1}, cast(null as timestamp)),"
        f" ('b', 'd2', 'on', 'b1', {t1}, {t1}, cast(null as timestamp))"
    )
    upsert(_sql(spark), _snapshot_spec(schema), "first_rows")
    spark.sql(
        f"create or replace temporary view staging (dbt_change_type, {SNAPSHOT_COLUMNS}) as"
        f" values ('update', 'a', 'd1', 'off', 'a1', {t2}, {t2}, {t2}),"
        f" ('insert', 'a', 'd1', 'off', 'a2', {t2}, {t2}, cast(null as timestamp)),"
        f" ('delete', 'b', 'd2', 'on', 'b1', {t2}, {t2}, {t2}),"
        f" ('insert', 'c', 'd3', 'on', 'c1', {t2}, {t2}, cast(null as timestamp))"
    )


def _unpartitioned(spark, schema, inbox):
    """A table without partitions (a snapshot's default): one commit, then a batch that
    changes a, adds c. Its commit and rollback point the table itself at a version."""
    _batch(spark, [("a", 1, "d1", "on"), ("b", 1, "d2", "on")])
    _unpartitioned_commit(spark, schema, inbox)
    _batch(spark, [("a", 2, "d1", "off"), ("c", 2, "d3", "on")])


def _unpartitioned_commit(spark, schema, inbox):
    upsert(_sql(spark), UpsertSpec(f"{schema}.target", *SPEC[:2]), "batch")


def _unpartitioned_twice(spark, schema, inbox):
    _unpartitioned(spark, schema, inbox)
    _unpartitioned_commit(spark, schema, inbox)


def _compacted_log(spark, schema, inbox):
    """Three commits, the log compacted after the last: what `drop_log` exists for."""
    _two_commits(spark, schema, inbox)
    _compacting_commit(spark, schema, inbox)


def _snapshot_spec(schema: str) -> UpsertSpec:
    return UpsertSpec(f"{schema}.target", partition_by=("day",), **SNAPSHOT)


def _snapshot_commit(spark, schema, inbox):
    """A snapshot run's commit, as the materialization makes it: its rows are computed
    from the staging rows and the table as it is now (the rerun's too)."""
    target = spark.table(f"{schema}.target")
    columns = stored_columns([(f.name, f.dataType.simpleString()) for f in target.schema])
    rows = changes_sql(f"{schema}.target", "staging", columns, spark.table("staging").columns)
    spark.sql(f"create or replace temporary view snapshot_rows as {rows}")
    upsert(_sql(spark), _snapshot_spec(schema), "snapshot_rows")


def _partitions_whole(spark, schema: str, before: dict, after: dict) -> None:
    """Each partition holds, for a reader, its rows before the run or after it, whole;
    none vanishes that is there before and after. The table is there unless the run
    makes it (a first commit), drops it, rebuilds it (a full refresh: dropped once its
    rows are built) or swaps it (its rows then under the retired name, as above)."""
    target = f"{schema}.target"
    if not spark.catalog.tableExists(target):
        rebuilt = spark.catalog.tableExists(f"{target}__dbt_new")
        if spark.catalog.tableExists(target + RETIRED_SUFFIX):
            target += RETIRED_SUFFIX
        else:
            made_or_dropped = "target" not in before or "target" not in after
            assert made_or_dropped or rebuilt, "the table vanished from its readers"
            return
    spark.sql(f"refresh table {target}")
    seen = _rows(spark, target)

    def by_day(rows: list[tuple] | None, columns: list[str]) -> dict[str, list]:
        """Rows per partition (`day`), on `columns` only."""
        if not rows:
            return {}
        names = [name for name, _ in rows[0]]
        grouped: dict[str, list] = {}
        for row in rows[1:]:
            value = dict(zip(names, row, strict=True))
            grouped.setdefault(value["day"], []).append(tuple(value.get(c, "-") for c in columns))
        return {day: sorted(rows, key=str) for day, rows in grouped.items()}

    old_rows, new_rows = before.get("target"), after.get("target")
    old_columns = [n for n, _ in old_rows[0]] if old_rows else []
    new_columns = [n for n, _ in new_rows[0]] if new_rows else []
    as_old, as_new = by_day(seen, old_columns), by_day(seen, new_columns)
    old, new = by_day(old_rows, old_columns), by_day(new_rows, new_columns)
    for day in set(as_old) | set(old) | set(new):
        whole = as_old.get(day) == old.get(day) or as_new.get(day) == new.get(day)
        assert whole, f"partition {day} is partial or gone: {as_old.get(day)}"


def _first_batch(spark, schema, inbox):
    _write(inbox, "a.json", BATCH_1)


def _raw_whole(spark, schema, before, after):
    _raw_history_visible(spark, schema, before, after)


def _ledger_of_old_layout(spark, schema, inbox):
    """A ledger as the first versions made it (partitioned by topic, no `first_line`),
    holding a committed file, and a new file to ingest."""
    _write(inbox, "a.json", BATCH_1)
    _ingest(spark, schema, inbox)
    ledger = f"{schema}.raw_file_ledger"
    spark.sql(
        f"create table {ledger}_old using parquet partitioned by (topic) as select path,"
        " size_bytes, modified_at, checksum, line_count, batch_id, state, recorded_at, topic"
        f" from {ledger}"
    )
    spark.sql(f"drop table {ledger}")
    spark.sql(f"alter table {ledger}_old rename to {ledger}")
    _write(inbox, "c.json", BATCH_1[:1])


def _ledger_whole(spark, schema, before, after):
    """The ledger's entries, as they were, are under its name, or under the retired
    name between the swap's two renames (which the next run puts back)."""
    table = f"{schema}.raw_file_ledger"
    if not spark.catalog.tableExists(table):
        table += RETIRED_SUFFIX
    seen = _rows(spark, table)
    assert _whole(seen, before["raw_file_ledger"], before["raw_file_ledger"]), seen[1:3]


def _ledger_made_anew(spark, schema, inbox):
    """A ledger migration killed between its renames, then an empty ledger made under
    the empty name (as dbt's on-run-start did, before it left the ledger alone then)."""
    _ledger_of_old_layout(spark, schema, inbox)
    with pytest.raises(steps.Interrupted), steps.hooked(steps.interrupt_on("swap.rename_new")):
        _ingest(spark, schema, inbox)
    for statement in bookkeeping_ddl(BookkeepingTables.in_schema(schema)):
        spark.sql(statement)


def _ledger_entries_kept(spark, schema, before, after):
    """The committed entries are under the ledger's name or its retired one: dropping
    the empty ledger made anew never drops them too."""
    ledger = f"{schema}.raw_file_ledger"
    kept = [
        Path(row.path).name
        for table in (ledger, ledger + RETIRED_SUFFIX)
        if spark.catalog.tableExists(table)
        for row in spark.table(table).where("state = 'committed'").collect()
    ]
    assert "a.json" in kept, f"the ledger's entries are gone: {kept}"


def _ingest_archiving(spark, schema: str, inbox: Path) -> None:
    """_ingest with a ledger that archives its batches past the first (ARCHIVE_AFTER 1)."""
    kept = bookkeeping.ARCHIVE_AFTER
    bookkeeping.ARCHIVE_AFTER = 1
    try:
        _ingest(spark, schema, inbox)
    finally:
        bookkeeping.ARCHIVE_AFTER = kept


def _archived_once(spark, schema, inbox):
    """A ledger whose first batch is archived (generation 1), its second batch is not
    yet, and a new file to ingest: the next run archives the second into generation 2."""
    for number, lines in enumerate(FLAT_BATCHES):
        _write(inbox, f"{number}.json", lines)
        _ingest_archiving(spark, schema, inbox)
    _write(inbox, "c.json", BATCH_1[:1])


def _ledger_entries_whole(spark, schema, before, after):
    """A reader without the lock (lineage, landing models' bound) sees every entry once,
    wherever the archiving run left it, and the newest committed batch."""
    tables = BookkeepingTables.in_schema(schema)
    sql, columns = spark_sql(spark), ", ".join(LEDGER_ENTRY_COLUMNS)
    entries = read_ledger_unlocked(
        sql, tables, lambda every: f"select {columns} from {every} as entries"
    )
    seen = sorted((Path(e.path).name, e.first_line, e.state) for e in entries)
    assert seen == [
        ("0.json", 1, "committed"),
        ("1.json", 1, "committed"),
        ("c.json", 1, "committed"),
    ]
    newest = max(e.batch_id for e in entries)
    assert newest_committed_batch(sql, f"{schema}.raw_kills")[1] == newest


def _killed(spark, schema: str, inbox: Path) -> None:
    """A run killed once its rows are written: its batch is left pending."""
    with pytest.raises(steps.Interrupted), steps.hooked(steps.interrupt_on("raw.record_committed")):
        _ingest(spark, schema, inbox)


def _killed_then_gone(spark, schema, inbox):
    """A killed batch whose only file is removed before the rerun, and a new file."""
    _write(inbox, "c.json", BATCH_1)
    _killed(spark, schema, inbox)
    (inbox / TOPIC["topic"] / "dt=2026-11-01" / "c.json").unlink()
    _write(inbox, "a.json", FLAT_BATCHES[0])


def _nothing_committed(spark, schema, before, after):
    """A pending batch's rows are no history: readers of batches (landing models) stop
    at the newest committed one, and none is."""
    assert newest_committed_batch(spark_sql(spark), f"{schema}.raw_kills")[1] is None


RAW_STEPS = ("raw.",)  # the lock's own steps: lock_take_over
SCENARIOS = [
    # Every step of a raw batch, on a first batch (tables created) ...
    Scenario("raw_first_batch", _first_batch, _ingest, _raw_whole, RAW_STEPS),
    # ... and on a later batch, at the steps a first batch does not have: adding a
    # column and a text companion (a type conflict) to tables that hold rows, then
    # writing beside those rows.
    Scenario(
        "raw_type_conflict_batch",
        _second_batch,
        _ingest,
        _raw_whole,
        ("raw.add_columns", "raw.write_"),
    ),
    # Compaction of a raw table (a child table's are the same steps): merged, swapped
    # in, cleaned; the swap's own steps too, with the interim table beside it.
    Scenario(
        "raw_compaction",
        _two_batches,
        _compact,
        _raw_rows_unchanged,
        ("raw_compaction.", "swap."),
    ),
    # The rerun of a killed batch: what the killed run wrote goes first (the rest of a
    # rerun is a batch's steps, as above); here its files are all gone, so nothing of
    # it stays (test_hostile_inbox reruns one whose files changed).
    Scenario(
        "raw_rerun",
        _killed_then_gone,
        _ingest,
        _nothing_committed,
        ("raw.drop_killed_attempt", "raw.forget_"),
    ),
    # A table of the layout before compaction, moved by the next batch (and swapped in:
    # a kill between the swap's renames is mended by the next run's start).
    Scenario("raw_layout_migration", _old_layout, _ingest, _raw_whole, ("raw_layout.", "swap.")),
    # The compaction after it, which removes the old folder.
    Scenario(
        "raw_retired_folder",
        _migrated_layout,
        _compact,
        _raw_rows_unchanged,
        ("raw_compaction.remove_retired",),
    ),
    # A ledger of the first layout moved to one partitioned by batch.
    Scenario(
        "ledger_migration",
        _ledger_of_old_layout,
        _ingest,
        _ledger_whole,
        ("ledger_migration.", "swap."),
    ),
    # The same, after an empty ledger was made between the swap's renames: dropped, the
    # retired one put back, the migration run again.
    Scenario(
        "ledger_made_anew",
        _ledger_made_anew,
        _ingest,
        _ledger_entries_kept,
        ("ledger_migration.", "swap."),
    ),
    # The ledger's older batches moved to a new generation of its archive, the older
    # generation dropped (the rows and entries of the batch before it are raw_'s steps).
    Scenario(
        "ledger_archive",
        _archived_once,
        _ingest_archiving,
        _ledger_entries_whole,
        ("ledger_archive.",),
    ),
    # A first commit's own steps (creating the tables); upsert_commit has every other.
    Scenario(
        "upsert_first_commit",
        _first_commit,
        _commit,
        _partitions_whole,
        ("upsert.drop_leftovers", "upsert.create"),
    ),
    Scenario("upsert_commit", _two_commits, _second_commit, _partitions_whole),
    # replace_partitions commits by the same protocol: its own merge, the same steps.
    Scenario("replace_commit", _replaced_once, _replace, _partitions_whole, ("upsert.",)),
    # A global key: rows leave the partitions they moved from (its own reads, same steps).
    Scenario("moving_commit", _moved_once, _moving_commit, _partitions_whole, ("upsert.",)),
    # A snapshot run: dbt's staging rows, closed and new rows committed by the same steps.
    Scenario(
        "snapshot_commit", _snapshotted_once, _snapshot_commit, _partitions_whole, ("upsert.",)
    ),
    Scenario("rollback", _committed_twice, _rollback, _partitions_whole, ("rollback.",)),
    # A table without partitions: its commit and rollback point the table at a version.
    Scenario(
        "unpartitioned_commit",
        _unpartitioned,
        _unpartitioned_commit,
        _partitions_whole,
        ("upsert.",),
    ),
    Scenario(
        "unpartitioned_rollback", _unpartitioned_twice, _rollback, _partitions_whole, ("rollback.",)
    ),
    # A restore is a commit of its own: its steps, each partition move and log line.
    Scenario(
        "rollback_to",
        _committed_twice,
        _rollback_to_first,
        _partitions_whole,
        ("rollback_to.", "upsert.", "sql: alter", "sql: insert"),
    ),
    Scenario("savepoint", _committed_twice, _savepoint_first, _partitions_whole, ("savepoint.",)),
    Scenario("full_refresh", _committed_twice, _full_refresh, _partitions_whole, ("drop.",)),
    # Dropping the table's log entries (steps repartition's drop_store and a new
    # table's creation share).
    Scenario("drop_log", _committed_twice, _drop, _partitions_whole, ("log.",)),
    # ... of a compacted log, which lives in a folder of its own until dropped.
    Scenario("drop_compacted_log", _compacted_log, _drop, _partitions_whole, ("log.",)),
    Scenario("vacuum", _orphans_left, _vacuum, _partitions_whole, ("vacuum.",)),
    # A new layout: rows copied, the table swapped, the store rewritten and pointed at.
    # Of the swaps' own steps (the ledger_migration scenario has them all), the one that
    # decides between undo and finish: between the two renames.
    Scenario(
        "repartition",
        _committed_twice,
        _repartition,
        _partitions_whole,
        ("repartition.", "swap.rename_new"),
    ),
    # The next writer undoes a repartition killed before its swap (the new definition
    # made, the swap not begun).
    Scenario(
        "repartition_undo",
        _repartition_killed_before_swap,
        _second_commit,
        _partitions_whole,
        ("repartition.undo", "sql: drop"),
    ),
    Scenario("lock_take_over", _stale_lock, _commit, _partitions_whole, ("lock.",)),
    Scenario("log_compaction", _two_commits, _compacting_commit, _partitions_whole, ("compact.",)),
]


def _fresh(spark, schema: str, inbox: Path) -> None:
    spark.sql(f"drop database if exists {schema} cascade")
    spark.sql(f"create database {schema}")
    shutil.rmtree(inbox, ignore_errors=True)


def _history(spark, schema: str) -> tuple | None:
    """The target's history as its commit log keeps it (commit ids differ run to run):
    how many commits can be read as of, which partitions exist, how many savepoints;
    and that every kept commit's partition versions are still in the store."""
    sql, spec = spark_sql(spark), UpsertSpec(f"{schema}.target")
    if "upsert_commits" not in _tables(spark, schema) or not spark.catalog.tableExists(spec.target):
        return None
    spec = UpsertSpec.of_table(sql, spec.target)
    state = read_log(sql, spec)
    stored = {(partition, version) for _, partition, version in stored_versions(sql, spec)}
    for commit in kept_commits(state):
        gone = set(versions_after(state, commit).items()) - stored
        assert not gone, f"commit {commit} is kept, its versions {sorted(gone)[:2]} are gone"
    return len(state.history), sorted(state.versions), len(state.savepoints)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_an_interruption_at_every_step_converges(spark, tmp_path, scenario):
    clean, schema = f"kill_{scenario.name}_clean", f"kill_{scenario.name}"
    inbox = tmp_path / "inbox"
    _fresh(spark, clean, inbox)
    scenario.prepare(spark, clean, inbox)
    before = _snapshot(spark, clean)
    seen, record = steps.recorder()
    with steps.hooked(record):
        scenario.act(spark, clean, inbox)
    expected = _snapshot(spark, clean)
    history = _history(spark, clean)
    # Every scenario on an upsert table checks its history (drop_log drops the table).
    assert history is not None or scenario.name.startswith(("raw_", "ledger_", "drop_"))
    assert seen, "the protocol marks no step"

    failures = []
    boundaries = scenario.boundaries(seen)
    assert boundaries, f"no step to interrupt at among {seen}"
    for index in boundaries:
        step = seen[index]
        _fresh(spark, schema, inbox)
        scenario.prepare(spark, schema, inbox)
        interrupt = steps.interrupt_at(index)

        def look_then_interrupt(name: str, interrupt=interrupt) -> None:
            try:
                interrupt(name)
            except steps.Interrupted:
                with steps.hooked(lambda _: None):
                    scenario.whole(spark, schema, before, expected)
                raise

        with pytest.raises(steps.Interrupted), steps.hooked(look_then_interrupt):
            scenario.act(spark, schema, inbox)
        scenario.act(spark, schema, inbox)  # the rerun
        got = _snapshot(spark, schema)
        if got != expected:
            failures.append(f"step {index} ({step}): {_difference(expected, got)}")
        if _history(spark, schema) != history:  # nothing of the history lost, or extra
            failures.append(f"step {index} ({step}): history {_history(spark, schema)}")
        if "upsert_commits" in _tables(spark, schema) and spark.catalog.tableExists(
            f"{schema}.target"
        ):
            state = read_log(spark_sql(spark), UpsertSpec(f"{schema}.target"))
            assert state.pending is None, f"step {index} ({step}) left {state.pending}"
    assert not failures, f"{len(failures)} of {len(boundaries)} steps diverge:\n" + "\n".join(
        failures
    )


def _difference(expected: dict, got: dict) -> str:
    if expected.keys() != got.keys():
        return f"tables {sorted(expected)} != {sorted(got)}"
    return "; ".join(
        f"{name}: only clean {sorted(set(expected[name]) - set(got[name]))[:2]},"
        f" only rerun {sorted(set(got[name]) - set(expected[name]))[:2]}"
        for name in expected
        if expected[name] != got[name]
    )


def test_a_ledger_made_anew_during_a_killed_migration_hides_no_entry(spark, tmp_path):
    """Found by review: a run killed between the ledger migration's renames left the name
    empty; dbt's next on-run-start made an empty ledger there, the raw model took it for
    the migrated one and dropped the retired one, and every inbox file was ingested
    again. On-run-start now leaves the ledger alone then; an empty one made anyway
    (by an older version, by hand) is dropped and the retired one put back."""
    schema, inbox = "kill_ledger_made_anew", tmp_path / "inbox"
    tables = BookkeepingTables.in_schema(schema)
    _fresh(spark, schema, inbox)
    _ledger_of_old_layout(spark, schema, inbox)
    with pytest.raises(steps.Interrupted), steps.hooked(steps.interrupt_on("swap.rename_new")):
        _ingest(spark, schema, inbox)
    on_run_start = unlocked_bookkeeping_ddl(spark_sql(spark), tables)
    assert on_run_start and all(f"{tables.ledger} (" not in ddl for ddl in on_run_start)
    _fresh(spark, schema, inbox)
    _ledger_made_anew(spark, schema, inbox)  # as any DDL might
    _ingest(spark, schema, inbox)
    files = spark.table(tables.ledger).groupBy("path").count().collect()
    assert sorted((Path(row.path).name, row[1]) for row in files) == [("a.json", 1), ("c.json", 1)]
    assert spark.table(f"{schema}.raw_kills").count() == 3  # a.json's two rows, c.json's one
