"""An upsert table as it was after one of its kept commits: read it (`as_of`), restore it
(`rollback_to`), or pin it (`savepoint`, `release_savepoint`).

Each partition points at one version in the version store; a commit moves some
of them. The log replays to every partition's version after each commit it
still holds (`commits.versions_after`), and the table keeps the files to read
it as of each of its last `keep_commits` + 1 commits. A read as of
a commit selects exactly those versions from the store; a restore points the
table back at them by a commit of its own, so it is logged, recovered after a
kill and undone by rollback_last_commit like any other.
"""

from __future__ import annotations

from datetime import UTC, datetime

from dynamic_ddl import steps
from dynamic_ddl.catalog import Sql, table_columns
from dynamic_ddl.locks import held
from dynamic_ddl.sql_text import path_row, quoted_identifier, rows_predicate
from dynamic_ddl.upsert.commit_log import read_log, write_log
from dynamic_ddl.upsert.commits import (
    COMMIT_ID_FORMAT,
    PENDING,
    RELEASED,
    SAVEPOINT,
    LogEntry,
    PartitionChange,
    TableState,
    commit_at,
    kept_commits,
    next_commit_id,
    rolled_back_over,
    versions_after,
)
from dynamic_ddl.upsert.protocol import (
    commit_clock,
    finish,
    mend_table,
    reads_its_store,
    recover,
    stored_versions,
)
from dynamic_ddl.upsert.relayout import refuse_while_repartitioning
from dynamic_ddl.upsert.spec import VERSION, UpsertError, UpsertSpec

COMMIT_ID = "20261101080000000000"  # the shape of a commit id (COMMIT_ID_FORMAT)


def commit_of(state: TableState, at: str, target: str) -> str:
    """The kept commit `at` names: a commit id (of the history or a savepoint), or the
    commit of the history the table showed at a UTC time (`2026-11-20 00:00:00`, ISO
    8601 too; a time with a zone is converted): commits.commit_at. A time when a commit
    since rolled back showed is refused: no read gives what the table showed then.

    Example:
        >>> from dynamic_ddl.upsert.commits import COMMITTED, replay
        >>> state = replay([LogEntry("20261101080000000000", COMMITTED)])
        >>> commit_of(state, "2026-11-01T09:00:00+01:00", "s.t")
        '20261101080000000000'
    """
    kept = kept_commits(state)
    if at in kept:
        return at
    oldest = f" (the oldest kept one is {kept[0]}, made {_made(kept[0])} UTC)" if kept else ""
    if len(at) == len(COMMIT_ID) and at.isdigit():
        raise UpsertError(
            f"{target} no longer keeps commit {at}{oldest}, or never made it: raise the"
            " model's keep_commits or keep_days to keep more of its history."
        )
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        raise UpsertError(
            f"{at!r} names no kept commit of {target}{oldest}: pass a commit id (a"
            " _commit_id value) or a UTC time such as '2026-11-20 00:00:00'."
        ) from None
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    if when > datetime.now(UTC).replace(tzinfo=None):  # a typo (2062) read as "now"
        raise UpsertError(
            f"{at!r} is in the future: pass a past UTC time, or the newest commit's id"
            f" ({kept[-1] if kept else 'none yet'})."
        )
    found = commit_at(state, when)
    gone = rolled_back_over(state, when, found)
    if gone is not None:
        until = state.rolled_back_at.get(gone) or "later"
        raise UpsertError(
            f"At {when} UTC {target} may have shown commit {gone}, made {_made(gone)} UTC"
            f" and rolled back at {until}: its files are gone, so no read gives what it"
            f" showed then. Pass a time outside that window, or a kept commit's id"
            f" ({', '.join(kept)})."
        )
    if found is None:
        pinned = f"; its savepoints are named by id: {', '.join(sorted(state.savepoints))}"
        raise UpsertError(
            f"{target} keeps no commit made at or before {when} UTC{oldest}: raise the"
            " model's keep_commits or keep_days to keep more of its history"
            + (pinned if state.savepoints else "")
            + "."
        )
    return found


def kept_versions_after(sql: Sql, spec: UpsertSpec, state: TableState, commit: str) -> dict:
    """Each partition's version right after `commit`, once checked to be in the store."""
    versions = versions_after(state, commit)
    stored = {(partition, version) for _, partition, version in stored_versions(sql, spec)}
    missing = sorted(set(versions.items()) - stored)
    if missing:
        raise UpsertError(
            f"{spec.target} no longer keeps the files of commit {commit} ({len(missing)}"
            f" partition versions are gone, e.g. {missing[0]}): raise the model's"
            " keep_commits or keep_days to keep more of its history."
        )
    return versions


def as_of_sql(sql: Sql, spec: UpsertSpec, at: str) -> str:
    """A subquery of the target's rows as they were right after the kept commit `at`
    names (see commit_of), read from the version store."""
    refuse_while_repartitioning(sql, spec, f"as_of({spec.target}, {at!r})")
    state = read_log(sql, spec)
    versions = kept_versions_after(sql, spec, state, commit_of(state, at, spec.target))
    columns = ", ".join(quoted_identifier(name) for name, _ in table_columns(sql, spec.target))
    chosen = [(*path_row(path), version) for path, version in sorted(versions.items())]
    where = rows_predicate([*spec.partition_by, VERSION], chosen) if chosen else "false"
    return f"(select {columns} from {spec.versions} where {where})"


def rollback_to(sql: Sql, spec: UpsertSpec, at: str) -> str | None:
    """Point every partition back at its version right after the kept commit `at` names,
    by a new commit (a partition made since is dropped); its id, None when the table
    is so already. rollback_last_commit undoes it."""
    with held(sql, spec.target):
        spec = mend_table(sql, spec, "roll back")
        state = recover(sql, spec)
        commit = commit_of(state, at, spec.target)
        wanted = kept_versions_after(sql, spec, state, commit)
        changes = tuple(
            PartitionChange(path, state.versions.get(path), wanted.get(path))
            for path in sorted(set(state.versions) | set(wanted))
            if state.versions.get(path) != wanted.get(path)
        )
        if not changes:
            return None
        commit_id = next_commit_id(datetime.now(UTC), state.last_commit_id)
        clock = commit_clock(commit_id)
        entry = LogEntry(commit_id, PENDING, changes)
        steps.reached("rollback_to.log_pending")
        write_log(sql, spec, entry)
        finish(sql, spec, entry, state, clock)
        return commit_id


def savepoint(sql: Sql, spec: UpsertSpec, at: str) -> str:
    """Pin the kept commit `at` names: its versions stay until release_savepoint; its id."""
    with held(sql, spec.target):
        spec = mend_table(sql, spec, "pin")
        state = recover(sql, spec)
        commit = commit_of(state, at, spec.target)
        if commit not in state.savepoints:
            versions = kept_versions_after(sql, spec, state, commit)
            changes = tuple(PartitionChange(p, None, v) for p, v in sorted(versions.items()))
            steps.reached("savepoint.log")
            write_log(sql, spec, LogEntry(commit, SAVEPOINT, changes))
        return commit


def release_savepoint(sql: Sql, spec: UpsertSpec, at: str) -> str:
    """Unpin the savepoint on commit `at` (its id); the model's next commit drops the
    versions nothing else keeps. Its id."""
    with held(sql, spec.target):
        # Also for a table that no longer reads its store (found by review: a model
        # switched to a table, then back, could neither rebuild over its savepoint nor
        # release it); such a table's log is only read, never replayed onto it.
        spec = mend_table(sql, spec, "release", needs_store=False)
        state = recover(sql, spec) if reads_its_store(sql, spec) else read_log(sql, spec)
        if at not in state.savepoints:
            pinned = ", ".join(sorted(state.savepoints)) or "none"
            raise UpsertError(
                f"{spec.target} has no savepoint on commit {at!r}; its savepoints: {pinned}."
            )
        steps.reached("savepoint.release")
        write_log(sql, spec, LogEntry(at, RELEASED))
        return at


def _made(commit_id: str) -> str:
    return datetime.strptime(commit_id, COMMIT_ID_FORMAT).strftime("%Y-%m-%d %H:%M:%S")
