"""An upsert table's partition layout changed in place (the steps of `repartition`).

Partition columns are fixed in the metastore, for the table and its version
store alike, so a new layout takes new tables. Every step leaves a reader
the table's rows, whole (the same rows throughout), and a killed run is
undone or finished by the next writer of the table (`finish_repartition`):

1. `build`: the table's rows are copied into `<table>__repartition`, the
   interim copy, under the new layout, and its remembered deletes
   (delete_marker's tombstones) into `<table>__repartition_deletes`.
2. `swap`: a new definition of the table, reading the interim copy's
   partitions, is swapped in (catalog.swap_in: two renames). A kill before
   this is undone; from here the table has its new layout, and a kill is
   finished.
3. `drop_store`: the old version store and the table's log go: history
   before a repartition cannot be read as of (its layout is gone).
4. `write_store`: the rows are written to a new version store as one
   version, under a new commit id, and the deletes as its tombstones.
5. `log`: the log starts from a checkpoint: every partition at that version.
6. `point`: a definition of the table reading the store's version is
   swapped in, as in step 2 (the same rows as the interim copy).
7. `drop_interim`: the interim copy, and the old definition if a kill
   between the swap's last two steps left it.

Rows keep their `_commit_id`: a model pulling `changed_since` this table
finds every partition changed and no row newer than it has, so it takes
nothing and needs no full refresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from dynamic_ddl import steps
from dynamic_ddl.catalog import (
    RETIRED_SUFFIX,
    Sql,
    drop_table,
    partition_columns,
    recover_swap,
    swap_in,
    table_columns,
    table_exists,
    table_location,
)
from dynamic_ddl.sql_text import (
    located_partition,
    partition_spec,
    path_row,
    path_values,
    quoted_identifier,
    rows_predicate,
    string_literal,
)
from dynamic_ddl.upsert.commit_log import drop_log, log_ddl, read_log, write_log
from dynamic_ddl.upsert.commits import (
    CHECKPOINT,
    LogEntry,
    PartitionChange,
    TableState,
    commit_time,
    next_commit_id,
)
from dynamic_ddl.upsert.spec import (
    COMMIT_ID,
    COMMIT_TS,
    EMPTY,
    VERSION,
    UpsertError,
    UpsertSpec,
    tombstone_version,
)
from dynamic_ddl.upsert.tables import carry_recorded, create_sql

INTERIM_SUFFIX = "__repartition"  # the rows under the new layout, until the store has them
DELETES_SUFFIX = "__repartition_deletes"  # their remembered deletes, likewise
NEW_SUFFIX = "__repartition_new"  # the table's new definition, until it is swapped in


def start_repartition(
    sql: Sql, spec: UpsertSpec, partition_by: Sequence[str], commit: str, state: TableState
) -> None:
    """Rewrite `spec.target` under `partition_by` (steps 1-7), its new version `commit`.
    The caller holds the table's lock, no commit is pending (`state`: the log's), and
    spec.partition_by are the table's partition columns (protocol.mend_table).

    Remembered deletes (delete_marker's tombstones, stored beside each
    partition's version) move with the rows, to the partitions their keys'
    rows would fall in; when a tombstone lacks a new partition column (it
    keeps keys, ordering and partition values only), that partition cannot be
    known, and the repartition is refused before any change. A NULL in a key or
    partition column is a value like any other: the NULL partition.
    """
    interim, new = spec.target + INTERIM_SUFFIX, spec.target + NEW_SUFFIX
    deletes = spec.target + DELETES_SUFFIX
    columns = table_columns(sql, spec.target)
    wanted = {p.lower() for p in partition_by}
    data = [(n, t) for n, t in columns if n.lower() not in wanted]
    types = {n.lower(): (n, t) for n, t in columns}
    partitions = [types[p.lower()] for p in partition_by]
    tombstones = tombstones_predicate(spec, state, commit)
    # A NULL in the key or a partition column (the table records both) is a real value,
    # the NULL partition (found by review: it was refused). A ranking column may have been
    # named after some tombstones were written (a table built before rankings were
    # recorded, tables.RANKING_PROPERTY, may hold such tombstones): a NULL
    # there may be one the tombstone never kept. Other columns are NULL in every one.
    recorded = {c.lower() for c in [*spec.unique_key, *spec.partition_by]}
    ranking = {c.lower() for c in spec.ranking_columns} - recorded
    unkept = [p for p in partition_by if p.lower() not in recorded | ranking]
    unsure = [p for p in partition_by if p.lower() in ranking]
    lost = "true" if unkept else " or ".join(f"{quoted_identifier(p)} is null" for p in unsure)
    if lost and sql(f"select 1 from {spec.versions} where ({tombstones}) and ({lost}) limit 1"):
        raise UpsertError(
            f"{spec.target} remembers deletes (delete_marker) that keep no value of"
            f" {', '.join(unkept + unsure)}, so their partitions under the new layout cannot"
            " be known: repartition by columns of the key or the current partitions, wait"
            " until tombstone_days have passed, or rebuild with --full-refresh."
        )
    steps.reached("repartition.build")
    drop_table(sql, interim)
    sql(create_sql(interim, data, partitions))
    sql(f"insert into {interim} by name select * from {spec.target}")
    drop_table(sql, deletes)
    sql(create_sql(deletes, data, partitions))
    names = ", ".join(quoted_identifier(n) for n, _ in columns)
    sql(f"insert into {deletes} by name select {names} from {spec.versions} where {tombstones}")
    steps.reached("repartition.swap")
    drop_table(sql, new)
    sql(create_sql(new, data, partitions, table_location(sql, interim)))
    sql(f"alter table {new} recover partitions")
    carry_recorded(sql, spec.target, new)
    swap_in(sql, new, spec.target)
    finish_repartition(sql, spec, commit)


def finish_repartition(sql: Sql, spec: UpsertSpec, commit: str | None = None) -> str | None:
    """Undo a repartition killed before its swap, or finish one killed after it (see the
    module docstring); nothing when none was killed. Every writer of the table runs
    it first, under the table's lock. `commit`: the new version's id (else the clock's).
    Returns what it did: "undone", "finished" or None.
    """
    interim = spec.target + INTERIM_SUFFIX
    if not table_exists(sql, interim):
        return None
    recover_swap(sql, spec.target)
    layout = partition_columns(sql, interim)
    if _lower(partition_columns(sql, spec.target)) != _lower(layout):
        steps.reached("repartition.undo")
        drop_table(sql, spec.target + NEW_SUFFIX)
        drop_table(sql, spec.target + DELETES_SUFFIX)
        drop_table(sql, interim)
        return "undone"
    state = read_log(sql, spec) if table_exists(sql, spec.log) else None
    stored_layout = partition_columns(sql, spec.versions)
    if (
        state is None
        or state.last_commit_id is None
        or _lower(stored_layout) != _lower([*layout, VERSION])
    ):
        _write_store(sql, spec, interim, layout, commit)
        state = read_log(sql, spec)
    steps.reached("repartition.point")
    _point_at_store(sql, spec, layout, state.versions)
    steps.reached("repartition.drop_interim")
    drop_table(sql, spec.target + RETIRED_SUFFIX)  # the old definition, if a kill left it
    drop_table(sql, spec.target + DELETES_SUFFIX)
    drop_table(sql, interim)
    return "finished"


def in_progress(sql: Sql, spec: UpsertSpec) -> bool:
    """Whether a repartition of the table is under way (or was killed): while it is,
    the table's log may be empty although the table reads whole rows."""
    return table_exists(sql, spec.target + INTERIM_SUFFIX)


def refuse_while_repartitioning(sql: Sql, spec: UpsertSpec, what: str) -> None:
    """Refuse `what`, a read by the table's commit log, while a repartition is under way
    or was killed: the log and the version store may still follow the old layout
    while the table has the new one, and a filter of one on the other reads nothing,
    silently. (Writers finish or undo it first; readers take no lock.)"""
    if in_progress(sql, spec):
        raise UpsertError(
            f"{what}: a repartition of {spec.target} is under way or was interrupted."
            " Let it finish, or run the model (or the repartition operation) again to"
            " finish it, then read again."
        )


def drop_repartition_leftovers(sql: Sql, spec: UpsertSpec) -> None:
    """Drop every table a killed repartition of `spec.target` may have left (for a
    rebuild from scratch, which must not bring any of them back)."""
    for suffix in (RETIRED_SUFFIX, NEW_SUFFIX, DELETES_SUFFIX, INTERIM_SUFFIX):
        drop_table(sql, spec.target + suffix)


def _point_at_store(
    sql: Sql, spec: UpsertSpec, layout: list[str], versions: dict[str, str]
) -> None:
    """Step 6: a definition of the table whose partitions read the store's versions,
    swapped in (one statement adds every partition; moving them one by one took a
    metastore call each)."""
    new = spec.target + NEW_SUFFIX
    names = {p.lower() for p in layout}
    columns = table_columns(sql, spec.target)
    store = table_location(sql, spec.versions)
    drop_table(sql, new)
    sql(
        create_sql(
            new,
            [(n, t) for n, t in columns if n.lower() not in names],
            [(n, t) for n, t in columns if n.lower() in names],
            f"{store}/{EMPTY}",
        )
    )
    if versions:
        added = " ".join(
            located_partition(layout, path_values(path), f"{store}/{path}/{VERSION}={version}")
            for path, version in sorted(versions.items())
        )
        sql(f"alter table {new} add if not exists {added}")
    carry_recorded(sql, spec.target, new)
    swap_in(sql, new, spec.target)


def _write_store(
    sql: Sql, spec: UpsertSpec, interim: str, layout: list[str], commit: str | None
) -> None:
    """Steps 3-5: a new version store holding the interim rows as version `commit`, and
    a log that starts from it."""
    steps.reached("repartition.drop_store")
    drop_table(sql, spec.versions)
    drop_log(sql, spec)
    if commit is None:  # resumed after a kill: after every row's commit, whatever the clock
        (newest,) = sql(f"select max({quoted_identifier(COMMIT_ID)}) from {interim}")[0]
        commit = next_commit_id(datetime.now(UTC), newest)
    steps.reached("repartition.write_store")
    columns = table_columns(sql, interim)
    names = {p.lower() for p in layout}
    data = [(n, t) for n, t in columns if n.lower() not in names]
    partitions = [(n, t) for n, t in columns if n.lower() in names]
    sql(create_sql(spec.versions, data, [*partitions, (VERSION, "string")]))
    sql(
        f"insert into {spec.versions} by name"
        f" select *, {string_literal(commit)} as {VERSION} from {interim}"
    )
    paths = {row[0] for row in sql(f"show partitions {interim}")}
    deletes = spec.target + DELETES_SUFFIX
    sql(
        f"insert into {spec.versions} by name"
        f" select *, {string_literal(tombstone_version(commit))} as {VERSION} from {deletes}"
    )
    # A partition holding deletes only reads an empty version, so that its deletes
    # are found by the next merge there (as a partition a commit emptied).
    emptied = {row[0] for row in sql(f"show partitions {deletes}")} - paths
    if emptied:
        specs = " ".join(
            partition_spec([*layout, VERSION], [*path_values(path), commit])
            for path in sorted(emptied)
        )
        sql(f"alter table {spec.versions} add if not exists {specs}")
    paths = sorted(paths | emptied)
    steps.reached("repartition.log")
    sql(log_ddl(spec))
    changes = tuple(PartitionChange(path, None, commit) for path in paths)
    write_log(sql, spec, LogEntry(commit, CHECKPOINT, changes))


def tombstones_predicate(spec: UpsertSpec, state: TableState, commit: str) -> str:
    """A filter on the version store keeping the remembered deletes of the versions the
    table's partitions (spec.partition_by, as the table has them) read, those a merge
    at `commit` would still find (within spec.tombstone_days); `false` when none."""
    chosen = [(*path_row(path), tombstone_version(v)) for path, v in sorted(state.versions.items())]
    if not chosen:
        return "false"
    made = commit_time(commit).isoformat(sep=" ")
    horizon = f"timestamp {string_literal(made)} - interval {int(spec.tombstone_days)} days"
    within = f"{quoted_identifier(COMMIT_TS)} >= {horizon}"
    return f"{rows_predicate([*spec.partition_by, VERSION], chosen)} and {within}"


def _lower(names: Sequence[str]) -> list[str]:
    return [name.lower() for name in names]
