"""Latest-wins upserts into plain Parquet tables: copy-on-write of changed partitions.

One protocol for both faces: a Python model calls it with `spark.sql`, the
SQL models' `upsert` strategy calls it through the adapter's connection. It
is written as SQL statements so it runs the same on every target. The
target's lock (locks.py) is held for the whole of each operation.

A commit (see commits.py for the log, merge.py for the merge):

1. recover: a commit or rollback logged by a killed run is finished;
2. merge: the batch's latest row per key, against the rows of only the
   partitions the batch touches (merge.py); with `replace` (the
   `replace_partitions` strategy), the batch's rows are those partitions'
   new contents, whole;
3. write the merged rows of the partitions that changed, and only those, as
   a new version in `<table>__versions` (invisible to readers of the table),
   and their remembered deletes as that version's `-tombstones` version
   (read back by the next merge of the partition); merge and write are one
   Spark job; a partition left without rows (deleted, moved to another
   partition, or a recomputed day found empty) gets an empty version;
4. log `pending` with each changed partition's previous and new version;
5. point each changed partition at its new version (one metastore update
   per partition: a reader sees a partition's old rows or its new rows);
6. log `committed`; drop versions that are neither current nor the previous
   version of a partition this commit changed (what a rollback returns to).

A rollback logs `rolling_back` before it moves any partition back, so a
kill in the middle is finished by the next run, and no cleanup ever drops
a version a partition points at.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from dynamic_ddl import steps
from dynamic_ddl.catalog import (
    Sql,
    drop_table,
    partition_columns,
    table_columns,
    table_exists,
    table_location,
)
from dynamic_ddl.locks import held
from dynamic_ddl.sql_text import (
    partition_path,
    partition_spec,
    partitions_predicate,
    path_row,
    path_values,
    quoted_identifier,
    rows_predicate,
    spark_text,
    sql_literal,
    string_literal,
    unescape_path,
)
from dynamic_ddl.upsert import commit_log
from dynamic_ddl.upsert.commit_log import compact_log, drop_log, read_log, write_log
from dynamic_ddl.upsert.commits import (
    COMMITTED,
    LOGGED_AT_FORMAT,
    PENDING,
    ROLLED_BACK,
    ROLLING_BACK,
    LogEntry,
    PartitionChange,
    TableState,
    commit_time,
    commits_to_keep,
    committed,
    next_commit_id,
    replay,
    visible_at,
)
from dynamic_ddl.upsert.merge import (
    aligned_source,
    fingerprints_sql,
    merge_sql,
    moved_keys_sql,
    replacement_sql,
)
from dynamic_ddl.upsert.relayout import drop_repartition_leftovers, finish_repartition
from dynamic_ddl.upsert.spec import (
    COMMIT_ID,
    COMMIT_TS,
    EMPTY,
    TOMBSTONES,
    VERSION,
    CommitResult,
    UpsertError,
    UpsertSpec,
    tombstone_version,
)
from dynamic_ddl.upsert.tables import ensure_tables


def upsert(
    sql: Sql,
    spec: UpsertSpec,
    source: str,
    now: datetime | None = None,
    recomputed: Iterable[str] = (),
) -> CommitResult:
    """Upsert the rows of `source` (a table or view) into the target (see the module docstring).

    `recomputed` (with `replace_partitions` only) lists partition paths the
    batch recomputed: each is replaced even when the batch has no row for
    it (a day whose every event moved away is emptied, not kept stale).
    """
    spec.validate()
    recomputed = sorted(set(recomputed))
    if recomputed and not spec.replace:
        raise UpsertError(f"Upsert into {spec.target}: only replace_partitions takes recomputed.")
    with held(sql, spec.target):
        return _commit(sql, spec, source, now, recomputed)


def _commit(
    sql: Sql, spec: UpsertSpec, source: str, now: datetime | None, recomputed: list[str]
) -> CommitResult:
    finish_repartition(sql, spec)
    source_columns = table_columns(sql, source)
    data_columns = ensure_tables(sql, spec, source_columns)
    refuse_changed_key_types(spec, source_columns, data_columns)
    data = [name for name, _ in data_columns]
    source = aligned_source(spec, source, data_columns, source_columns)
    state = recover(sql, spec)
    commit_id = next_commit_id(now or datetime.now(UTC), state.last_commit_id)
    clock = commit_clock(commit_id)
    affected = _partitions_of(sql, spec, source)
    if not affected and not recomputed:
        return CommitResult(None, 0, 0)
    emptied: set[str] = set()
    moved_from: list[tuple] = []
    if spec.replace:
        incoming = {partition_path(spec.partition_by, values) for values in affected}
        changed = _replaced_partitions(sql, spec, source, data_columns, incoming | set(recomputed))
        if not changed:
            return CommitResult(None, 0, len(affected))
        merged = replacement_sql(
            spec, source, data_columns, commit_id, partitions_predicate(spec.partition_by, changed)
        )
        emptied = set(changed) - incoming  # recomputed, and left without rows
    else:
        moved_from = _partitions_holding_moved_keys(sql, spec, source, commit_id)
        affected = list(dict.fromkeys([*affected, *moved_from]))
        tombstones = _tombstone_partitions(spec, state, affected)
        merged = merge_sql(spec, source, data_columns, commit_id, affected, tombstones)
    steps.reached("upsert.write_versions")
    _write_new_versions(sql, spec, merged, data, commit_id)
    written = _written_paths(sql, spec, commit_id)
    remembered = set()
    if spec.keeps_tombstones:
        remembered = _written_paths(sql, spec, tombstone_version(commit_id))
        emptied |= remembered - written  # a partition left with deletes only
    if not spec.replace:  # a replacement writes only the partitions it listed
        _refuse_unread_partitions(sql, spec, commit_id, affected, written | remembered)
    if moved_from or (spec.delete_marker and not spec.keeps_tombstones):
        emptied |= _emptied_paths(sql, spec, merged, affected, commit_id) - written
    # An emptied partition reads an empty version rather than being dropped: its
    # tombstones stay found, and rows_of_changed_days (which reads partition
    # versions) sees that it changed.
    _add_empty_versions(sql, spec, emptied, commit_id)
    written |= emptied
    changes = tuple(
        PartitionChange(path, state.versions.get(path), commit_id) for path in sorted(written)
    )
    if not changes:
        return CommitResult(None, 0, len(affected))
    entry = LogEntry(commit_id, PENDING, changes)
    steps.reached("upsert.log_pending")
    write_log(sql, spec, entry)
    finish(sql, spec, entry, state, clock)
    return CommitResult(commit_id, len(changes), len(affected))


def _replaced_partitions(
    sql: Sql, spec: UpsertSpec, source: str, data: list[tuple[str, str]], paths: set[str]
) -> list[str]:
    """The partitions (paths) among `paths` whose new rows differ from the stored ones
    (a rerun of the same recompute changes nothing, as a rerun of an upsert does)."""
    where = partitions_predicate(spec.partition_by, sorted(paths))
    width = len(spec.partition_by)

    def fingerprints(relation: str) -> dict[str, tuple]:
        rows = sql(fingerprints_sql(spec, relation, data, where))
        return {partition_path(spec.partition_by, row[:width]): tuple(row[width:]) for row in rows}

    incoming = fingerprints(source)
    stored = fingerprints(spec.target) if table_exists(sql, spec.target) else {}
    return sorted(path for path in paths if incoming.get(path) != stored.get(path))


def _partitions_holding_moved_keys(
    sql: Sql, spec: UpsertSpec, source: str, commit_id: str
) -> list[tuple]:
    """With `spec.moves_keys`: the partitions (values) holding a key of the batch (a row,
    or a remembered delete) while the batch's row of that key is in another one."""
    if not spec.moves_keys or not table_exists(sql, spec.target):
        return []
    return [tuple(row) for row in sql(moved_keys_sql(spec, source, commit_id))]


def _tombstone_partitions(spec: UpsertSpec, state: TableState, affected: list[tuple]) -> list:
    """For the batch's partitions that exist: their values, then the tombstone version
    of the version each reads (where its remembered deletes are)."""
    if not spec.keeps_tombstones:
        return []
    found = []
    for values in affected:
        version = state.versions.get(partition_path(spec.partition_by, values))
        if version is None and any(isinstance(value, float) for value in values):
            version = _version_of_equal_values(state, values)
        if version is not None:
            found.append((*values, tombstone_version(version)))
    return found


def _version_of_equal_values(state: TableState, values: tuple) -> str | None:
    """The version of the partition whose values equal `values`, doubles compared as
    numbers: Java 17 writes a few doubles with more digits than the shortest that reads
    back (`9.999999999999999E22` for 1e23), so its folder's name is not spark_text's."""

    def same(text: str | None, value: object) -> bool:
        if isinstance(value, float) and text is not None:
            try:
                return float(text) == value
            except ValueError:
                return False
        return text == (None if value is None else spark_text(value))

    for path, version in state.versions.items():
        row = path_row(path)
        if len(row) == len(values) and all(map(same, row, values)):
            return version
    return None


def _write_new_versions(sql: Sql, spec: UpsertSpec, merged: str, data: list[str], commit: str):
    """Write every row of each partition the batch changes as the version `commit`, and
    its remembered deletes (keys and ordering only) as that version's tombstones.

    One job, merge and write; an unpartitioned table computes the merge
    twice (its rows, and whether any is new).
    """
    lineage = [quoted_identifier(c) for c in [COMMIT_ID, COMMIT_TS, *spec.partition_by]]
    version = sql_literal(commit)
    kept = "not _deleted and not _vacated"
    values = [quoted_identifier(c) for c in data]
    if spec.keeps_tombstones:
        named = {c.lower() for c in [*spec.unique_key, *spec.ranking_columns]}
        values = [
            q if c.lower() in named else f"if(_deleted, null, {q}) as {q}"
            for c, q in zip(data, values, strict=True)
        ]
        version = f"if(_deleted, {sql_literal(tombstone_version(commit))}, {version})"
        kept = "not _vacated"
    columns = ", ".join([*values, *lineage])
    if spec.partition_by:
        rows = f"merged where _changes_partition and {kept}"
    else:
        rows = f"merged where {kept} and exists (select 1 from merged where _is_new)"
    sql(
        f"with merged as ({merged})"
        f" insert into {spec.versions} by name select {columns}, {version} as {VERSION}"
        f" from {rows}"
    )


def _add_empty_versions(sql: Sql, spec: UpsertSpec, paths: set[str], commit: str) -> None:
    """An empty version `commit` (a folder) for each partition at `paths`, to point at."""
    if not paths:
        return
    steps.reached("upsert.add_empty_versions")
    specs = " ".join(
        partition_spec([*spec.partition_by, VERSION], [*path_values(path), commit])
        for path in sorted(paths)
    )
    sql(f"alter table {spec.versions} add if not exists {specs}")


def _emptied_paths(
    sql: Sql, spec: UpsertSpec, merged: str, affected: list[tuple], commit_id: str
) -> set[str]:
    """Paths of the partitions the batch left without rows: every row deleted or moved
    to another partition (no version to write). Computes the merge again, so reads the
    source again: a partition outside `affected` (whose stored rows the merge did not
    read) is refused as _refuse_unread_partitions refuses one written to."""
    keys = ", ".join(quoted_identifier(p) for p in spec.partition_by)
    listed = f"coalesce({rows_predicate(spec.partition_by, affected)}, false)" if keys else "true"
    rows = sql(
        f"select {keys + ', ' if keys else ''}{listed} from ({merged})"
        f"{' group by ' + keys if keys else ''}"
        " having max(_is_new) and not max(not _deleted and not _vacated)"
    )
    unread = [tuple(row[:-1]) for row in rows if not row[-1]]
    if unread:
        raise _refused(sql, spec, commit_id, unread)
    return {partition_path(spec.partition_by, row[:-1]) for row in rows}


def _partitions_of(sql: Sql, spec: UpsertSpec, source: str) -> list[tuple]:
    """The partitions (values) the batch holds rows for; [()] for an unpartitioned table
    with rows, [] for an empty batch."""
    if not spec.partition_by:
        return [()] if sql(f"select 1 from {source} limit 1") else []
    columns = ", ".join(quoted_identifier(p) for p in spec.partition_by)
    return [tuple(row) for row in sql(f"select distinct {columns} from {source}")]


def _refuse_unread_partitions(
    sql: Sql, spec: UpsertSpec, commit_id: str, affected: list[tuple], paths: set[str]
) -> None:
    """Refuse a commit that wrote rows (or remembered deletes) to a partition whose
    stored rows the merge did not read: the source changed between the read that
    listed its partitions and the merge's (a concurrent commit upstream), and that
    partition's new version would hold the incoming rows alone. `paths` are the
    partitions written. Nothing is logged yet.

    The paths are compared first (no query when all is well); a path named
    otherwise than partition_path names the value (a timestamp's fraction) is
    decided by the merge's own filter on the new version."""
    listed = {partition_path(spec.partition_by, values) for values in affected}
    if not spec.partition_by or paths <= listed:
        return
    versions = [commit_id, tombstone_version(commit_id)]
    outside = sql(
        f"select distinct {', '.join(quoted_identifier(p) for p in spec.partition_by)}"
        f" from {spec.versions} where {quoted_identifier(VERSION)} in"
        f" ({', '.join(string_literal(v) for v in versions)})"
        f" and not coalesce({rows_predicate(spec.partition_by, affected)}, false) limit 5"
    )
    if outside:
        raise _refused(sql, spec, commit_id, [tuple(row) for row in outside])


def _refused(sql: Sql, spec: UpsertSpec, commit_id: str, partitions: list[tuple]) -> UpsertError:
    """Drop what the commit wrote (nothing reads it; a rerun under the same commit id, a
    clock behind the last commit, must not add to it) and return the error of a commit
    whose source gave rows for `partitions` (values) after the partitions were listed."""
    written = [
        row[0]
        for version in (commit_id, tombstone_version(commit_id))
        for row in sql(f"show partitions {spec.versions} {partition_spec([VERSION], [version])}")
    ]
    _drop_stored(sql, spec, written)
    return UpsertError(
        f"Upsert into {spec.target}: its source changed while it was read (rows for"
        f" partitions {partitions[:5]} appeared after the partitions to merge were listed;"
        " a concurrent run committing upstream?). Nothing was committed: run it again."
    )


def _written_paths(sql: Sql, spec: UpsertSpec, commit_id: str) -> set[str]:
    """Paths of the partitions the commit wrote rows to ("" for an unpartitioned table)."""
    rows = sql(f"show partitions {spec.versions} {partition_spec([VERSION], [commit_id])}")
    suffix = f"{VERSION}={commit_id}"
    return {row[0][: -len(suffix)].rstrip("/") for row in rows if row[0].endswith(suffix)}


def refuse_changed_key_types(
    spec: UpsertSpec, source: list[tuple[str, str]], stored: list[tuple[str, str]]
) -> None:
    """Refuse a batch whose key column has another type than the table's: its keys would
    be compared through a cast (`"SN-A"` fails, `7` and `"7"` may meet or not) and
    bucketed by another hash, so a stored key would not be found and would stay beside
    its new row (found by review, when landing keys became text).

    Example:
        >>> refuse_changed_key_types(UpsertSpec("s.t", ("id",)), [("id", "string")], [])
    """
    types = {name.lower(): data_type.lower() for name, data_type in stored}
    keys = {column.lower() for column in spec.unique_key}
    for name, data_type in source:
        was = types.get(name.lower())
        if name.lower() in keys and was not in (None, data_type.lower()):
            raise UpsertError(
                f"{spec.target} stores its key {name} as {was}, and this batch sends"
                f" {data_type.lower()}: rebuild it, and what reads it, with --full-refresh"
                f" (dbt build --select '{spec.table_name}+' --full-refresh)."
            )


def commit_clock(commit_id: str) -> Callable[[], datetime]:
    """The clock of a commit's log lines: its id's time, plus the time since the id was
    taken. In a run it is the host's UTC clock; a commit made with another `now` (tests,
    a clock stepped back) keeps its lines' times after its id, as a reader of the log
    compares them (commits.visible_at)."""
    started = time.monotonic()
    return lambda: commit_time(commit_id) + timedelta(seconds=time.monotonic() - started)


def host_clock() -> datetime:
    """This host's UTC clock, naive, as the log's times are (UTC)."""
    return datetime.now(UTC).replace(tzinfo=None)


def finish(
    sql: Sql,
    spec: UpsertSpec,
    entry: LogEntry,
    before: TableState,
    clock: Callable[[], datetime] = host_clock,
) -> TableState:
    """Point every changed partition at its new version, log the commit, drop old versions;
    the state after (`before` is the state the commit started from). The `committed`
    line's time, by `clock`, is when the table shows the commit (time travel by time
    reads it): after its partitions moved.

    Safe to repeat: recovery runs it again for a commit a killed run left pending.
    """
    steps.reached("upsert.point")
    _point(sql, spec, [(c.path, c.current, c.previous) for c in entry.changes])
    steps.reached("upsert.log_committed")
    # Never before the commit's id: a recovery's host clock may be behind a bumped id.
    logged_at = max(clock(), commit_time(entry.commit_id)).strftime(LOGGED_AT_FORMAT)
    write_log(sql, spec, LogEntry(entry.commit_id, COMMITTED, entry.changes, logged_at))
    after = committed(before, entry, logged_at)
    steps.reached("upsert.clean_versions")
    clean_versions(sql, spec, after)
    keep = _commits_kept(spec, after)
    if keep is not None and after.entries > commit_log.COMPACT_AFTER + keep:
        compact_log(sql, spec, after, keep)
    return after


def _commits_kept(spec: UpsertSpec, state: TableState) -> int | None:
    """How many newest commits keep their previous versions (keep_commits, keep_days);
    None when the spec does not know (an operation)."""
    if spec.keep_commits is None:
        return None
    return commits_to_keep(state, spec.keep_commits, spec.keep_days)


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
        return partition_spec(spec.partition_by, path_values(path))

    def location(path: str, version: str) -> str:
        return string_literal(f"{store}/{path}/{VERSION}={version}")

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
        sql(f"alter table {spec.versions} add if not exists {partition_spec([VERSION], [version])}")
        location = f"{store}/{VERSION}={version}"
    sql(f"alter table {spec.target} set location {string_literal(location)}")


def recover(sql: Sql, spec: UpsertSpec, state: TableState | None = None) -> TableState:
    """Finish a commit or a rollback a killed run left unfinished; the state after.

    `state` is the log's state when the caller has read it (else the log is read).
    """
    state = state or read_log(sql, spec)
    if state.pending is None:
        return state
    if state.pending.action == ROLLING_BACK:
        return _finish_rollback(sql, spec, state.pending, state.last_commit)
    return finish(sql, spec, state.pending, state)


def mend_table(sql: Sql, spec: UpsertSpec, doing: str, needs_store: bool = True) -> UpsertSpec:
    """What an operation on the table does first, under its lock: finish or undo a
    repartition a killed run left (its swap may have left the name empty), then
    check that the table exists (else an error: there is nothing to `doing`).
    Returns `spec` with the table's partition columns as they are now (read before
    the lock, they may have been those of a table a repartition replaced)."""
    finish_repartition(sql, spec)
    if not table_exists(sql, spec.target):
        raise UpsertError(f"{spec.target} does not exist: there is nothing to {doing}.")
    if needs_store and not reads_its_store(sql, spec):
        # Found by review: a model switched from upsert to a table kept its old store and
        # log, and a rollback re-pointed the new table's partitions at stale versions.
        raise UpsertError(
            f"{spec.target} is not an upsert table (its rows are not in {spec.versions}):"
            f" there is no history to {doing}. Only models of incremental_strategy upsert"
            " or replace_partitions, and snapshots, keep one; a model switched back to one"
            " starts its history again with --full-refresh."
        )
    return replace(spec, partition_by=tuple(partition_columns(sql, spec.target)))


def reads_its_store(sql: Sql, spec: UpsertSpec) -> bool:
    """Whether the target's folder is in its version store's, as every upsert table's is
    (create_tables), unlike a table, a view or a seed of that name."""
    if not table_exists(sql, spec.versions):
        return False
    try:
        target = table_location(sql, spec.target)
    except StopIteration:  # a view has no location
        return False
    return (target + "/").startswith(table_location(sql, spec.versions).rstrip("/") + "/")


def clean_versions(sql: Sql, spec: UpsertSpec, state: TableState | None = None) -> int:
    """Drop stored versions no partition reads and no kept commit needs (keep_commits,
    keep_days);
    how many were dropped (none when the spec does not know what to keep: an operation).

    `state` is the table's state when the caller knows it (else the log is read).
    """
    if spec.keep_commits is None:
        return 0
    state = state or read_log(sql, spec)
    retained = state.retained(_commits_kept(spec, state))
    if not spec.partition_by:
        retained = {("", version) for _, version in retained}
    # A version's tombstones go with it.
    stale = [
        path
        for path, partition, version in stored_versions(sql, spec)
        if (partition, version.removesuffix(TOMBSTONES)) not in retained
    ]
    _drop_stored(sql, spec, stale)
    return len(stale)


def _drop_stored(sql: Sql, spec: UpsertSpec, paths: list[str]) -> None:
    """Drop the version store's partitions at `paths` (as `show partitions` names them)."""
    if paths:
        specs = ", ".join(
            partition_spec([*spec.partition_by, VERSION], path_values(path)) for path in paths
        )
        sql(f"alter table {spec.versions} drop if exists {specs}")


def stored_versions(sql: Sql, spec: UpsertSpec) -> list[tuple[str, str, str]]:
    """The version store's partitions: (its path, the table partition's path, the version)."""
    stored = []
    for (path,) in sql(f"show partitions {spec.versions}"):
        head, _, version = path.rpartition(f"{VERSION}=")
        stored.append((path, head.rstrip("/"), unescape_path(version)))
    return stored


def rollback_last_commit(sql: Sql, spec: UpsertSpec) -> str:
    """Restore the partitions the last commit changed to their previous versions.

    Only the last commit can be rolled back, once: older versions are gone.
    Returns the id of the commit rolled back.
    """
    with held(sql, spec.target):
        spec = mend_table(sql, spec, "roll back")
        logged = read_log(sql, spec)
        unfinished = logged.pending
        state = recover(sql, spec, logged)
        if unfinished is not None and unfinished.action == ROLLING_BACK:
            return unfinished.commit_id  # a rollback a killed run began: now done, not repeated
        last = state.last_commit
        if last is None:
            raise UpsertError(
                f"{spec.target} has no commit to roll back: it has none, or its last one was"
                " rolled back already (only the last commit is kept)."
            )
        if last.commit_id in state.savepoints:  # found by review: the pin went with it
            raise UpsertError(
                f"{spec.target}'s last commit {last.commit_id} has a savepoint, which rolling"
                " it back would drop: release it first (release_savepoint), or restore an"
                " earlier commit with rollback_to, which keeps it."
            )
        steps.reached("rollback.log_rolling_back")
        write_log(sql, spec, LogEntry(last.commit_id, ROLLING_BACK, last.changes))
        _finish_rollback(sql, spec, last, last)
        return last.commit_id


def _finish_rollback(
    sql: Sql, spec: UpsertSpec, entry: LogEntry, undone: LogEntry | None
) -> TableState:
    """Point the partitions `entry` changed back at their previous versions and log
    `rolled_back`; safe to repeat (recovery finishes a killed rollback with it).
    `undone` is the commit rolled back, as its `committed` line says (its time)."""
    steps.reached("rollback.point")
    _point(sql, spec, [(c.path, c.previous, c.current) for c in entry.changes])
    steps.reached("rollback.log_rolled_back")
    # The end of the commit's window, never before it showed: its line's time is on its
    # commit's clock, which runs ahead of this host's when its id was bumped.
    ended = host_clock()
    if undone is not None and undone.commit_id == entry.commit_id:
        ended = max(ended, visible_at(undone))
    logged_at = ended.strftime(LOGGED_AT_FORMAT)
    write_log(sql, spec, LogEntry(entry.commit_id, ROLLED_BACK, entry.changes, logged_at))
    return read_log(sql, spec)


def refuse_dropping_savepoints(state: TableState, target: str, doing: str) -> None:
    """Refuse `doing`, which drops the table's history, while a savepoint pins some of
    it: a savepoint promises its commit's files stay until it is released."""
    if state.savepoints:
        raise UpsertError(
            f"{target} has savepoints ({', '.join(sorted(state.savepoints))}), whose"
            f" history {doing} would drop: release them first (release_savepoint)."
        )


def drop_upsert_table(sql: Sql, spec: UpsertSpec) -> None:
    """Drop the target, its version store and its commit log entries, and what a killed
    repartition left (so none of it comes back as the table)."""
    with held(sql, spec.target):
        steps.reached("drop.repartition_leftovers")
        drop_repartition_leftovers(sql, spec)
        steps.reached("drop.target")
        drop_table(sql, spec.target)
        steps.reached("drop.versions")
        drop_table(sql, spec.versions)
        steps.reached("drop.log")
        drop_log(sql, spec)


__all__ = [
    "CommitResult",
    "TableState",
    "UpsertError",
    "UpsertSpec",
    "clean_versions",
    "drop_upsert_table",
    "finish",
    "recover",
    "refuse_dropping_savepoints",
    "replay",
    "rollback_last_commit",
    "upsert",
]
