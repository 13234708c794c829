"""Vacuum an upsert table: remove what its version store holds and no kept commit needs.

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
from dataclasses import dataclass
from pathlib import Path

from dynamic_ddl import steps
from dynamic_ddl.catalog import Sql, local_path, table_exists, table_location
from dynamic_ddl.locks import held
from dynamic_ddl.upsert.protocol import clean_versions, recover, stored_versions
from dynamic_ddl.upsert.spec import UpsertError, UpsertSpec

# Folder names a killed write job leaves at the top of its output location.
JOB_FOLDER_PREFIXES = ("_temporary", ".spark-staging-")


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
    if not table_exists(sql, spec.target):
        raise UpsertError(f"{spec.target} does not exist: there is nothing to vacuum.")
    with held(sql, spec.target):
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
