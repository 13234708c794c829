"""Ingestion as a job: exactly once under interruption, and sample drift with no manual step."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace

import pytest
from pyspark.sql import functions as F

from dynamic_ddl.ingest import bookkeeping, job
from dynamic_ddl.ingest.bookkeeping import (
    QUARANTINE_COLUMNS,
    BookkeepingTables,
    archive_ledger,
    create_bookkeeping_tables,
    read_ledger,
    read_registry,
    write_ledger_batch,
    write_quarantine,
    write_registry,
)
from dynamic_ddl.ingest.job import ingest_topic
from dynamic_ddl.ingest.ledger import LedgerEntry
from dynamic_ddl.ingest.local_rows import local_dataframe
from dynamic_ddl.sampledata.generator import GeneratorConfig, generate
from dynamic_ddl.sampledata.reference import load_reference
from dynamic_ddl.schema.registry import RegistryEntry

TOPIC = {"topic": "device_events", "record_key": ["_data.event.id"], "event_time": "_data.log_ts"}


@pytest.fixture(scope="module")
def inbox(tmp_path_factory):
    """Two sample batches, each in its own inbox folder, the second drifting."""
    root = tmp_path_factory.mktemp("sample")
    for batch in (1, 2):
        generate(GeneratorConfig(root / f"b{batch}", events=400, batch=batch), load_reference())
    return root


def _config(schema: str, inbox_dir) -> dict:
    return {**TOPIC, "inbox_dir": str(inbox_dir), "schema": schema, "table": "raw_device_events"}


def _accounted(spark, schema: str) -> list[tuple]:
    """Per batch: input lines, raw rows, quarantined lines."""
    ledger = (
        spark.table(f"{schema}.raw_file_ledger")
        .groupBy("batch_id")
        .agg(F.sum("line_count").alias("lines"), F.min("state").alias("state"))
    )
    raw = spark.table(f"{schema}.raw_device_events").groupBy(F.col("_batch_id").alias("batch_id"))
    quarantined = spark.table(f"{schema}.raw_quarantine").groupBy("batch_id")
    return [
        tuple(row)
        for row in ledger.join(raw.count().withColumnRenamed("count", "raw"), "batch_id", "left")
        .join(quarantined.count().withColumnRenamed("count", "quarantined"), "batch_id", "left")
        .select("state", "lines", "raw", "quarantined")
        .fillna(0)
        .collect()
    ]


def test_second_sample_batch_drifts_in_with_no_manual_step(spark, inbox, tmp_path):
    spark.sql("create database if not exists ingest_drift")
    both = tmp_path / "inbox"
    shutil.copytree(inbox / "b1", both)
    (first,) = ingest_topic(spark, _config("ingest_drift", both)).collect()
    for day in (inbox / "b2" / "device_events").iterdir():  # batch 2 lands beside batch 1
        shutil.copytree(day, both / "device_events" / f"b2-{day.name}")
    (second,) = ingest_topic(spark, _config("ingest_drift", both)).collect()
    assert first.columns_added > 0 and second.columns_added > 0

    registry = spark.table("ingest_drift.raw_schema_registry")
    new = registry.where(F.col("first_seen_batch") == second.batch_id)
    assert new.count() == second.columns_added
    raw = spark.table("ingest_drift.raw_device_events")
    old_rows = raw.where(F.col("_batch_id") == first.batch_id)
    for (column,) in new.where("table_name = 'raw_device_events'").select("column_name").collect():
        assert old_rows.where(F.col(column).isNotNull()).count() == 0  # old rows read NULL
        assert raw.where(F.col(column).isNotNull()).count() > 0
    for state, lines, raw_rows, quarantined in _accounted(spark, "ingest_drift"):
        assert state == "committed" and lines == raw_rows + quarantined


def test_a_batch_stuck_pending_does_not_look_fresh(spark, inbox, tmp_path, monkeypatch):
    """`dbt source freshness` reads the ledger's committed files only: a batch that keeps
    failing (recorded pending on every try) must let the topic go stale."""
    import yaml

    from tests.conftest import PROJECT_ROOT

    spark.sql("create database if not exists ingest_stuck")
    both = tmp_path / "inbox"
    shutil.copytree(inbox / "b1", both)
    ingest_topic(spark, _config("ingest_stuck", both))
    committed_at = spark.table("ingest_stuck.raw_file_ledger").agg(F.max("recorded_at")).first()[0]

    for day in (inbox / "b2" / "device_events").iterdir():
        shutil.copytree(day, both / "device_events" / f"b2-{day.name}")

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("the batch fails every time")

    monkeypatch.setattr(job, "_write_registry", killed)
    for _ in range(2):
        with pytest.raises(KeyboardInterrupt):
            ingest_topic(spark, _config("ingest_stuck", both))
    ledger = spark.table("ingest_stuck.raw_file_ledger")
    assert ledger.where("state = 'pending'").count() > 0
    assert ledger.where("state = 'committed'").agg(F.max("recorded_at")).first()[0] == committed_at

    raw_yml = yaml.safe_load((PROJECT_ROOT / "python_models/raw/_raw.yml").read_text())
    tables = {table["name"]: table for table in raw_yml["sources"][0]["tables"]}
    query = tables["raw_file_ledger"]["config"]["loaded_at_query"]
    loaded_at = spark.sql(query.replace("{{ target.schema }}", "ingest_stuck")).first()[0]
    assert loaded_at == committed_at


def test_ingestion_times_are_utc_whatever_the_hosts_zone(spark, tmp_path, monkeypatch):
    # `_ingested_at` was a naive UTC time that PySpark read as local: on a Berlin host,
    # 2026-11-01 00:00 UTC was stored as 2026-10-31 23:00 (issue 21, finding 4).
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        inbox = tmp_path / "inbox"
        (inbox / "zones").mkdir(parents=True)
        (inbox / "zones" / "a.json").write_text(
            '{"id": 1, "ts": "2026-11-01T00:00:00Z"}\nnot json\n'
        )
        config = {"topic": "zones", "record_key": ["id"], "event_time": "ts"}
        spark.sql("create database if not exists ingest_zones")
        before = time.time()
        ingest_topic(
            spark,
            {**config, "inbox_dir": str(inbox), "schema": "ingest_zones", "table": "raw_zones"},
        )
        after = time.time()
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    for table, column in (
        ("raw_zones", "_ingested_at"),
        ("raw_quarantine", "quarantined_at"),
        ("raw_file_ledger", "recorded_at"),
    ):
        (seconds,) = spark.sql(f"select unix_timestamp({column}) from ingest_zones.{table}").first()
        assert before - 2 <= seconds <= after + 2, (table, seconds - before)
    (day,) = spark.sql("select cast(_event_date as string) from ingest_zones.raw_zones").first()
    assert day == "2026-11-01"


def test_a_bookkeeping_write_replaces_its_own_partition_and_no_other(spark, monkeypatch):
    """Ledger, registry and quarantine writes replace their own partition, a topic named
    with quotes included, and leave every other as it was."""
    spark.sql("drop schema if exists bookkeeping_writes cascade")
    spark.sql("create schema bookkeeping_writes")
    tables = BookkeepingTables.in_schema("bookkeeping_writes")
    create_bookkeeping_tables(spark, tables)
    odd = "it's `odd` ok"

    def entries(batch: str, state: str, *paths: str) -> list[LedgerEntry]:
        return [LedgerEntry(path, 10, 1.0, "sum", 2, batch, state) for path in paths]

    write_ledger_batch(spark, tables.ledger, odd, entries("b1", "pending", "/a"))
    write_ledger_batch(spark, tables.ledger, odd, entries("b2", "pending", "/b"))
    write_ledger_batch(spark, tables.ledger, "other", entries("b1", "committed", "/c"))
    write_ledger_batch(spark, tables.ledger, odd, entries("b1", "committed", "/a", "/a2"))

    def ledger() -> list[tuple]:
        read = spark.table(tables.ledger).select("topic", "batch_id", "path", "state")
        return sorted(tuple(row) for row in read.collect())

    kept = [
        (odd, "b1", "/a", "committed"),
        (odd, "b1", "/a2", "committed"),
        (odd, "b2", "/b", "pending"),
        ("other", "b1", "/c", "committed"),
    ]
    assert ledger() == kept
    assert sorted(e.path for e in read_ledger(spark, tables, odd)) == ["/a", "/a2", "/b"]
    # Archiving moves the topic's older committed batches and no other topic's.
    write_ledger_batch(spark, tables.ledger, odd, entries("b0", "committed", "/z"))
    monkeypatch.setattr(bookkeeping, "ARCHIVE_AFTER", 1)
    assert archive_ledger(spark, tables, odd) == 1  # b0: b1 is the newest committed
    archived = spark.table(tables.ledger_archive).select("topic", "batch_id", "path", "generation")
    assert [tuple(row) for row in archived.collect()] == [(odd, "b0", "/z", 1)]
    assert ledger() == kept  # b0 left it
    assert sorted(e.path for e in read_ledger(spark, tables, odd)) == ["/a", "/a2", "/b", "/z"]

    column = RegistryEntry(odd, "raw_t", ("x",), "x", "bigint", "b1", "b2")
    write_registry(spark, tables.registry, odd, [column])
    write_registry(spark, tables.registry, "other", [replace(column, topic="other")])
    write_registry(spark, tables.registry, odd, [replace(column, last_seen_batch="b3")])
    assert read_registry(spark, tables.registry, odd) == [replace(column, last_seen_batch="b3")]
    assert read_registry(spark, tables.registry, "other")[0].last_seen_batch == "b2"

    def line(batch: str) -> tuple:
        return ("/a", 3, "{", None, "unparseable_json", None, odd, batch)

    for batch in ("b1", "b2"):
        rows = local_dataframe(spark, [line(batch)], QUARANTINE_COLUMNS)
        write_quarantine(spark, tables.quarantine, rows, odd, batch)
    write_quarantine(spark, tables.quarantine, None, odd, "b2")
    quarantine = spark.table(tables.quarantine).select("topic", "batch_id", "source_file")
    assert [tuple(row) for row in quarantine.collect()] == [(odd, "b1", "/a")]
