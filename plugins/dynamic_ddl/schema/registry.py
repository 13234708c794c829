"""The schema registry's logic: one entry per column per topic, updated per batch.

Given the registry so far and a batch's leaves, `plan_schema` decides which
paths get new columns (within the column cap), which paths' values conflict
with their column's type (type_conflicts.py: parsed as text, split between
the column and its `__text` companion), and which entries are stale (not
seen this batch). The caller turns the plan into `ALTER TABLE ... ADD
COLUMNS` and registry rows. A column's type never changes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

from pyspark.sql.types import DataType

from dynamic_ddl.schema.exact import text_column
from dynamic_ddl.schema.flatten import Leaf
from dynamic_ddl.schema.naming import ELEMENT_KEY, JsonPath, assign_column_names, display_path
from dynamic_ddl.schema.type_conflicts import parses_into
from dynamic_ddl.schema.variant_schema import parse_variant_type

ACTIVE = "active"
STALE = "stale"


@dataclass(frozen=True)
class RegistryEntry:
    """A discovered column: where it comes from, its type, and when it was seen."""

    topic: str
    table_name: str
    json_keys: JsonPath
    column_name: str
    data_type: str
    first_seen_batch: str
    last_seen_batch: str
    status: str = ACTIVE

    @property
    def json_path(self) -> str:
        return display_path(self.json_keys)


@dataclass(frozen=True)
class SchemaPlan:
    """What a batch changes: the registry after it, new columns, type conflicts, overflow."""

    entries: list[RegistryEntry]
    added: list[RegistryEntry]
    # Columns whose batch values have another type (entry, the batch's type): the
    # batch parses them as text; `texts` are those with values that do not fit.
    conflicts: list[tuple[RegistryEntry, str]]
    overflow: list[Leaf]
    texts: list[RegistryEntry] = field(default_factory=list)

    def text_paths(self) -> set[JsonPath]:
        """Paths this batch parses as text (the conflicts)."""
        return {entry.json_keys for entry, _ in self.conflicts}

    def text_columns(self) -> list[tuple[str, str]]:
        """The text companions this batch writes, as (column name, type)."""
        return [(text_column(entry.column_name), "string") for entry in self.texts]

    def new_paths(self) -> set[JsonPath]:
        """Paths the registry did not know: those given columns and those over the cap."""
        return {entry.json_keys for entry in self.added} | {leaf.path for leaf in self.overflow}

    def column_names(self) -> dict[JsonPath, str]:
        return {entry.json_keys: entry.column_name for entry in self.entries}


def hint_of(path: JsonPath, hints: Mapping[str, str]) -> str | None:
    """The hinted type of a path: by its registry path (`media[].type`) or by its keys
    joined with dots (`media.type`, as `pinned_paths` are written).

    Example:
        >>> hint_of(("media", "[]", "type"), {"media.type": "string"})
        'string'
    """
    shown = display_path(path)
    dotted = ".".join(key for key in path if key != ELEMENT_KEY)
    return hints.get(shown) or hints.get(dotted)


def spark_type(type_name: str) -> DataType:
    """A registry type name (Spark's simpleString) as a Spark type."""
    return parse_variant_type(type_name.upper().replace("STRUCT<", "OBJECT<"))


def plan_schema(
    existing: list[RegistryEntry],
    leaves: list[Leaf],
    topic: str,
    table_name: str,
    batch_id: str,
    max_columns: int,
    carried: Mapping[JsonPath, int] | None = None,
    pinned: Collection[JsonPath] = (),
    misfits: Mapping[JsonPath, int] | None = None,
    hints: Mapping[str, str] | None = None,
    kept_out: Collection[JsonPath] = (),
    timed: Collection[JsonPath] = (),
) -> SchemaPlan:
    """The registry after `batch_id`, and the DDL it implies.

    `pinned` paths (the topic's record key and event time, its `pinned_paths`)
    always get a column, past the cap too. When the cap cannot take every
    other new path, hinted paths come first, then
    the paths the most records carry (`carried`: path -> records holding a
    value), then path order. So one misbehaving record with thousands of
    keys cannot push out the keys every record sends. `misfits` (once the
    batch is parsed) counts, per conflicting path, the values that do not
    fit its column: those paths write their text companion. `hints` (display
    path -> type) give a new column its type instead of the batch's, which
    is then a conflict like any other if the batch's type differs. New paths
    in `kept_out` (schema modes that route them elsewhere: modes.Routes) get
    no column, whatever the room (the caller sends their values to `_overflow`
    or a quarantine); conflicting paths in it get no text companion. New
    `timed` paths (text, every value a time: ISO 8601 or a declared format) take
    `timestamp` columns, ranked like any path.

    Example:
        >>> from pyspark.sql.types import LongType
        >>> plan = plan_schema([], [Leaf(("a", "B"), LongType())], "t", "raw_t", "b1", 10)
        >>> [(e.column_name, e.data_type) for e in plan.added]
        [('a_b', 'bigint')]
    """
    by_path = {entry.json_keys: entry for entry in existing}
    seen = {leaf.path: leaf for leaf in leaves}
    room = max(0, max_columns - len(by_path))
    carried = carried or {}
    unknown = [leaf for leaf in leaves if leaf.path not in by_path]
    new_leaves = sorted(
        (leaf for leaf in unknown if leaf.path not in kept_out),
        key=lambda leaf: (
            hint_of(leaf.path, hints or {}) is None,
            -carried.get(leaf.path, 0),
            leaf.path,
        ),
    )
    # Pinned paths get their column past the cap too (found by review: once a flood of
    # keys had filled it, a path the models read went to `_overflow`, and they read
    # NULL); the cap bounds what the rest may take.
    first = [leaf for leaf in new_leaves if leaf.path in pinned]
    rest = [leaf for leaf in new_leaves if leaf.path not in pinned]
    left = max(0, room - len(first))
    admitted = sorted(first + rest[:left], key=lambda leaf: leaf.path)  # columns in path order
    overflow = rest[left:] + [leaf for leaf in unknown if leaf.path in kept_out]
    names = assign_column_names(
        (leaf.path for leaf in admitted), {path: e.column_name for path, e in by_path.items()}
    )

    entries, conflicts = [], []
    for path, entry in by_path.items():
        if path not in seen:
            entries.append(replace(entry, status=STALE))
            continue
        updated = replace(entry, last_seen_batch=batch_id, status=ACTIVE)
        incoming = seen[path].data_type
        if not parses_into(spark_type(entry.data_type), incoming):
            conflicts.append((updated, incoming.simpleString()))
        entries.append(updated)
    hints = hints or {}
    added = []
    for leaf in admitted:
        timestamp = "timestamp" if leaf.path in timed else None
        data_type = hint_of(leaf.path, hints) or timestamp or leaf.data_type.simpleString()
        entry = RegistryEntry(
            topic, table_name, leaf.path, names[leaf.path], data_type, batch_id, batch_id
        )
        if not parses_into(spark_type(data_type), leaf.data_type):
            conflicts.append((entry, leaf.data_type.simpleString()))
        added.append(entry)
    misfits = misfits or {}
    texts = [
        entry
        for entry, _ in conflicts
        if misfits.get(entry.json_keys, 0) > 0 and entry.json_keys not in kept_out
    ]
    return SchemaPlan(entries + added, added, conflicts, overflow, texts)


def add_columns_sql(table: str, added: list[RegistryEntry]) -> str | None:
    """`ALTER TABLE ... ADD COLUMNS` for the new columns, or None when there are none.

    Column names come from naming.py (lowercase letters, digits and `_`), and
    are backquoted all the same.
    """
    if not added:
        return None
    columns = ", ".join(f"`{entry.column_name}` {entry.data_type}" for entry in added)
    return f"alter table {table} add columns ({columns})"
