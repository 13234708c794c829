"""What an upsert is asked to do: the target, its key and its options; its errors and result."""

from __future__ import annotations

from dataclasses import dataclass

from dynamic_ddl.catalog import Sql, partition_columns

COMMIT_ID = "_commit_id"
COMMIT_TS = "_commit_ts"
VERSION = "_version"
EMPTY = "_empty"  # what a new table points at: no rows until its first commit
LOG_TABLE = "upsert_commits"
ON_SCHEMA_CHANGE = ("ignore", "append_new_columns", "fail")


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
    # The `replace_partitions` strategy: the batch's rows replace the partitions they
    # fall in, whole (a recomputed day); no key, no ordering, no merge.
    replace: bool = False
    # Rows that carry some of a key's columns (pivoted attributes split across
    # batches): per column, the value of the newest row holding one wins, so a NULL
    # keeps what is stored (as Hudi's partial-update payload).
    partial_updates: bool = False

    @classmethod
    def of_table(cls, sql: Sql, target: str) -> UpsertSpec:
        """The spec of an existing upsert table, enough to roll back, pull or drop it."""
        return cls(target, partition_by=tuple(partition_columns(sql, target)))

    def validate(self) -> None:
        """Raise UpsertError, naming the fix, when the config cannot upsert."""
        if self.replace:
            if not self.partition_by:
                raise UpsertError(
                    f"replace_partitions into {self.target} needs partition_by: the"
                    " partitions the new rows fall in are the ones replaced (e.g. a day)."
                )
            if self.delete_marker or self.predicates:
                raise UpsertError(
                    f"replace_partitions into {self.target} replaces partitions whole:"
                    " delete_marker and incremental_predicates do not apply; remove them."
                )
        elif not self.unique_key:
            raise UpsertError(f"Upsert into {self.target} needs unique_key (one or more columns).")
        if not self.replace and not self.ordering_field:
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
