"""Raw and child tables kept in few files and partitions: compaction, and the move of a
table from the layout before it.

Every batch writes its own partitions, (`_event_date`, `_slot`) with the
batch id as the slot, so a table gains a partition per day each batch
touches, each of a few small files. Compaction, under the topic's lock:

1. `plan`: the partitions of days older than `after_days` are merged into
   one per day, and any other partition holding more files than its bytes
   need (at `target_bytes` a file) is rewritten alone (`plan_merges`). A
   batch the ledger has not committed is left as it is: its rerun replaces
   its partitions.
2. `write`: the merged rows go to `<table>__compacting`, a table at the same
   location, each merge as one partition whose slot is the greatest batch id
   merged and a stamp (`merged_slot`): a folder no reader reads. Each row
   keeps its `_batch_id` as data, and a row's slot is never below it
   (readers of new batches prune on `_slot > seen`, exact on `_batch_id`).
3. `swap`: a new definition of the table, with the merged partitions
   instead of their sources, is swapped in (catalog.swap_in: a reader sees
   the table before or after). Every partition is in its folder under the
   table's location, so no statement needs where the files are.
4. `clean`: the interim definition is dropped. The merged partitions'
   folders stay until the next compaction starts, which removes (on a local
   disk) every partition folder under the location that the table does not
   read, and the folders of killed write jobs. A reader that fetched the
   table's partitions before the swap lists folders after it: Spark takes a
   partition folder that is gone for an empty one, so a removal right after
   the swap could make it miss rows without an error (found by review,
   2026-11-25).

Planning lists files (`binaryFile`, content unread) and the metastore's
partitions: its cost grows with the files, not with the rows.

The interim table marks a compaction not finished: the next compaction
cleans first. A kill before the swap is so undone (the interim's folders
are read by no partition); a kill between the swap's renames is mended
first by the next writer (catalog.recover_swap); a kill after the swap is
finished.

A table of the layout before compaction (partitioned by `_batch_id`, which
Spark reads from the folder, never from the file) is copied once into the
current layout and swapped in (`migrate_layout`), by the first batch or
compaction that meets it.
"""

from __future__ import annotations

import logging
import math
import re
import shutil
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from dynamic_ddl import steps
from dynamic_ddl.catalog import (
    RETIRED_SUFFIX,
    Sql,
    drop_table,
    job_folders,
    local_path,
    read_settled,
    recorded_properties,
    recover_swap,
    set_table_properties,
    swap_in,
    table_columns,
    table_exists,
    table_location,
)
from dynamic_ddl.ingest.bookkeeping import BookkeepingTables
from dynamic_ddl.ingest.raw_rows import BATCH_ID_COLUMN, EVENT_DATE_COLUMN, SLOT_COLUMN
from dynamic_ddl.ingest.tables import PARTITION_COLUMNS, create_table_sql
from dynamic_ddl.ingest.topics import ConfigError, whole_number
from dynamic_ddl.locks import LockSettings, held
from dynamic_ddl.sql_text import (
    glob_escaped,
    partition_spec,
    path_row,
    quoted_identifier,
    quoted_table,
    rows_predicate,
    sql_literal,
    string_literal,
)

# Bridged into dbt's log (adapter/python_jobs.py).
_LOG = logging.getLogger("dynamic_ddl.ingest")

COMPACTING_SUFFIX = "__compacting"  # the merged rows, until the table reads them
NEW_SUFFIX = "__compacted"  # the table's new definition, until it is swapped in
LAYOUT_SUFFIX = "__layout"  # a table copied into the current layout, likewise
SLOT_MARK = "~"  # in a merged slot, between the greatest batch id and the stamp
DEFAULT_TARGET_MB = 128
# Files of a megabyte at least (smaller defeats compaction), of a terabyte at most.
MIN_TARGET_MB = 1
MAX_TARGET_MB = 1_048_576
DEFAULT_AFTER_DAYS = 2
LAYOUT = [name for name, _ in PARTITION_COLUMNS]


class CompactionError(Exception):
    """A compaction asked of a table it does not apply to."""


@dataclass(frozen=True)
class CompactionPolicy:
    """When and how a raw model compacts its tables (its config `compact_every`,
    `compact_after_days`, `compact_target_mb`; the `compact` operation's arguments)."""

    every: int | None = None  # batches between compactions; None: only when asked
    after_days: int | None = DEFAULT_AFTER_DAYS  # days older merge; None: no day merges
    target_mb: float = DEFAULT_TARGET_MB  # the size files are written near

    @classmethod
    def from_config(cls, config: dict[str, Any], where: str) -> CompactionPolicy:
        """The policy from `compact_*` settings; a bad value is an error naming the fix.

        Example:
            >>> CompactionPolicy.from_config({"compact_every": 20}, "model raw_t")
            CompactionPolicy(every=20, after_days=2, target_mb=128)
            >>> try:
            ...     CompactionPolicy.from_config({"compact_target_mb": 1e-7}, "raw_t")
            ... except ConfigError as error:
            ...     print(error)
            raw_t: compact_target_mb must be a number of megabytes from 1 to 1,048,576, not 1e-07.
        """
        every = whole_number(config, "compact_every", where, minimum=1, default=None)
        after = whole_number(
            config, "compact_after_days", where, minimum=0, default=DEFAULT_AFTER_DAYS
        )
        target = config.get("compact_target_mb")
        if target is None:
            target = DEFAULT_TARGET_MB
        elif (
            isinstance(target, bool)
            or not isinstance(target, int | float)
            or not MIN_TARGET_MB <= target <= MAX_TARGET_MB  # NaN too
        ):
            # Found by review: 1e-7 divided by zero, .inf overflowed, 0.001 wrote a file
            # per kilobyte (after the batch had committed).
            raise ConfigError(
                f"{where}: compact_target_mb must be a number of megabytes from"
                f" {MIN_TARGET_MB} to {MAX_TARGET_MB:,}, not {target!r}."
            )
        return cls(every, after, target)

    def due(self, committed_before: int, committed_now: int) -> bool:
        """Whether a run that took the topic from `committed_before` committed batches to
        `committed_now` crossed a multiple of `every`.

        Example:
            >>> policy = CompactionPolicy(every=20)
            >>> policy.due(19, 21), policy.due(20, 21), CompactionPolicy().due(0, 99)
            (True, False, False)
        """
        if not self.every:
            return False
        return committed_now // self.every > committed_before // self.every


@dataclass(frozen=True)
class StoredPartition:
    """A partition with its files: `day` as text (None: no event date), and its folder
    under the table's location (`show partitions`' path: every partition is there)."""

    day: str | None
    slot: str
    path: str
    files: int
    bytes: int


@dataclass(frozen=True)
class Merge:
    """Partitions of one day written as one, at `slot` (merged_slot), in `files` files."""

    day: str | None
    slot: str
    sources: tuple[StoredPartition, ...]
    files: int


@dataclass(frozen=True)
class CompactionResult:
    """A table's partitions and files before and after a compaction."""

    table: str
    partitions_before: int
    files_before: int
    partitions_after: int
    files_after: int
    migrated: bool = False

    def message(self) -> str:
        """One line for dbt's log.

        Example:
            >>> CompactionResult("raw.raw_t", 40, 52, 4, 4).message()
            'raw.raw_t: compacted 40 partitions in 52 files into 4 partitions in 4 files'
        """
        moved = " (moved to the layout with _slot first)" if self.migrated else ""
        return (
            f"{self.table}: compacted {self.partitions_before} partitions in"
            f" {self.files_before} files into {self.partitions_after} partitions in"
            f" {self.files_after} files{moved}"
        )


def files_needed(size: int, target_bytes: int) -> int:
    """How many files `size` bytes take at `target_bytes` a file (at least one).

    Example:
        >>> files_needed(0, 100), files_needed(100, 100), files_needed(101, 100)
        (1, 1, 2)
    """
    return max(1, math.ceil(size / target_bytes))


def plan_merges(
    partitions: Sequence[StoredPartition],
    merge_before: date | None,
    target_bytes: int,
    stamp: str = "c",
) -> list[Merge]:
    """What to rewrite: every day before `merge_before` (and the rows without an event
    date) with more than one partition becomes one; any partition left alone but holding
    more files than its bytes need is rewritten by itself. None: merge no day. `stamp`
    tells this compaction's slots from earlier ones (merged_slot).

    Example:
        >>> p = [StoredPartition("2026-11-01", s, "f", 1, 10) for s in ("b1", "b2~c0")]
        >>> [(m.day, m.slot, len(m.sources)) for m in plan_merges(p, date(2026, 11, 2), 100)]
        [('2026-11-01', 'b2~c', 2)]
        >>> plan_merges(p, date(2026, 11, 1), 100)
        []
    """
    by_day: dict[str | None, list[StoredPartition]] = {}
    for partition in partitions:
        by_day.setdefault(partition.day, []).append(partition)
    merges = []
    for day, group in sorted(by_day.items(), key=lambda item: item[0] or ""):
        old = merge_before is not None and (day is None or day_before(day, merge_before))
        groups = [group] if old else [[partition] for partition in group]
        for sources in groups:
            size = sum(p.bytes for p in sources)
            files = files_needed(size, target_bytes)
            if len(sources) > 1 or sum(p.files for p in sources) > files:
                slot = merged_slot([p.slot for p in sources], stamp)
                merges.append(Merge(day, slot, tuple(sources), files))
    return merges


def day_before(day: str, first_kept: date) -> bool:
    """Whether the partition day `day` (as Spark writes it) is before `first_kept`. A
    year Python's dates do not hold is before (year 0 and below: an event time read
    as such, which must not stop compaction) or after (beyond 9999).

    Example:
        >>> [day_before(d, date(2026, 1, 1)) for d in ("2025-12-31", "0000-12-31", "-0001-01-01")]
        [True, True, True]
        >>> day_before("2026-01-01", date(2026, 1, 1)), day_before("+10000-01-01", date(2026, 1, 1))
        (False, False)
    """
    try:
        return date.fromisoformat(day) < first_kept
    except ValueError:
        return day.startswith(("-", "0000"))


def merged_slot(slots: Sequence[str], stamp: str) -> str:
    """The slot of a merged partition: the greatest batch id merged, then `~` and the
    compaction's stamp. Never below a batch id in it, so readers of batches after one
    prune on `_slot`; never a slot a partition had (a batch's, or an earlier
    compaction's), so the merged rows go to a folder no reader reads yet.

    Example:
        >>> merged_slot(["20261101T080000Z-ab", "20261102T080000Z-cd~20261124T1"], "20261125T1")
        '20261102T080000Z-cd~20261125T1'
    """
    return f"{max(slot.split(SLOT_MARK)[0] for slot in slots)}{SLOT_MARK}{stamp}"


def merge_before_day(after_days: int | None, today: date | None = None) -> date | None:
    """The first day not merged: `after_days` before today (UTC); None merges none.

    Example:
        >>> merge_before_day(2, date(2026, 11, 24)), merge_before_day(None)
        (datetime.date(2026, 11, 22), None)
        >>> merge_before_day(10**6, date(2026, 11, 24))
        datetime.date(1, 1, 1)
    """
    if after_days is None:
        return None
    try:
        return (today or datetime.now(UTC).date()) - timedelta(days=int(after_days))
    except OverflowError:  # more days than the calendar holds: no day is that old
        return date.min


def stored_partitions(sql: Sql, table: str, root: str | None = None) -> list[StoredPartition]:
    """Every partition of `table`, with the files and bytes in its folder: the
    metastore's partitions and a listing of the files under the table's location
    (`root`, else read; binaryFile, content unread), so the cost grows with files,
    not rows."""
    paths = [row[0] for row in sql(f"show partitions {quoted_table(table)}")]
    files = listed_files(sql, root or table_location(sql, table)) if paths else {}
    partitions = []
    for path in paths:
        day, slot = path_row(path)
        sizes = files.get(path, [])
        partitions.append(StoredPartition(day, slot or "", path, len(sizes), sum(sizes)))
    return partitions


def listed_files(sql: Sql, root: str) -> dict[str, list[int]]:
    """The sizes of the Parquet files in each partition folder under `root`, by the
    folder's path relative to it (`_event_date=.../_slot=...`)."""
    pattern = quoted_identifier(glob_escaped(root) + "/*=*/*=*/*.parquet")
    try:
        rows = sql(f"select path, length from binaryFile.{pattern}")
    except Exception as error:  # the pattern matched nothing: no file yet
        if "PATH_NOT_FOUND" not in str(error):
            raise
        return {}
    found: dict[str, list[int]] = {}
    for path, size in rows:
        found.setdefault("/".join(path.split("/")[-3:-1]), []).append(int(size))
    return found


def topic_tables(sql: Sql, table: str) -> list[str]:
    """The raw table `table` (`schema.name`) and its child tables, as the schema registry
    knows them; a clear error for a table that is not a raw table."""
    schema, name = table.split(".")
    registry = BookkeepingTables.in_schema(schema).registry
    rows = []
    if table_exists(sql, registry):
        rows = read_settled(
            sql,
            registry,
            f"select distinct table_name from {registry} where topic in (select topic"
            f" from {registry} where table_name = {sql_literal(name)})",
        )
    names = sorted(row[0] for row in rows)
    if name not in names:
        raise CompactionError(
            f"{table} is not a raw table the schema registry knows: compact names a raw"
            " model (raw_<topic>), whose child tables are compacted with it."
        )
    return [table, *(f"{schema}.{other}" for other in names if other != name)]


def uncommitted_batches(sql: Sql, table: str) -> set[str]:
    """The batch ids of `table`'s topic that the ledger has not committed (a killed run's:
    the next run of the raw model writes them again)."""
    schema, name = table.split(".")
    tables = BookkeepingTables.in_schema(schema)
    if not table_exists(sql, tables.ledger):
        return set()
    rows = read_settled(
        sql,
        tables.ledger,
        f"select batch_id from {tables.ledger} where topic in (select topic from"
        f" {tables.registry} where table_name = {sql_literal(name)}) group by batch_id"
        " having max(case when state = 'committed' then 1 else 0 end) = 0",
    )
    return {row[0] for row in rows}


def compact_topic(
    sql: Sql,
    table: str,
    after_days: int | None = DEFAULT_AFTER_DAYS,
    target_mb: float = DEFAULT_TARGET_MB,
    lock: LockSettings | None = None,
    today: date | None = None,
    pending: Collection[str] | None = None,
) -> list[CompactionResult]:
    """Compact the raw table `table` and its child tables (see the module docstring),
    under the topic's lock, which its raw model holds while it ingests. `pending`: the
    batches the ledger has not committed, when the caller knows (else read)."""
    target_bytes = int(target_mb * 2**20)
    with held(sql, table, lock):
        tables = topic_tables(sql, table)
        for each in tables:  # a swap killed between its renames: put the table back
            recover_swap(sql, each)
        tables = [each for each in tables if table_exists(sql, each)]  # dropped by hand
        if pending is None:
            pending = uncommitted_batches(sql, table)
        merge_before = merge_before_day(after_days, today)
        return [compact_table(sql, each, merge_before, target_bytes, pending) for each in tables]


def compact_table(
    sql: Sql,
    table: str,
    merge_before: date | None,
    target_bytes: int,
    pending: Collection[str] = (),
) -> CompactionResult:
    """Compact one raw or child table (steps 1-4); the caller holds the topic's lock."""
    if table_exists(sql, table + COMPACTING_SUFFIX):  # a compaction was killed
        clean_compaction(sql, table)
    _remove_retired_root(sql, table)  # before a migration now retires another
    migrated = migrate_layout(sql, table)
    root = table_location(sql, table)
    _remove_unread_folders(sql, table, root)  # those the last compaction merged, and more
    before = after = stored_partitions(sql, table, root)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    movable = [p for p in before if p.slot not in pending]
    merges = plan_merges(movable, merge_before, target_bytes, stamp)
    if merges:
        _write_merged(sql, table, root, merges)
        _swap(sql, table, root, before, merges)
        steps.reached("raw_compaction.drop_interim")
        drop_table(sql, table + COMPACTING_SUFFIX)
        after = stored_partitions(sql, table, root)
    return CompactionResult(
        table,
        len(before),
        sum(p.files for p in before),
        len(after),
        sum(p.files for p in after),
        migrated,
    )


def _write_merged(sql: Sql, table: str, root: str, merges: Sequence[Merge]) -> None:
    """Step 2: the rows of the merges' partitions into `<table>__compacting`, a table at
    the same location `root`, each merge as one partition at its slot (a folder no
    reader reads), spread over its number of files. No interim exists (compact_table
    cleaned a killed one's)."""
    steps.reached("raw_compaction.write")
    interim = table + COMPACTING_SUFFIX
    sql(
        f"create table {quoted_table(interim)} like {quoted_table(table)}"
        f" location {string_literal(root)}"
    )
    data = [n for n, _ in table_columns(sql, table) if n not in LAYOUT]
    selected = ", ".join(f"t.{quoted_identifier(n)}" for n in data)
    merged = ", ".join(
        f"({sql_literal(m.day)}, {sql_literal(p.slot)}, {sql_literal(m.slot)}, {m.files})"
        for m in merges
        for p in m.sources
    )
    day, slot = (f"t.{quoted_identifier(name)}" for name in LAYOUT)
    days = rows_predicate([EVENT_DATE_COLUMN], sorted({(m.day,) for m in merges}, key=repr), "t")
    sql(
        # Appended: the slots are new, and an overwrite without a partition spec would
        # empty the whole location (the table's too) wherever partition overwrite is static.
        f"insert into {quoted_table(interim)} select {selected}, {day}, m.slot"
        f" from {quoted_table(table)} t join (values {merged}) as m(day, source, slot, files)"
        f" on {day} <=> cast(m.day as date) and {slot} = m.source where {days}"
        # A merge's rows go to `files` tasks, so it is written as at most that many files.
        f" distribute by {day}, m.slot, pmod(hash(t._source_file, t._line_number), m.files)"
    )


def _swap(
    sql: Sql, table: str, root: str, before: Sequence[StoredPartition], merges: Sequence[Merge]
) -> None:
    """Step 3: a definition of `table` with the merged partitions instead of their
    sources, every partition in its folder under the location `root`, swapped in. No
    new definition exists (compact_table cleaned a killed one's)."""
    steps.reached("raw_compaction.swap")
    new = table + NEW_SUFFIX
    replaced = {p.path for m in merges for p in m.sources}
    partitions = [(p.day, p.slot) for p in before if p.path not in replaced]
    partitions += [(m.day, m.slot) for m in merges]
    location = string_literal(root)
    sql(f"create table {quoted_table(new)} like {quoted_table(table)} location {location}")
    # `like` copies no table property: the folder a migration in this compaction left
    # was forgotten, and stayed on disk for good (found by review).
    retired = _retired_root(sql, table)
    if retired is not None:
        set_table_properties(sql, new, {RETIRED_ROOT: retired})
    added = " ".join(partition_spec(LAYOUT, values) for values in sorted(partitions, key=repr))
    sql(f"alter table {quoted_table(new)} add if not exists {added}")
    swap_in(sql, new, table)


def clean_compaction(sql: Sql, table: str) -> None:
    """What undoes or finishes a killed compaction (the interim table is its mark,
    dropped last): drop the new and retired definitions, then the interim definition.
    Its rows' folders, which no partition reads, go with the next removal (step 4),
    which every compaction starts with."""
    drop_table(sql, table + NEW_SUFFIX)
    drop_table(sql, table + RETIRED_SUFFIX)  # a swap killed before its last step
    drop_table(sql, table + COMPACTING_SUFFIX)


def _remove_unread_folders(sql: Sql, table: str, root: str) -> None:
    """Step 4: on a local disk, every partition folder under the table's location `root`
    that the table does not read (sources of the last compaction's merges; a killed
    compaction's rows, or a killed batch's), and the folders of killed write jobs.
    Elsewhere only Spark reaches the files, and SQL cannot list them."""
    steps.reached("raw_compaction.clean")
    folder = local_path(root)
    if folder is None:
        _LOG.warning(
            f"{table}: its location {root} is not on a local disk, where SQL cannot list"
            " files: remove the partition folders under it that `show partitions` no"
            " longer names with the storage's own tools"
        )
        return
    read = {folder / row[0] for row in sql(f"show partitions {quoted_table(table)}")}
    for partition in folder.glob("*=*/*=*"):
        if partition not in read:
            shutil.rmtree(partition, ignore_errors=True)
    for day in folder.glob("*=*"):
        if day.is_dir() and not any(day.iterdir()):
            day.rmdir()
    for job in job_folders(str(folder)) or []:  # of a write killed mid-job
        shutil.rmtree(job, ignore_errors=True)


# A table property naming the folder a layout migration left, for the next compaction.
RETIRED_ROOT = "dynamic_ddl.retired_root"


def migrate_layout(sql: Sql, table: str) -> bool:
    """Copy a table partitioned by (`_event_date`, `_batch_id`), the layout before
    compaction, into the current one at the next `v<n>` folder, and swap it in; False
    when the table has the current layout already. Under the topic's lock."""
    columns = table_columns(sql, table)
    names = [name for name, _ in columns]
    if SLOT_COLUMN in names or BATCH_ID_COLUMN not in names:
        return False
    steps.reached("raw_layout.copy")
    staging = table + LAYOUT_SUFFIX
    old_root = table_location(sql, table)
    new_root = _next_root(old_root)
    data = [(n, t) for n, t in columns if n not in (EVENT_DATE_COLUMN, BATCH_ID_COLUMN)]
    at = next((i + 1 for i, (n, _) in enumerate(data) if n == "_ingested_at"), 0)
    data.insert(at, (BATCH_ID_COLUMN, "string"))
    drop_table(sql, staging)
    sql(create_table_sql(quoted_table(staging), [*data, *PARTITION_COLUMNS], new_root))
    set_table_properties(sql, staging, {RETIRED_ROOT: old_root})
    selected = ", ".join(quoted_identifier(n) for n, _ in data)
    sql(
        f"insert overwrite table {quoted_table(staging)} select {selected},"
        f" {quoted_identifier(EVENT_DATE_COLUMN)}, {quoted_identifier(BATCH_ID_COLUMN)}"
        f" from {quoted_table(table)}"
    )
    steps.reached("raw_layout.swap")
    swap_in(sql, staging, table)
    # The old folder stays until the next compaction (_remove_retired_root): a query
    # that listed the old partitions before the swap may read their folders after it,
    # and Spark takes a folder that is gone for an empty partition (rows missed, no
    # error; found by review, as for compaction's merged folders).
    return True


def _remove_retired_root(sql: Sql, table: str) -> None:
    """Remove the folder a layout migration moved `table` away from (named in its
    RETIRED_ROOT property), on a local disk; elsewhere SQL cannot delete files. Never
    the table's folder nor one holding it."""
    retired = _retired_root(sql, table)
    if retired is None:
        return
    steps.reached("raw_compaction.remove_retired")
    folder, root = local_path(retired), local_path(table_location(sql, table))
    if folder is not None and root is not None and folder != root and folder not in root.parents:
        shutil.rmtree(folder, ignore_errors=True)
    elif folder is None:
        _LOG.warning(
            f"{table}: the folder it was moved away from, {retired}, is not on a local"
            " disk: remove it with the storage's own tools"
        )
    sql(f"alter table {quoted_table(table)} unset tblproperties ({string_literal(RETIRED_ROOT)})")


def _retired_root(sql: Sql, table: str) -> str | None:
    """The folder a layout migration moved `table` away from, if not removed yet."""
    return recorded_properties(sql, table, [RETIRED_ROOT]).get(RETIRED_ROOT)


def _next_root(location: str) -> str:
    """The folder a table moves to: `.../v<n+1>` after `.../v<n>`; beside a folder
    without a version (never inside it: the old folder is removed once moved), by a
    name no table's folder has: `raw_t__items_v2` would be the folder of the child
    table of an array `items_v2` (found by review); no table name holds a dot.

    Example:
        >>> _next_root("file:/w/raw/raw_t/v1"), _next_root("file:/w/raw/raw_t")
        ('file:/w/raw/raw_t/v2', 'file:/w/raw/raw_t.v2')
    """
    found = re.fullmatch(r"(.*)/v(\d+)", location)
    if found is None:
        return f"{location}.v2"
    return f"{found.group(1)}/v{int(found.group(2)) + 1}"
