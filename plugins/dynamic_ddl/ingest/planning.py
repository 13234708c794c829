"""A batch's schema plan: which table each JSON path goes to, and which new paths get a column.

Pure functions of the registry and the batch's inferred schema (and, once
the batch is parsed, of how many accepted records carry each new path).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from dynamic_ddl.catalog import RETIRED_SUFFIX
from dynamic_ddl.ingest.compaction import COMPACTING_SUFFIX, LAYOUT_SUFFIX, NEW_SUFFIX
from dynamic_ddl.ingest.parse import EMPTY_OBJECT_TEXT, LINE_NUMBER, RECORD
from dynamic_ddl.ingest.raw_rows import (
    BATCH_ID_COLUMN,
    INDEX_COLUMN,
    OVERFLOW_COLUMN,
    PARENT_PREFIX,
    RAW_JSON,
    element_leaves,
    table_leaves,
    type_at,
)
from dynamic_ddl.ingest.settings import IngestSettings, dotted
from dynamic_ddl.ingest.topics import TopicConfig
from dynamic_ddl.locks import LOCK_SUFFIX
from dynamic_ddl.schema.event_time import declared_timestamp, event_timestamp_sql
from dynamic_ddl.schema.exact import BEYOND_MICROSECONDS, ISO_TIMESTAMP_FORMAT, fits
from dynamic_ddl.schema.flatten import Leaf, field_at, with_leaf_types
from dynamic_ddl.schema.modes import NO_ROUTES, ROUTING_MODES, Routes
from dynamic_ddl.schema.naming import (
    ELEMENT_KEY,
    JsonPath,
    assign_column_names,
    base_column_name,
    display_path,
)
from dynamic_ddl.schema.registry import (
    RegistryEntry,
    SchemaPlan,
    hint_of,
    plan_schema,
    spark_type,
)
from dynamic_ddl.schema.type_conflicts import parses_into


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
    names = assign_column_names(paths, existing, reserved=BESIDE_A_RAW_TABLE)
    return {path: f"{schema}.{prefix}{names[path]}" for path in paths}


# What the protocols name the tables beside a raw table `<t>`: its lock `<t>__lock`, a
# swap's retired `<t>__dbt_old`, compaction's and the layout move's interim tables, and
# dbt's own relations. A child table `<t>__<array>` so named would be taken for one of
# them (and dropped): an array named so gets a hashed name (`lock_8ae91d64`) instead.
BESIDE_A_RAW_TABLE = frozenset(
    suffix.removeprefix("__")
    for suffix in (
        LOCK_SUFFIX,
        RETIRED_SUFFIX,
        COMPACTING_SUFFIX,
        NEW_SUFFIX,
        LAYOUT_SUFFIX,
        "__versions",  # an upsert table's version store, counted so in the run summary
        "__dbt_tmp",
        "__dbt_new",
    )
)


def column_hints(topic: TopicConfig) -> dict[str, str]:
    """The type each hinted path's new column takes: the topic's `hints`, and its event
    time as a timestamp unless a hint says otherwise (decision 0005, "Typed times").

    Example:
        >>> from dynamic_ddl.ingest.topics import TopicConfig
        >>> column_hints(TopicConfig("t", ("id",), "a.ts", hints=(("n", "double"),)))
        {'a.ts': 'timestamp', 'n': 'double'}
    """
    return {topic.event_time: "timestamp"} | dict(topic.hints)


def routed_arrays_as_text(
    topic: TopicConfig, registry: list[RegistryEntry], inferred: StructType
) -> StructType:
    """The batch's schema with each new array of objects whose mode never changes the
    schema (rescue, discard_row, discard_value) read as its JSON text: a leaf of the
    row, routed like any new key, instead of a new child table. Unchanged on a
    topic's first batch, which sets the schema."""
    if not registry:
        return inferred
    _, children = table_leaves(inferred)
    known = {
        entry.json_keys[: entry.json_keys.index(ELEMENT_KEY)]
        for entry in registry
        if ELEMENT_KEY in entry.json_keys
    }
    routed = {
        child.path: StringType()
        for child in children
        if child.path not in known and topic.schema_modes.mode_of(child.path) in ROUTING_MODES
    }
    return with_leaf_types(inferred, routed) if routed else inferred


def pinned_paths(topic: TopicConfig) -> set[JsonPath]:
    """Paths that always get a column first: the record key, the event time, `pinned_paths`."""
    return {dotted(path) for path in (*topic.record_key, topic.event_time, *topic.pinned_paths)}


def raw_leading(topic: TopicConfig) -> list[tuple[str, str]]:
    """The first columns of a raw table: lineage (the line's place in the inbox, and its
    text when the topic keeps it), then the overflow map."""
    text = [(RAW_JSON, "string")] if topic.keep_raw_json else []
    return [
        ("_source_file", "string"),
        (LINE_NUMBER, "bigint"),
        ("_ingested_at", "timestamp"),
        (BATCH_ID_COLUMN, "string"),
        *text,
        (OVERFLOW_COLUMN, "map<string,string>"),
    ]


def child_leading(topic: TopicConfig) -> list[tuple[str, str]]:
    """The first columns of every child table: lineage, the parent's record key, the index."""
    keys = [(PARENT_PREFIX + base_column_name(dotted(path)), "string") for path in topic.record_key]
    return [
        ("_source_file", "string"),
        (LINE_NUMBER, "bigint"),
        ("_ingested_at", "timestamp"),
        (BATCH_ID_COLUMN, "string"),
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
    misfits: dict[JsonPath, int] | None = None,
    routes: Routes = NO_ROUTES,
    timed: Collection[JsonPath] = (),
) -> dict[str, SchemaPlan]:
    """A schema plan per table the batch writes (the raw table, each child table), by bare name.

    `carried`, once the batch is parsed, counts the accepted records holding
    a value at each new path: a new path gets a column only if one does,
    and the cap ranks new paths by it. `misfits` counts, per conflicting
    path, the values that need its text companion. Paths `routes` sends
    elsewhere (schema modes) get neither a column nor a companion. `timed`
    new paths (every value a time: ISO 8601 or a declared format) get timestamp
    columns, ranked under the cap like any path.
    """
    parent, children = table_leaves(source)
    tables = child_table_names(settings.table, [child.path for child in children], registry)
    leaves_by_table = {bare_name(settings.table): parent}
    for child in children:
        leaves_by_table[bare_name(tables[child.path])] = element_leaves(child)
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
            misfits,
            column_hints(settings.topic),
            routes.kept_out,
            timed,
        )
        for name, leaves in leaves_by_table.items()
    }


def text_paths(
    settings: IngestSettings,
    registry: list[RegistryEntry],
    draft: dict[str, SchemaPlan],
    inferred: StructType,
) -> dict[JsonPath, DataType]:
    """The paths a batch parses as text, each with the column type that splits its values
    (schema/exact.py): existing columns the batch's type conflicts with, and every hinted
    new path whose batch type does not parse into its hint, whether or not the cap then
    gives it a column (the draft plan ranks new paths before their values are counted)."""
    paths = {
        entry.json_keys: spark_type(entry.data_type)
        for plan in draft.values()
        for entry, _ in plan.conflicts
    }
    hints = column_hints(settings.topic)
    known = {entry.json_keys for entry in registry}
    for leaf in all_leaves(inferred):
        hint = hint_of(leaf.path, hints)
        if hint and leaf.path not in known and not parses_into(spark_type(hint), leaf.data_type):
            paths[leaf.path] = spark_type(hint)
    return paths


def row_discards(
    source: StructType,
    routes: Routes,
    new_paths: set[JsonPath],
    as_text: dict[JsonPath, DataType],
) -> list[tuple[str, Column]]:
    """Per path whose mode is `discard_row`, what the path objects to and whether a line's
    record (parsed with `source`) brings it: any value at a new path, or a value its
    column's type (`as_text`) does not hold."""
    new = {path for path in routes.discarding_rows if path in new_paths}
    conflicting = {
        path: column_type
        for path, column_type in as_text.items()
        if path in routes.discarding_rows and path not in new
    }
    checks = [
        (f"{display_path(path)} (new key)", check) for path, check in value_checks(source, new)
    ]
    checks += [
        (f"{display_path(path)} (not a {conflicting[path].simpleString()})", check)
        for path, check in misfit_checks(source, conflicting)
    ]
    return checks


def time_candidates(
    settings: IngestSettings,
    registry: list[RegistryEntry],
    inferred: StructType,
    routes: Routes,
) -> set[JsonPath]:
    """New paths whose values the batch holds as text (JSON strings, not objects kept as
    text), with no hint, not the record key and not routed elsewhere: each becomes a
    timestamp column if every value the batch has there is a time, ISO 8601
    (schema/exact.py) or in one of the topic's `time_formats` (counted while the
    batch is parsed: time_misfit_checks), and the cap gives it a column."""
    hints = column_hints(settings.topic)
    known = {entry.json_keys for entry in registry}
    keys = {dotted(path) for path in settings.topic.record_key}  # identities stay as sent
    return {
        path
        for path in text_leaves(inferred)
        if path not in known
        and path not in keys
        and path not in routes.kept_out
        and hint_of(path, hints) is None
    }


def text_leaves(schema: StructType) -> set[JsonPath]:
    """Paths of leaves whose values are JSON strings (not arrays or objects shown as text)."""
    parent, children = table_leaves(schema)
    found = {leaf.path for leaf in parent if isinstance(type_at(schema, leaf.ordinals), StringType)}
    for child in children:
        found |= {
            leaf.path
            for leaf in element_leaves(child)
            if isinstance(type_at(child.element, leaf.ordinals), StringType)
        }
    return found


def timestamp_text_paths(
    as_text: dict[JsonPath, DataType],
    routes: Routes,
    registry: list[RegistryEntry],
    topic: TopicConfig,
) -> tuple[set[JsonPath], set[JsonPath]]:
    """Paths parsed as text for a timestamp column, as (settled, new).

    Settled paths have their column already, whatever their mode (a time the
    topic reads fits its column), or are the event time (first under the cap):
    times_as_iso rewrites them as the batch is parsed, so checks and modes see
    one form. New
    ones (a hinted path's first batch) may yet be left without a column by the
    cap or a mode: they are counted as times are (time_misfit_checks) and
    rewritten only once a plan gives them their column, so text that stays text
    (in `_overflow`) is never rewritten."""
    known = {entry.json_keys for entry in registry}
    event_time = dotted(topic.event_time)
    timestamps = {
        path
        for path, column_type in as_text.items()
        if isinstance(column_type, TimestampType | TimestampNTZType)
    }
    settled = {
        path
        for path in timestamps
        if path in known or (path == event_time and path not in routes.kept_out)
    }
    new = {path for path in timestamps if path not in known and path != event_time}
    return settled, new


def admitted_paths(plans: dict[str, SchemaPlan]) -> set[JsonPath]:
    """The paths the plans give a new column."""
    return {entry.json_keys for plan in plans.values() for entry in plan.added}


# A change of one leaf's value (its text, as parsed), for rewrite_leaves.
ValueRewrite = Callable[[Column], Column]


def times_as_iso(
    source: StructType, topic: TopicConfig, paths: Collection[JsonPath]
) -> dict[JsonPath, ValueRewrite]:
    """Per path of `paths` (leaves parsed as text for a timestamp column), the rewrite
    that puts its time as ISO 8601 text, for the column to take exactly: the event time
    in any format schema/event_time.py reads (epochs, the topic's formats, a date
    alone, ...), any other path in a format the topic declares (`time_formats`). Text
    the column takes as it is stays as sent, and so does text with digits beyond
    microseconds (to `__text` whole: no timestamp holds it) or that no format reads.
    The event time's reader is SQL on the `_record` column (it names it)."""
    event_time = dotted(topic.event_time)
    parent, _ = table_leaves(source)
    rewrites: dict[JsonPath, ValueRewrite] = {}
    for leaf in parent:
        if leaf.path == event_time and leaf.path in paths:
            sql = event_timestamp_sql(
                f"{RECORD}.{positional(leaf.ordinals)}", topic.event_time_formats
            )
            rewrites[leaf.path] = lambda value, sql=sql: as_iso(value, F.expr(sql))
    if topic.time_formats:
        formats = topic.time_formats
        for path in set(paths) - {event_time}:
            rewrites[path] = lambda value: as_iso(value, declared_timestamp(value, formats))
    return rewrites


def empty_objects_nulled(hidden: dict[JsonPath, DataType]) -> dict[JsonPath, ValueRewrite]:
    """Per leaf parse.empty_strings_as_text brought back (text, or arrays of it), the rewrite that
    makes its `{}` null again: an empty object holds no value. An array left with no
    value at all becomes null too, as the key was before (so `[{}]` alone never makes
    a column)."""

    def nulled(value: Column, data_type: DataType) -> Column:
        if isinstance(data_type, ArrayType):
            inner = data_type.elementType
            kept = F.transform(value, lambda element: nulled(element, inner))
            return F.when(F.exists(kept, lambda element: element.isNotNull()), kept)
        return F.when(value != F.lit(EMPTY_OBJECT_TEXT), value)

    def text_inside(data_type: DataType) -> bool:
        if isinstance(data_type, ArrayType):
            return text_inside(data_type.elementType)
        return isinstance(data_type, StringType)

    return {
        path: lambda value, data_type=data_type: nulled(value, data_type)
        for path, data_type in hidden.items()
        if text_inside(data_type)  # "{}" can be compared with text only (ANSI)
    }


def rewrite_leaves(
    source: StructType, *rewrites: dict[JsonPath, ValueRewrite]
) -> Callable[[Column], Column] | None:
    """A rewrite of each record (parsed with `source`) applying, per leaf, its rewrites
    in the order given: at the record's own leaves and inside the elements of its
    arrays of objects (leaves deeper than that are left as parsed). None when no
    leaf has one."""
    at: dict[JsonPath, list[ValueRewrite]] = {}
    for mapping in rewrites:
        for path, rewrite in mapping.items():
            at.setdefault(path, []).append(rewrite)
    parent, children = table_leaves(source)
    top = [leaf for leaf in parent if leaf.path in at]
    inner = {
        child.ordinals: [leaf for leaf in element_leaves(child) if leaf.path in at]
        for child in children
    }
    inner = {ordinals: leaves for ordinals, leaves in inner.items() if leaves}
    if not top and not inner:
        return None

    def apply(struct: Column, leaves: list[Leaf]) -> Column:
        rewritten = struct
        for leaf in leaves:
            value = field_at(struct, leaf.ordinals)  # as parsed: each expression stays small
            for rewrite in at[leaf.path]:
                value = rewrite(value)
            rewritten = rewritten.withField(positional(leaf.ordinals), value)
        return rewritten

    def in_elements(leaves: list[Leaf]) -> Callable[[Column], Column]:
        # One argument: F.transform takes a two-argument lambda as (element, index).
        return lambda element: apply(element, leaves)

    def rewrite_record(record: Column) -> Column:
        rewritten = apply(record, top)
        for ordinals, leaves in inner.items():
            array = F.transform(field_at(record, ordinals), in_elements(leaves))
            rewritten = rewritten.withField(positional(ordinals), array)
        return rewritten

    return rewrite_record


def as_iso(text: Column, read: Column) -> Column:
    """`text` (a time as sent) as ISO 8601 text, from `read` (its timestamp), when the
    text needs reading (a timestamp does not take it as it is, and it has no digits
    beyond microseconds) and the ISO text fits; else `text` itself."""
    iso = F.date_format(read, ISO_TIMESTAMP_FORMAT)
    needs_reading = ~fits(text, TimestampType()) & ~text.rlike(BEYOND_MICROSECONDS)
    return F.coalesce(F.when(needs_reading & fits(iso, TimestampType()), iso), text)


def positional(ordinals: tuple[int, ...]) -> str:
    """The dotted name of a field in a record parsed with positional names (`f0.f3`)."""
    return ".".join(f"f{ordinal}" for ordinal in ordinals)


def time_misfit_checks(
    source: StructType, candidates: Collection[JsonPath], formats: tuple[str, ...]
) -> list[tuple[JsonPath, Column]]:
    """Per new text path (time_candidates), whether a line's record holds a value there
    that is not a time: neither ISO 8601 nor, read by a declared format, ISO text
    (as_iso, the rewrite a timed path's values then get)."""
    timestamp = TimestampType()

    def misfit(value: Column, _: DataType) -> Column:
        read = as_iso(value, declared_timestamp(value, formats)) if formats else value
        return value.isNotNull() & ~fits(read, timestamp)

    return _checks(source, {path: misfit for path in candidates})


def all_leaves(schema: StructType) -> list[Leaf]:
    """Every leaf of a batch's schema: the raw table's and its child tables'."""
    parent, children = table_leaves(schema)
    return parent + [leaf for child in children for leaf in element_leaves(child)]


def ignored_hints(settings: IngestSettings, registry: list[RegistryEntry]) -> list[str]:
    """Hints on paths whose column exists with another type (a type never changes)."""
    hints = dict(settings.topic.hints)
    return [
        f"{entry.json_path}: {hint} (its column {entry.column_name} is {entry.data_type})"
        for entry in registry
        if (hint := hint_of(entry.json_keys, hints)) and hint != entry.data_type
    ]


def bare_name(table: str) -> str:
    """`schema.table` -> `table`."""
    return table.split(".")[1]


def parse_types(plans: dict[str, SchemaPlan], source: StructType) -> dict[JsonPath, DataType]:
    """Types to parse the batch's leaves with: each existing column's type, or text where
    the batch's values conflict with it (schema/type_conflicts.py)."""
    parent, children = table_leaves(source)
    paths = {leaf.path for leaf in parent}
    paths |= {leaf.path for child in children for leaf in element_leaves(child)}
    types: dict[JsonPath, DataType] = {}
    for plan in plans.values():
        as_text = plan.text_paths()
        for entry in plan.entries:
            if entry.json_keys in paths:
                text = entry.json_keys in as_text
                types[entry.json_keys] = StringType() if text else spark_type(entry.data_type)
    return types


def holds_value(value: Column, data_type: DataType) -> Column:
    """Whether a leaf holds a value: not NULL, and for an array not empty ("" is a value)."""
    if isinstance(data_type, ArrayType):
        return F.coalesce(F.size(value) > 0, F.lit(False))
    return value.isNotNull()


def value_checks(source: StructType, candidates: set[JsonPath]) -> list[tuple[JsonPath, Column]]:
    """Per candidate path, whether a line's record (parsed with `source`) holds a value there."""
    return _checks(source, {path: holds_value for path in candidates})


def misfit_checks(
    source: StructType, column_types: dict[JsonPath, DataType]
) -> list[tuple[JsonPath, Column]]:
    """Per conflicting path (parsed as text), whether a line's record holds a value there
    that its column's type (`column_types`) does not hold exactly."""

    def misfit(column_type: DataType) -> Callable[[Column, DataType], Column]:
        return lambda value, _: value.isNotNull() & ~fits(value, column_type)

    return _checks(source, {path: misfit(t) for path, t in column_types.items()})


def _test_at(leaf: Leaf, test: Callable[[Column, DataType], Column]) -> Callable[[Column], Column]:
    """`test` on an array element's leaf (a one-argument lambda, as `F.exists` wants)."""
    return lambda element: test(field_at(element, leaf.ordinals), leaf.data_type)


def _checks(
    source: StructType, tests: dict[JsonPath, Callable[[Column, DataType], Column]]
) -> list[tuple[JsonPath, Column]]:
    """Per path in `tests`, whether a line's record passes its test at that path (for a
    child table's path: whether any element does)."""
    record = F.col(RECORD)
    parent, children = table_leaves(source)
    checks: list[tuple[JsonPath, Column]] = [
        (leaf.path, tests[leaf.path](field_at(record, leaf.ordinals), leaf.data_type))
        for leaf in parent
        if leaf.path in tests
    ]
    for child in children:
        array = field_at(record, child.ordinals)
        for leaf in element_leaves(child):
            if leaf.path in tests:
                holds = F.exists(array, _test_at(leaf, tests[leaf.path]))
                checks.append((leaf.path, F.coalesce(holds, F.lit(False))))
    return checks
