"""The catalog through SQL: existence, columns, locations, and swapping a table in.

Written against a `Sql` callable (one statement in, its rows out), so the
raw layer (`spark.sql`), the upserts (the adapter's connection) and the
materializations share one copy, on every target.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from dynamic_ddl import steps
from dynamic_ddl.sql_text import ddl_type, quoted_identifier, quoted_table, string_literal

Sql = Callable[[str], Sequence[Sequence[Any]]]
"""Runs one statement and returns its rows (spark.sql(...).collect(), or the adapter's)."""

RETIRED_SUFFIX = "__dbt_old"
# How long a read waits out other writers' rewrites of a table it scans (read_settled).
REREAD_SECONDS = 60.0
REREAD_PAUSE_SECONDS = 0.2
# Spark's error classes and the Java exceptions under them (a session's error may carry
# only the class, a Thrift server's the Java text).
VANISHED_FILE_SIGNS = (
    "FileNotFoundException",
    "NoSuchFileException",
    "FILE_NOT_EXIST",
    "FAILED_READ_FILE",
)


def spark_sql(spark: Any) -> Sql:
    """The `Sql` callable of a SparkSession (classic or Connect)."""
    return lambda statement: session_rows(spark.sql(statement))


def session_rows(frame: Any, rows: Sequence[Any] | None = None) -> list[Any]:
    """A DataFrame's rows (`rows`, else collected) with its TIMESTAMP values in UTC,
    the sessions' time zone, as naive datetimes.

    PySpark gives a TIMESTAMP as a naive datetime in the Python process's local time
    zone: written back into SQL as text (a partition value, a filter) it would name
    another instant, outside UTC, and an upsert would miss the stored rows of its
    partition. TIMESTAMP_NTZ values are wall times already, and left alone.
    """
    rows = frame.collect() if rows is None else rows
    fields = frame.schema.fields
    stamps = [i for i, field in enumerate(fields) if field.dataType.typeName() == "timestamp"]
    if not stamps or not rows:
        return list(rows)
    make = type(rows[0])(*(field.name for field in fields))  # a Row of the same names
    fixed = []
    for row in rows:
        values = list(row)
        for i in stamps:
            if values[i] is not None:  # naive local -> aware -> naive UTC, exact
                values[i] = values[i].astimezone(UTC).replace(tzinfo=None)
        fixed.append(make(*values))
    return fixed


def read_settled(sql: Sql, table: str | Sequence[str], statement: str) -> Sequence[Sequence[Any]]:
    """The rows of `statement`, a read of `table` (or of each of several), read again while
    a file it listed is gone by the time it is read.

    A Parquet partition is overwritten by deleting its files and moving new
    ones in. A query that listed the partition a moment before (another
    thread of this dbt run, writing another topic's partitions of a shared
    table; a `dbt docs` or `compile` beside a run) fails reading a deleted
    file. Its answer was never wrong, only missing: refresh the listing and
    read again, for up to REREAD_SECONDS.
    """
    deadline = time.monotonic() + REREAD_SECONDS
    stale = False
    while True:
        try:
            if stale:
                for each in [table] if isinstance(table, str) else table:
                    sql(f"refresh table {quoted_table(each)}")
            return sql(statement)
        except Exception as error:
            if not _listed_file_vanished(error) or time.monotonic() > deadline:
                raise
        stale = True
        time.sleep(REREAD_PAUSE_SECONDS)


def _listed_file_vanished(error: Exception) -> bool:
    """Whether a read failed on a file deleted after the query listed it (Spark's error, as
    raised by a session or reported through a Thrift server)."""
    text = str(error)
    return any(sign in text for sign in VANISHED_FILE_SIGNS)


def schema_exists(sql: Sql, schema: str) -> bool:
    """Whether the schema (database) exists."""
    rows = sql(f"show schemas like {string_literal(schema)}")
    return any(row[0].lower() == schema.lower() for row in rows)


def table_exists(sql: Sql, table: str) -> bool:
    """Whether `schema.table` exists (a view counts)."""
    schema, name = table.split(".")
    rows = sql(f"show tables in {quoted_identifier(schema)} like {string_literal(name)}")
    return any(row[1].lower() == name.lower() for row in rows)


# `show tblproperties` redacts a property whose name or value matches Spark's redaction
# patterns (by default: url, secret, password, token, access key, credential), so a
# unique_key `page_url` or a pivot pinning `avatar_url` read back as REDACTED (found by
# review). Values are stored as hex, which no default pattern matches.
ENCODED = "hex:"
REDACTED = "*********(redacted)"


def property_value(value: str) -> str:
    """A table property's value as set_table_properties stores it (hex, never redacted).

    Example:
        >>> property_value("avatar_url"), read_property("hex:6f6b"), read_property("hex:x")
        ('hex:6176617461725f75726c', 'ok', 'hex:x')
    """
    return ENCODED + value.encode().hex()


def read_property(value: str) -> str:
    """A stored property's value: decoded when property_value stored it, else as it is
    (a value set otherwise may start with `hex:` too)."""
    if value.startswith(ENCODED):
        try:
            return bytes.fromhex(value[len(ENCODED) :]).decode()
        except ValueError:  # UnicodeDecodeError is one
            pass
    return value


def table_properties(sql: Sql, table: str) -> dict[str, str]:
    """A table's properties (`tblproperties`), by name, decoded; one Spark redacted reads
    REDACTED (see recorded_properties)."""
    rows = sql(f"show tblproperties {quoted_table(table)}")
    return {row[0]: read_property(row[1]) for row in rows}


def recorded_properties(sql: Sql, table: str, names: Sequence[str]) -> dict[str, str]:
    """Those of `names` the table records, decoded. RuntimeError naming the fix when
    Spark redacted one, rather than taking it for unset: a lock would look free, and a
    table's recorded key unrecorded (review).
    """
    properties = table_properties(sql, table)
    redacted = [name for name in names if properties.get(name) == REDACTED]
    if redacted:
        listed = ", ".join(string_literal(name) for name in redacted)
        raise RuntimeError(
            f"{table}: Spark redacts its table properties {listed} when it reads them"
            " back (spark.redaction.regex or spark.sql.redaction.options.regex match"
            " them), so they cannot be checked. Values stored now never match Spark's"
            " default patterns: for one stored before as plain text, run"
            f" `alter table {quoted_table(table)} unset tblproperties ({listed})` and the"
            " next run records it anew; with patterns of your own, let them leave"
            " `hex:` values alone."
        )
    return {name: properties[name] for name in names if name in properties}


def properties_clause(properties: dict[str, str]) -> str:
    """`'name' = 'value', ...` for TBLPROPERTIES, each value encoded so that Spark never
    redacts it (property_value).

    Example:
        >>> properties_clause({"a": "ok"})
        "'a' = 'hex:6f6b'"
    """
    return ", ".join(
        f"{string_literal(k)} = {string_literal(property_value(v))}" for k, v in properties.items()
    )


def set_table_properties(sql: Sql, table: str, properties: dict[str, str]) -> None:
    """Set `properties` on a table in one statement (none: no statement)."""
    if properties:
        sql(
            f"alter table {quoted_table(table)} set tblproperties ({properties_clause(properties)})"
        )


def table_columns(sql: Sql, table: str) -> list[tuple[str, str]]:
    """(name, type) of a table's or view's columns, partition columns included, in order."""
    return described(sql, table)[0]


def partition_columns(sql: Sql, table: str) -> list[str]:
    """A table's partition columns, in order (none when it is missing or unpartitioned)."""
    if not table_exists(sql, table):
        return []
    rows = [(row[0], row[1]) for row in sql(f"describe {quoted_table(table)}")]
    return describe_sections(rows)[1]  # no column types: no second describe


def described(sql: Sql, table: str) -> tuple[list[tuple[str, str]], list[str]]:
    """One `describe` of an existing table: its (name, type) columns, partition columns
    included, in order; and its partition columns, in order (see describe_sections).
    A struct's type is written as DDL reads it back (struct_types_for_ddl)."""
    rows = [(row[0], row[1]) for row in sql(f"describe {quoted_table(table)}")]
    columns, partitions = describe_sections(rows)
    return struct_types_for_ddl(sql, table, columns), partitions


def struct_types_for_ddl(
    sql: Sql, table: str, columns: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """`columns` ((name, type) as `describe` writes them), with each type holding a
    struct whose field names need quotes written from `describe ... as json`
    (sql_text.ddl_type): `describe` writes `struct<a-b:int>`, which DDL cannot read,
    and `struct<c:d:int>`, which it reads wrongly. No statement when no type holds a
    struct; `describe`'s text where no name needs quotes (its JSON reads a char(3)
    inside a table's struct as string)."""
    if not any("struct<" in data_type for _, data_type in columns):
        return columns
    text = sql(f"describe table extended {quoted_table(table)} as json")[0][0]
    types = {column["name"]: column["type"] for column in json.loads(text)["columns"]}
    return [
        (name, _quoted_ddl_type_or(types[name], data_type) if "struct<" in data_type else data_type)
        for name, data_type in columns
    ]


def _quoted_ddl_type_or(described: dict[str, Any], written: str) -> str:
    """ddl_type where it quotes a name, else `describe`'s text (also for a type of a
    shape ddl_type does not know)."""
    try:
        rendered = ddl_type(described)
    except KeyError:
        return written
    return rendered if "`" in rendered else written


def describe_sections(rows: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[str]]:
    """`describe`'s (name, type) rows read as columns, and partition columns.

    A section starts with a heading of no type (`# Partition Information`); a
    column may start with `#` too (`#events`, `# n`): taken for a heading, it and
    every column after it were left out of an upsert's table, their values never
    stored (found by review).

    Example:
        >>> describe_sections([
        ...     ("#events", "int"), ("# p", "string"), ("# Partition Information", ""),
        ...     ("# col_name", "data_type"), ("# p", "string"), ("", ""),
        ... ])
        ([('#events', 'int'), ('# p', 'string')], ['# p'])
    """
    columns = []
    for name, data_type in rows:
        if is_heading(name, data_type):
            break
        columns.append((name, data_type))
    # Its type is "" or None (over Thrift): found by the name, as a heading.
    headings = [
        i for i, (name, kind) in enumerate(rows) if name == "# Partition Information" and not kind
    ]
    if not headings:
        return columns, []
    listed = rows[headings[0] + 1 :]
    if listed[:1] == [("# col_name", "data_type")]:  # the section's own header row
        listed = listed[1:]
    partitions = []
    for name, data_type in listed:
        if is_heading(name, data_type):
            break
        partitions.append(name)
    return columns, partitions


def is_heading(name: str | None, data_type: str | None) -> bool:
    """Whether a row of `describe` ends the list of columns: empty, or a section's
    heading (a name starting with `#`, and no type)."""
    return not name or (name.startswith("#") and not data_type)


def table_layout(sql: Sql, table: str) -> dict[str, int]:
    """A table's rows, data files and partitions (0 when unpartitioned): many files per
    partition, or many partitions of few rows, are what compaction is for; and, for an
    upsert table, the partition versions its version store keeps (what retention
    left). Reads file metadata and row counts only (`_metadata.file_path`), no column."""
    rows, files = sql(
        f"select count(*), count(distinct _metadata.file_path) from {quoted_table(table)}"
    )[0]
    partitioned = bool(partition_columns(sql, table))
    partitions = len(sql(f"show partitions {quoted_table(table)}")) if partitioned else 0
    # An upsert table's version store: the partition versions its retention kept.
    store = table + "__versions"
    versions = len(sql(f"show partitions {quoted_table(store)}")) if table_exists(sql, store) else 0
    return {"rows": int(rows), "files": int(files), "partitions": partitions, "versions": versions}


def table_location(sql: Sql, table: str) -> str:
    """Where a table's files are, as the catalog reports it (no trailing slash)."""
    rows = sql(f"describe table extended {quoted_table(table)}")
    return next(row[1] for row in rows if row[0] == "Location").rstrip("/")


# A URI scheme (`s3a:`) at the start of a location; a local path starts with `/`.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def local_path(location: str) -> Path | None:
    """The local directory a location names (a `file:` location as `table_location` and
    `database_location` give it, or a plain path); None when it is on another file
    system, which only Spark can reach. The location is a path, not a URI: `%`, `?`
    and `#` are part of the name.

    Example:
        >>> local_path("file:/tmp/w/a b%41#"), local_path("/tmp/w"), local_path("s3a://b/w")
        (PosixPath('/tmp/w/a b%41#'), PosixPath('/tmp/w'), None)
    """
    if location.startswith("file:"):
        return Path("/" + location.removeprefix("file:").lstrip("/"))
    if _SCHEME.match(location):
        return None
    return Path(location)


# Folder names a killed write job leaves at the top of its output location.
JOB_FOLDER_PREFIXES = ("_temporary", ".spark-staging-")


def job_folders(location: str) -> list[Path] | None:
    """The folders of killed write jobs at the top of `location` (JOB_FOLDER_PREFIXES);
    None when it is not on a local disk.

    Example:
        >>> job_folders("s3a://bucket/warehouse/t__versions") is None
        True
    """
    root = local_path(location)
    if root is None:
        return None
    if not root.is_dir():
        return []
    return sorted(
        child
        for child in root.iterdir()
        if child.is_dir() and child.name.startswith(JOB_FOLDER_PREFIXES)
    )


def database_location(sql: Sql, schema: str) -> str:
    """The location of a database (schema), as a path like `table_location`'s: the
    catalog reports a database's as a URI (`a%20b` for the folder `a b`), which a
    `location` clause or a reader would take for a folder named `a%20b`."""
    rows = sql(f"describe database {quoted_identifier(schema)}")
    return unquote(next(row[1] for row in rows if row[0] == "Location")).rstrip("/")


def rename(sql: Sql, table: str, to: str) -> None:
    """Rename `schema.table` to `schema.to` (a metadata operation for external tables)."""
    sql(f"alter table {quoted_table(table)} rename to {quoted_table(to)}")


def drop_table(sql: Sql, table: str) -> None:
    sql(f"drop table if exists {quoted_table(table)}")


def swap_in(sql: Sql, staging: str, target: str) -> None:
    """Put the built table `staging` at the name `target`, retiring the table there.

    Two renames: the live name is missing only between them. A failure of
    the second puts the old table back; a kill between them is mended by
    `recover_swap`, which every writer of `target` runs first. The retired
    table is dropped last (for an external table only its definition goes).
    """
    retired = target + RETIRED_SUFFIX
    steps.reached("swap.drop_stale_retired")
    drop_table(sql, retired)
    if table_exists(sql, target):
        steps.reached("swap.retire_old")
        rename(sql, target, retired)
    steps.reached("swap.rename_new")
    try:
        rename(sql, staging, target)
    except Exception:
        if table_exists(sql, retired) and not table_exists(sql, target):
            rename(sql, retired, target)
        raise
    steps.reached("swap.drop_retired")
    drop_table(sql, retired)


def recover_swap(sql: Sql, target: str) -> None:
    """Mend a swap a killed run left half done: the name empty but a retired table
    there puts the retired table back (the swap then runs again from the start).

    A retired table beside a live one is a finished swap that was not
    cleaned: it is left for the next swap to drop (its files may be the ones
    the live table read before, still needed by nobody, or by a rollback).
    """
    retired = target + RETIRED_SUFFIX
    if not table_exists(sql, target) and table_exists(sql, retired):
        rename(sql, retired, target)
