"""The catalog side of ingestion: raw and child tables, and the three bookkeeping tables.

Raw and child tables are external Parquet tables partitioned by
(`_event_date`, `_slot`), rooted at `<database location>/<table>/v1`; each
row's `_batch_id` is a data column. A batch only ever writes its own
partitions (its id is their slot), so old data is never rewritten and a
rerun of a batch replaces exactly what an interrupted run wrote. Compaction
merges a day's partitions into one (ingest/compaction.py).

New columns arrive with `ALTER TABLE ... ADD COLUMNS` (old files read NULL).
A column never changes type: values another type conflicts with go to its
`__text` companion (schema/type_conflicts.py), also an added column.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dynamic_ddl import catalog, steps
from dynamic_ddl.catalog import spark_sql
from dynamic_ddl.schema.registry import RegistryEntry
from dynamic_ddl.sql_text import (
    glob_escaped,
    location_clause,
    partition_path,
    partition_spec,
    quoted_identifier,
    quoted_table,
)

PARTITION_COLUMNS = (("_event_date", "date"), ("_slot", "string"))


class OldLayoutError(Exception):
    """A raw or child table of the layout before compaction (compaction.migrate_layout
    moves it)."""


def quote(name: str) -> str:
    """A backquoted identifier (sql_text.py; names come from naming.py, but quote all the same)."""
    return quoted_identifier(name)


def table_exists(spark: SparkSession, table: str) -> bool:
    """Whether `schema.table` exists in the catalog."""
    return spark.catalog.tableExists(table)


def database_location(spark: SparkSession, schema: str) -> str:
    """The location of a database (schema), as Spark reports it."""
    return catalog.database_location(spark_sql(spark), schema)


def table_location(spark: SparkSession, table: str) -> str:
    """The location of a table, as Spark reports it."""
    return catalog.table_location(spark_sql(spark), table)


def create_table_sql(table: str, columns: Iterable[tuple[str, str]], location: str) -> str:
    """`CREATE TABLE` for a raw or child table, partition columns last."""
    body = ", ".join(f"{quote(name)} {data_type}" for name, data_type in columns)
    partitions = ", ".join(quote(name) for name, _ in PARTITION_COLUMNS)
    return (
        f"create table {table} ({body}) using parquet "
        f"partitioned by ({partitions}){location_clause(location)}"
    )


def table_columns(
    leading: list[tuple[str, str]],
    entries: list[RegistryEntry],
    texts: Sequence[tuple[str, str]] = (),
) -> list[tuple[str, str]]:
    """Every column of a raw or child table, in table order (`texts`: text companions)."""
    data = [(entry.column_name, entry.data_type) for entry in entries]
    return [*leading, *data, *texts, *PARTITION_COLUMNS]


def ensure_table(
    spark: SparkSession,
    table: str,
    leading: list[tuple[str, str]],
    entries: list[RegistryEntry],
    texts: Sequence[tuple[str, str]] = (),
) -> None:
    """Create the table if it does not exist, else add the columns it lacks (`texts`:
    the text companions the batch writes).

    Columns are compared with the table itself, not only the registry, so a
    run killed between the registry write and the DDL is repaired by a rerun.
    """
    if not table_exists(spark, table):
        steps.reached("raw.create_table")
        schema, name = table.split(".")
        location = f"{database_location(spark, schema)}/{name}/v1"
        spark.sql(create_table_sql(table, table_columns(leading, entries, texts), location))
        return
    existing = {column.lower() for column in spark.table(table).columns}
    if PARTITION_COLUMNS[-1][0] not in existing:
        raise OldLayoutError(f"{table} is partitioned by _batch_id, the layout before _slot")
    wanted = table_columns(leading, entries, texts)[: -len(PARTITION_COLUMNS)]
    # Leading columns too: a table made before a lineage column existed gets it.
    missing = [(name, data_type) for name, data_type in wanted if name.lower() not in existing]
    if missing:
        steps.reached("raw.add_columns")
        columns = ", ".join(f"{quote(name)} {data_type}" for name, data_type in missing)
        spark.sql(f"alter table {table} add columns ({columns})")


def remove_local_dir(location: str) -> None:
    """Delete a directory the catalog no longer points at, when it is on a local disk."""
    path = catalog.local_path(location)
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


def aligned(spark: SparkSession, table: str, rows: DataFrame) -> DataFrame:
    """`rows` in the table's column order; columns the rows lack are NULL of the table's type."""
    target = spark.table(table).schema
    present = set(rows.columns)
    return rows.select(
        *[
            F.col(quote(f.name))
            if f.name in present
            else F.lit(None).cast(f.dataType).alias(f.name)
            for f in target.fields
        ]
    )


def drop_batch_partitions(spark: SparkSession, table: str, batch_id: str) -> None:
    """Drop every partition of `table` that holds the batch's rows (its slot, or, in the
    layout before compaction, its `_batch_id`), and their folders on a local disk."""
    sql = spark_sql(spark)
    columns = catalog.partition_columns(sql, table)
    column = next((c for c in ("_slot", "_batch_id") if c in columns), None)
    if column is None:
        return
    sql(f"alter table {quoted_table(table)} drop if exists {partition_spec([column], [batch_id])}")
    root = catalog.local_path(catalog.table_location(sql, table))
    if root is not None:
        for folder in root.glob(f"*=*/{glob_escaped(partition_path([column], [batch_id]))}"):
            shutil.rmtree(folder, ignore_errors=True)


def overwrite_partitions(spark: SparkSession, table: str, rows: DataFrame) -> None:
    """Write rows into the partitions they belong to, replacing only those partitions.

    Spark lists every partition of the table first; compaction keeps a raw table's
    partitions few by merging a day's slots."""
    aligned(spark, table, rows).write.insertInto(table, overwrite=True)
