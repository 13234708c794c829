"""The file ledger, the schema registry and the quarantine as tables.

One of each per schema, shared by every topic and partitioned by topic, so
raw models of different topics never write the same partition. Ledger and
registry hold a row per file and per column: each write reads the topic's
rows, changes them in Python and overwrites the topic's partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dynamic_ddl.ingest.ledger import LedgerEntry
from dynamic_ddl.ingest.local_rows import local_dataframe
from dynamic_ddl.ingest.tables import aligned
from dynamic_ddl.schema.registry import RegistryEntry
from dynamic_ddl.sql_text import partition_spec, quoted_identifier

LEDGER_COLUMNS = (
    "path string, size_bytes bigint, modified_at double, checksum string, line_count bigint, "
    "batch_id string, state string, recorded_at timestamp, first_line bigint, topic string"
)
# Columns added to a bookkeeping table since it was first created: (table kind, column, type).
ADDED_COLUMNS = (("ledger", "first_line", "bigint"),)
REGISTRY_COLUMNS = (
    "table_name string, json_path string, json_keys array<string>, column_name string, "
    "data_type string, first_seen_batch string, last_seen_batch string, status string, "
    "topic string"
)
QUARANTINE_COLUMNS = (
    "source_file string, line_number bigint, raw_text string, raw_base64 string, reason string, "
    "quarantined_at timestamp, topic string, batch_id string"
)


@dataclass(frozen=True)
class BookkeepingTables:
    """Where one schema keeps its ledger, registry and quarantine."""

    ledger: str
    registry: str
    quarantine: str

    @classmethod
    def in_schema(cls, schema: str) -> BookkeepingTables:
        return cls(
            ledger=f"{schema}.raw_file_ledger",
            registry=f"{schema}.raw_schema_registry",
            quarantine=f"{schema}.raw_quarantine",
        )


def bookkeeping_ddl(tables: BookkeepingTables) -> list[str]:
    """`CREATE TABLE IF NOT EXISTS` for the three tables (run by dbt's on-run-start too)."""
    return [
        f"create table if not exists {table} ({columns}) using parquet "
        f"partitioned by ({partitions})"
        for table, columns, partitions in (
            (tables.ledger, LEDGER_COLUMNS, "topic"),
            (tables.registry, REGISTRY_COLUMNS, "topic"),
            (tables.quarantine, QUARANTINE_COLUMNS, "topic, batch_id"),
        )
    ]


def create_bookkeeping_tables(spark: SparkSession, tables: BookkeepingTables) -> None:
    """Create the three tables if they do not exist yet; add columns newer versions added.

    Two raw models may get here at once (dbt threads, two runs): of two
    creates of one table one fails, as does one of two `ADD COLUMNS`, and
    either way the table is as wanted.
    """
    for statement in bookkeeping_ddl(tables):
        _tolerating_a_racing_twin(spark, statement)
    for kind, column, data_type in ADDED_COLUMNS:
        table = getattr(tables, kind)
        if column not in spark.table(table).columns:
            _tolerating_a_racing_twin(
                spark, f"alter table {table} add columns ({quoted_identifier(column)} {data_type})"
            )


def _tolerating_a_racing_twin(spark: SparkSession, statement: str) -> None:
    """Run DDL; an error saying another run did the same thing first is no error."""
    try:
        spark.sql(statement)
    except Exception as error:
        if "ALREADY_EXISTS" not in str(error).upper():
            raise


def _topic_rows(spark: SparkSession, table: str, topic: str) -> list:
    spark.sql(f"refresh table {table}")  # another session may have rewritten it
    return spark.table(table).where(F.col("topic") == topic).collect()


def read_ledger(spark: SparkSession, table: str, topic: str) -> list[LedgerEntry]:
    """The topic's ledger rows."""
    return [
        LedgerEntry(
            row.path,
            row.size_bytes,
            row.modified_at,
            row.checksum,
            row.line_count,
            row.batch_id,
            row.state,
            row.recorded_at,
            row.first_line or 1,
        )
        for row in _topic_rows(spark, table, topic)
    ]


def write_ledger(spark: SparkSession, table: str, topic: str, entries: list[LedgerEntry]) -> None:
    """Replace the topic's ledger rows; an entry keeps its `recorded_at`, a new one gets now.

    So a run that records a batch as pending does not make the topic's
    committed files look fresh (source freshness reads committed rows).
    """
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = [
        (
            e.path,
            e.size,
            e.mtime,
            e.checksum,
            e.line_count,
            e.batch_id,
            e.state,
            e.recorded_at or now,
            e.first_line,
            topic,
        )
        for e in entries
    ]
    _overwrite_topic(spark, table, topic, rows, LEDGER_COLUMNS)


def read_registry(spark: SparkSession, table: str, topic: str) -> list[RegistryEntry]:
    """The topic's registry rows, in the order their columns were added."""
    return [
        RegistryEntry(
            topic,
            row.table_name,
            tuple(row.json_keys),
            row.column_name,
            row.data_type,
            row.first_seen_batch,
            row.last_seen_batch,
            row.status,
        )
        for row in sorted(
            _topic_rows(spark, table, topic),
            key=lambda r: (r.table_name, r.first_seen_batch, r.json_keys),
        )
    ]


def write_registry(
    spark: SparkSession, table: str, topic: str, entries: list[RegistryEntry]
) -> None:
    """Replace the topic's registry rows."""
    rows = [
        (
            e.table_name,
            e.json_path,
            list(e.json_keys),
            e.column_name,
            e.data_type,
            e.first_seen_batch,
            e.last_seen_batch,
            e.status,
            topic,
        )
        for e in entries
    ]
    _overwrite_topic(spark, table, topic, rows, REGISTRY_COLUMNS)


def _overwrite_topic(
    spark: SparkSession, table: str, topic: str, rows: list[tuple], schema: str
) -> None:
    """Replace the topic's partition with `rows` (dropping it when there are none)."""
    if not rows:
        spark.sql(f"alter table {table} drop if exists {partition_spec(['topic'], [topic])}")
        return
    local_dataframe(spark, rows, schema).write.insertInto(table, overwrite=True)


def write_quarantine(
    spark: SparkSession, table: str, rows: DataFrame, topic: str, batch_id: str
) -> None:
    """Replace the batch's quarantine partition with `rows`."""
    partition = partition_spec(["topic", "batch_id"], [topic, batch_id])
    spark.sql(f"alter table {table} drop if exists {partition}")
    aligned(spark, table, rows).write.insertInto(table, overwrite=True)
