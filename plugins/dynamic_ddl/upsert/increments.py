"""What an incremental model has not read yet, found without reading whole tables.

An incremental model reads its upstream's new rows only: rows of raw
batches it has not taken (`unseen_batches`), or rows of upsert commits
after the newest one it has stored (`changed_since`). Both need the
greatest value of a column in the model's own table, and `changed_since`
needs where the upstream's new rows are. Reading a whole column for either
would make each run cost more as the tables age; the commit log answers
both from a few partitions:

- the greatest value is in the partitions the model's last commit wrote
  (that commit's rows came from upstream rows newer than any before), so
  only that commit's version is read; a table without a last commit (never
  upserted, or its last commit rolled back) is read whole;
- the upstream's rows newer than a commit are in the partitions that read
  a newer version (`commits.changed_partitions`), and the filter lists them
  so that Spark reads nothing else.

A value found too low only makes the next run read some rows again, which
an upsert takes as it did the first time.
"""

from __future__ import annotations

from typing import Any

from dynamic_ddl.catalog import Sql, table_exists
from dynamic_ddl.sql_text import (
    NULL_PARTITION,
    partitions_predicate,
    path_values,
    quoted_identifier,
    quoted_table,
    sql_literal,
)
from dynamic_ddl.upsert.commit_log import read_log
from dynamic_ddl.upsert.commits import TableState, changed_partitions
from dynamic_ddl.upsert.relayout import in_progress, refuse_while_repartitioning
from dynamic_ddl.upsert.spec import COMMIT_ID, VERSION, UpsertError, UpsertSpec

# Past this many changed partitions, listing them saves little: the filter is left out.
MAX_LISTED_PARTITIONS = 1000


def table_state(sql: Sql, spec: UpsertSpec) -> TableState:
    """The table's state from its commit log (empty when the schema has no log)."""
    return read_log(sql, spec) if table_exists(sql, spec.log) else TableState()


def greatest_value(sql: Sql, spec: UpsertSpec, column: str) -> Any:
    """The greatest value of `column` in the target (None when it has no rows), reading
    only the version its last commit wrote when there is one. A restore (rollback_to)
    writes none: then the table is read whole, rather than taken for empty (which made
    a downstream model recompute every day)."""
    last = table_state(sql, spec).last_commit
    select = f"select max({quoted_identifier(column)}) from"
    if last is not None:
        version = f"{VERSION} = {sql_literal(last.commit_id)}"
        (row,) = sql(f"{select} {quoted_table(spec.versions)} where {version}")
        if row[0] is not None:
            return row[0]
    (row,) = sql(f"{select} {quoted_table(spec.target)}")
    return row[0]


def changed_since_filter(sql: Sql, upstream: UpsertSpec, qualifier: str, seen: Any) -> str:
    """A filter on the upstream's rows (columns prefixed with `qualifier`): those of its
    commits that are wholly visible and, when `seen` (a commit id) is given, newer
    than `seen`, in the partitions that hold such rows only. `false` before the
    upstream's first commit."""
    commit = f"{qualifier}.{quoted_identifier(COMMIT_ID)}"
    if in_progress(sql, upstream):
        # A repartition is rewriting the store and the log (their partitions may be of
        # the old layout still): the table reads whole rows, which keep their commit
        # ids, so the ids alone tell what is new.
        return "true" if seen is None else f"{commit} > {sql_literal(str(seen))}"
    state = table_state(sql, upstream)
    last = max(state.versions.values(), default=None)
    if last is None:
        return "false"
    terms = [f"{commit} <= {sql_literal(last)}"]
    if seen is not None:
        terms.append(f"{commit} > {sql_literal(str(seen))}")
        changed = changed_partitions(state, str(seen))
        if upstream.partition_by and len(changed) <= MAX_LISTED_PARTITIONS:
            terms.append(partitions_predicate(upstream.partition_by, changed, qualifier))
    return "(" + " and ".join(terms) + ")"


def finished_commits(sql: Sql, upstream: UpsertSpec, reader: str) -> TableState:
    """The upstream's state for a model that recomputes what it reads and stores the
    newest commit id it saw (rows_of_changed_days): ValueError naming the fix while a
    commit of the upstream is pending (under way, or left by a killed run).

    Found by review: such a commit's first partitions already read its rows, so
    the model stored its id, and once the commit was finished its other days
    never counted as changed: wrong for good."""
    state = table_state(sql, upstream)
    if state.pending is not None:
        model = upstream.target.split(".")[-1]
        raise ValueError(
            f"{reader}: {upstream.target} has a commit under way, or left by a killed run"
            f" ({state.pending.commit_id}), of which some partitions show the rows already."
            f" Run its model first (dbt run -s {model}: it finishes or undoes the commit),"
            " or wait for the run that is writing it; then run this model."
        )
    return state


def committed_rows_predicate(state: TableState, qualifier: str) -> str:
    """The rows of commits the log shows finished (`qualifier`.`_commit_id` up to the
    newest version): a commit started after the state was read is read the next time
    (changed_since_filter has the same bound). `true` when the log holds no commit (a
    table never upserted is read as it is).

    Example:
        >>> committed_rows_predicate(TableState(), "t")
        'true'
    """
    last = max(state.versions.values(), default=None)
    if last is None:
        return "true"
    return f"{qualifier}.{quoted_identifier(COMMIT_ID)} <= {sql_literal(last)}"


def changed_days(
    sql: Sql, upstream: UpsertSpec, day_column: str, seen: Any, state: TableState | None = None
) -> list[Any]:
    """The values of the upstream's partition column `day_column` in its partitions that
    changed after commit `seen` (all of them when `seen` is None), None for NULL;
    `state`: the upstream's (finished_commits), read here when not given.

    A partition changes when it reads a newer version: new rows, rows that
    moved away, deletes; an emptied partition reads an empty version, so it
    is found too. Raises ValueError when `day_column` is no partition column,
    or while a commit of the upstream is pending (finished_commits).
    """
    names = [c.lower() for c in upstream.partition_by]
    if day_column.lower() not in names:
        raise ValueError(
            f"{upstream.target} is not partitioned by {day_column!r} (its partitions:"
            f" {', '.join(upstream.partition_by) or 'none'}); pass its day partition column"
            " as day_column."
        )
    index = names.index(day_column.lower())
    try:  # the log's partitions may be of the old layout
        refuse_while_repartitioning(sql, upstream, f"rows_of_changed_days({upstream.target})")
    except UpsertError as error:
        raise ValueError(str(error)) from None
    if state is None:
        state = finished_commits(sql, upstream, f"rows_of_changed_days({upstream.target})")
    paths = changed_partitions(state, str(seen) if seen else "")
    days = {path_values(path)[index] for path in paths}
    return sorted((None if day == NULL_PARTITION else day for day in days), key=str)
