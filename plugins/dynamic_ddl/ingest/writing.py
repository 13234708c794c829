"""A staged batch written to its tables: create them or add columns, then raw, child and
quarantine rows, each into the batch's own partitions only."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from dynamic_ddl import steps
from dynamic_ddl.catalog import spark_sql
from dynamic_ddl.ingest.bookkeeping import write_quarantine
from dynamic_ddl.ingest.compaction import migrate_layout
from dynamic_ddl.ingest.parse import REJECT_REASON, line_numbers, line_pieces
from dynamic_ddl.ingest.planning import bare_name, child_leading, child_table_names, raw_leading
from dynamic_ddl.ingest.raw_rows import (
    BatchContext,
    child_rows,
    quarantine_rows,
    quarantined_values_rows,
    raw_rows,
    table_leaves,
)
from dynamic_ddl.ingest.settings import IngestSettings, dotted
from dynamic_ddl.ingest.staging import LineCounts
from dynamic_ddl.ingest.tables import OldLayoutError, ensure_table, overwrite_partitions
from dynamic_ddl.ingest.topics import TopicConfig
from dynamic_ddl.schema.flatten import Leaf
from dynamic_ddl.schema.modes import NO_ROUTES, Routes
from dynamic_ddl.schema.naming import JsonPath, base_column_name
from dynamic_ddl.schema.registry import RegistryEntry, SchemaPlan, spark_type


def prepare_tables(
    spark: SparkSession, settings: IngestSettings, plans: dict[str, SchemaPlan]
) -> None:
    """Create each table, or add its new columns and text companions: no old partition
    is rewritten, whatever types the batch brings (schema/type_conflicts.py). A table of
    the layout before compaction is moved to the current one first, once."""
    schema_name = settings.table.split(".")[0]
    for name, plan in plans.items():
        table = f"{schema_name}.{name}"
        main = table == settings.table
        leading = raw_leading(settings.topic) if main else child_leading(settings.topic)
        try:
            ensure_table(spark, table, leading, plan.entries, plan.text_columns())
        except OldLayoutError:
            migrate_layout(spark_sql(spark), table)
            ensure_table(spark, table, leading, plan.entries, plan.text_columns())


def write_batch(
    spark: SparkSession,
    settings: IngestSettings,
    context: BatchContext,
    parsed: DataFrame,
    counts: LineCounts,
    source: StructType,
    plans: dict[str, SchemaPlan],
    registry: list[RegistryEntry],
    routes: Routes = NO_ROUTES,
) -> None:
    """Write the staged batch's raw, child and quarantine rows (of lines, and of the values
    `routes` discards), each to its own partitions.

    `counts` are the staged lines' counts; quarantined lines are numbered here.
    """
    topic = settings.topic
    event_time = dotted(topic.event_time)
    plan = plans[bare_name(settings.table)]
    # Every row gets its line number: the pieces of the batch's files are a
    # few rows per file, computed once here and looked up by each write.
    parsed = line_numbers(parsed, line_pieces(parsed))
    steps.reached("raw.write_raw_rows")
    overwrite_partitions(
        spark,
        settings.table,
        raw_rows(
            parsed,
            context,
            source,
            plan,
            event_time,
            topic.event_time_formats,
            topic.keep_raw_json,
            routes,
        ),
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
            plans[bare_name(table)],
            _parent_keys(topic, parent),
            event_time,
            topic.event_time_formats,
            routes,
        )
        steps.reached("raw.write_child_rows")
        overwrite_partitions(spark, table, rows)
    # No pass over the staged lines, and no write, when none was rejected.
    rows = None
    if counts.rejected:
        rows = quarantine_rows(parsed.where(F.col(REJECT_REASON).isNotNull()), context)
    steps.reached("raw.write_quarantine")
    write_quarantine(spark, settings.bookkeeping.quarantine, rows, topic.name, context.batch_id)
    discarded = discarded_column_types(plans, routes)
    values = quarantined_values_rows(parsed, context, source, discarded) if discarded else None
    steps.reached("raw.write_quarantined_values")
    table = settings.bookkeeping.quarantined_values
    write_quarantine(spark, table, values, topic.name, context.batch_id)


def discarded_column_types(
    plans: dict[str, SchemaPlan], routes: Routes
) -> dict[JsonPath, DataType | None]:
    """The paths whose values `discard_value` keeps out: each with its column's type (only
    values it cannot hold are discarded), or None for a new key (every value is)."""
    columns = {e.json_keys: e.data_type for plan in plans.values() for e in plan.entries}
    return {
        path: spark_type(columns[path]) if path in columns else None for path in routes.discarded
    }


def _parent_keys(topic: TopicConfig, leaves: list[Leaf]) -> dict[str, Leaf]:
    """The parent's record-key leaves by their `_parent_` column suffix."""
    by_path = {leaf.path: leaf for leaf in leaves}
    return {
        base_column_name(dotted(path)): by_path[dotted(path)]
        for path in topic.record_key
        if dotted(path) in by_path
    }
