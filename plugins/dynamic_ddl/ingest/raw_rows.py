"""From classified lines to the rows of a raw table and of the quarantine.

Every line ends up in exactly one of the two: accepted lines become raw rows
(lineage columns, the original JSON text, one column per leaf), rejected
lines become quarantine rows with their reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import NullType, StringType, StructType, VariantType

from dynamic_ddl.schema.flatten import Leaf, flat_columns, split_schema, variant_at
from dynamic_ddl.schema.naming import JsonPath, display_path, json_path
from dynamic_ddl.schema.registry import SchemaPlan
from dynamic_ddl.schema.variant_schema import parse_variant_type

OVERFLOW_COLUMN = "_overflow"
EVENT_DATE_COLUMN = "_event_date"


@dataclass(frozen=True)
class BatchContext:
    """What every row of one batch shares."""

    topic: str
    batch_id: str
    ingested_at: datetime
    event_time: JsonPath


def batch_schema(classified: DataFrame) -> StructType:
    """The accepted lines' schema, inferred from their parsed VARIANTs in one aggregate."""
    accepted = classified.where(F.col("_reject_reason").isNull())
    text = accepted.select(F.expr("schema_of_variant_agg(_variant)")).first()[0]
    schema = parse_variant_type(text) if text else StructType([])
    return schema if isinstance(schema, StructType) else StructType([])


def storable_leaves(schema: StructType) -> list[Leaf]:
    """Leaves that get a column: conflicting types are held as text, null-only ones wait.

    A leaf seen only as null has no type yet; it stays in `_raw_json` until a
    value arrives.
    """
    leaves, _ = split_schema(schema)
    stored = []
    for leaf in leaves:
        if isinstance(leaf.data_type, NullType):
            continue
        if isinstance(leaf.data_type, VariantType):
            leaf = Leaf(leaf.path, data_type=StringType())
        stored.append(leaf)
    return stored


def overflow_map(variant: Column, leaves: list[Leaf]) -> Column:
    """Leaves without a column: a map from path (keys joined by dots) to JSON text."""
    if not leaves:
        return F.lit(None).cast("map<string,string>")
    pairs = []
    for leaf in leaves:
        pairs += [F.lit(display_path(leaf.path)), F.to_json(variant_at(variant, leaf.path))]
    return F.map_filter(F.create_map(*pairs), lambda _, value: value.isNotNull())


def raw_rows(
    classified: DataFrame, context: BatchContext, leaves: list[Leaf], plan: SchemaPlan
) -> DataFrame:
    """Accepted lines as raw rows: lineage, event date, a column per leaf the plan names,
    and the plan's overflow leaves in a map."""
    names = plan.column_names()
    columns = [leaf for leaf in leaves if leaf.path in names]
    variant = F.col("_variant")
    event_time = F.try_variant_get(variant, json_path(context.event_time), "timestamp")
    return classified.where(F.col("_reject_reason").isNull()).select(
        F.col("_source_file"),
        F.col("_line_number"),
        F.lit(context.batch_id).alias("_batch_id"),
        F.lit(context.ingested_at).cast("timestamp").alias("_ingested_at"),
        F.col("line").alias("_raw_json"),
        *flat_columns(variant, columns, names),
        overflow_map(variant, plan.overflow).alias(OVERFLOW_COLUMN),
        F.to_date(event_time).alias(EVENT_DATE_COLUMN),
    )


def quarantine_rows(classified: DataFrame, context: BatchContext) -> DataFrame:
    """Rejected lines with topic, file, line number, raw text, reason and batch id."""
    return classified.where(F.col("_reject_reason").isNotNull()).select(
        F.lit(context.topic).alias("topic"),
        F.col("_source_file").alias("source_file"),
        F.col("_line_number").alias("line_number"),
        F.col("line").alias("raw_text"),
        F.col("_reject_reason").alias("reason"),
        F.lit(context.batch_id).alias("batch_id"),
        F.lit(context.ingested_at).cast("timestamp").alias("quarantined_at"),
    )
