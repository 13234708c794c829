"""The commit log as a table: one per schema, a partition per upsert table.

Entries are appended (see commits.py for what they say); once a table's log
holds COMPACT_AFTER lines (plus the commits it keeps), it is compacted into a
checkpoint and the commits the table keeps (keep_commits), so reading it
costs the same after ten commits or ten thousand.
"""

from __future__ import annotations

import json
import threading
import uuid

from dynamic_ddl import steps
from dynamic_ddl.catalog import Sql, table_exists, table_location
from dynamic_ddl.sql_text import (
    partition_path,
    partition_spec,
    path_values,
    sql_literal,
    string_literal,
)
from dynamic_ddl.upsert.commits import LogEntry, PartitionChange, TableState, compacted, replay
from dynamic_ddl.upsert.spec import UpsertError, UpsertSpec

CHANGES_TYPE = "array<struct<path:string,previous:string,current:string>>"
# A line's time as LogEntry holds it (commits.LOGGED_AT_FORMAT), in Spark's pattern: UTC,
# the session time zone of every engine we start.
LOGGED_AT_PATTERN = "yyyy-MM-dd HH:mm:ss.SSSSSS"
# A table's log is compacted once it holds more lines than this: a commit reads
# the whole log, so its cost stays bounded whatever the table's age.
COMPACT_AFTER = 50


def log_ddl(spec: UpsertSpec) -> str:
    """`CREATE TABLE IF NOT EXISTS` for the schema's commit log."""
    return (
        f"create table if not exists {spec.log} (commit_id string, action string,"
        f" changes {CHANGES_TYPE},"
        " logged_at timestamp, table_name string) using parquet partitioned by (table_name)"
    )


def read_log(sql: Sql, spec: UpsertSpec) -> TableState:
    """The target's state from its commit log (changes read as JSON: the same on every target)."""
    rows = sql(
        f"select commit_id, action, to_json(changes),"
        f" date_format(logged_at, {string_literal(LOGGED_AT_PATTERN)}) from {spec.log}"
        f" where table_name = {sql_literal(spec.table_name)}"
    )
    if not rows:
        _refuse_a_log_of_another_case(sql, spec)
    return replay(
        LogEntry(
            row[0],
            row[1],
            tuple(
                PartitionChange(c["path"], c.get("previous"), c.get("current"))
                for c in json.loads(row[2] or "[]")
            ),
            row[3],
        )
        for row in rows
    )


def _refuse_a_log_of_another_case(sql: Sql, spec: UpsertSpec) -> None:
    """A log kept under the table's name in another case (written before names were
    lowercased) is the table's: read as empty, its versions would be dropped."""
    for row in sql(f"show partitions {spec.log}"):
        (spelled,) = path_values(row[0])
        if spelled != spec.table_name and spelled.lower() == spec.table_name:
            raise UpsertError(
                f"The commit log of {spec.target} is kept as table_name={spelled!r}; rename"
                f" it: alter table {spec.log} partition (table_name = {sql_literal(spelled)})"
                f" rename to partition (table_name = {sql_literal(spec.table_name)})"
            )


def last_commit_id(sql: Sql, spec: UpsertSpec) -> str | None:
    """The newest commit whose rows are all visible (for incremental pulls)."""
    if not table_exists(sql, spec.log):
        return None
    versions = read_log(sql, spec).versions.values()
    return max(versions, default=None)


# One schema's models share its log table. Two appends to one table at once share its
# `_temporary` folder, and the first to finish deletes it under the other (dbt runs two
# models at once with `threads: 2`): log writes of this process take turns.
_LOG_WRITES = threading.Lock()


def _entry_select(entry: LogEntry) -> str:
    """`select` of one log line (the log's data columns, in order)."""
    changes = ", ".join(
        f"named_struct('path', {sql_literal(c.path)}, 'previous', {sql_literal(c.previous)},"
        f" 'current', {sql_literal(c.current)})"
        for c in entry.changes
    )
    array = f"array({changes})" if changes else f"cast(array() as {CHANGES_TYPE})"
    logged_at = "current_timestamp()"
    if entry.logged_at is not None:  # a time of its own (a commit's, kept by compaction)
        logged_at = f"cast({string_literal(entry.logged_at)} as timestamp)"
    return (
        f"select {sql_literal(entry.commit_id)} as commit_id, {sql_literal(entry.action)}"
        f" as action, {array} as changes, {logged_at} as logged_at"
    )


def write_log(sql: Sql, spec: UpsertSpec, entry: LogEntry) -> None:
    """Append one entry to the target's log partition."""
    with _LOG_WRITES:
        # A static partition: the insert lists only this table's log partition.
        sql(
            f"insert into {spec.log} {partition_spec(['table_name'], [spec.table_name])}"
            f" {_entry_select(entry)}"
        )


def compact_log(sql: Sql, spec: UpsertSpec, state: TableState, keep: int = 1) -> None:
    """Replace the target's log by the few entries that replay to `state` and its last
    `keep` commits.

    The entries are written to a new folder, then the log partition is
    pointed at it: one metastore update, so a reader replays the old log or
    the new one, the same state either way. The old folder's files are left
    (a few KB per compaction), as no reader can be sure to be done with them.
    """
    entries = compacted(state, keep)
    folder = partition_path(["table_name"], [spec.table_name])
    location = (
        f"{table_location(sql, spec.log)}/_compacted/{folder}/{entries[-1].commit_id}"
        f"-{uuid.uuid4().hex[:8]}"
    )
    steps.reached("compact.write")
    sql(
        f"insert overwrite directory {string_literal(location)} using parquet"
        f" {' union all '.join(_entry_select(entry) for entry in entries)}"
    )
    steps.reached("compact.point")
    partition = partition_spec(["table_name"], [spec.table_name])
    sql(f"alter table {spec.log} {partition} set location {string_literal(location)}")


def drop_log(sql: Sql, spec: UpsertSpec) -> None:
    """Remove the target's log entries.

    A compacted log's partition points at its own folder; the partition's
    default folder still holds the lines from before the compaction, which
    the next write there would bring back. So the partition is dropped, added
    again over its default folder, and dropped again (the log is a managed
    table: a dropped partition's files go with it). A kill between the
    steps leaves entries that the next drop removes the same way.
    """
    if table_exists(sql, spec.log):
        partition = partition_spec(["table_name"], [spec.table_name])
        for step, change in (
            ("log.drop", "drop if exists"),
            ("log.add_default_folder", "add if not exists"),
            ("log.drop_default_folder", "drop if exists"),
        ):
            steps.reached(step)
            sql(f"alter table {spec.log} {change} {partition}")
