"""`dbt snapshot` on Parquet: a snapshot run's changes as whole rows, committed as an upsert.

dbt's snapshot merge (`snapshot_merge_sql`) is a MERGE: it sets `dbt_valid_to`
on the current rows that changed or vanished, and inserts the new rows. Parquet
cannot MERGE, so the same change is written as whole rows and committed by the
copy-on-write protocol (docs/decisions/0006), keyed by `dbt_scd_id` and ordered
by `dbt_updated_at`:

- a closed row is the stored row with its new `dbt_valid_to`: it ties with the
  stored row on `dbt_updated_at`, and an incoming row wins a tie;
- a new row is the staging row, its columns in the target's order (a column
  the source no longer sends is NULL), unless its `dbt_scd_id` is stored
  already (MERGE's `when not matched`).

Every other stored row is kept as it is, in a partition the commit does not
touch or copied unchanged into the one it rewrites.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dynamic_ddl.sql_text import quoted_identifier as quoted
from dynamic_ddl.upsert.spec import COMMIT_ID, COMMIT_TS


@dataclass(frozen=True)
class SnapshotColumns:
    """The names of dbt's snapshot columns (config `snapshot_table_column_names`)."""

    scd_id: str = "dbt_scd_id"
    updated_at: str = "dbt_updated_at"
    valid_to: str = "dbt_valid_to"


def stored_columns(columns: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The target's (name, type) pairs a snapshot row carries: all but each commit's
    lineage (`_commit_id`, `_commit_ts`), which the upsert adds itself."""
    lineage = {COMMIT_ID.lower(), COMMIT_TS.lower()}
    return [(name, kind) for name, kind in columns if name.lower() not in lineage]


def changes_sql(
    target: str,
    staging: str,
    columns: Sequence[tuple[str, str]],
    staged: Sequence[str],
    names: SnapshotColumns = SnapshotColumns(),
    valid_to_current: str | None = None,
    added: Sequence[tuple[str, str]] = (),
) -> str:
    """The rows a snapshot run changes in `target`, from dbt's staging relation.

    `columns` are the target's stored (name, type) pairs, in order; `staged` the
    staging relation's column names; `added` the (name, type) of staged columns the
    target lacks (a column new in the source: NULL in closed rows; the commit adds
    it to the table). `valid_to_current` is the config's SQL expression for an open
    row's `dbt_valid_to`, if any (NULL is open too).

    Example:
        >>> print(changes_sql("s.snap", "s.snap__dbt_tmp", [("id", "int"),
        ...     ("dbt_scd_id", "string"), ("dbt_valid_to", "timestamp")], ["id", "dbt_scd_id"]))
        select dest.`id`, dest.`dbt_scd_id`, src.`dbt_valid_to`
        from s.snap as dest
        join s.snap__dbt_tmp as src on src.`dbt_scd_id` = dest.`dbt_scd_id`
        where (dest.`dbt_valid_to` is null) and src.dbt_change_type in ('update', 'delete')
        union all
        select src.`id`, src.`dbt_scd_id`, cast(null as timestamp) `dbt_valid_to`
        from s.snap__dbt_tmp as src
        left anti join s.snap as dest on src.`dbt_scd_id` = dest.`dbt_scd_id`
        where src.dbt_change_type = 'insert'
    """
    valid_to = quoted(names.valid_to)
    scd_id = quoted(names.scd_id)
    present = {name.lower() for name in staged}
    closed = [
        f"src.{valid_to}" if name.lower() == names.valid_to.lower() else f"dest.{quoted(name)}"
        for name, _ in columns
    ] + [f"cast(null as {kind}) {quoted(name)}" for name, kind in added]
    inserted = [
        f"src.{quoted(name)}" if name.lower() in present else f"cast(null as {kind}) {quoted(name)}"
        for name, kind in columns
    ] + [f"src.{quoted(name)}" for name, _ in added]
    open_row = f"dest.{valid_to} is null"
    if valid_to_current:
        open_row += f" or dest.{valid_to} = {valid_to_current}"
    return "\n".join(
        [
            f"select {', '.join(closed)}",
            f"from {target} as dest",
            f"join {staging} as src on src.{scd_id} = dest.{scd_id}",
            f"where ({open_row}) and src.dbt_change_type in ('update', 'delete')",
            "union all",
            f"select {', '.join(inserted)}",
            f"from {staging} as src",
            f"left anti join {target} as dest on src.{scd_id} = dest.{scd_id}",
            "where src.dbt_change_type = 'insert'",
        ]
    )
