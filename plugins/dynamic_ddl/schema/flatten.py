"""Flattening a nested schema into leaf columns, the Relationalize way.

Nested objects become one column per leaf, named by path (see naming.py).
Arrays of objects become child tables (one per array path) and are not
leaves of the parent; arrays of scalars and scalars stay as they are. An
empty object has no leaves: there is nothing to hold until a key appears.

Values are read from the parsed VARIANT by JSON path, which is exact about
case and punctuation: struct field access in Spark is case-insensitive and
splits on dots, so `State` vs `state` or a key `a.b` would be ambiguous.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, StructType

from dynamic_ddl.schema.naming import JsonPath, UnaddressableKey, json_path


@dataclass(frozen=True)
class Leaf:
    """A value column of the flattened table: its JSON path and Spark type."""

    path: JsonPath
    data_type: DataType


@dataclass(frozen=True)
class ChildArray:
    """An array of objects, flattened into a child table of its own."""

    path: JsonPath
    element: StructType


def split_schema(schema: StructType, prefix: JsonPath = ()) -> tuple[list[Leaf], list[ChildArray]]:
    """Leaves and child arrays of a (possibly nested) struct, in schema order.

    Example:
        >>> from pyspark.sql.types import LongType, StringType, StructField
        >>> inner = StructType([StructField("u", LongType()), StructField("k", StringType())])
        >>> leaves, _ = split_schema(StructType([StructField("p", inner)]))
        >>> [leaf.path for leaf in leaves]
        [('p', 'u'), ('p', 'k')]
    """
    leaves: list[Leaf] = []
    children: list[ChildArray] = []
    for field in schema.fields:
        path = (*prefix, field.name)
        data_type = field.dataType
        if isinstance(data_type, StructType):
            nested_leaves, nested_children = split_schema(data_type, path)
            leaves.extend(nested_leaves)
            children.extend(nested_children)
        elif isinstance(data_type, ArrayType) and isinstance(data_type.elementType, StructType):
            children.append(ChildArray(path=path, element=data_type.elementType))
        else:
            leaves.append(Leaf(path=path, data_type=data_type))
    return leaves, children


def variant_at(variant: Column, path: JsonPath) -> Column:
    """The VARIANT value at `path`, by JSON path, or by map lookups for keys no path can name."""
    try:
        return F.try_variant_get(variant, json_path(path), "variant")
    except UnaddressableKey:
        value = variant
        for key in path:
            value = F.element_at(value.try_cast("map<string,variant>"), F.lit(key))
        return value


def leaf_column(variant: Column, leaf: Leaf) -> Column:
    """The leaf's value, read from the VARIANT by its exact JSON path, as the leaf's type.

    try_variant_get yields NULL where a value does not fit the type; callers
    compare with the untyped value to find such values and keep them.
    """
    type_name = leaf.data_type.simpleString()
    try:
        return F.try_variant_get(variant, json_path(leaf.path), type_name)
    except UnaddressableKey:
        return F.try_variant_get(variant_at(variant, leaf.path), "$", type_name)


def max_depth(schema: DataType) -> int:
    """How deeply structs and arrays nest in a type (a scalar is 0)."""
    if isinstance(schema, StructType):
        return 1 + max((max_depth(f.dataType) for f in schema.fields), default=0)
    if isinstance(schema, ArrayType):
        return 1 + max_depth(schema.elementType)
    return 0


def flat_columns(variant: Column, leaves: list[Leaf], names: dict[JsonPath, str]) -> list[Column]:
    """One aliased column per leaf, for a select over the parsed records."""
    return [leaf_column(variant, leaf).alias(names[leaf.path]) for leaf in leaves]
