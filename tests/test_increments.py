"""Incremental reads that do not grow with a table's age: what changed since a commit is
found from the commit log, the newest value stored from the last commit's version, and
a raw batch is taken only once its ledger entry is committed (upsert/increments.py,
landing/batches.py)."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest

from dynamic_ddl import steps
from dynamic_ddl.catalog import spark_sql
from dynamic_ddl.ingest import bookkeeping
from dynamic_ddl.ingest.bookkeeping import (
    LEDGER_ENTRY_COLUMNS,
    NEWEST_READ,
    BookkeepingTables,
    archive_ledger,
    newest_committed_batch,
    read_ledger,
    read_ledger_unlocked,
    read_registry,
    write_ledger_batch,
    write_registry,
)
from dynamic_ddl.landing.batches import unseen_batches_filter
from dynamic_ddl.upsert import commit_log
from dynamic_ddl.upsert.commit_log import read_log
from dynamic_ddl.upsert.history import rollback_to
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
    # A restore is a commit that writes no version: read whole too, not taken for empty.
    first = min(row[0] for row in spark.sql(f"select _commit_id from {spec.target}").collect())
    _commit(spark, spec, [("c", 12, "d3")])
    assert rollback_to(spark_sql(spark), spec, first)
    assert greatest_value(spark_sql(spark), spec, "ts") == 9


def test_a_batch_still_being_written_is_not_taken(spark, schema, tmp_path: Path):
    inbox = tmp_path / "inbox"
    write_lines(inbox, "a.json", ['{"id": 1, "ts": "2026-11-01T00:00:00Z"}'])
    ingest(spark, schema, inbox)
    write_lines(inbox, "b.json", ['{"id": 2, "ts": "2026-11-01T00:00:00Z"}'])

    stop_before_commit = steps.interrupt_on("raw.record_committed")
    with pytest.raises(steps.Interrupted), steps.hooked(stop_before_commit):
        ingest(spark, schema, inbox)
    raw = spark.table(f"{schema}.raw_feed")
    assert raw.count() == 2  # the second batch's rows are visible, its ledger entry pending
    where = unseen_batches_filter(spark_sql(spark), "_batch_id", None, f"{schema}.raw_feed")
    assert [row.id for row in raw.where(where).collect()] == [1]

    ingest(spark, schema, inbox)  # the rerun commits it: now it is taken
    where = unseen_batches_filter(spark_sql(spark), "_batch_id", None, f"{schema}.raw_feed")
    assert sorted(row.id for row in raw.where(where).collect()) == [1, 2]


def test_a_topics_bound_is_read_while_other_topics_rewrite_their_bookkeeping(
    spark, schema, tmp_path: Path
):
    """dbt runs models in threads: a landing model asks for its raw table's newest committed
    batch while another topic's raw model rewrites that topic's registry and ledger
    partitions (the files the reader listed are deleted before it reads them)."""
    inbox = tmp_path / "inbox"
    write_lines(inbox, "a.json", ['{"id": 1, "ts": "2026-11-01T00:00:00Z"}'])
    ingest(spark, schema, inbox)
    tables = BookkeepingTables.in_schema(schema)
    (batch,) = {entry.batch_id for entry in read_ledger(spark, tables, "feed")}
    registry = read_registry(spark, tables.registry, "feed")
    others = [replace(e, topic="other", table_name="raw_other") for e in registry]
    ledger = [replace(e, batch_id="b-other") for e in read_ledger(spark, tables, "feed")]
    stop = threading.Event()

    def rewrite_other_topic() -> None:
        while not stop.is_set():
            write_registry(spark, tables.registry, "other", others)
            write_ledger_batch(spark, tables.ledger, "other", ledger)

    writer = threading.Thread(target=rewrite_other_topic)
    writer.start()
    try:
        bounds = [newest_committed_batch(spark_sql(spark), f"{schema}.raw_feed") for _ in range(20)]
    finally:
        stop.set()
        writer.join()
    assert set(bounds) == {(True, batch)}


def test_the_newest_committed_batch_is_found_behind_newer_pending_ones(
    spark, schema, tmp_path: Path
):
    """newest_committed_batch reads the newest batches of the ledger a few at a time: a
    committed one behind more pending ones than it reads at once is still the bound."""
    inbox = tmp_path / "inbox"
    write_lines(inbox, "a.json", ['{"id": 1, "ts": "2026-11-01T00:00:00Z"}'])
    ingest(spark, schema, inbox)
    tables = BookkeepingTables.in_schema(schema)
    (entry,) = read_ledger(spark, tables, "feed")
    for n in range(NEWEST_READ + 5):  # killed runs' batches, newer than the committed one
        pending = replace(entry, batch_id=f"{entry.batch_id}-{n:02d}", state="pending")
        write_ledger_batch(spark, tables.ledger, "feed", [pending])
    table = f"{schema}.raw_feed"
    assert newest_committed_batch(spark_sql(spark), table) == (True, entry.batch_id)
    newer = replace(entry, batch_id=f"{entry.batch_id}-03", state="committed")
    write_ledger_batch(spark, tables.ledger, "feed", [newer])
    assert newest_committed_batch(spark_sql(spark), table) == (True, newer.batch_id)


def _archiving_once(monkeypatch, spark, tables: BookkeepingTables, before_read: bool):
    """read_settled, but at its first read of the ledger a raw run commits one more batch
    and archives every older one: just before the read (the reader listed the batches
    already) or just after it (the archive's generations change under the reader). The
    calls that read the ledger."""
    calls = []
    read = bookkeeping.read_settled

    def archive() -> None:
        entry = max(read_ledger(spark, tables, "feed"), key=lambda e: e.batch_id)
        newest = replace(entry, batch_id="99999999T999999Z-newest", state="committed")
        write_ledger_batch(spark, tables.ledger, "feed", [newest])
        assert archive_ledger(spark, tables, "feed") == 3

    def racing(sql, table, statement):
        if tables.ledger not in ([table] if isinstance(table, str) else table):
            return read(sql, table, statement)
        calls.append(statement)
        if len(calls) == 1 and before_read:
            archive()
        rows = read(sql, table, statement)
        if len(calls) == 1 and not before_read:
            archive()
        return rows

    monkeypatch.setattr(bookkeeping, "ARCHIVE_AFTER", 0)
    monkeypatch.setattr(bookkeeping, "read_settled", racing)
    return calls


def _three_batches(spark, schema, inbox: Path) -> BookkeepingTables:
    for name in ("a", "b", "c"):
        write_lines(inbox, f"{name}.json", [f'{{"id": "{name}", "ts": "2026-11-01T00:00:00Z"}}'])
        ingest(spark, schema, inbox)
    return BookkeepingTables.in_schema(schema)


def test_the_bound_is_found_when_a_run_archives_the_batches_a_reader_listed(
    spark, schema, tmp_path: Path, monkeypatch
):
    """A landing model lists the ledger's batches, then reads their states; a raw run
    committing a batch and archiving the older ones in between leaves none of the listed
    batches: the bound is then read from the archive, never taken for "nothing yet"."""
    tables = _three_batches(spark, schema, tmp_path / "inbox")
    committed = max(entry.batch_id for entry in read_ledger(spark, tables, "feed"))
    _archiving_once(monkeypatch, spark, tables, before_read=True)
    known, bound = newest_committed_batch(spark_sql(spark), f"{schema}.raw_feed")
    assert known and bound is not None and bound >= committed


def test_a_reader_without_the_lock_reads_again_when_a_run_archived_meanwhile(
    spark, schema, tmp_path: Path, monkeypatch
):
    """Lineage reads the ledger and its archive without the topic's lock: when the
    archive's generations changed during its read, it reads again, and sees every entry."""
    tables = _three_batches(spark, schema, tmp_path / "inbox")
    calls = _archiving_once(monkeypatch, spark, tables, before_read=False)
    columns = ", ".join(LEDGER_ENTRY_COLUMNS)
    entries = read_ledger_unlocked(
        spark_sql(spark), tables, lambda every: f"select {columns} from {every} as entries"
    )
    assert len(calls) == 2  # read again
    assert sorted(Path(e.path).name for e in entries) == ["a.json", "b.json", "c.json", "c.json"]
