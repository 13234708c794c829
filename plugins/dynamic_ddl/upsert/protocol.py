"""Latest-wins upserts into plain Parquet tables: copy-on-write of changed partitions.

One protocol for both faces: a Python model calls it with `spark.sql`, the
SQL models' `upsert` strategy calls it through the adapter's connection. It
is written as SQL statements so it runs the same on every target.

A commit (see commits.py for the log):

1. recover: a commit logged `pending` by a killed run is rolled forward;
2. merge: the batch's latest row per key, against the rows of only the
   partitions the batch touches. The greatest `ordering_field` wins; on a
   tie the incoming row wins (a correction); a row identical to the stored
   one changes nothing. A delete marker removes the key;
3. write the merged rows of the partitions that changed, and only those, as
   a new version in `<table>__versions` (invisible to readers of the table);
   merge and write are one Spark job;
4. log `pending` with each changed partition's previous and new version;
5. point each changed partition at its new version (one metastore update
   per partition: a reader sees a partition's old rows or its new rows);
6. log `committed`; drop versions that are neither current nor the previous
   version of a partition this commit changed (what a rollback returns to).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dynamic_ddl.upsert.commits import (
    COMMITTED,
    PENDING,
    ROLLED_BACK,
    LogEntry,
    PartitionChange,
    TableState,
    commit_time,
    committed,
    next_commit_id,
    replay,
)

Sql = Callable[[str], Sequence[Sequence[Any]]]
"""Runs one statement and returns its rows (spark.sql(...).collect(), or the adapter's)."""

COMMIT_ID = "_commit_id"
COMMIT_TS = "_commit_ts"
VERSION = "_version"
EMPTY = "_empty"  # what a new table points at: no rows until its first commit
LOG_TABLE = "upsert_commits"
CHANGES_TYPE = "array<struct<path:string,previous:string,current:string>>"
ON_SCHEMA_CHANGE = ("ignore", "append_new_columns", "fail")
# Characters Spark escapes (as %XX) in partition directory names.
_ESCAPED = {chr(c) for c in range(1, 32)} | set("\"#%'*/:=?\\\x7f{[]^")


class UpsertError(Exception):
    """An upsert that cannot go ahead; the message names the fix."""


@dataclass(frozen=True)
class UpsertSpec:
    """Where and how to upsert: the target table and its record key."""

    target: str
    unique_key: tuple[str, ...] = ()
    ordering_field: str = ""
    partition_by: tuple[str, ...] = ()
    delete_marker: str | None = None
    on_schema_change: str = "ignore"
    # dbt's incremental_predicates: stored rows failing them take no part in the
    # merge and are kept as they are (the target is aliased DBT_INTERNAL_DEST).
    predicates: tuple[str, ...] = ()

    @classmethod
    def of_table(cls, sql: Sql, target: str) -> UpsertSpec:
        """The spec of an existing upsert table, enough to roll back, pull or drop it."""
        return cls(target, partition_by=tuple(partition_columns(sql, target)))

    def validate(self) -> None:
        """Raise UpsertError, naming the fix, when the config cannot upsert."""
        if not self.unique_key:
            raise UpsertError(f"Upsert into {self.target} needs unique_key (one or more columns).")
        if not self.ordering_field:
            raise UpsertError(
                f"Upsert into {self.target} needs ordering_field: the column whose greatest"
                " value wins for a key (e.g. log_ts)."
            )
        if self.on_schema_change not in ON_SCHEMA_CHANGE:
            raise UpsertError(
                f"on_schema_change={self.on_schema_change!r} is not supported by upsert;"
                f" use one of {', '.join(ON_SCHEMA_CHANGE)} (Parquet cannot drop columns)."
            )

    @property
    def schema(self) -> str:
        return self.target.split(".")[0]

    @property
    def versions(self) -> str:
        return f"{self.target}__versions"

    @property
    def log(self) -> str:
        return f"{self.schema}.{LOG_TABLE}"

    @property
    def table_name(self) -> str:
        return self.target.split(".")[1]


@dataclass(frozen=True)
class CommitResult:
    """What one upsert did."""

    commit_id: str | None
    changed_partitions: int
    affected_partitions: int


def quote(name: str) -> str:
    """A backquoted identifier."""
    return "`" + name.replace("`", "``") + "`"


def literal(value: Any) -> str:
    """A SQL literal for a partition value or a text (None -> null)."""
    if value is None:
        return "null"
    if isinstance(value, bool | int):
        return str(value).lower()
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def partition_path(columns: Sequence[str], values: Sequence[Any]) -> str:
    """The partition's directory path, as Spark names it.

    Example:
        >>> partition_path(["day", "kind"], ["2026-11-01", "a/b"])
        'day=2026-11-01/kind=a%2Fb'
    """
    return "/".join(f"{_escape(c)}={_escape(str(v))}" for c, v in zip(columns, values, strict=True))


def _escape(text: str) -> str:
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in text)


def partition_spec(columns: Sequence[str], values: Sequence[Any]) -> str:
    """`(day = '2026-11-01', kind = 'a')` for ALTER TABLE ... PARTITION."""
    pairs = ", ".join(f"{quote(c)} = {literal(v)}" for c, v in zip(columns, values, strict=True))
    return f"({pairs})"


def _unescape(text: str) -> str:
    from urllib.parse import unquote

    return unquote(text)


def path_values(path: str) -> list[str]:
    """The partition values in a path (the inverse of partition_path, values as text)."""
    return [_unescape(part.split("=", 1)[1]) for part in path.split("/") if part]


# --- reading the catalog -------------------------------------------------------------


def table_exists(sql: Sql, table: str) -> bool:
    schema, name = table.split(".")
    return bool(sql(f"show tables in {quote(schema)} like {literal(name)}"))


def table_columns(sql: Sql, table: str) -> list[tuple[str, str]]:
    """(name, type) of a table's or view's columns, partition columns included, in order."""
    columns = []
    for row in sql(f"describe {table}"):
        name = row[0]
        if not name or name.startswith("#"):
            break
        columns.append((name, row[1]))
    return columns


def partition_columns(sql: Sql, table: str) -> list[str]:
    """A table's partition columns, in order (none when it is missing or unpartitioned)."""
    if not table_exists(sql, table):
        return []
    rows = [row[0] for row in sql(f"describe {table}")]
    if "# Partition Information" not in rows:
        return []
    after = rows[rows.index("# Partition Information") + 1 :]
    return [name for name in after if name and not name.startswith("#")]


def table_location(sql: Sql, table: str) -> str:
    rows = sql(f"describe table extended {table}")
    return next(row[1] for row in rows if row[0] == "Location").rstrip("/")


def read_log(sql: Sql, spec: UpsertSpec) -> TableState:
    """The target's state from its commit log (changes read as JSON: the same on every target)."""
    rows = sql(
        f"select commit_id, action, to_json(changes) from {spec.log}"
        f" where table_name = {literal(spec.table_name)}"
    )
    return replay(
        LogEntry(
            row[0],
            row[1],
            tuple(
                PartitionChange(c["path"], c.get("previous"), c.get("current"))
                for c in json.loads(row[2] or "[]")
            ),
        )
        for row in rows
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


def write_log(sql: Sql, spec: UpsertSpec, entry: LogEntry) -> None:
    changes = ", ".join(
        f"named_struct('path', {literal(c.path)}, 'previous', {literal(c.previous)},"
        f" 'current', {literal(c.current)})"
        for c in entry.changes
    )
    array = f"array({changes})" if changes else f"cast(array() as {CHANGES_TYPE})"
    with _LOG_WRITES:
        # A static partition: the insert lists only this table's log partition.
        sql(
            f"insert into {spec.log} partition (table_name = {literal(spec.table_name)})"
            f" select {literal(entry.commit_id)}, {literal(entry.action)}, {array},"
            " current_timestamp()"
        )


# --- creating and evolving the tables ------------------------------------------------


def log_ddl(spec: UpsertSpec) -> str:
    return (
        f"create table if not exists {spec.log} (commit_id string, action string,"
        f" changes {CHANGES_TYPE},"
        " logged_at timestamp, table_name string) using parquet partitioned by (table_name)"
    )


def ensure_tables(
    sql: Sql, spec: UpsertSpec, source_columns: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """Create the log, the version store and the target if missing; add the source's
    new columns (`source_columns`: its (name, type), as table_columns gives them).

    Returns the target's data columns (no lineage, no partition columns).
    """
    sql(log_ddl(spec))
    source_columns = [(n, t) for n, t in source_columns if n != spec.delete_marker]
    names = {n.lower() for n, _ in source_columns}
    for column in (*spec.unique_key, spec.ordering_field, *spec.partition_by):
        if column.lower() not in names:
            raise UpsertError(
                f"Upsert into {spec.target}: column {column!r} is not in the model's result;"
                " unique_key, ordering_field and partition_by must name its columns."
            )
    partitions = {p.lower() for p in spec.partition_by}
    data = [(n, t) for n, t in source_columns if n.lower() not in partitions]
    types = {n.lower(): t for n, t in source_columns}
    partition_columns = [(p, types[p.lower()]) for p in spec.partition_by]
    lineage = [(COMMIT_ID, "string"), (COMMIT_TS, "timestamp")]
    if not table_exists(sql, spec.target):
        sql(_create_sql(spec.versions, data + lineage, [*partition_columns, (VERSION, "string")]))
        location = f"{table_location(sql, spec.versions)}/{EMPTY}"
        sql(_create_sql(spec.target, data + lineage, partition_columns, location))
        return data
    existing = [
        (n, t)
        for n, t in table_columns(sql, spec.target)
        if n.lower() not in partitions and n not in (COMMIT_ID, COMMIT_TS)
    ]
    known = {n.lower() for n, _ in existing}
    new = [(n, t) for n, t in data if n.lower() not in known]
    if new and spec.on_schema_change == "fail":
        raise UpsertError(
            f"The model's result has columns {spec.target} lacks: {', '.join(n for n, _ in new)}."
            " Set on_schema_change='append_new_columns' to add them, or run with --full-refresh."
        )
    if new and spec.on_schema_change == "append_new_columns":
        added = ", ".join(f"{quote(n)} {t}" for n, t in new)
        for table in (spec.versions, spec.target):
            sql(f"alter table {table} add columns ({added})")
        return existing + new
    return existing


def _create_sql(
    table: str,
    columns: list[tuple[str, str]],
    partitions: list[tuple[str, str]],
    location: str | None = None,
) -> str:
    body = ", ".join(f"{quote(n)} {t}" for n, t in [*columns, *partitions])
    partitioned = (
        f" partitioned by ({', '.join(quote(n) for n, _ in partitions)})" if partitions else ""
    )
    where = f" location {literal(location)}" if location else ""
    return f"create table {table} ({body}) using parquet{partitioned}{where}"


# --- the merge ----------------------------------------------------------------------


def aligned_source(
    spec: UpsertSpec,
    source: str,
    data: list[tuple[str, str]],
    source_columns: list[tuple[str, str]],
) -> str:
    """The batch as a subquery with the target's columns: NULL for those it lacks."""
    present = {name.lower() for name, _ in source_columns}
    columns = [
        quote(name) if name.lower() in present else f"cast(null as {data_type}) as {quote(name)}"
        for name, data_type in data
    ]
    extra = [*spec.partition_by, *([spec.delete_marker] if spec.delete_marker else [])]
    return f"(select {', '.join([*columns, *(quote(c) for c in extra)])} from {source})"


def comparable(column: str, data_type: str) -> str:
    """The column as a value SQL can order and compare: maps and variants (which
    cannot be) as their JSON text.

    >>> comparable("tags", "map<string,string>"), comparable("n", "bigint")
    ('to_json(`tags`)', '`n`')
    """
    unorderable = "map<" in data_type.lower() or "variant" in data_type.lower()
    return f"to_json({quote(column)})" if unorderable else quote(column)


def merge_sql(
    spec: UpsertSpec,
    source: str,
    data: list[tuple[str, str]],
    commit_id: str,
    affected: list[tuple],
) -> str:
    """The winners of the batch against the stored rows of the partitions it touches.

    One ranking per key over the batch's rows and the stored row: the
    greatest ordering value wins, then an incoming row over the stored one,
    then the greater content (a deterministic tie-break within the batch).
    Contents are the row's data values, compared natively after the shuffle
    (cheaper than shuffling a JSON text of each row; maps and variants as
    JSON).
    An incoming winner identical to the stored row keeps the stored row (and
    its commit); an incoming delete marker removes a stored key and is
    ignored for a key never stored. `affected` lists the batch's partitions
    (values), a literal filter so the target's other partitions are never
    listed or read; stored rows failing the spec's predicates are kept as
    they are. Columns: the target's, plus `_is_new` (the row changes the
    partition), `_deleted` (the key is removed) and, for a partitioned
    table, `_changes_partition` (its partition has a new row).

    Rows are shuffled by partition only: one exchange serves the ranking per
    key and the flag per partition, and each partition's new version is
    written by one task (one file rather than one per shuffle task).
    """
    key = ", ".join(quote(k) for k in [*spec.partition_by, *spec.unique_key])
    select_columns = ", ".join(quote(c) for c in [*(n for n, _ in data), *spec.partition_by])
    values = [comparable(n, t) for n, t in data]
    content = f"struct({', '.join(values)})"
    tie_break = ", ".join(f"{v} desc" for v in values)
    deleted = (
        f"coalesce(cast({quote(spec.delete_marker)} as boolean), false)"
        if spec.delete_marker
        else "false"
    )
    commit, commit_ts = quote(COMMIT_ID), quote(COMMIT_TS)
    stored = f"{spec.target} as DBT_INTERNAL_DEST where {_among(spec.partition_by, affected)}"
    matched = " and ".join(f"({p})" for p in spec.predicates) or "true"
    kept = (
        f"""
union all
select {select_columns}, {commit}, {commit_ts}, false as _deleted, false as _is_new
from {stored} and not coalesce({matched}, false)"""
        if spec.predicates
        else ""
    )
    new_ts = f"timestamp {literal(commit_time(commit_id).isoformat(sep=' '))}"
    partitions = ", ".join(quote(p) for p in spec.partition_by)
    by_partition = f"\ndistribute by {partitions}" if partitions else ""
    merged = f"""
with
candidates as (
    select * from (
        select {select_columns}, cast(null as string) as {commit},
            cast(null as timestamp) as {commit_ts}, {deleted} as _deleted, true as _incoming
        from {source}
        union all
        select {select_columns}, {commit}, {commit_ts}, false as _deleted, false as _incoming
        from {stored} and {matched}
    ){by_partition}
),
ranked as (
    select *,
        row_number() over (
            partition by {key}
            order by {quote(spec.ordering_field)} desc nulls last, _incoming desc, {tie_break}
        ) as _rank,
        max(if(_incoming, null, {content})) over (partition by {key}) as _stored_content,
        max(if(_incoming, null, {commit})) over (partition by {key}) as _stored_commit,
        max(if(_incoming, null, {commit_ts})) over (partition by {key}) as _stored_commit_ts
    from candidates
),
winners as (
    select *, _incoming and not _deleted and {content} <=> _stored_content as _unchanged
    from ranked
    where _rank = 1 and not (_deleted and _stored_content is null)
)
select {select_columns},
    case when not _incoming then {commit} when _unchanged then _stored_commit
        else {literal(commit_id)} end as {commit},
    case when not _incoming then {commit_ts} when _unchanged then _stored_commit_ts
        else {new_ts} end as {commit_ts},
    _deleted, _incoming and not _unchanged as _is_new
from winners{kept}"""
    if not partitions:
        return merged
    return f"""
select *, max(_is_new) over (partition by {partitions}) as _changes_partition
from ({merged}
)"""


# --- the commit ---------------------------------------------------------------------


def upsert(sql: Sql, spec: UpsertSpec, source: str, now: datetime | None = None) -> CommitResult:
    """Upsert the rows of `source` (a table or view) into the target (see the module docstring)."""
    spec.validate()
    source_columns = table_columns(sql, source)
    data_columns = ensure_tables(sql, spec, source_columns)
    data = [name for name, _ in data_columns]
    source = aligned_source(spec, source, data_columns, source_columns)
    state = recover(sql, spec)
    commit_id = next_commit_id(now or datetime.now(UTC), state.last_commit_id)
    affected = _partitions_of(sql, spec, source)
    if not affected:
        return CommitResult(None, 0, 0)
    merged = merge_sql(spec, source, data_columns, commit_id, affected)
    _write_new_versions(sql, spec, merged, data, commit_id)
    written = _written_paths(sql, spec, commit_id)
    emptied = _emptied_paths(sql, spec, merged) if spec.delete_marker else set()
    changes = tuple(
        PartitionChange(path, state.versions.get(path), commit_id if path in written else None)
        for path in sorted(written | emptied)
    )
    if not changes:
        return CommitResult(None, 0, len(affected))
    entry = LogEntry(commit_id, PENDING, changes)
    write_log(sql, spec, entry)
    finish(sql, spec, entry, state)
    return CommitResult(commit_id, len(changes), len(affected))


def _write_new_versions(sql: Sql, spec: UpsertSpec, merged: str, data: list[str], commit: str):
    """Write every row of each partition the batch changes as the version `commit`.

    One job, merge and write; an unpartitioned table computes the merge
    twice (its rows, and whether any is new).
    """
    columns = ", ".join(quote(c) for c in [*data, COMMIT_ID, COMMIT_TS, *spec.partition_by])
    if spec.partition_by:
        rows = "merged where _changes_partition and not _deleted"
    else:
        rows = "merged where not _deleted and exists (select 1 from merged where _is_new)"
    sql(
        f"with merged as ({merged})"
        f" insert into {spec.versions} by name select {columns}, {literal(commit)} as {VERSION}"
        f" from {rows}"
    )


def _emptied_paths(sql: Sql, spec: UpsertSpec, merged: str) -> set[str]:
    """Paths of the partitions whose every row the batch deleted (no version to write)."""
    keys = ", ".join(quote(p) for p in spec.partition_by)
    rows = sql(
        f"select {keys + ', ' if keys else ''}true from ({merged})"
        f"{' group by ' + keys if keys else ''} having max(_is_new) and not max(not _deleted)"
    )
    return {partition_path(spec.partition_by, row[:-1]) for row in rows}


def _partitions_of(sql: Sql, spec: UpsertSpec, source: str) -> list[tuple]:
    """The partitions (values) the batch holds rows for; [()] for an unpartitioned table
    with rows, [] for an empty batch."""
    if not spec.partition_by:
        return [()] if sql(f"select 1 from {source} limit 1") else []
    columns = ", ".join(quote(p) for p in spec.partition_by)
    return [tuple(row) for row in sql(f"select distinct {columns} from {source}")]


def _among(columns: Sequence[str], values: list[tuple]) -> str:
    """A filter keeping rows of the given partitions (true for an unpartitioned table)."""
    if not columns:
        return "true"
    key = f"({', '.join(quote(c) for c in columns)})" if len(columns) > 1 else quote(columns[0])
    items = [
        f"({', '.join(literal(v) for v in row)})" if len(columns) > 1 else literal(row[0])
        for row in values
    ]
    return f"{key} in ({', '.join(items)})"


def _written_paths(sql: Sql, spec: UpsertSpec, commit_id: str) -> set[str]:
    """Paths of the partitions the commit wrote rows to ("" for an unpartitioned table)."""
    version = f"({quote(VERSION)} = {literal(commit_id)})"
    rows = sql(f"show partitions {spec.versions} partition {version}")
    suffix = f"{VERSION}={commit_id}"
    return {row[0][: -len(suffix)].rstrip("/") for row in rows if row[0].endswith(suffix)}


def finish(sql: Sql, spec: UpsertSpec, entry: LogEntry, before: TableState) -> TableState:
    """Point every changed partition at its new version, log the commit, drop old versions;
    the state after (`before` is the state the commit started from).

    Safe to repeat: recovery runs it again for a commit a killed run left pending.
    """
    _point(sql, spec, [(c.path, c.current, c.previous) for c in entry.changes])
    write_log(sql, spec, LogEntry(entry.commit_id, COMMITTED, entry.changes))
    after = committed(before, entry)
    clean_versions(sql, spec, after)
    return after


def _point(sql: Sql, spec: UpsertSpec, moves: list[tuple[str, str | None, str | None]]) -> None:
    """Make each partition (path) read a version instead of another: (path, to, was).

    `to` None drops the partition; `was` None means it may not exist yet.
    Partitions are added and dropped in one statement each and moved one by
    one: every metastore update is whole per partition, and repeating the
    moves gives the same result (recovery and rollback rely on it). Each of
    these statements refreshes the table in the session that runs it.
    """
    store = table_location(sql, spec.versions)
    if not spec.partition_by:
        (_, version, _), *_ = moves
        _point_unpartitioned(sql, spec, store, version)
        return
    target = spec.target

    def where(path: str) -> str:
        return "partition " + partition_spec(spec.partition_by, path_values(path))

    def location(path: str, version: str) -> str:
        return literal(f"{store}/{path}/{VERSION}={version}")

    dropped = [where(path) for path, to, _ in moves if to is None]
    if dropped:
        sql(f"alter table {target} drop if exists {', '.join(dropped)}")
    # A partition reading a version exists; one that read none may (a killed run added it).
    new = [(path, to) for path, to, was in moves if to is not None and was is None]
    if new:
        added = " ".join(f"{where(path)} location {location(path, to)}" for path, to in new)
        sql(f"alter table {target} add if not exists {added}")
    for path, to, was in moves:
        if to is not None and was is not None:
            sql(f"alter table {target} {where(path)} set location {location(path, to)}")


def _point_unpartitioned(sql: Sql, spec: UpsertSpec, store: str, version: str | None) -> None:
    """Make an unpartitioned table read `version` (None: no rows)."""
    location = f"{store}/{EMPTY}"
    if version is not None:
        # An emptied table still needs a (then empty) directory to point at.
        sql(f"alter table {spec.versions} add if not exists partition ({VERSION} = '{version}')")
        location = f"{store}/{VERSION}={version}"
    sql(f"alter table {spec.target} set location {literal(location)}")


def recover(sql: Sql, spec: UpsertSpec) -> TableState:
    """Finish a commit a killed run left pending (its files are all written); the state after."""
    state = read_log(sql, spec)
    if state.pending is None:
        return state
    return finish(sql, spec, state.pending, state)


def clean_versions(sql: Sql, spec: UpsertSpec, state: TableState | None = None) -> int:
    """Drop stored versions no partition reads and no rollback needs; how many were dropped.

    `state` is the table's state when the caller knows it (else the log is read).
    """
    state = state or read_log(sql, spec)
    retained = state.retained()
    if not spec.partition_by:
        retained = {("", version) for _, version in retained}
    stale = []
    for (path,) in sql(f"show partitions {spec.versions}"):
        head, _, version = path.rpartition(f"{VERSION}=")
        partition = head.rstrip("/")
        if (partition, _unescape(version)) not in retained:
            stale.append(path)
    if stale:
        specs = ", ".join(
            "partition " + partition_spec([*spec.partition_by, VERSION], path_values(path))
            for path in stale
        )
        sql(f"alter table {spec.versions} drop if exists {specs}")
    return len(stale)


def rollback_last_commit(sql: Sql, spec: UpsertSpec) -> str:
    """Restore the partitions the last commit changed to their previous versions.

    Only the last commit can be rolled back, once: older versions are gone.
    Returns the id of the commit rolled back.
    """
    if not table_exists(sql, spec.target):
        raise UpsertError(f"{spec.target} does not exist: there is nothing to roll back.")
    state = recover(sql, spec)
    last = state.last_commit
    if last is None:
        raise UpsertError(
            f"{spec.target} has no commit to roll back: it has none, or its last one was"
            " rolled back already (only the last commit is kept)."
        )
    _point(sql, spec, [(c.path, c.previous, c.current) for c in last.changes])
    write_log(sql, spec, LogEntry(last.commit_id, ROLLED_BACK, last.changes))
    return last.commit_id


def drop_upsert_table(sql: Sql, spec: UpsertSpec) -> None:
    """Drop the target, its version store and its commit log entries."""
    sql(f"drop table if exists {spec.target}")
    sql(f"drop table if exists {spec.versions}")
    if table_exists(sql, spec.log):
        table = f"(table_name = {literal(spec.table_name)})"
        sql(f"alter table {spec.log} drop if exists partition {table}")
