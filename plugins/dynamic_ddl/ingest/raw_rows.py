"""From parsed lines to the rows of a raw table, its child tables and the quarantine.

Every line ends up in exactly one place: accepted lines become raw rows
(lineage: file and line number in the inbox; one column per leaf the registry names,
the rest in `_overflow`), rejected lines become quarantine rows with their
reason. Elements of arrays of objects become rows of child tables, keyed by
the parent's record key and the element's index.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, StringType, StructType

from dynamic_ddl.ingest.parse import LINE_NUMBER, RECORD, REJECT_REASON
from dynamic_ddl.schema.event_time import event_timestamp_sql
from dynamic_ddl.schema.exact import exact_value, fits, misfit_text, text_column
from dynamic_ddl.schema.flatten import ChildArray, Leaf, field_at, holds_struct, split_schema
from dynamic_ddl.schema.modes import NO_ROUTES, Routes
from dynamic_ddl.schema.naming import ELEMENT_KEY, JsonPath, display_path
from dynamic_ddl.schema.registry import SchemaPlan, spark_type

OVERFLOW_COLUMN = "_overflow"
RAW_JSON = "_raw_json"
EVENT_DATE_COLUMN = "_event_date"
BATCH_ID_COLUMN = "_batch_id"
# The second partition column: the batch id for a batch's own partitions, the
# greatest batch id merged for a compacted one (ingest/compaction.py), so never
# below the batch id of a row in it.
SLOT_COLUMN = "_slot"
INDEX_COLUMN = "_index"
PARENT_PREFIX = "_parent_"
ELEMENT = "_element"
EVENT_TIME_VALUE = "_event_time_value"
# A value a `discard_value` path keeps out of its table (quarantined_values_rows).
DISCARDED_VALUE = "struct<json_path:string,element_index:int,value:string,reason:string>"


@dataclass(frozen=True)
class BatchContext:
    """What every row of one batch shares."""

    topic: str
    batch_id: str
    ingested_at: datetime


def table_leaves(schema: StructType) -> tuple[list[Leaf], list[ChildArray]]:
    """Leaves that get columns, and the arrays of objects that get child tables.

    Arrays that hold objects below another array (say, arrays of arrays of
    objects) stay in the row as JSON text (their leaf type is string).
    """
    leaves, children = split_schema(schema)
    kept = [
        Leaf(leaf.path, StringType(), leaf.ordinals) if holds_struct(leaf.data_type) else leaf
        for leaf in leaves
    ]
    return kept, children


def element_leaves(child: ChildArray) -> list[Leaf]:
    """The columns of a child table: the element's leaves, nested arrays of objects as JSON text.

    Paths are full (through ELEMENT_KEY: `items[].sku`), ordinals are within the element.
    """
    leaves, nested = table_leaves(child.element)
    as_text = [Leaf(array.path, StringType(), array.ordinals) for array in nested]
    return [
        Leaf((*child.path, ELEMENT_KEY, *leaf.path), leaf.data_type, leaf.ordinals)
        for leaf in leaves + as_text
    ]


def leaf_value(record: Column, leaf: Leaf, source: DataType) -> Column:
    """The leaf's value from a positional struct; nested structures as JSON text."""
    value = field_at(record, leaf.ordinals)
    source_type = type_at(source, leaf.ordinals)
    if isinstance(leaf.data_type, StringType) and holds_struct(source_type):
        return _as_text(value, source_type)
    return value


def type_at(schema: DataType, ordinals: tuple[int, ...]) -> DataType:
    """The type of the field at `ordinals` (a leaf's place) in `schema`."""
    data_type: DataType = schema
    for ordinal in ordinals:
        data_type = data_type.fields[ordinal].dataType  # type: ignore[union-attr]
    return data_type


def _as_text(value: Column, data_type: DataType) -> Column:
    """A value as text: JSON for nested values, cast back to the original key names first."""
    if isinstance(data_type, ArrayType | StructType):
        return F.to_json(value.cast(data_type))
    return value.cast("string")


def _leaf_text(record: Column, leaf: Leaf, source: StructType) -> Column:
    """A leaf's value as its JSON text (the batch's type, before any column's)."""
    return _as_text(field_at(record, leaf.ordinals), type_at(source, leaf.ordinals))


def overflow_map(pairs: list[tuple[str, Column]]) -> Column:
    """A map from path (display_path) to text, without the NULL texts; NULL when no pair."""
    if not pairs:
        return F.lit(None).cast("map<string,string>")
    keys_and_values = [part for path, text in pairs for part in (F.lit(path), text)]
    return F.map_filter(F.create_map(*keys_and_values), lambda _, value: value.isNotNull())


def data_columns(
    record: Column, leaves: list[Leaf], plan: SchemaPlan, source: StructType, routes: Routes
) -> tuple[list[Column], Column]:
    """A column per registry entry (NULL where the batch lacks it), the text companions
    the batch writes, and the `_overflow` map.

    A path whose values conflict with its column's type was parsed as text:
    each value goes to the column when it fits exactly, else to `<column>__text`,
    or for a rescued path to `_overflow`. Leaves without a column go to
    `_overflow` too (over the cap, or rescued), except discarded ones
    (quarantined_values_rows writes those).
    """
    by_path = {leaf.path: leaf for leaf in leaves}
    as_text, texts = plan.text_paths(), {entry.json_keys for entry in plan.texts}
    columns, rescued = [], []
    for entry in plan.entries:
        leaf = by_path.get(entry.json_keys)
        value = leaf_value(record, leaf, source) if leaf else F.lit(None)
        column_type = spark_type(entry.data_type)
        if entry.json_keys in as_text:
            columns.append(exact_value(value, column_type).alias(entry.column_name))
        else:
            columns.append(value.cast(column_type).alias(entry.column_name))
        if entry.json_keys in texts:
            columns.append(misfit_text(value, column_type).alias(text_column(entry.column_name)))
        if leaf and entry.json_keys in routes.rescued:
            rescued.append((display_path(entry.json_keys), misfit_text(value, column_type)))
    named = {entry.json_keys for entry in plan.entries}
    rest = [
        (display_path(leaf.path), _leaf_text(record, leaf, source))
        for leaf in leaves
        if leaf.path not in named and leaf.path not in routes.discarded
    ]
    return columns, overflow_map(rest + rescued)


def with_event_time(
    rows: DataFrame, record: Column, leaves: list[Leaf], event_time: JsonPath
) -> DataFrame:
    """`rows` with EVENT_TIME_VALUE: the value at the event-time path (NULL when absent)."""
    value = F.lit(None).cast("string")
    for leaf in leaves:
        if leaf.path == event_time:
            value = field_at(record, leaf.ordinals)
    return rows.withColumn(EVENT_TIME_VALUE, value)


def event_date(event_time_formats: Sequence[str]) -> Column:
    """The date of EVENT_TIME_VALUE in any format schema/event_time.py reads (the topic's
    declared `event_time_formats` first); else NULL."""
    return F.to_date(F.expr(event_timestamp_sql(EVENT_TIME_VALUE, event_time_formats)))


def lineage_columns(context: BatchContext) -> list[Column]:
    """The columns every raw and child row starts with: the line's place in the inbox
    (its file and line number, which lead back to the original text), when, and by
    which batch."""
    return [
        F.col("_source_file"),
        F.col(LINE_NUMBER),
        F.lit(context.ingested_at).cast("timestamp").alias("_ingested_at"),
        F.lit(context.batch_id).alias(BATCH_ID_COLUMN),
    ]


def accepted(parsed: DataFrame) -> DataFrame:
    """The lines that became records."""
    return parsed.where(F.col(REJECT_REASON).isNull())


def raw_rows(
    parsed: DataFrame,
    context: BatchContext,
    source: StructType,
    plan: SchemaPlan,
    event_time: JsonPath,
    event_time_formats: Sequence[str] = (),
    keep_raw_json: bool = False,
    routes: Routes = NO_ROUTES,
) -> DataFrame:
    """Accepted lines (numbered) as raw rows: lineage, the original text when kept, the
    registry's columns, overflow, and the partition columns (_event_date, _slot)."""
    record = F.col(RECORD)
    leaves, _ = table_leaves(source)
    columns, overflow = data_columns(record, leaves, plan, source, routes)
    text = [F.col("line").alias(RAW_JSON)] if keep_raw_json else []
    return with_event_time(accepted(parsed), record, leaves, event_time).select(
        *lineage_columns(context),
        *text,
        overflow.alias(OVERFLOW_COLUMN),
        *columns,
        event_date(event_time_formats).alias(EVENT_DATE_COLUMN),
        F.lit(context.batch_id).alias(SLOT_COLUMN),
    )


def child_rows(
    parsed: DataFrame,
    context: BatchContext,
    source: StructType,
    child: ChildArray,
    plan: SchemaPlan,
    parent_keys: dict[str, Leaf],
    event_time: JsonPath,
    event_time_formats: Sequence[str] = (),
    routes: Routes = NO_ROUTES,
) -> DataFrame:
    """One row per element of the child array: lineage, the parent's key, `_index`, leaves."""
    record = F.col(RECORD)
    leaves, _ = table_leaves(source)
    keys = [
        leaf_value(record, leaf, source).cast("string").alias(PARENT_PREFIX + name)
        for name, leaf in parent_keys.items()
    ]
    exploded = with_event_time(accepted(parsed), record, leaves, event_time).select(
        *lineage_columns(context),
        *keys,
        F.posexplode(field_at(record, child.ordinals)).alias(INDEX_COLUMN, ELEMENT),
        event_date(event_time_formats).alias(EVENT_DATE_COLUMN),
    )
    element = F.col(ELEMENT)
    columns, overflow = data_columns(element, element_leaves(child), plan, child.element, routes)
    return exploded.select(
        *[F.col(c) for c in exploded.columns if c not in (ELEMENT, EVENT_DATE_COLUMN)],
        overflow.alias(OVERFLOW_COLUMN),
        *columns,
        F.col(EVENT_DATE_COLUMN),
        F.lit(context.batch_id).alias(SLOT_COLUMN),
    )


def quarantine_rows(rejected: DataFrame, context: BatchContext) -> DataFrame:
    """Rejected lines (already numbered) with topic, file, line, raw text, reason, batch id.

    Text that is not valid UTF-8 is shown with U+FFFD in `raw_text`; its
    exact bytes are kept in `raw_base64`.
    """
    return rejected.select(
        F.col("_source_file").alias("source_file"),
        F.col("_line_number").alias("line_number"),
        F.make_valid_utf8("line").alias("raw_text"),
        F.when(~F.is_valid_utf8("line"), F.base64(F.col("line").cast("binary"))).alias(
            "raw_base64"
        ),
        F.col(REJECT_REASON).alias("reason"),
        F.lit(context.ingested_at).cast("timestamp").alias("quarantined_at"),
        F.lit(context.topic).alias("topic"),
        F.lit(context.batch_id).alias("batch_id"),
    )


def quarantined_values_rows(
    parsed: DataFrame,
    context: BatchContext,
    source: StructType,
    column_types: dict[JsonPath, DataType | None],
) -> DataFrame:
    """The values of accepted lines that a `discard_value` path keeps out of its table,
    one row each: the line's place, the value's path (and element index in an array
    of objects), its JSON text and why.

    `column_types` names the discarded paths: a new key's (None) loses every value,
    an existing column's only the values its type does not hold (schema/exact.py).
    """
    record = F.col(RECORD)
    parent, children = table_leaves(source)
    found = []
    for leaf in parent:
        if leaf.path in column_types:
            value = _discarded(field_at(record, leaf.ordinals), leaf, source, column_types)
            found.append(F.when(value.isNotNull(), F.array(value)))
    for child in children:
        array = field_at(record, child.ordinals)
        for leaf in element_leaves(child):
            if leaf.path in column_types:
                at = _element_discarded(leaf, child.element, column_types)
                found.append(F.filter(F.transform(array, at), lambda value: value.isNotNull()))
    empty = F.array().cast(f"array<{DISCARDED_VALUE}>")
    values = F.concat(*[F.coalesce(each, empty) for each in found]) if found else empty
    return (
        accepted(parsed)
        .select(
            F.col("_source_file").alias("source_file"),
            F.col(LINE_NUMBER).alias("line_number"),
            F.explode(values).alias("discarded"),
        )
        .select(
            "source_file",
            "line_number",
            "discarded.*",
            F.lit(context.ingested_at).cast("timestamp").alias("quarantined_at"),
            F.lit(context.topic).alias("topic"),
            F.lit(context.batch_id).alias("batch_id"),
        )
    )


def _element_discarded(
    leaf: Leaf, element: DataType, column_types: dict[JsonPath, DataType | None]
) -> Callable[[Column, Column], Column]:
    """`_discarded` of an array element's leaf, as `F.transform` wants it (element, index)."""
    return lambda value, index: _discarded(
        field_at(value, leaf.ordinals), leaf, element, column_types, index
    )


def _discarded(
    value: Column,
    leaf: Leaf,
    source: DataType,
    column_types: dict[JsonPath, DataType | None],
    index: Column | None = None,
) -> Column:
    """The DISCARDED_VALUE of a leaf's value when it is discarded, else NULL."""
    column_type = column_types[leaf.path]
    text = _as_text(value, type_at(source, leaf.ordinals))
    if column_type is None:
        discarded, reason = value.isNotNull(), "new key"
    else:
        discarded = value.isNotNull() & ~fits(text, column_type)
        reason = f"not held by its {column_type.simpleString()} column"
    position = F.lit(None).cast("int") if index is None else index.cast("int")
    row = F.struct(
        F.lit(display_path(leaf.path)).alias("json_path"),
        position.alias("element_index"),
        text.alias("value"),
        F.lit(reason).alias("reason"),
    )
    return F.when(discarded, row).cast(DISCARDED_VALUE)
