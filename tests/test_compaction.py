"""Compaction of raw and child tables, and the move from the layout before it
(ingest/compaction.py): the same rows with the same batch ids, fewer partitions and
files, readers of new batches still exact, a batch not committed left to its rerun."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dynamic_ddl import steps
from dynamic_ddl.catalog import local_path, spark_sql, table_location
from dynamic_ddl.ingest.compaction import (
    CompactionError,
    compact_topic,
    files_needed,
    stored_partitions,
)
from dynamic_ddl.landing.batches import unseen_batches_filter
from dynamic_ddl.sql_text import string_literal
from tests.test_hostile_inbox import assert_every_line_accounted_for, ingest, write_lines

SCHEMA = "compaction"
RAW, CHILD = f"{SCHEMA}.raw_feed", f"{SCHEMA}.raw_feed__tags"


@pytest.fixture
def schema(spark):
    spark.sql(f"drop database if exists {SCHEMA} cascade")
    spark.sql(f"create database {SCHEMA}")
    return SCHEMA


def _line(n: int, day: int) -> str:
    return (
        f'{{"id": {n}, "ts": "2026-11-0{day}T08:00:00Z", "n": {n},'
        f' "tags": [{{"k": "t{n}"}}, {{"k": "u{n}"}}]}}'
    )


def _rows(spark, table: str) -> list[tuple]:
    """Every row as (column, value) pairs, `_slot` left out (the batch id is kept exactly)."""
    spark.sql(f"refresh table {table}")
    frame = spark.table(table).drop("_slot")
    return sorted(
        tuple(sorted((k, str(v)) for k, v in row.asDict().items())) for row in frame.collect()
    )


def _folders_left_over(spark, table: str) -> set[Path]:
    """Partition folders under the table's location that it does not read."""
    root = local_path(table_location(spark_sql(spark), table))
    read = {root / p.path for p in stored_partitions(spark_sql(spark), table)}
    return set(root.glob("*=*/*=*")) - read


@contextmanager
def _reader(spark, table: str) -> Iterator[list[tuple[int, int]]]:
    """Rows and batches of `table`, read over and over from another session while the
    block runs. A read may fail (the name empty between a swap's two renames, a file
    gone that it listed before the swap); one that succeeds must see the whole table."""
    reader, seen, done = spark.newSession(), [], threading.Event()

    def poll() -> None:
        while not done.is_set():
            try:
                reader.sql(f"refresh table {table}")
                row = reader.sql(f"select count(*), count(distinct _batch_id) from {table}").first()
                seen.append((row[0], row[1]))
            except Exception as error:  # noqa: BLE001 - a failed read is no wrong answer
                if "NOT_FOUND" not in str(error) and "does not exist" not in str(error):
                    seen.append(("failed", str(error)[:300]))

    thread = threading.Thread(target=poll)
    thread.start()
    try:
        yield seen
    finally:
        done.set()
        thread.join()


def test_compaction_merges_old_days_and_keeps_every_row_and_batch_id(spark, schema, tmp_path):
    inbox = tmp_path / "inbox"
    for batch in range(4):  # each batch touches every day
        write_lines(
            inbox, f"b{batch}.json", [_line(10 * batch + i, 1 + (batch + i) % 3) for i in range(4)]
        )
        ingest(spark, schema, inbox)
    write_lines(inbox, "late.json", [_line(90, 1), _line(91, 3)])

    stop_before_commit = steps.interrupt_on("raw.record_committed")  # the last batch stays pending
    with pytest.raises(steps.Interrupted), steps.hooked(stop_before_commit):
        ingest(spark, schema, inbox)
    sql = spark_sql(spark)
    before = {table: _rows(spark, table) for table in (RAW, CHILD)}
    first = min(row[0] for row in spark.sql(f"select _batch_id from {RAW}").collect())
    unseen = unseen_batches_filter(sql, "_batch_id", None, RAW)
    seen_then = sorted(
        r.id for r in spark.table(RAW).where(f"_batch_id > '{first}' and {unseen}").collect()
    )
    partitions = {table: stored_partitions(sql, table) for table in (RAW, CHILD)}
    pending = {row[0] for row in spark.sql(f"select _batch_id from {RAW} where id >= 90").collect()}

    with _reader(spark, RAW) as seen:  # another session reads while it runs
        results = compact_topic(sql, RAW, after_days=0, target_mb=128)
    whole = (len(before[RAW]), len({dict(row)["_batch_id"] for row in before[RAW]}))
    assert seen and all(counts == whole for counts in seen), f"a reader saw {seen}"

    assert [r.table for r in results] == [RAW, CHILD]
    for table in (RAW, CHILD):
        assert _rows(spark, table) == before[table], f"{table} changed its rows"
        after = stored_partitions(sql, table)
        # One partition per day, besides the pending batch's own (left to its rerun).
        merged = [p for p in after if p.slot not in pending]
        assert sorted(p.day for p in merged) == ["2026-11-01", "2026-11-02", "2026-11-03"]
        kept = {(p.day, p.slot) for p in after if p.slot in pending}
        assert kept == {(p.day, p.slot) for p in partitions[table] if p.slot in pending}
        assert all(p.files <= files_needed(p.bytes, 128 * 2**20) for p in after)
        # The merged partitions' folders stay, for a reader that listed them before the
        # swap (Spark reads a folder that is gone as an empty one), until the next one.
        root = local_path(table_location(sql, table))
        merged_away = {root / p.path for p in partitions[table] if p not in after}
        assert _folders_left_over(spark, table) == merged_away
        wrong = spark.sql(f"select count(*) from {table} where _slot < _batch_id").first()[0]
        assert wrong == 0, "a row's slot is below its batch id"
    assert results[0].partitions_after < results[0].partitions_before
    # A reader of new batches takes exactly what it took before.
    unseen = unseen_batches_filter(sql, "_batch_id", None, RAW)
    rows = spark.table(RAW).where(f"_batch_id > '{first}' and {unseen}").collect()
    assert sorted(r.id for r in rows) == seen_then

    ingest(spark, schema, inbox)  # the pending batch's rerun replaces its partitions only
    assert_every_line_accounted_for(spark, schema)
    assert spark.table(RAW).count() == len(before[RAW])
    again = compact_topic(sql, RAW, after_days=0, target_mb=128)[0]
    assert again.partitions_after == 3
    # Nothing left to merge; what the one before merged is removed now.
    assert compact_topic(sql, RAW, after_days=0)[0].files_before == again.files_after
    assert not _folders_left_over(spark, RAW)


def test_young_days_keep_their_partitions_and_other_tables_are_refused(spark, schema, tmp_path):
    inbox = tmp_path / "inbox"
    for batch in range(2):
        write_lines(inbox, f"b{batch}.json", [_line(batch, 1)])
        ingest(spark, schema, inbox)
    sql = spark_sql(spark)
    result = compact_topic(sql, RAW, after_days=None)[0]  # no day is old enough
    assert (result.partitions_before, result.partitions_after) == (2, 2)
    with pytest.raises(CompactionError, match="not a raw table"):
        compact_topic(sql, f"{SCHEMA}.raw_file_ledger")


def test_a_table_of_the_layout_before_slots_is_moved_by_the_next_batch(spark, schema, tmp_path):
    inbox = tmp_path / "inbox"
    write_lines(inbox, "a.json", [_line(1, 1), _line(2, 2)])
    ingest(spark, schema, inbox)
    old_folders = _as_before_slots(spark, tmp_path)
    before = _rows(spark, RAW)
    write_lines(inbox, "b.json", [_line(3, 1)])
    ingest(spark, schema, inbox)
    for table in (RAW, CHILD):  # each table the topic writes, with or without new rows
        assert "_slot" in spark.table(table).columns
        assert spark.table(table).where("_slot >= _batch_id").count() == len(_rows(spark, table))
    assert set(before) < set(_rows(spark, RAW))
    assert spark.table(CHILD).count() == 3 * 2  # every line's two elements
    assert_every_line_accounted_for(spark, schema)
    # The old folders stay until the next compaction: a query that listed the old
    # partitions before the swap may read their folders after it (found by review).
    assert all(folder.exists() for folder in old_folders)
    compact_topic(spark_sql(spark), RAW, after_days=None)
    assert not any(folder.exists() for folder in old_folders), "an old folder was left behind"
    assert set(before) < set(_rows(spark, RAW))


def _as_before_slots(spark, tmp_path: Path) -> tuple[Path, Path]:
    """The raw and child tables copied into the layout before compaction (partitioned by
    `_event_date`, `_batch_id`) at folders of their own; those folders."""
    for table in (RAW, CHILD):
        old = f"{table}_old"
        columns = [
            c for c in spark.table(table).columns if c not in ("_slot", "_event_date", "_batch_id")
        ]
        # The child's folder has no version: its copy once went inside it, then was
        # removed with it (found by review).
        version = "/v1" if table == RAW else ""
        spark.sql(
            f"create table {old} using parquet partitioned by (_event_date, _batch_id)"
            f" location '{tmp_path}/{old.split('.')[1]}{version}'"
            f" as select {', '.join(columns)}, _event_date, _batch_id from {table}"
        )
        spark.sql(f"drop table {table}")
        spark.sql(f"alter table {old} rename to {table}")
    return tmp_path / "raw_feed_old" / "v1", tmp_path / "raw_feed__tags_old"


def test_a_compaction_that_moves_the_old_layout_and_merges_leaves_no_old_folder(
    spark, schema, tmp_path
):
    """Found by review: a compaction that moved a table of the old layout and then
    merged its partitions swapped in a definition made `like` the moved one, which
    copies no table property: the old folder's name was lost, and a full copy of the
    table stayed on disk for good."""
    inbox = tmp_path / "inbox"
    for name, ids in (("a.json", (1, 2)), ("b.json", (3, 4))):  # two batches a day
        write_lines(inbox, name, [_line(n, day) for n, day in zip(ids, (1, 2), strict=True)])
        ingest(spark, schema, inbox)
    old_folders = _as_before_slots(spark, tmp_path)
    before = _rows(spark, RAW)
    moved_and_merged = compact_topic(spark_sql(spark), RAW, after_days=0)[0]
    assert moved_and_merged.migrated
    assert moved_and_merged.partitions_after < moved_and_merged.partitions_before
    assert all(folder.exists() for folder in old_folders)  # until the next compaction
    compact_topic(spark_sql(spark), RAW, after_days=0)
    assert not any(folder.exists() for folder in old_folders), "an old folder was left behind"
    assert _rows(spark, RAW) == before
    assert_every_line_accounted_for(spark, schema)


def test_a_schema_folder_whose_name_a_uri_would_encode(spark, tmp_path):
    """A database location with a space, `%41`, a quote, `#` and unicode (a home folder
    can hold any of them): the catalog reports it as a URI (`a%20b`), which a location
    clause or reader takes for another folder. Locks, staging, inference's scratch
    folders, the raw tables and compaction's listing and cleanup all use the folder."""
    spark.sql(f"drop database if exists {SCHEMA} cascade")
    location = tmp_path / "my wh %41 it's ü#"
    spark.sql(f"create database {SCHEMA} location {string_literal(str(location))}")
    inbox = tmp_path / "inbox"
    for batch in range(2):
        # A repeated key and an empty string: inference reads its scratch folders.
        lines = [_line(batch, 1), _line(10 + batch, 2), '{"id": 7, "id": 8}', '{"id": 9, "n": ""}']
        write_lines(inbox, f"b{batch}.json", lines)
        ingest(spark, SCHEMA, inbox)
    assert_every_line_accounted_for(spark, SCHEMA)
    before = _rows(spark, RAW)
    result = compact_topic(spark_sql(spark), RAW, after_days=0)[0]
    assert (result.partitions_before, result.partitions_after) == (6, 3)  # a day, null too
    assert _rows(spark, RAW) == before
    compact_topic(spark_sql(spark), RAW, after_days=0)  # removes what the first merged
    assert _rows(spark, RAW) == before and not _folders_left_over(spark, RAW)
    # Everything is in that folder: no other one was made beside it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inbox", location.name]
    assert {"_locks", "raw_feed", "raw_feed__tags"} <= {p.name for p in location.iterdir()}


# Arrays named as the tables the protocols keep beside a raw table `<t>`: its lock
# `<t>__lock` (and a stale one moved aside, `<t>__lock_<token>`), compaction's interim
# `<t>__compacting`, new definition `<t>__compacted` and layout copy `<t>__layout`, and a
# swap's retired `<t>__dbt_old`. Each array's child table must be the array's alone.
PROTOCOL_NAMED_ARRAYS = ("lock", "lock_events", "compacting", "compacted", "layout", "dbt_old")


def test_arrays_named_like_protocol_tables_keep_their_child_rows(spark, schema, tmp_path):
    """Found by review: a lock taken dropped every table named `<lock>_*` (a child table
    of an array `lock_events`), and compaction took a child table `<t>__compacting` for a
    killed compaction's interim table and dropped it."""
    inbox = tmp_path / "inbox"
    arrays = ", ".join(f'"{name}": [{{"k": 1}}, {{"k": 2}}]' for name in PROTOCOL_NAMED_ARRAYS)
    for batch in (1, 2):  # the second takes the lock with the child tables there
        line = f'{{"id": {batch}, "ts": "2026-11-0{batch}T08:00:00Z", {arrays}}}'
        write_lines(inbox, f"b{batch}.json", [line])
        ingest(spark, schema, inbox)
    compact_topic(spark_sql(spark), RAW, after_days=0)
    assert_every_line_accounted_for(spark, schema)
    children = [f"{SCHEMA}.{row[1]}" for row in spark.sql(f"show tables in {SCHEMA}").collect()]
    children = [t for t in children if t.startswith(f"{RAW}__") and not t.endswith("__lock")]
    assert len(children) == len(PROTOCOL_NAMED_ARRAYS), children
    for child in children:
        spark.sql(f"refresh table {child}")
        assert spark.table(child).count() == 2 * 2, f"{child} lost rows"
        keys = {row[0] for row in spark.sql(f"select distinct _parent_id from {child}").collect()}
        assert keys == {"1", "2"}, child
