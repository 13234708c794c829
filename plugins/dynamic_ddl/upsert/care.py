"""Table care operations on an upsert table: vacuum and repartition.

Repartition rewrites the table under new partition columns and swaps it in
(the steps and their recovery are in relayout.py).

Vacuum removes what the table's version store holds and no kept commit needs.

A commit already drops the versions its table's retention (keep_commits,
keep_days) no longer needs. What no commit sees are orphans that writes
killed mid-job leave in the store's location:

- a version's folder written but never listed as a partition (the job
  finished, the run died before the metastore heard of it, or before the
  commit was logged), which no reader sees but which takes space;
- the job's own folders (Hadoop's `_temporary`, Spark's
  `.spark-staging-<job>`) at the top of the location.

Vacuum lists the store's folders as partitions (`recover partitions`, plain
SQL on any file system) and drops every version the retention does not keep,
orphans included, as a commit's cleanup would; then it removes the job
folders, where the location is on a local disk (SQL cannot list them).
Under the table's lock, so no commit is writing; each step can be repeated.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from dynamic_ddl import steps
from dynamic_ddl.catalog import (
    RETIRED_SUFFIX,
    Sql,
    job_folders,
    schema_exists,
    table_columns,
    table_exists,
    table_location,
)
from dynamic_ddl.locks import LockSettings, held
from dynamic_ddl.sql_text import quoted_identifier, string_literal
from dynamic_ddl.upsert.commits import next_commit_id
from dynamic_ddl.upsert.protocol import (
    clean_versions,
    mend_table,
    recover,
    refuse_dropping_savepoints,
    stored_versions,
)
from dynamic_ddl.upsert.relayout import (
    INTERIM_SUFFIX,
    finish_repartition,
    start_repartition,
    tombstones_predicate,
)
from dynamic_ddl.upsert.spec import COMMIT_ID, COMMIT_TS, UpsertError, UpsertSpec


@dataclass(frozen=True)
class VacuumResult:
    """What a vacuum removed."""

    dropped_versions: int  # partition versions past retention, orphans included
    orphans: int  # of those, folders no partition listed before the vacuum
    job_folders: int | None  # folders of killed jobs removed; None: not on a local disk


def vacuum(sql: Sql, spec: UpsertSpec) -> VacuumResult:
    """Drop the versions `spec`'s retention does not keep, orphans included, and the
    folders of killed write jobs (see the module docstring)."""
    if spec.keep_commits is None:
        raise UpsertError(
            f"Vacuum of {spec.target} needs the model's retention (keep_commits, keep_days):"
            " run it as `dbt run-operation vacuum --args '{model: <name>}'`."
        )
    with held(sql, spec.target):
        spec = mend_table(sql, spec, "vacuum")
        state = recover(sql, spec)
        listed = {path for path, _, _ in stored_versions(sql, spec)}
        steps.reached("vacuum.recover_partitions")
        sql(f"alter table {spec.versions} recover partitions")
        orphans = {path for path, _, _ in stored_versions(sql, spec)} - listed
        steps.reached("vacuum.drop_versions")
        dropped = clean_versions(sql, spec, state)
        steps.reached("vacuum.remove_job_folders")
        folders = job_folders(table_location(sql, spec.versions))
        for folder in folders or ():
            shutil.rmtree(folder, ignore_errors=True)
        return VacuumResult(dropped, len(orphans), None if folders is None else len(folders))


def repartition(sql: Sql, spec: UpsertSpec, partition_by: Sequence[str]) -> str | None:
    """Rewrite `spec.target` under the partition columns `partition_by` and swap it in
    (relayout.py); the id of its new version, None when it is so partitioned already.

    The table's rows, their `_commit_id` and its downstream models stay as they
    are; its history before (as_of, rollback_to) does not, and a savepoint,
    which promises to keep it, must be released first.
    """
    partition_by = tuple(partition_by or ())
    if not partition_by:
        raise UpsertError(
            f"Repartition of {spec.target} needs partition_by, one column or more; to"
            " remove partitioning, rebuild the model with --full-refresh."
        )
    with held(sql, spec.target):
        spec = mend_table(sql, spec, "repartition")
        state = recover(sql, spec)
        refuse_dropping_savepoints(state, spec.target, "a repartition")
        names = {name.lower() for name, _ in table_columns(sql, spec.target)}
        lineage = {COMMIT_ID, COMMIT_TS}
        unknown = [p for p in partition_by if p.lower() not in names or p.lower() in lineage]
        if unknown or len({p.lower() for p in partition_by}) < len(partition_by):
            raise UpsertError(
                f"Repartition of {spec.target}: partition_by={list(partition_by)} must name"
                f" distinct columns of the table ({', '.join(unknown) or 'a repeated one'}"
                " is not)."
            )
        if [p.lower() for p in spec.partition_by] == [p.lower() for p in partition_by]:
            return None  # spec.partition_by: the table's, as mend_table read them
        commit = next_commit_id(datetime.now(UTC), state.last_commit_id)
        refuse_merging_keys(sql, spec, partition_by, tombstones_predicate(spec, state, commit))
        start_repartition(sql, spec, partition_by, commit, state)
        return commit


def refuse_merging_keys(
    sql: Sql, spec: UpsertSpec, partition_by: Sequence[str], tombstones: str = "false"
) -> None:
    """Raise UpsertError when the new layout would put rows of one key in one partition.

    Without `global_key` a key is unique within its partition only: a key
    stored on two days is two rows, and a layout without the day would hold
    both in one partition, where the next commit keeps one of them (found by
    review: a row lost with no delete). A remembered delete (the version store's
    rows `tombstones` selects) counts as a row: it moves with the rows, and would
    remove a live row of its key there. A layout keeping every old partition
    column cannot do that; any other is checked against the rows, by the key
    the model names (`spec.unique_key`).
    """
    kept = {p.lower() for p in partition_by}
    dropped = [p for p in spec.partition_by if p.lower() not in kept]
    if spec.global_key or not dropped:
        return
    if not spec.unique_key:
        raise UpsertError(
            f"Repartition of {spec.target} without {', '.join(dropped)} needs the model's"
            " unique_key, to check that no two rows of a key meet in one partition: run"
            " it as `dbt run-operation repartition --args '{model: <name>, partition_by:"
            " [...]}'`."
        )
    grouped = ", ".join(quoted_identifier(c) for c in (*partition_by, *spec.unique_key))
    rows = (
        f"select {grouped} from {spec.target}"
        f" union all select {grouped} from {spec.versions} where {tombstones}"
    )
    if sql(f"select 1 from ({rows}) group by {grouped} having count(*) > 1 limit 1"):
        raise UpsertError(
            f"Repartition of {spec.target} by {list(partition_by)} would put rows of one"
            f" key ({', '.join(spec.unique_key)}) stored under different"
            f" {', '.join(dropped)} in one partition, and its next commit would keep only"
            " one: without global_key a key is unique within its partition only. Keep"
            f" {', '.join(dropped)} among the partition columns, or set global_key and"
            " rebuild the model with --full-refresh."
        )


def hidden_by_repartitions(sql: Sql, schema: str) -> list[UpsertSpec]:
    """The upsert tables of `schema` a repartition killed between its swap's two renames
    left hidden: the name empty, the rows under the retired name. Only a hidden table
    with an interim copy and a version store is one (a raw child table may end in the
    interim's suffix too)."""
    if not schema_exists(sql, schema):
        return []
    pattern = string_literal(f"*{INTERIM_SUFFIX}")
    listed = sql(f"show tables in {quoted_identifier(schema)} like {pattern}")
    names = sorted(row[1] for row in listed if row[1].endswith(INTERIM_SUFFIX))
    specs = [UpsertSpec(f"{schema}.{name.removesuffix(INTERIM_SUFFIX)}") for name in names]
    return [spec for spec in specs if _hidden(sql, spec)]


def _hidden(sql: Sql, spec: UpsertSpec) -> bool:
    return (
        not table_exists(sql, spec.target)
        and table_exists(sql, spec.target + RETIRED_SUFFIX)
        and table_exists(sql, spec.versions)
    )


def mend_hidden_table(sql: Sql, spec: UpsertSpec, lock: LockSettings | None = None) -> str | None:
    """Under the table's lock, put back a table hidden_by_repartitions found, and undo or
    finish its repartition (relayout.finish_repartition): "undone" (killed at its first
    swap), "finished" (at its last) or None (mended meanwhile by its holder).

    A dbt run does this when it lists the schema, before any model renders. Found by
    review: dbt saw no table, so the model ran its SQL as a first build
    (`is_incremental()` false) and its commit put the table back only then; a model
    whose first build differs from its increments (lnd_media's dropped media) came
    out wrong.
    """
    with held(sql, spec.target, lock):
        if not _hidden(sql, spec):
            return None
        return finish_repartition(sql, spec)
