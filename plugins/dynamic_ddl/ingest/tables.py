"""The catalog side of ingestion: raw and child tables, and the three bookkeeping tables.

Raw and child tables are external Parquet tables partitioned by
(`_event_date`, `_batch_id`), rooted at `<database location>/<table>/v<n>`.
A batch only ever writes its own partitions, so old data is never rewritten
and a rerun of a batch replaces exactly what an interrupted run wrote.

New columns arrive with `ALTER TABLE ... ADD COLUMNS` (old files read NULL).
Parquet cannot read old files through a changed type (bigint files as
double or string fail), so a widened column costs one rewrite: the table is
copied with the new types to `v<n+1>`, then swapped in by renames; a reader
sees the old table or the new one.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from urllib.parse import urlparse

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StructType

from dynamic_ddl import catalog, steps
from dynamic_ddl.catalog import spark_sql
from dynamic_ddl.schema.registry import RegistryEntry, spark_type
from dynamic_ddl.sql_text import location_clause, quoted_identifier

PARTITION_COLUMNS = (("_event_date", "date"), ("_batch_id", "string"))
_VERSION = re.compile(r"/v(\d+)/?$")


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


def next_version_location(location: str) -> str:
    """`.../v3` -> `.../v4`.

    Example:
        >>> next_version_location("file:/w/raw.db/raw_t/v1")
        'file:/w/raw.db/raw_t/v2'
    """
    match = _VERSION.search(location)
    if not match:
        return location.rstrip("/") + "/v2"
    return location[: match.start()] + f"/v{int(match.group(1)) + 1}"


def create_table_sql(table: str, columns: Iterable[tuple[str, str]], location: str) -> str:
    """`CREATE TABLE` for a raw or child table, partition columns last."""
    body = ", ".join(f"{quote(name)} {data_type}" for name, data_type in columns)
    partitions = ", ".join(quote(name) for name, _ in PARTITION_COLUMNS)
    return (
        f"create table {table} ({body}) using parquet "
        f"partitioned by ({partitions}){location_clause(location)}"
    )


def table_columns(
    leading: list[tuple[str, str]], entries: list[RegistryEntry]
) -> list[tuple[str, str]]:
    """Every column of a raw or child table, in table order."""
    data = [(entry.column_name, entry.data_type) for entry in entries]
    return [*leading, *data, *PARTITION_COLUMNS]


def ensure_table(
    spark: SparkSession,
    table: str,
    leading: list[tuple[str, str]],
    entries: list[RegistryEntry],
) -> None:
    """Create the table if it does not exist, else add the columns it lacks.

    Columns are compared with the table itself, not only the registry, so a
    run killed between the DDL and the registry write is repaired by a rerun.
    """
    if not table_exists(spark, table):
        steps.reached("raw.create_table")
        schema, name = table.split(".")
        location = f"{database_location(spark, schema)}/{name}/v1"
        spark.sql(create_table_sql(table, table_columns(leading, entries), location))
        return
    existing = {column.lower() for column in spark.table(table).columns}
    wanted = [*leading, *((e.column_name, e.data_type) for e in entries)]
    # Leading columns too: a table made before a lineage column existed gets it.
    missing = [(name, data_type) for name, data_type in wanted if name.lower() not in existing]
    if missing:
        steps.reached("raw.add_columns")
        columns = ", ".join(f"{quote(name)} {data_type}" for name, data_type in missing)
        spark.sql(f"alter table {table} add columns ({columns})")


def _widened(value: Column, before: str, after: str) -> Column:
    """An old column's value in its widened type: JSON text for nested values."""
    if after == "string" and isinstance(spark_type(before), ArrayType | StructType):
        return F.to_json(value)
    return value.cast(after)


def rewrite_widened(
    spark: SparkSession,
    table: str,
    leading: list[tuple[str, str]],
    entries: list[RegistryEntry],
    widened: dict[str, str],
) -> None:
    """Copy the table with widened column types to its next version and swap it in.

    `widened` maps column name to its type before. The copy is a new table
    `<table>__dbt_new` over `v<n+1>`; catalog.swap_in puts it in place by two
    renames (a kill between them is mended by `catalog.recover_swap`, which
    the next batch runs first). The old files are deleted once nothing
    points at them.
    """
    old_location = table_location(spark, table)
    new_location = next_version_location(old_location)
    staging = f"{table}__dbt_new"
    steps.reached("widen.drop_stale_copy")
    spark.sql(f"drop table if exists {staging}")
    old = spark.table(table)
    types = {entry.column_name: entry.data_type for entry in entries}
    copy = old.select(
        *[
            _widened(F.col(quote(c)), widened[c], types[c]).alias(c) if c in widened else F.col(c)
            for c in old.columns
        ]
    )
    steps.reached("widen.write_copy")
    copy.write.mode("overwrite").partitionBy(*(n for n, _ in PARTITION_COLUMNS)).parquet(
        new_location
    )
    steps.reached("widen.create_copy")
    # Every column the table has stays, those the topic no longer writes too (a
    # `_raw_json` a topic stopped keeping holds its old rows' text).
    columns = table_columns(leading, entries)
    named = {name.lower() for name, _ in columns}
    kept = [(f.name, f.dataType.simpleString()) for f in old.schema if f.name.lower() not in named]
    columns = [*columns[: -len(PARTITION_COLUMNS)], *kept, *PARTITION_COLUMNS]
    spark.sql(create_table_sql(staging, columns, new_location))
    steps.reached("widen.register_partitions")
    spark.sql(f"msck repair table {staging}")
    catalog.swap_in(spark_sql(spark), staging, table)
    steps.reached("widen.remove_old_files")
    remove_local_dir(old_location)


def remove_local_dir(location: str) -> None:
    """Delete a directory the catalog no longer points at, when it is on a local disk."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        shutil.rmtree(parsed.path, ignore_errors=True)


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


def overwrite_partitions(spark: SparkSession, table: str, rows: DataFrame) -> None:
    """Write rows into the partitions they belong to, replacing only those partitions."""
    aligned(spark, table, rows).write.insertInto(table, overwrite=True)
