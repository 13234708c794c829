"""One raw model's run: ingest a topic's new inbox files, batch by batch, exactly once.

For each batch (pending ones from an interrupted run first, then new files):

1. record its files in the ledger as `pending` (with their line counts);
2. infer the batch's schema, plan the registry (new, widened, stale columns);
3. parse every line once, into the batch's staging Parquet (each line with
   where it was read, its parsed record or its reason for quarantine),
   observing on the way which new paths hold values; the raw, child and
   quarantine writes all read it, and no JSON again;
4. create, widen or `ADD COLUMNS` to the raw table and its child tables;
5. write raw rows, child rows and quarantine rows, each into the batch's own
   partitions only (quarantine is skipped when no line was rejected);
6. write the registry, then mark the ledger entries `committed`; drop the
   staging files.

A run killed anywhere leaves the batch `pending`; the next run repeats it
under the same batch id, overwriting the same partitions, so the result is
the result of an uninterrupted run.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, StructType

from dynamic_ddl import steps
from dynamic_ddl.catalog import RETIRED_SUFFIX, recover_swap, spark_sql
from dynamic_ddl.ingest.bookkeeping import (
    BookkeepingTables,
    create_bookkeeping_tables,
    read_ledger,
    read_registry,
    write_ledger,
    write_quarantine,
    write_registry,
)
from dynamic_ddl.ingest.inbox_links import link_files, link_folder
from dynamic_ddl.ingest.ledger import (
    COMMITTED,
    PENDING,
    Batch,
    BatchLimits,
    InboxFile,
    LedgerEntry,
    plan_batches,
    scan_inbox,
)
from dynamic_ddl.ingest.local_rows import local_dataframe
from dynamic_ddl.ingest.parse import (
    RECORD,
    REJECT_REASON,
    LineLimits,
    exact_numbers,
    infer_schema,
    line_numbers,
    parse_lines,
    parse_schema,
    read_text_lines,
)
from dynamic_ddl.ingest.raw_rows import (
    INDEX_COLUMN,
    OVERFLOW_COLUMN,
    PARENT_PREFIX,
    BatchContext,
    child_rows,
    element_leaves,
    quarantine_rows,
    raw_rows,
    table_leaves,
)
from dynamic_ddl.ingest.tables import (
    database_location,
    ensure_table,
    overwrite_partitions,
    quote,
    remove_local_dir,
    rewrite_widened,
    table_exists,
)
from dynamic_ddl.ingest.topics import TopicConfig
from dynamic_ddl.locks import LockSettings, held
from dynamic_ddl.schema.flatten import Leaf, field_at
from dynamic_ddl.schema.naming import ELEMENT_KEY, JsonPath, assign_column_names, base_column_name
from dynamic_ddl.schema.registry import STALE, RegistryEntry, SchemaPlan, plan_schema, spark_type
from dynamic_ddl.spark_conf import project_root
from dynamic_ddl.sql_text import string_literal

RAW_LEADING = [
    ("_source_file", "string"),
    ("_ingested_at", "timestamp"),
    ("_raw_json", "string"),
    (OVERFLOW_COLUMN, "map<string,string>"),
]
SUMMARY_COLUMNS = (
    "topic string, batch_id string, files bigint, input_lines bigint, raw_rows bigint, "
    "quarantined_lines bigint, columns_added bigint, columns_widened bigint"
)


@dataclass(frozen=True)
class IngestSettings:
    """Everything one raw model needs to know, from dbt_project.yml and the model."""

    topic: TopicConfig
    inbox: Path
    table: str
    bookkeeping: BookkeepingTables
    limits: LineLimits = LineLimits()
    max_columns: int = 500
    batch_limits: BatchLimits = BatchLimits()
    lock: LockSettings = LockSettings()

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> IngestSettings:
        """Settings from the dict the `raw_ingest` materialization passes to the model."""
        inbox = Path(config["inbox_dir"])
        topic = TopicConfig(
            name=config["topic"],
            record_key=tuple(config["record_key"]),
            event_time=config["event_time"],
            pinned_paths=tuple(config.get("pinned_paths") or ()),
            event_time_format=config.get("event_time_format"),
        )
        limits = LineLimits(
            max_line_bytes=int(config.get("max_line_bytes", LineLimits.max_line_bytes)),
            max_depth=int(config.get("max_depth", LineLimits.max_depth)),
        )
        return cls(
            topic=topic,
            inbox=inbox if inbox.is_absolute() else project_root() / inbox,
            table=f"{config['schema']}.{config['table']}",
            bookkeeping=BookkeepingTables.in_schema(config["schema"]),
            limits=limits,
            max_columns=int(config.get("max_columns", 500)),
            batch_limits=BatchLimits(
                max_files=int(config.get("max_batch_files", BatchLimits.max_files)),
                max_bytes=int(config.get("max_batch_mb", BatchLimits.max_bytes >> 20)) << 20,
            ),
            lock=LockSettings.from_env(config.get("lock_wait_seconds")),
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
    columns_widened: int


def dotted(path: str) -> JsonPath:
    """A configured JSON path (`_data.log_ts`) as keys."""
    return tuple(path.split("."))


def child_table_names(
    table: str, paths: list[JsonPath], registry: list[RegistryEntry]
) -> dict[JsonPath, str]:
    """The child table of each array path: `schema.raw_device_events__data_media` for `_data.media`.

    Names follow the column rule (naming.py): an array that has a table
    keeps it; new arrays whose names collide (`media` and `Media`) get a
    hash suffix, so no two arrays share a table.
    """
    schema, bare = table.split(".")
    prefix = f"{bare}__"
    existing = {
        entry.json_keys[: entry.json_keys.index(ELEMENT_KEY)]: entry.table_name[len(prefix) :]
        for entry in registry
        if entry.table_name.startswith(prefix) and ELEMENT_KEY in entry.json_keys
    }
    names = assign_column_names(paths, existing)
    return {path: f"{schema}.{prefix}{names[path]}" for path in paths}


def pinned_paths(topic: TopicConfig) -> set[JsonPath]:
    """Paths that always get a column first: the record key, the event time, `pinned_paths`."""
    return {dotted(path) for path in (*topic.record_key, topic.event_time, *topic.pinned_paths)}


def child_leading(topic: TopicConfig) -> list[tuple[str, str]]:
    """The first columns of every child table: lineage, the parent's record key, the index."""
    keys = [(PARENT_PREFIX + base_column_name(dotted(path)), "string") for path in topic.record_key]
    return [
        ("_source_file", "string"),
        ("_ingested_at", "timestamp"),
        *keys,
        (INDEX_COLUMN, "int"),
        (OVERFLOW_COLUMN, "map<string,string>"),
    ]


def plan_tables(
    settings: IngestSettings,
    registry: list[RegistryEntry],
    source: StructType,
    batch_id: str,
    carried: dict[JsonPath, int] | None = None,
) -> dict[str, SchemaPlan]:
    """A schema plan per table the batch writes (the raw table, each child table), by bare name.

    `carried`, once the batch is parsed, counts the accepted records holding
    a value at each new path: a new path gets a column only if one does,
    and the cap ranks new paths by it.
    """
    parent, children = table_leaves(source)
    tables = child_table_names(settings.table, [child.path for child in children], registry)
    leaves_by_table = {_bare(settings.table): parent}
    for child in children:
        leaves_by_table[_bare(tables[child.path])] = element_leaves(child)
    known = {entry.json_keys for entry in registry}

    def keep(path: JsonPath) -> bool:
        return carried is None or path in known or carried.get(path, 0) > 0

    return {
        name: plan_schema(
            [e for e in registry if e.table_name == name],
            [leaf for leaf in leaves if keep(leaf.path)],
            settings.topic.name,
            name,
            batch_id,
            settings.max_columns,
            carried,
            pinned_paths(settings.topic),
        )
        for name, leaves in leaves_by_table.items()
    }


def _bare(table: str) -> str:
    return table.split(".")[1]


def parse_types(plans: dict[str, SchemaPlan], source: StructType) -> dict[JsonPath, DataType]:
    """Types to parse the batch's leaves with: each existing column's type after widening."""
    parent, children = table_leaves(source)
    paths = {leaf.path for leaf in parent}
    paths |= {leaf.path for child in children for leaf in element_leaves(child)}
    return {
        entry.json_keys: spark_type(entry.data_type)
        for plan in plans.values()
        for entry in plan.entries
        if entry.json_keys in paths
    }


def holds_value(value: Column, data_type: DataType) -> Column:
    """Whether a leaf holds a value: not NULL, and for an array not empty ("" is a value)."""
    if isinstance(data_type, ArrayType):
        return F.coalesce(F.size(value) > 0, F.lit(False))
    return value.isNotNull()


def _holds_value_at(leaf: Leaf) -> Callable[[Column], Column]:
    return lambda element: holds_value(field_at(element, leaf.ordinals), leaf.data_type)


def value_checks(source: StructType, candidates: set[JsonPath]) -> list[tuple[JsonPath, Column]]:
    """Per candidate path, whether a line's record (parsed with `source`) holds a value there."""
    record = F.col(RECORD)
    parent, children = table_leaves(source)
    checks: list[tuple[JsonPath, Column]] = [
        (leaf.path, holds_value(field_at(record, leaf.ordinals), leaf.data_type))
        for leaf in parent
        if leaf.path in candidates
    ]
    for child in children:
        array = field_at(record, child.ordinals)
        for leaf in element_leaves(child):
            if leaf.path in candidates:
                holds = F.exists(array, _holds_value_at(leaf))
                checks.append((leaf.path, F.coalesce(holds, F.lit(False))))
    return checks


def staging_location(spark: SparkSession, table: str) -> str:
    """Where a raw table's batch is staged: `<database location>/_staging/<table>`."""
    schema, name = table.split(".")
    return f"{database_location(spark, schema)}/_staging/{name}"


def stage_batch(
    spark: SparkSession,
    settings: IngestSettings,
    files: list[InboxFile],
    links: list[str],
    source: StructType,
    location: str,
    candidates: set[JsonPath],
) -> tuple[DataFrame, LineCounts, dict[JsonPath, int]]:
    """Parse the batch's lines once, with `source`, into its staging Parquet at `location`.

    Returns the staged lines (`read_text_lines`' columns, `_record`,
    `_reject_reason`), their counts, and for each of the `candidates` (new
    paths) the number of accepted records holding a value there. Reading
    Parquet back is far cheaper than parsing JSON again, and every later pass
    reads it; a rerun of the batch overwrites it.
    """
    counts, valued = Observation(), Observation()
    lines = read_text_lines(spark, links, [f.path for f in files], [f.first_line for f in files])
    parsed = parse_lines(lines, source, settings.limits, counts)
    checks = value_checks(source, candidates)
    accepted = F.col(REJECT_REASON).isNull()
    parsed = parsed.observe(
        valued,
        F.lit(0).alias("none"),  # an observation needs a metric, even with no candidates
        *[F.count_if(accepted & check).alias(f"path{i}") for i, (_, check) in enumerate(checks)],
    )
    # Staged lines are read once or twice, then deleted: no dictionaries, which
    # for text and ids are built only to be dropped (about 15% of the write).
    parsed.write.mode("overwrite").option("parquet.enable.dictionary", "false").parquet(location)
    carried = {path: valued.get[f"path{i}"] for i, (path, _) in enumerate(checks)}
    return spark.read.parquet(location), LineCounts.observed(counts), carried


def ingest_topic(spark: SparkSession, config: dict[str, Any]) -> DataFrame:
    """Ingest every new file of the topic; one summary row per batch (none when nothing is new)."""
    settings = IngestSettings.from_config(config)
    create_bookkeeping_tables(spark, settings.bookkeeping)
    with held(spark_sql(spark), settings.table, settings.lock):
        mend_interrupted_swaps(spark, settings)
        summaries = [
            ingest_batch(spark, settings, batch) for batch in batches_to_ingest(spark, settings)
        ]
    rows = [tuple(vars(summary).values()) for summary in summaries]
    return local_dataframe(spark, rows, SUMMARY_COLUMNS)


def mend_interrupted_swaps(spark: SparkSession, settings: IngestSettings) -> None:
    """Put back the topic's tables a run killed in the middle of a widening swap left
    without their name (catalog.recover_swap), before anything reads them."""
    schema, bare = settings.table.split(".")
    pattern = string_literal(f"{bare}*{RETIRED_SUFFIX}")
    rows = spark.sql(f"show tables in {quote(schema)} like {pattern}").collect()
    for row in rows:
        retired = row[1]
        if retired.lower().endswith(RETIRED_SUFFIX):
            recover_swap(spark_sql(spark), f"{schema}.{retired[: -len(RETIRED_SUFFIX)]}")


def batches_to_ingest(spark: SparkSession, settings: IngestSettings) -> list[Batch]:
    """Pending batches again, then the new files; reads no file the ledger has committed."""
    entries = read_ledger(spark, settings.bookkeeping.ledger, settings.topic.name)
    scanned = scan_inbox(settings.inbox, settings.topic.name, entries)
    return plan_batches(scanned, entries, datetime.now(UTC), settings.batch_limits)


def _record_ledger(spark: SparkSession, settings: IngestSettings, batch: Batch, state: str) -> None:
    entries = read_ledger(spark, settings.bookkeeping.ledger, settings.topic.name)
    taken = {(f.path, f.checksum) for f in batch.files}
    kept = [e for e in entries if (e.path, e.checksum) not in taken or e.state == COMMITTED]
    kept += [
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
        for f in batch.files
    ]
    write_ledger(spark, settings.bookkeeping.ledger, settings.topic.name, kept)


def ingest_batch(spark: SparkSession, settings: IngestSettings, batch: Batch) -> BatchSummary:
    """Ingest one batch of files (see the module docstring for the steps)."""
    topic = settings.topic
    context = BatchContext(topic.name, batch.batch_id, datetime.now(UTC).replace(tzinfo=None))
    steps.reached("raw.record_pending")
    _record_ledger(spark, settings, batch, PENDING)

    staging = staging_location(spark, settings.table)
    steps.reached("raw.link_files")
    links = link_files([f.path for f in batch.files], link_folder(staging))
    scratch = f"{staging}__inference"
    steps.reached("raw.infer_schema")
    inferred: StructType = exact_numbers(infer_schema(spark, links, scratch))  # type: ignore[assignment]
    remove_local_dir(scratch)
    registry = read_registry(spark, settings.bookkeeping.registry, topic.name)
    draft = plan_tables(settings, registry, inferred, batch.batch_id)
    source = parse_schema(inferred, parse_types(draft, inferred))
    # Inference sees quarantined lines too: a new path gets a column only if
    # an accepted record holds a value there; the cap ranks by that count.
    new_paths = {path for plan in draft.values() for path in plan.new_paths()}
    steps.reached("raw.stage_batch")
    parsed, counts, carried = stage_batch(
        spark, settings, list(batch.files), links, source, staging, new_paths
    )
    plans = plan_tables(settings, registry, source, batch.batch_id, carried)
    prepare_tables(spark, settings, plans)
    write_batch(spark, settings, context, parsed, counts, source, plans, registry)

    steps.reached("raw.write_registry")
    _write_registry(spark, settings, registry, plans)
    steps.reached("raw.record_committed")
    _record_ledger(spark, settings, batch, COMMITTED)
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
        columns_widened=sum(len(plan.widened) for plan in plans.values()),
    )


def prepare_tables(
    spark: SparkSession, settings: IngestSettings, plans: dict[str, SchemaPlan]
) -> None:
    """Create each table, rewrite it if a column widened, add its new columns."""
    schema_name = settings.table.split(".")[0]
    for name, plan in plans.items():
        table = f"{schema_name}.{name}"
        leading = RAW_LEADING if table == settings.table else child_leading(settings.topic)
        widened = {entry.column_name: before for entry, before in plan.widened}
        if widened and table_exists(spark, table):
            rewrite_widened(spark, table, leading, plan.entries, widened)
        ensure_table(spark, table, leading, plan.entries)


@dataclass(frozen=True)
class LineCounts:
    """How the lines of a batch were judged, as observed while writing them."""

    accepted: int
    rejected: int

    @classmethod
    def observed(cls, observation: Observation) -> LineCounts:
        """The counts an observation passed to `parse_lines` collected."""
        metrics = observation.get
        return cls(metrics["accepted"], metrics["rejected"])


def write_batch(
    spark: SparkSession,
    settings: IngestSettings,
    context: BatchContext,
    parsed: DataFrame,
    counts: LineCounts,
    source: StructType,
    plans: dict[str, SchemaPlan],
    registry: list[RegistryEntry],
) -> None:
    """Write the staged batch's raw, child and quarantine rows, each to its own partitions.

    `counts` are the staged lines' counts; quarantined lines are numbered here.
    """
    topic = settings.topic
    event_time = dotted(topic.event_time)
    entries = plans[_bare(settings.table)].entries
    steps.reached("raw.write_raw_rows")
    overwrite_partitions(
        spark,
        settings.table,
        raw_rows(parsed, context, source, entries, event_time, topic.event_time_format),
    )
    parent, children = table_leaves(source)
    tables = child_table_names(settings.table, [child.path for child in children], registry)
    for child in children:
        table = tables[child.path]
        rows = child_rows(
            parsed,
            context,
            source,
            child,
            plans[_bare(table)].entries,
            _parent_keys(topic, parent),
            event_time,
            topic.event_time_format,
        )
        steps.reached("raw.write_child_rows")
        overwrite_partitions(spark, table, rows)
    # No pass over the staged lines when none was rejected.
    rejected = _no_lines(spark)
    if counts.rejected:
        rejected = line_numbers(parsed, parsed.where(F.col(REJECT_REASON).isNotNull()))
    rows = quarantine_rows(rejected, context)
    steps.reached("raw.write_quarantine")
    write_quarantine(spark, settings.bookkeeping.quarantine, rows, topic.name, context.batch_id)


def _no_lines(spark: SparkSession) -> DataFrame:
    return local_dataframe(
        spark, [], f"_source_file string, _line_number bigint, line string, {REJECT_REASON} string"
    )


def _parent_keys(topic: TopicConfig, leaves: list[Leaf]) -> dict[str, Leaf]:
    """The parent's record-key leaves by their `_parent_` column suffix."""
    by_path = {leaf.path: leaf for leaf in leaves}
    return {
        base_column_name(dotted(path)): by_path[dotted(path)]
        for path in topic.record_key
        if dotted(path) in by_path
    }


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
