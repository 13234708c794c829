"""What an upsert is asked to do: the target, its key and its options; its errors and result."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dynamic_ddl.catalog import Sql, partition_columns
from dynamic_ddl.locks import RUN_LOCK

COMMIT_ID = "_commit_id"
COMMIT_TS = "_commit_ts"
VERSION = "_version"
EMPTY = "_empty"  # what a new table points at: no rows until its first commit
LOG_TABLE = "upsert_commits"
# A version's deletes (keys and ordering values only) are stored beside its rows as the
# version `<commit>-tombstones`, which no partition of the table ever reads.
TOMBSTONES = "-tombstones"
DEFAULT_TOMBSTONE_DAYS = 30
# The most days keep_days and tombstone_days may say (a century): a date that far back
# must exist (found by review: keep_days=999999 failed every commit after it was made).
MAX_DAYS = 36_500
ON_SCHEMA_CHANGE = ("ignore", "append_new_columns", "fail")
# Names the commit adds to a target's rows, and the merge to the rows it ranks
# (merge.py): a model's result holding one failed the commit with a duplicate column,
# after a --full-refresh had dropped the table and its history (found by review).
RESERVED_COLUMNS = frozenset(
    {
        COMMIT_ID,
        COMMIT_TS,
        VERSION,
        "_changes_partition",
        "_deleted",
        "_incoming",
        "_is_new",
        "_rank",
        "_stored_commit",
        "_stored_commit_ts",
        "_stored_content",
        "_stored_delete",
        "_unchanged",
        "_vacated",
        "_winner_at",
    }
)
# partial_updates' window columns: `_latest_0`, `_latest_1`, ...
_RESERVED_NUMBERED = re.compile(r"_latest_[0-9]+")


def is_reserved(column: str) -> bool:
    """Whether a column of a model's result would clash with one the commit makes.

    Example:
        >>> [is_reserved(c) for c in ("_Commit_Id", "_latest_3", "_latest_value", "id")]
        [True, True, False, False]
    """
    name = column.lower()
    return name in RESERVED_COLUMNS or _RESERVED_NUMBERED.fullmatch(name) is not None


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
    # With a delete_marker: how many days after its commit a delete is remembered, so
    # that an update older than the delete, arriving later, does not bring the key
    # back; 0 remembers none (a delete then removes what is stored, nothing more).
    tombstone_days: int = DEFAULT_TOMBSTONE_DAYS
    # The key is unique across partitions, and a row's partition can change (an event
    # corrected to another day): a key stored in another partition than its new row's
    # is found there and moved (as Hudi's global index). Costs a read of the key and
    # partition columns of the whole table per commit.
    global_key: bool = False
    # N keeps the files to read the table as it was after each of its last N + 1 commits
    # (`as_of`) and to restore it (`rollback_to`); 1 keeps what rollback_last_commit
    # needs. None (an operation that does not know the model's
    # config): no version is dropped and the log is not compacted.
    keep_commits: int | None = 1
    # D also keeps every commit made in the D days before the last one (and the one
    # before them), so the table can be read as of any time in them; None: no age rule.
    keep_days: int | None = None
    # Columns that decide between rows of a key with equal ordering values, greatest
    # first (the raw lineage: _batch_id, _line_number), so that a build from scratch
    # keeps the row an incremental run keeps. Without them the incoming row wins a tie
    # across runs and the greater content within one. (Last: positional arguments keep
    # their meaning.)
    tie_break: tuple[str, ...] = ()
    # How the model builds its rows, as its rendering noted it (a pivot's arguments,
    # the event time formats): a JSON list, "" when nothing was noted. The table
    # records it, and a run that builds rows another way is refused: rows landed
    # before would stay as they were beside new ones (tables.refuse_recorded_changes).
    built_with: str = ""
    # The dbt model writing the table, for the commands a message names ("": its table's
    # name, as it is unless the model sets an alias or a version).
    model_name: str = ""

    @classmethod
    def of_table(cls, sql: Sql, target: str) -> UpsertSpec:
        """The spec of an existing upsert table, enough to roll back, pull or drop it."""
        return cls(target, partition_by=tuple(partition_columns(sql, target)), keep_commits=None)

    def validate(self) -> None:
        """Raise UpsertError, naming the fix, when the config cannot upsert."""
        if self.table_name in (LOG_TABLE, RUN_LOCK):
            raise UpsertError(
                f"{self.target} is named as the schema's commit log ({LOG_TABLE}) or its run"
                f" lock's table ({RUN_LOCK}__lock would be this table's lock too); give the"
                " model another name (or alias)."
            )
        if self.replace:
            if not self.partition_by:
                raise UpsertError(
                    f"replace_partitions into {self.target} needs partition_by: the"
                    " partitions the new rows fall in are the ones replaced (e.g. a day)."
                )
            if self.delete_marker or self.predicates or self.global_key:
                raise UpsertError(
                    f"replace_partitions into {self.target} replaces partitions whole:"
                    " delete_marker, global_key and incremental_predicates do not apply;"
                    " remove them."
                )
        elif not self.unique_key:
            raise UpsertError(f"Upsert into {self.target} needs unique_key (one or more columns).")
        if not self.replace and not self.ordering_field:
            raise UpsertError(
                f"Upsert into {self.target} needs ordering_field: the column whose greatest"
                " value wins for a key (e.g. log_ts)."
            )
        if self.tie_break and self.replace:
            raise UpsertError(
                f"replace_partitions into {self.target} has no key to break ties for:"
                " remove tie_break."
            )
        if self.partial_updates and self.delete_marker:
            raise UpsertError(
                f"Upsert into {self.target}: partial_updates and delete_marker cannot be"
                " combined (a delete removes the whole key); remove one of them."
            )
        if self.global_key and (self.partial_updates or self.predicates):
            raise UpsertError(
                f"Upsert into {self.target}: global_key cannot be combined with"
                " partial_updates or incremental_predicates (a key must be found, whole,"
                " wherever it is stored); remove one of them."
            )
        self.validate_tombstone_days()
        self.validate_retention()
        if self.on_schema_change not in ON_SCHEMA_CHANGE:
            raise UpsertError(
                f"on_schema_change={self.on_schema_change!r} is not supported by upsert;"
                f" use one of {', '.join(ON_SCHEMA_CHANGE)} (Parquet cannot drop columns)."
            )

    def validate_tombstone_days(self) -> None:
        """Raise UpsertError, naming the fix, when tombstone_days is not valid."""
        days = self.tombstone_days
        if isinstance(days, bool) or not isinstance(days, int) or not 0 <= days <= MAX_DAYS:
            raise UpsertError(
                f"Upsert into {self.target}: tombstone_days={days!r} must be a whole number"
                f" of days, 0 to {MAX_DAYS} (how long a delete beats older updates arriving"
                " late)."
            )

    def validate_retention(self) -> None:
        """Raise UpsertError, naming the fix, when keep_commits or keep_days is not valid."""
        keep = self.keep_commits
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
            raise UpsertError(
                f"Upsert into {self.target}: keep_commits={keep!r} must be a whole number, 1 or"
                " more (how many of the newest commits can be read as of, or rolled back to)."
            )
        days = self.keep_days
        whole = isinstance(days, int) and not isinstance(days, bool)
        if days is not None and not (whole and 0 <= days <= MAX_DAYS):
            raise UpsertError(
                f"Upsert into {self.target}: keep_days={days!r} must be a whole number of"
                f" days, 0 to {MAX_DAYS} (how far back from its last commit the table can be"
                " read as of, or rolled back to)."
            )

    @property
    def keeps_tombstones(self) -> bool:
        """Whether deletes are remembered (see tombstone_days)."""
        return bool(self.delete_marker) and self.tombstone_days > 0

    @property
    def ranking_columns(self) -> tuple[str, ...]:
        """The columns ranking a key's rows, greatest first: the ordering field, then the
        tie-break columns."""
        return (self.ordering_field, *self.tie_break) if self.ordering_field else ()

    @property
    def moves_keys(self) -> bool:
        """Whether a key is looked up in every partition (see global_key); an
        unpartitioned table holds every key in one place anyway."""
        return self.global_key and bool(self.partition_by)

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
        """The table's name as the catalog keeps it, lowercase: its commit log's partition,
        whatever case a caller spells the table in. (A model renamed from `Orders` to
        `orders` read an empty log, and its next commit dropped every version the table
        read: found by review.)"""
        return self.target.split(".")[1].lower()


def tombstone_version(version: str) -> str:
    """The version holding the deletes of `version` (see TOMBSTONES).

    >>> tombstone_version("20261101000000000000")
    '20261101000000000000-tombstones'
    """
    return version + TOMBSTONES


@dataclass(frozen=True)
class CommitResult:
    """What one upsert did."""

    commit_id: str | None
    changed_partitions: int
    affected_partitions: int
