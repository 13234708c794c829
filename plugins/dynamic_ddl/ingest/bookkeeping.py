"""The file ledger, the schema registry and the quarantines (of lines, of values) as tables.

One of each per schema, shared by every topic and partitioned by topic, so
raw models of different topics never write the same partition. The ledger
holds a row per file per batch and is partitioned by batch too: a batch
writes its own entries only. Reading a small file per batch made a run's cost grow
with the topic's history, so the ledger is two tables read as one set: the newest
batches (ARCHIVE_AFTER per topic, plus a run's own, a partition each) and the archive,
which a run rewrites as one new generation per topic when the batches pass that bound
(archive_ledger; docs/decisions/0005, "A batch as the ledger ages").
The registry holds a row per column (bounded by the column cap): each write
overwrites the topic's partition.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dynamic_ddl import steps
from dynamic_ddl.catalog import (
    RETIRED_SUFFIX,
    Sql,
    drop_table,
    partition_columns,
    read_settled,
    recover_swap,
    spark_sql,
    swap_in,
    table_exists,
)
from dynamic_ddl.ingest.ledger import LedgerEntry
from dynamic_ddl.ingest.local_rows import local_dataframe
from dynamic_ddl.ingest.tables import aligned
from dynamic_ddl.ingest.topics import BOOKKEEPING_NAMES
from dynamic_ddl.locks import LockSettings, held
from dynamic_ddl.schema.registry import RegistryEntry
from dynamic_ddl.sql_text import (
    partition_spec,
    path_values,
    quoted_identifier,
    quoted_table,
    sql_literal,
    string_literal,
)

LEDGER_COLUMNS = (
    "path string, size_bytes bigint, modified_at double, checksum string, line_count bigint, "
    "batch_id string, state string, recorded_at timestamp, first_line bigint, topic string"
)
LEDGER_PARTITIONS = ("topic", "batch_id")
# The archive: the ledger's columns, partitioned by topic and generation instead.
LEDGER_ARCHIVE_COLUMNS = LEDGER_COLUMNS + ", generation bigint"
LEDGER_ARCHIVE_PARTITIONS = ("topic", "generation")
# Batch partitions a topic's ledger keeps before a run archives its committed ones.
ARCHIVE_AFTER = 32
# Columns added to the ledger since it was first created: (column, type).
ADDED_LEDGER_COLUMNS = (("first_line", "bigint"),)
REGISTRY_COLUMNS = (
    "table_name string, json_path string, json_keys array<string>, column_name string, "
    "data_type string, first_seen_batch string, last_seen_batch string, status string, "
    "topic string"
)
QUARANTINE_COLUMNS = (
    "source_file string, line_number bigint, raw_text string, raw_base64 string, reason string, "
    "quarantined_at timestamp, topic string, batch_id string"
)
QUARANTINED_VALUES_COLUMNS = (
    "source_file string, line_number bigint, json_path string, element_index int, "
    "value string, reason string, quarantined_at timestamp, topic string, batch_id string"
)


@dataclass(frozen=True)
class BookkeepingTables:
    """Where one schema keeps its ledger, registry and quarantines."""

    ledger: str
    ledger_archive: str  # the ledger's older committed batches (archive_ledger)
    registry: str
    quarantine: str  # lines that did not become rows
    quarantined_values: str  # values `discard_value` kept out of accepted rows

    @classmethod
    def in_schema(cls, schema: str) -> BookkeepingTables:
        return cls(**{role: f"{schema}.{name}" for role, name in BOOKKEEPING_NAMES.items()})


def bookkeeping_ddl(tables: BookkeepingTables) -> list[str]:
    """`CREATE TABLE IF NOT EXISTS` for the five tables, the ledger first (run by dbt's
    on-run-start too)."""
    return [
        f"create table if not exists {table} ({columns}) using parquet "
        f"partitioned by ({partitions})"
        for table, columns, partitions in (
            (tables.ledger, LEDGER_COLUMNS, ", ".join(LEDGER_PARTITIONS)),
            (tables.ledger_archive, LEDGER_ARCHIVE_COLUMNS, ", ".join(LEDGER_ARCHIVE_PARTITIONS)),
            (tables.registry, REGISTRY_COLUMNS, "topic"),
            (tables.quarantine, QUARANTINE_COLUMNS, "topic, batch_id"),
            (tables.quarantined_values, QUARANTINED_VALUES_COLUMNS, "topic, batch_id"),
        )
    ]


def unlocked_bookkeeping_ddl(sql: Sql, tables: BookkeepingTables) -> list[str]:
    """bookkeeping_ddl for a caller without the ledger's lock (dbt's on-run-start): the
    ledger's left out while a migration a killed run left holds it under its retired
    name (found by review: an empty ledger made there was taken for the migrated one,
    and every topic's inbox was ingested again). Its raw models settle it."""
    ledger_ddl, *other_ddl = bookkeeping_ddl(tables)
    if table_exists(sql, tables.ledger + RETIRED_SUFFIX):
        return other_ddl
    return [ledger_ddl, *other_ddl]


def create_bookkeeping_tables(spark: SparkSession, tables: BookkeepingTables) -> None:
    """Create the five tables if they do not exist yet; bring an older ledger up to date.

    Two raw models may get here at once (dbt threads, two runs): of two
    creates of one table one fails, and either way the table is as wanted.
    The ledger is settled under its lock when it is missing, of an older
    layout (partitioned by topic alone, before batches had partitions, or
    without a newer column) or left half migrated by a killed run.
    """
    sql = spark_sql(spark)
    ledger_ddl, *other_ddl = bookkeeping_ddl(tables)
    for statement in other_ddl:
        _tolerating_a_racing_twin(spark, statement)
    add_missing_ledger_columns(spark, tables.ledger_archive)
    if not _ledger_ready(sql, tables.ledger):
        with held(sql, tables.ledger, LockSettings.from_env()):
            _settle_ledger(spark, tables.ledger, ledger_ddl)


def _ledger_ready(sql: Sql, ledger: str) -> bool:
    """Whether the ledger exists in today's layout and no migration was left half done."""
    schema, name = ledger.split(".")
    pattern = string_literal(f"{name}*")
    names = {
        row[1].lower() for row in sql(f"show tables in {quoted_identifier(schema)} like {pattern}")
    }
    return (
        name in names
        and name + RETIRED_SUFFIX not in names
        and tuple(partition_columns(sql, ledger)) == LEDGER_PARTITIONS
    )


def _settle_ledger(spark: SparkSession, ledger: str, ddl: str) -> None:
    """Under the ledger's lock: finish a migration a killed run left (the ledger put back
    if it lost its name between the swap's renames, a retired copy dropped), create the
    ledger or migrate it to today's layout."""
    sql = spark_sql(spark)
    retired = ledger + RETIRED_SUFFIX
    if _emptied(sql, ledger, retired):  # made anew between the swap's renames
        steps.reached("ledger_migration.drop_empty")
        drop_table(sql, ledger)
    recover_swap(sql, ledger)
    steps.reached("ledger_migration.drop_retired")
    drop_table(sql, retired)
    spark.sql(ddl)
    add_missing_ledger_columns(spark, ledger)
    if tuple(partition_columns(sql, ledger)) != LEDGER_PARTITIONS:
        _migrate_ledger(spark, ledger)


def add_missing_ledger_columns(spark: SparkSession, table: str) -> None:
    """Add to the ledger or its archive the columns added since it was created
    (ADDED_LEDGER_COLUMNS): the two are read as one set."""
    for column, data_type in ADDED_LEDGER_COLUMNS:
        if column not in spark.table(table).columns:
            spark.sql(f"alter table {table} add columns ({quoted_identifier(column)} {data_type})")


def _emptied(sql: Sql, ledger: str, retired: str) -> bool:
    """Whether the ledger is empty while its retired copy holds entries: someone made
    it anew while a killed migration had it under the retired name (it is never emptied
    otherwise: a batch replaces its own entries only)."""

    def holds_rows(table: str) -> bool:
        return table_exists(sql, table) and bool(sql(f"select 1 from {table} limit 1"))

    return holds_rows(retired) and table_exists(sql, ledger) and not holds_rows(ledger)


def _migrate_ledger(spark: SparkSession, ledger: str) -> None:
    """Copy a ledger partitioned by topic alone into one partitioned by (topic, batch_id),
    and swap it in (catalog.swap_in)."""
    sql = spark_sql(spark)
    built = f"{ledger}__dbt_new"
    steps.reached("ledger_migration.build")
    drop_table(sql, built)
    names = [quoted_identifier(c.split()[0]) for c in LEDGER_COLUMNS.split(", ")]
    # Entries from before `first_line` were whole files.
    values = [f"coalesce({n}, 1)" if n == "`first_line`" else n for n in names]
    spark.sql(
        f"create table {built} ({LEDGER_COLUMNS}) using parquet"
        f" partitioned by ({', '.join(LEDGER_PARTITIONS)})"
    )
    spark.sql(f"insert into {built} ({', '.join(names)}) select {', '.join(values)} from {ledger}")
    swap_in(sql, built, ledger)


def _tolerating_a_racing_twin(spark: SparkSession, statement: str) -> None:
    """Run DDL; an error saying another run did the same thing first is no error."""
    try:
        spark.sql(statement)
    except Exception as error:
        if "ALREADY_EXISTS" not in str(error).upper():
            raise


def _topic_table(spark: SparkSession, table: str, topic: str) -> DataFrame:
    """The topic's partition of a bookkeeping table, as it is now."""
    spark.sql(f"refresh table {table}")  # another session may have rewritten it
    return spark.table(table).where(F.col("topic") == topic)


# A ledger row's columns in LedgerEntry's field order.
LEDGER_ENTRY_COLUMNS = (
    "path",
    "size_bytes",
    "modified_at",
    "checksum",
    "line_count",
    "batch_id",
    "state",
    "recorded_at",
    "first_line",
)


def ledger_entry(row: tuple) -> LedgerEntry:
    """A ledger row (LEDGER_ENTRY_COLUMNS, in order) as a LedgerEntry."""
    *fields, first_line = row
    return LedgerEntry(*fields, first_line=first_line or 1)


def read_ledger(spark: SparkSession, tables: BookkeepingTables, topic: str) -> list[LedgerEntry]:
    """The topic's ledger entries, its batches' and its archive's, each once (a run killed
    while archiving leaves some in both; an archive of an older version may be missing).

    Under the topic's lock: only its holder archives, so the two tables agree."""
    read = _topic_table(spark, tables.ledger, topic).select(*LEDGER_ENTRY_COLUMNS)
    if spark.catalog.tableExists(tables.ledger_archive):
        archived = _topic_table(spark, tables.ledger_archive, topic)
        read = read.unionByName(archived.select(*LEDGER_ENTRY_COLUMNS))
    rows = dict.fromkeys(tuple(row) for row in read.collect())
    return [ledger_entry(row) for row in rows]


def ledger_entries_sql(sql: Sql, tables: BookkeepingTables) -> str:
    """A relation (a subquery) of every ledger entry, in LEDGER_ENTRY_COLUMNS and its
    topic, each once: the batches' and the archive's (when the schema has one yet)."""
    columns = ", ".join((*LEDGER_ENTRY_COLUMNS, "topic"))
    entries = f"select {columns} from {quoted_table(tables.ledger)}"
    if table_exists(sql, tables.ledger_archive):
        entries += f" union select {columns} from {quoted_table(tables.ledger_archive)}"
    return f"({entries})"


def read_ledger_unlocked(
    sql: Sql, tables: BookkeepingTables, query: Callable[[str], str]
) -> list[LedgerEntry]:
    """The entries `query(<every entry: ledger_entries_sql>)` reads (LEDGER_ENTRY_COLUMNS),
    for a reader without the topic's lock: read again while the archive changed during
    the read. A run archiving writes a generation before it drops the batches it holds,
    so a read that listed the batches after that drop and the archive before that write
    would miss them; an unchanged list of generations rules that out. The query is made
    anew each time: the archive may have been created meanwhile (review)."""
    while True:
        before = _generations(sql, tables.ledger_archive)
        read = tables.ledger if before is None else (tables.ledger, tables.ledger_archive)
        rows = read_settled(sql, read, query(ledger_entries_sql(sql, tables)))
        if _generations(sql, tables.ledger_archive) == before:
            return [ledger_entry(tuple(row)) for row in rows]


def _generations(sql: Sql, archive: str) -> list[str] | None:
    """The archive's partitions, every topic's (None when there is no archive yet)."""
    if not table_exists(sql, archive):
        return None
    return sorted(row[0] for row in sql(f"show partitions {quoted_table(archive)}"))


def ledger_rows_of_file_sql(entries: str, path: str) -> str:
    """The rows of one inbox file (LEDGER_ENTRY_COLUMNS), any topic, of `entries`
    (ledger_entries_sql)."""
    columns = ", ".join(LEDGER_ENTRY_COLUMNS)
    return f"select {columns} from {entries} as entries where path = {string_literal(path)}"


def ledger_rows_of_continued_files_sql(entries: str) -> str:
    """The rows (LEDGER_ENTRY_COLUMNS) of `entries` (ledger_entries_sql) of every file one
    of whose entries starts past its first line: grown, or another file renamed, moved or
    rotated (lineage.moved_to tells them apart), any topic."""
    columns = ", ".join(LEDGER_ENTRY_COLUMNS)
    continued = f"select path from {entries} as continued where first_line > 1"
    return f"select {columns} from {entries} as entries where path in ({continued})"


def write_ledger_batch(
    spark: SparkSession, table: str, topic: str, entries: list[LedgerEntry]
) -> None:
    """Replace the ledger partition of the entries' batch (one batch id) with them."""
    now = datetime.now(UTC)
    rows = [
        (
            e.path,
            e.size,
            e.mtime,
            e.checksum,
            e.line_count,
            e.batch_id,
            e.state,
            e.recorded_at or now,
            e.first_line,
            topic,
        )
        for e in entries
    ]
    if len({e.batch_id for e in entries}) != 1:
        raise ValueError("ledger entries are written one batch at a time")
    written = local_dataframe(spark, rows, LEDGER_COLUMNS)
    # Not `insert overwrite ... partition (<every column> = ...)`, which would not list the
    # table's partitions: a static overwrite deletes the partition before its job runs, and
    # a kill then leaves a batch without its entries (docs/decisions/0005).
    aligned(spark, table, written).write.insertInto(table, overwrite=True)


def read_registry(spark: SparkSession, table: str, topic: str) -> list[RegistryEntry]:
    """The topic's registry rows, in the order their columns were added."""
    return [
        RegistryEntry(
            topic,
            row.table_name,
            tuple(row.json_keys),
            row.column_name,
            row.data_type,
            row.first_seen_batch,
            row.last_seen_batch,
            row.status,
        )
        for row in sorted(
            _topic_table(spark, table, topic).collect(),
            key=lambda r: (r.table_name, r.first_seen_batch, r.json_keys),
        )
    ]


def write_registry(
    spark: SparkSession, table: str, topic: str, entries: list[RegistryEntry]
) -> None:
    """Replace the topic's registry rows."""
    rows = [
        (
            e.table_name,
            e.json_path,
            list(e.json_keys),
            e.column_name,
            e.data_type,
            e.first_seen_batch,
            e.last_seen_batch,
            e.status,
            topic,
        )
        for e in entries
    ]
    _overwrite_topic(spark, table, topic, rows, REGISTRY_COLUMNS)


def _overwrite_topic(
    spark: SparkSession, table: str, topic: str, rows: list[tuple], schema: str
) -> None:
    """Replace the topic's partition with `rows` (dropping it when there are none)."""
    if not rows:
        spark.sql(f"alter table {table} drop if exists {partition_spec(['topic'], [topic])}")
        return
    local_dataframe(spark, rows, schema).write.insertInto(table, overwrite=True)


def write_quarantine(
    spark: SparkSession, table: str, rows: DataFrame | None, topic: str, batch_id: str
) -> None:
    """Replace the batch's partition of a quarantine table with `rows` (None: nothing was
    quarantined, so only an earlier attempt's partition is dropped, with no Spark job)."""
    partition = partition_spec(["topic", "batch_id"], [topic, batch_id])
    spark.sql(f"alter table {table} drop if exists {partition}")
    if rows is not None:
        aligned(spark, table, rows).write.insertInto(table, overwrite=True)


def newest_committed_batch(sql: Sql, table: str) -> tuple[bool, str | None]:
    """Whether `table` (`schema.name`) is a raw or child table the registry knows, and
    the newest batch id its topic's ledger has committed (None before the first).

    A batch's rows are visible before its ledger entry is committed: a reader in
    another run bounds itself by this, so it never takes half of a batch that is
    still being written.
    """
    schema, name = table.split(".")
    tables = BookkeepingTables.in_schema(schema)
    if not (table_exists(sql, tables.registry) and table_exists(sql, tables.ledger)):
        return False, None
    # Other topics' raw models may be rewriting their partitions of both tables now.
    topics = [
        row[0]
        for row in read_settled(
            sql,
            tables.registry,
            f"select distinct topic from {tables.registry} where table_name = {sql_literal(name)}",
        )
    ]
    if not topics:
        return False, None
    if tuple(partition_columns(sql, tables.ledger)) != LEDGER_PARTITIONS:  # not migrated yet
        (row,) = read_settled(
            sql,
            tables.ledger,
            f"select max(batch_id) from {tables.ledger} where state = 'committed'"
            f" and topic in ({', '.join(sql_literal(topic) for topic in topics)})",
        )
        return True, row[0]
    committed = [newest_committed_of_topic(sql, tables, topic) for topic in topics]
    return True, max((batch for batch in committed if batch is not None), default=None)


# Batches whose entries newest_committed_of_topic reads at a time, newest first.
NEWEST_READ = 20


def newest_committed_of_topic(sql: Sql, tables: BookkeepingTables, topic: str) -> str | None:
    """The newest batch id the ledger has committed for `topic` (None before the first).

    The metastore lists the topic's batches (a partition each); only the newest
    are read, NEWEST_READ at a time, until one is committed (most often the first or
    the second: a run still writing, or a killed one, leaves its batch pending).
    Every landing model asks at every run, and reading the state of every entry
    read a small file per batch the topic ever had: 2.8 s at 4,013 batches, then
    0.5 s (docs/decisions/0005). archive_ledger never archives the newest committed
    batch; the archive is read only when none is listed (a run archived the batches
    this read listed, after committing a newer one it did not).
    """
    ledger = tables.ledger
    listed = _partitions_of_topic(sql, ledger, LEDGER_PARTITIONS, topic)
    batches = sorted((partition["batch_id"] for partition in listed), reverse=True)
    for start in range(0, len(batches), NEWEST_READ):
        newest = ", ".join(sql_literal(batch) for batch in batches[start : start + NEWEST_READ])
        (row,) = read_settled(
            sql,
            ledger,
            f"select max(batch_id) from {quoted_table(ledger)} where state = 'committed'"
            f" and topic = {sql_literal(topic)} and batch_id in ({newest})",
        )
        if row[0] is not None:
            return row[0]
    if not table_exists(sql, tables.ledger_archive):
        return None
    (row,) = read_settled(
        sql,
        (tables.ledger, tables.ledger_archive),
        f"select max(batch_id) from {ledger_entries_sql(sql, tables)} as entries"
        f" where state = 'committed' and topic = {sql_literal(topic)}",
    )
    return row[0]


def archive_ledger(spark: SparkSession, tables: BookkeepingTables, topic: str) -> int:
    """Move the topic's committed batches, but the newest, from the ledger's batch
    partitions into a new generation of its archive, once it keeps more than
    ARCHIVE_AFTER batches; the number of batches moved.

    Under the topic's lock (its raw model's run, after its batches). Every step
    keeps each entry in one table at least, so readers of both (read_ledger,
    ledger_entries_sql) see every entry at every step, and a killed run's
    leftovers (two generations, entries in both tables) are read once and
    folded into the next generation by the next run:
    1. write generation g + 1: every generation's entries and the moved batches';
    2. drop the older generations;
    3. drop the moved batches' partitions.
    A pending batch (a killed run's, rerun later) stays where its rerun writes it.
    """
    sql = spark_sql(spark)
    if len(_partitions_of_topic(sql, tables.ledger, LEDGER_PARTITIONS, topic)) <= ARCHIVE_AFTER:
        return 0
    spark.sql(f"refresh table {quoted_table(tables.ledger)}")
    states = (
        spark.table(tables.ledger)
        .where(F.col("topic") == topic)
        .groupBy("batch_id")
        .agg(F.min(F.col("state") == "committed").alias("committed"))
        .where("committed")
        .collect()
    )
    moved = sorted(row.batch_id for row in states)[:-1]  # the newest committed stays
    if not moved:
        return 0
    listed = _partitions_of_topic(sql, tables.ledger_archive, LEDGER_ARCHIVE_PARTITIONS, topic)
    generations = [int(partition["generation"]) for partition in listed]
    generation = max(generations, default=0) + 1
    spark.sql(f"refresh table {quoted_table(tables.ledger_archive)}")
    archived = _topic_table(spark, tables.ledger_archive, topic).drop("generation")
    batches = spark.table(tables.ledger).where(
        (F.col("topic") == topic) & F.col("batch_id").isin(moved)
    )
    entries = archived.unionByName(batches).distinct()
    # Materialized first: Spark refuses to overwrite a table the same job reads.
    written = entries.withColumn("generation", F.lit(generation)).coalesce(1).localCheckpoint()
    steps.reached("ledger_archive.write_generation")
    aligned(spark, tables.ledger_archive, written).write.insertInto(
        tables.ledger_archive, overwrite=True
    )
    steps.reached("ledger_archive.drop_older_generations")
    _drop_partitions(
        sql, tables.ledger_archive, LEDGER_ARCHIVE_PARTITIONS, [[topic, g] for g in generations]
    )
    steps.reached("ledger_archive.drop_moved_batches")
    _drop_partitions(sql, tables.ledger, LEDGER_PARTITIONS, [[topic, b] for b in moved])
    return len(moved)


# Partitions one `alter table ... drop` names at most.
DROPPED_AT_ONCE = 500


def _drop_partitions(sql: Sql, table: str, columns: Sequence[str], values: list[list]) -> None:
    """Drop the partitions (`values` of `columns` each), DROPPED_AT_ONCE per statement."""
    for start in range(0, len(values), DROPPED_AT_ONCE):
        specs = ", ".join(
            partition_spec(columns, value) for value in values[start : start + DROPPED_AT_ONCE]
        )
        sql(f"alter table {quoted_table(table)} drop if exists {specs}")


def _partitions_of_topic(
    sql: Sql, table: str, columns: Sequence[str], topic: str
) -> list[dict[str, str]]:
    """The topic's partitions of a bookkeeping table partitioned by `columns` (topic
    first), as the metastore lists them: each a dict of its values, as text."""
    listed = sql(f"show partitions {quoted_table(table)} {partition_spec(['topic'], [topic])}")
    return [dict(zip(columns, path_values(row[0]), strict=True)) for row in listed]
