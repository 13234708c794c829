"""One raw model's run: ingest a topic's new inbox files, batch by batch, exactly once.

The topic's lock is held for the whole run, and the ledger is read once,
under it. For each batch (pending ones from an interrupted run first, then
new files), its steps in the modules named:

1. record its files in the ledger as `pending` (with their line counts), in
   the batch's own ledger partition (bookkeeping.py);
2. infer the batch's schema, plan the registry (new columns, stale ones,
   and paths whose values conflict with their column's type, parsed as
   text) (planning.py), and where each path's mode sends what would change
   the schema (schema/modes.py); a plan that changes a frozen path fails
   the batch here, once step 3 has counted the values;
3. parse every line once, into the batch's staging Parquet (each line with
   where it was read, its parsed record or its reason for quarantine,
   `discard_row` included; readable event times as ISO text), observing on
   the way which new paths hold values, which values misfit their column,
   and which new text paths hold only times (timestamp columns);
   the raw, child and quarantine writes all read it, and no JSON again
   (staging.py);
4. write the registry, then create the raw table and its child tables, or
   `ADD COLUMNS` to them (new paths, and the `__text` companions of
   conflicting values): a column is registered before it exists, so a rerun
   plans against every column a killed run added;
5. write raw rows, child rows, quarantine rows and quarantined values
   (`discard_value`), each into the batch's own partitions only (a
   quarantine is skipped when nothing went there) (writing.py);
6. mark the ledger entries `committed`; drop the staging files.

A run killed anywhere leaves the batch `pending`; the next run repeats it
under the same batch id, with its files as they are then: it first drops
every partition the killed run wrote (a file may have changed or gone
since), so the result is the result of an uninterrupted run over the inbox
as it is. A pending batch whose files are all gone leaves nothing, its
ledger entries included (`forget_batch`).

A model configured with `compact_every: N` compacts its tables, still under
the lock, when its run crosses every N-th committed batch (compaction.py).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructType, TimestampType

from dynamic_ddl import steps
from dynamic_ddl.catalog import RETIRED_SUFFIX, drop_table, recover_swap, spark_sql
from dynamic_ddl.ingest.bookkeeping import (
    archive_ledger,
    create_bookkeeping_tables,
    read_ledger,
    read_registry,
    write_ledger_batch,
    write_quarantine,
    write_registry,
)
from dynamic_ddl.ingest.compaction import compact_topic
from dynamic_ddl.ingest.inbox_links import link_files, link_folder
from dynamic_ddl.ingest.ledger import (
    COMMITTED,
    PENDING,
    Batch,
    InboxFile,
    LedgerEntry,
    finished_since_scan,
    plan_batches,
    scan_inbox,
)
from dynamic_ddl.ingest.local_rows import local_dataframe
from dynamic_ddl.ingest.parse import (
    RECORD,
    changed_since_scan,
    empty_strings_as_text,
    exact_numbers,
    grown_since_scan,
    infer_schema,
    parse_schema,
)
from dynamic_ddl.ingest.planning import (
    admitted_paths,
    all_leaves,
    empty_objects_nulled,
    ignored_hints,
    misfit_checks,
    parse_types,
    plan_tables,
    rewrite_leaves,
    routed_arrays_as_text,
    row_discards,
    text_paths,
    time_candidates,
    time_misfit_checks,
    times_as_iso,
    timestamp_text_paths,
)
from dynamic_ddl.ingest.raw_rows import BatchContext
from dynamic_ddl.ingest.settings import IngestSettings, dotted, unmatched_key_paths
from dynamic_ddl.ingest.staging import cut_lines_unmeasured, stage_batch, staging_location
from dynamic_ddl.ingest.tables import drop_batch_partitions, remove_local_dir
from dynamic_ddl.ingest.topics import ConfigError, TopicConfig
from dynamic_ddl.ingest.writing import prepare_tables, write_batch
from dynamic_ddl.locks import held
from dynamic_ddl.schema.event_time import lossy_pattern
from dynamic_ddl.schema.modes import SchemaFrozen, frozen_changes, frozen_message, plan_routes
from dynamic_ddl.schema.registry import STALE, RegistryEntry, SchemaPlan
from dynamic_ddl.sql_text import partition_spec, quoted_identifier, quoted_table, string_literal

# Progress of long runs, for whoever watches `dbt run` (bridged into dbt's log by
# adapter/python_jobs.py) or calls ingest_topic with logging configured.
PROGRESS = logging.getLogger("dynamic_ddl.ingest")
# Stagings of a batch whose files grow while they are read, before the run gives up.
STAGE_ATTEMPTS = 3

SUMMARY_COLUMNS = (
    "topic string, batch_id string, files bigint, input_lines bigint, raw_rows bigint, "
    "quarantined_lines bigint, columns_added bigint, values_as_text bigint"
)


@dataclass(frozen=True)
class BatchSummary:
    """What one batch did, for the run summary and the invariant check."""

    topic: str
    batch_id: str
    files: int
    input_lines: int
    raw_rows: int
    quarantined_lines: int
    columns_added: int
    # Records with a value their column's type does not hold (kept in `__text`), summed
    # over such paths; a child table's path counts records, not elements.
    values_as_text: int


def ingest_topic(spark: SparkSession, config: dict[str, Any]) -> DataFrame:
    """Ingest every new file of the topic; one summary row per batch (none when nothing is new)."""
    settings = IngestSettings.from_config(config)
    check_declared_formats(spark, settings.topic)
    create_bookkeeping_tables(spark, settings.bookkeeping)
    with held(spark_sql(spark), settings.table, settings.lock):
        mend_interrupted_swaps(spark, settings)
        # Read once: under the lock, only this run changes the topic's ledger.
        ledger = read_ledger(spark, settings.bookkeeping, settings.topic.name)
        batches = batches_to_ingest(settings, ledger)
        summaries: list[BatchSummary] = []
        for number, batch in enumerate(batches, start=1):
            PROGRESS.info(batch_started(settings.table, batch, number, len(batches)))
            started = time.monotonic()
            summaries.append(ingest_batch(spark, settings, batch))
            PROGRESS.info(batch_done(settings.table, summaries, time.monotonic() - started))
        committed = {entry.batch_id for entry in ledger if entry.state == COMMITTED}
        taken = {summary.batch_id for summary in summaries if summary.files}
        if settings.compaction.due(len(committed), len(committed | taken)):
            compaction = settings.compaction
            # Under this run's lock. A batch left pending whose files this run did not
            # find stays pending: its partitions are left to its rerun.
            pending = {entry.batch_id for entry in ledger} - committed - taken
            for result in compact_topic(
                spark_sql(spark),
                settings.table,
                compaction.after_days,
                compaction.target_mb,
                pending=pending,
            ):
                PROGRESS.info(result.message())
        archived = archive_ledger(spark, settings.bookkeeping, settings.topic.name)
        if archived:
            PROGRESS.info(
                f"{settings.table}: the ledger's entries of {archived} committed batches moved"
                f" to {settings.bookkeeping.ledger_archive}"
            )
    rows = [tuple(vars(summary).values()) for summary in summaries]
    return local_dataframe(spark, rows, SUMMARY_COLUMNS)


def check_declared_formats(spark: SparkSession, topic: TopicConfig) -> None:
    """Refuse a topic whose `event_time_format` or `time_formats` Spark cannot use as a
    datetime pattern, or that would read more digits than a timestamp holds, naming
    it, before any batch (each would fail mid-batch, or round times)."""
    where = f"vars.raw_topics.{topic.name} (event_time_format or time_formats)"
    guide = "see https://spark.apache.org/docs/latest/sql-ref-datetime-pattern.html"
    for pattern in topic.event_time_formats:
        if lossy_pattern(pattern):
            raise ConfigError(
                f"{where}: {pattern!r} reads more than 6 fraction digits (SSSSSS), which a"
                " timestamp cannot hold; declare at most SSSSSS and keep finer times as text."
            )
        try:
            spark.range(1).select(F.try_to_timestamp(F.lit(""), F.lit(pattern))).collect()
        except Exception as error:  # Spark raises several kinds for a pattern
            reason = str(error).strip().splitlines()[0]
            if "DATETIME_PATTERN" not in reason and "DATETIME_WEEK_BASED" not in reason:
                raise
            raise ConfigError(
                f"{where}: {pattern!r} is not a Spark datetime pattern ({reason}); {guide}"
            ) from None


def batch_started(table: str, batch: Batch, number: int, count: int) -> str:
    """A progress line: which batch starts, and how big it is.

    Example:
        >>> from dynamic_ddl.ingest.ledger import InboxFile
        >>> files = (InboxFile("a.json", 3 << 20, 0.0, "", 1200),)
        >>> batch_started("raw.raw_t", Batch("b7", files), 2, 3)
        'raw.raw_t: batch 2 of 3 (b7): 1 files, 3.0 MB, 1,200 lines'
    """
    megabytes = sum(f.size for f in batch.files) / 2**20
    lines = sum(f.line_count for f in batch.files)
    return (
        f"{table}: batch {number} of {count} ({batch.batch_id}): "
        f"{len(batch.files)} files, {megabytes:.1f} MB, {lines:,} lines"
    )


def batch_done(table: str, summaries: list[BatchSummary], seconds: float) -> str:
    """A progress line: the last batch committed, and the run's totals so far."""
    last = summaries[-1]
    accepted = sum(s.raw_rows for s in summaries)
    quarantined = sum(s.quarantined_lines for s in summaries)
    return (
        f"{table}: batch {last.batch_id} committed in {seconds:.1f} s: "
        f"{last.raw_rows:,} lines accepted, {last.quarantined_lines:,} quarantined, "
        f"{last.columns_added} columns added, {last.values_as_text:,} values kept as text "
        f"(run so far: {accepted:,} accepted, {quarantined:,} quarantined)"
    )


def mend_interrupted_swaps(spark: SparkSession, settings: IngestSettings) -> None:
    """Put back the topic's tables a run killed in the middle of a swap left
    without their name (catalog.recover_swap), before anything reads them; drop the
    retired definition a swap killed after its renames left beside its table (raw
    tables are external: their files stay, for compaction to remove; found by the
    kill test once it enumerated a layout migration's swap)."""
    schema, bare = settings.table.split(".")
    pattern = string_literal(f"{bare}*{RETIRED_SUFFIX}")
    rows = spark.sql(f"show tables in {quoted_identifier(schema)} like {pattern}").collect()
    sql = spark_sql(spark)
    for row in rows:
        retired = row[1].lower()
        table = retired.removesuffix(RETIRED_SUFFIX)
        if retired.endswith(RETIRED_SUFFIX) and of_topic(bare, table):
            recover_swap(sql, f"{schema}.{table}")
            drop_table(sql, f"{schema}.{retired}")  # gone already, if it was put back


def named_after(bare: str, name: str) -> bool:
    """Whether `name` is the raw table `bare` or a table named after it (`<bare>__<part>`:
    a child table, its lock, a protocol's interim table), not another topic's, which a
    `like '<bare>*'` also finds: `raw_feed_v2`, or `raw_feed___tags` (the child table of
    topic `feed_`; a part never starts with `_`, see naming.base_column_name).

    Example:
        >>> names = ("raw_feed", "raw_feed__tags", "raw_feed_v2", "raw_feed___tags")
        >>> [named_after("raw_feed", name) for name in names]
        [True, True, False, False]
        >>> named_after("raw_feed_", "raw_feed___tags")
        True
    """
    return name == bare or (
        name.startswith(f"{bare}__") and not name[len(bare) + 2 :].startswith("_")
    )


def of_topic(bare: str, name: str) -> bool:
    """Whether `name` is the raw table `bare` or one of its child tables (`<bare>__<array>`,
    whose name holds no `__`), not another topic's (`raw_feed_v2` for `raw_feed`: found
    by review) nor an interim table.

    Example:
        >>> names = ("raw_feed", "raw_feed__tags", "raw_feed___tags", "raw_feed__tags__compacting")
        >>> [of_topic("raw_feed", name) for name in names]
        [True, True, False, False]
    """
    return named_after(bare, name) and "__" not in name[len(bare) + 2 :]


def batches_to_ingest(settings: IngestSettings, entries: list[LedgerEntry]) -> list[Batch]:
    """Pending batches again, then the new files; reads no file the ledger has committed."""
    scanned = scan_inbox(settings.inbox, settings.topic.name, entries)
    return plan_batches(scanned, entries, datetime.now(UTC), settings.batch_limits)


def _record_ledger(
    spark: SparkSession,
    settings: IngestSettings,
    batch: Batch,
    state: str,
    files: Sequence[InboxFile] | None = None,
) -> None:
    """Write the batch's ledger entries (of `files`, else the batch's as scanned), in
    `state`: its partition of the ledger only."""
    entries = [
        LedgerEntry(
            f.path,
            f.size,
            f.mtime,
            f.checksum,
            f.line_count,
            batch.batch_id,
            state,
            first_line=f.first_line,
        )
        for f in (batch.files if files is None else files)
    ]
    write_ledger_batch(spark, settings.bookkeeping.ledger, settings.topic.name, entries)


def ingest_batch(spark: SparkSession, settings: IngestSettings, batch: Batch) -> BatchSummary:
    """Ingest one batch of files (see the module docstring for the steps)."""
    topic = settings.topic
    context = BatchContext(topic.name, batch.batch_id, datetime.now(UTC))
    if batch.rerun:  # its files may hold less, or other lines, than the killed run wrote
        steps.reached("raw.drop_killed_attempt")
        for table in topic_raw_tables(spark, settings):
            drop_batch_partitions(spark, table, batch.batch_id)
        if not batch.files:
            return forget_batch(spark, settings, batch)
    steps.reached("raw.record_pending")
    _record_ledger(spark, settings, batch, PENDING)

    staging = staging_location(spark, settings.table)
    steps.reached("raw.link_files")
    links = link_files(batch.files, link_folder(staging), settings.limits.max_line_bytes)
    scratch = f"{staging}__inference"
    steps.reached("raw.infer_schema")
    depth = settings.limits.max_depth
    inferred: StructType = exact_numbers(infer_schema(spark, links, scratch, depth))  # type: ignore[assignment]
    first = {leaf.path for leaf in all_leaves(inferred)}
    if any(f.holds_empty_string for f in batch.files):  # the ledger's read noted it
        inferred = empty_strings_as_text(spark, links, inferred, scratch, depth)
    remove_local_dir(scratch)
    # Keys the reader deleted with their "": their {} parse as text, to be made null.
    hidden = {leaf.path: leaf.data_type for leaf in all_leaves(inferred) if leaf.path not in first}
    registry = read_registry(spark, settings.bookkeeping.registry, topic.name)
    # The modes decide as if a killed run of this batch never happened (a first batch
    # stays the first, which sets the schema whatever the mode), while the plan keeps
    # the types of the columns that run added (registered before its DDL).
    settled = [entry for entry in registry if entry.first_seen_batch != batch.batch_id]
    inferred = routed_arrays_as_text(topic, settled, inferred)
    for ignored in ignored_hints(settings, registry):
        PROGRESS.warning(
            f"{settings.table}: hint ignored, a column's type never changes: {ignored}"
        )
    draft = plan_tables(settings, registry, inferred, batch.batch_id)
    # One decision of which paths are parsed as text (and split by their column's type).
    as_text = text_paths(settings, registry, draft, inferred)
    types = {**parse_types(draft, inferred), **{path: StringType() for path in as_text}}
    source = parse_schema(inferred, types)
    # Inference sees quarantined lines too: a new path gets a column only if
    # an accepted record holds a value there; the cap ranks by that count.
    new_paths = {path for plan in draft.values() for path in plan.new_paths()}
    seen = {leaf.path: leaf.data_type.simpleString() for leaf in all_leaves(inferred)}
    for unmatched in unmatched_key_paths(topic, seen):
        PROGRESS.warning(
            f"{settings.table}: no line of batch {batch.batch_id} holds the {unmatched};"
            f" if the path is misspelt, fix vars.raw_topics.{topic.name} in dbt_project.yml"
        )
    # Where the modes send what would change the schema (none on a topic's first batch).
    # Never the record key: a child row's `_parent_` key must join its parent's (found by
    # review: a routed key was NULL in raw and kept in the child rows).
    record_key = {dotted(path) for path in topic.record_key}
    routes = plan_routes(topic.schema_modes, settled, (new_paths | set(as_text)) - record_key)
    discards = row_discards(source, routes, new_paths, as_text)
    # New text paths become timestamp columns when every value is a time, ISO 8601 or
    # in a declared format (counted as misfits while parsing, like conflicts).
    timestamps = time_candidates(settings, registry, inferred, routes)
    settled_times, new_times = timestamp_text_paths(as_text, routes, registry, topic)
    conflicts = {path: t for path, t in as_text.items() if path not in new_times}
    checks = misfit_checks(source, conflicts) + time_misfit_checks(
        source, timestamps | new_times, topic.time_formats
    )
    # Only where the leaf is parsed as inferred (not as its column's type, or as text).
    parsed_hidden = {
        leaf.path: leaf.data_type
        for leaf in all_leaves(source)
        if hidden.get(leaf.path) == leaf.data_type
    }
    rewrite = rewrite_leaves(
        source, empty_objects_nulled(parsed_hidden), times_as_iso(source, topic, settled_times)
    )
    steps.reached("raw.stage_batch")
    for attempt in range(1, STAGE_ATTEMPTS + 1):
        parsed, counts, carried, misfits = stage_batch(
            spark,
            settings,
            list(batch.files),
            links,
            source,
            staging,
            new_paths,
            checks,
            discards,
            rewrite,
        )
        # A file appended to after Spark listed it gives its first new line too (Hadoop
        # reads the line starting at the listed end): staged again, a file grown since
        # the scan is read to the scan's last line (parse.read_text_lines). So is one
        # whose cut last line may have been finished after the staging looked.
        lines, scanned = counts.accepted + counts.rejected, sum(f.line_count for f in batch.files)
        unmeasured = cut_lines_unmeasured(batch.files, counts)
        if (lines <= scanned or not grown_since_scan(batch.files)) and not unmeasured:
            break
        if attempt == STAGE_ATTEMPTS:
            raise RuntimeError(
                f"{settings.table}: batch {batch.batch_id}'s files kept growing while it read"
                f" them ({lines:,} lines read, {scanned:,} scanned): it stays pending, and the"
                " next run takes them as they are then."
            )
    # A file rewritten or truncated between the scan and the read: the lines read are
    # not those the ledger would record (found by review: a truncation committed the
    # scan's checksum over fewer rows, and the next run took the file anew).
    changed = changed_since_scan(batch.files)
    if changed or lines != scanned:
        raise RuntimeError(
            f"{settings.table}: batch {batch.batch_id}'s files changed while it read them"
            f" ({lines:,} lines read, {scanned:,} scanned; rewritten or truncated:"
            f" {', '.join(changed) or 'none'}): it stays pending, and the next run takes"
            " them as they are then."
        )
    timed = {path for path in timestamps if carried.get(path, 0) and not misfits[path]}
    as_text |= {path: TimestampType() for path in timed}  # parsed as text already
    PROGRESS.info(
        f"{settings.table}: batch {batch.batch_id} parsed: {counts.accepted:,} lines accepted, "
        f"{counts.rejected:,} quarantined; writing raw, child and quarantine rows"
    )
    for what, lines in counts.discarded_rows.items():
        if lines:
            PROGRESS.warning(
                f"{settings.table}: discard_row: {lines:,} quarantined lines bring {what}"
            )
    plans = plan_tables(settings, registry, source, batch.batch_id, carried, misfits, routes, timed)
    unsplit = {path for plan in plans.values() for path in plan.text_paths()} - set(as_text)
    if unsplit:  # a bug, never data: refuse rather than write values unsplit
        raise RuntimeError(f"{settings.table}: paths parsed as text but not split: {unsplit}")
    frozen = frozen_changes(plans, settled, topic.schema_modes, seen)
    if frozen:  # before any table is written: the batch stays pending
        raise SchemaFrozen(frozen_message(settings.table, batch.batch_id, frozen))
    # New timestamp columns take their times as ISO text (counted as times above, so
    # none goes astray); a path the plan gave no column keeps its text as sent.
    new_columns = (timed | new_times) & admitted_paths(plans)
    rewrite_new = rewrite_leaves(source, times_as_iso(source, topic, new_columns))
    if rewrite_new is not None:
        parsed = parsed.withColumn(RECORD, rewrite_new(F.col(RECORD)))
    # The registry first, then the DDL: a column the table has is always registered,
    # with its type, so a rerun of a killed batch whose files changed since plans
    # against it (a value of another type goes to the text companion). Found by review:
    # registered after the rows, the rerun planned the path anew, found a column of its
    # name, and wrote a string into a bigint (the topic stopped) or 7.5 as 7.
    steps.reached("raw.write_registry")
    _write_registry(spark, settings, registry, plans)
    prepare_tables(spark, settings, plans)
    write_batch(spark, settings, context, parsed, counts, source, plans, registry, routes)
    steps.reached("raw.record_committed")
    # A last line the scan found cut and Spark read finished is committed whole (found
    # by review: the next run took it again).
    read = counts.last_line_bytes
    taken = [finished_since_scan(f, read.get(f.path)) for f in batch.files]
    _record_ledger(spark, settings, batch, COMMITTED, taken)
    steps.reached("raw.remove_staging")
    remove_local_dir(staging)
    shutil.rmtree(link_folder(staging), ignore_errors=True)
    return BatchSummary(
        topic=topic.name,
        batch_id=batch.batch_id,
        files=len(batch.files),
        input_lines=sum(f.line_count for f in batch.files),
        raw_rows=counts.accepted,
        quarantined_lines=counts.rejected,
        columns_added=sum(len(plan.added) for plan in plans.values()),
        values_as_text=sum(
            misfits[entry.json_keys] for plan in plans.values() for entry in plan.texts
        ),
    )


def topic_raw_tables(spark: SparkSession, settings: IngestSettings) -> list[str]:
    """The topic's raw table and the tables named after it (child tables `<table>__<array>`)
    that exist, those the registry has not recorded yet included (a killed run may have
    made them); not another topic's, whose batch partitions a rerun would drop."""
    schema, bare = settings.table.split(".")
    pattern = string_literal(f"{bare}*")
    rows = spark.sql(f"show tables in {quoted_identifier(schema)} like {pattern}").collect()
    names = sorted(row[1] for row in rows if named_after(bare, row[1]))
    return [f"{schema}.{name}" for name in names]


def forget_batch(spark: SparkSession, settings: IngestSettings, batch: Batch) -> BatchSummary:
    """A pending batch whose files are all gone: its quarantined lines and values, then
    its ledger entries (last: until then a rerun finds it pending and comes back here).
    Its raw and child partitions are dropped already."""
    steps.reached("raw.forget_batch")
    name = settings.topic.name
    for table in (settings.bookkeeping.quarantine, settings.bookkeeping.quarantined_values):
        write_quarantine(spark, table, None, name, batch.batch_id)
    steps.reached("raw.forget_ledger_entries")
    partition = partition_spec(["topic", "batch_id"], [name, batch.batch_id])
    spark.sql(f"alter table {quoted_table(settings.bookkeeping.ledger)} drop if exists {partition}")
    PROGRESS.warning(
        f"{settings.table}: batch {batch.batch_id} was left pending by a killed run and its"
        " files are gone from the inbox: nothing of it is kept"
    )
    return BatchSummary(name, batch.batch_id, 0, 0, 0, 0, 0, 0)


def _write_registry(
    spark: SparkSession,
    settings: IngestSettings,
    registry: list[RegistryEntry],
    plans: dict[str, SchemaPlan],
) -> None:
    """The plans' entries, plus the entries of tables this batch did not touch, now stale."""
    untouched = [
        replace(entry, status=STALE) for entry in registry if entry.table_name not in plans
    ]
    entries = [entry for plan in plans.values() for entry in plan.entries] + untouched
    write_registry(spark, settings.bookkeeping.registry, settings.topic.name, entries)
