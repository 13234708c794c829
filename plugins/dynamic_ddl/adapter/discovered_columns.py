"""Docs for columns found at run time.

A raw table's columns come from the JSON its provider sends, so no YAML
names them. When `dbt docs generate` builds the catalog, the adapter reads
each schema's registry and gives every column that YAML leaves undocumented
a description from it: the JSON path, the type, the batch that first held
it. A new field is documented by the next docs build, with no edit.

A pivot model's key columns are not in the registry: its YAML gives one
sentence for all of them (`meta: {discovered_columns: "... {column} ..."}`),
filled in for each column the warehouse has and YAML does not describe.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dynamic_ddl.schema.exact import text_column

REGISTRY_TABLE = "raw_schema_registry"
PATTERN_META_KEY = "discovered_columns"


@dataclass(frozen=True)
class DiscoveredColumn:
    """One registry row, as docs need it."""

    table_name: str
    column_name: str
    json_path: str
    data_type: str
    first_seen_batch: str
    last_seen_batch: str
    status: str


def registry_query(schema: str) -> str:
    """The query for every registry row of `schema`, in DiscoveredColumn's field order."""
    return (
        "select table_name, column_name, json_path, data_type, first_seen_batch, "
        f"last_seen_batch, status from `{schema}`.`{REGISTRY_TABLE}`"
    )


def describe(column: DiscoveredColumn) -> str:
    """A column's description, from its registry row.

    Example:
        >>> row = ("raw_t", "data_id", "_data.id", "bigint", "b1", "b2", "active")
        >>> describe(DiscoveredColumn(*row))
        'Discovered at run time: JSON path `_data.id`, type bigint, first seen in batch b1.'
    """
    text = (
        f"Discovered at run time: JSON path `{column.json_path}`, type {column.data_type}, "
        f"first seen in batch {column.first_seen_batch}"
    )
    if column.status != "active":
        text += f"; not sent since batch {column.last_seen_batch}"
    return text + "."


def describe_text(column: DiscoveredColumn) -> str:
    """The description of a discovered column's text companion (schema/exact.py).

    Example:
        >>> row = ("raw_t", "data_n", "_data.n", "bigint", "b1", "b2", "active")
        >>> describe_text(DiscoveredColumn(*row))[:68]
        'Values at JSON path `_data.n` that data_n (bigint) could not hold ex'
    """
    return (
        f"Values at JSON path `{column.json_path}` that {column.column_name}"
        f" ({column.data_type}) could not hold exactly, as their JSON text; read the pair"
        " as one column with the exact_column macro."
    )


def descriptions_to_add(
    documented: Mapping[str, str],
    discovered: Iterable[DiscoveredColumn],
    in_warehouse: Iterable[str] = (),
) -> dict[str, str]:
    """Column name to description, for the discovered columns YAML leaves undescribed,
    and their text companions among the table's columns `in_warehouse`.

    `documented` maps a node's column names (any case) to their YAML
    descriptions; a written description always wins over the registry's.
    """
    described = {name.lower() for name, text in documented.items() if text.strip()}
    present = {name.lower(): name for name in in_warehouse}
    added = {}
    for column in discovered:
        added[column.column_name] = describe(column)
        companion = present.get(text_column(column.column_name).lower())
        if companion is not None:
            added[companion] = describe_text(column)
    return {name: text for name, text in added.items() if name.lower() not in described}


def descriptions_from_pattern(
    pattern: str, documented: Mapping[str, str], in_warehouse: Mapping[str, str]
) -> dict[str, str]:
    """Column name to description, from a model's `{column}`/`{type}` sentence, for
    the warehouse columns (name to type) YAML leaves undescribed.

    Example:
        >>> descriptions_from_pattern("App attribute `{column}` ({type}).", {}, {"theme": "string"})
        {'theme': 'App attribute `theme` (string).'}
    """
    described = {name.lower() for name, text in documented.items() if text.strip()}
    return {
        name: pattern.format(column=name, type=data_type)
        for name, data_type in in_warehouse.items()
        if name.lower() not in described
    }
