"""Flattening a nested schema into leaf columns, the Relationalize way.

Nested objects become one column per leaf, named by path (see naming.py).
Arrays of objects become child tables (one per array path) and are not
leaves of the parent; arrays of scalars and scalars stay as they are. An
empty object has no leaves: there is nothing to hold until a key appears.

Values are read from the parsed struct by field position, never by name:
Spark resolves struct fields case-insensitively, so keys such as `State`
and `state`, or a key `a.b` next to an object `a` holding `b`, would be
ambiguous by name. `positional_type` renames every field to `f<ordinal>`;
casting the parsed struct to it (a struct cast maps fields by position) makes
every leaf reachable by plain, unique names.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from dynamic_ddl.schema.naming import ELEMENT_KEY, JsonPath

Ordinals = tuple[int, ...]


@dataclass(frozen=True)
class Leaf:
    """A value column of the flattened table: its JSON path, Spark type and field ordinals."""

    path: JsonPath
    data_type: DataType
    ordinals: Ordinals = ()


@dataclass(frozen=True)
class ChildArray:
    """An array of objects, flattened into a child table of its own."""

    path: JsonPath
    element: StructType
    ordinals: Ordinals = ()


def objects_in_array(data_type: DataType) -> bool:
    """Whether the type is an array of objects (a child table, or JSON text below one)."""
    return isinstance(data_type, ArrayType) and isinstance(data_type.elementType, StructType)


def holds_struct(data_type: DataType) -> bool:
    """Whether the type is an object, or arrays (of arrays ...) of objects."""
    if isinstance(data_type, ArrayType):
        return holds_struct(data_type.elementType)
    return isinstance(data_type, StructType)


def split_schema(
    schema: StructType, prefix: JsonPath = (), ordinals: Ordinals = ()
) -> tuple[list[Leaf], list[ChildArray]]:
    """Leaves and child arrays of a (possibly nested) struct, in schema order.

    Example:
        >>> from pyspark.sql.types import LongType, StringType
        >>> inner = StructType([StructField("u", LongType()), StructField("k", StringType())])
        >>> leaves, _ = split_schema(StructType([StructField("p", inner)]))
        >>> [(leaf.path, leaf.ordinals) for leaf in leaves]
        [(('p', 'u'), (0, 0)), (('p', 'k'), (0, 1))]
    """
    leaves: list[Leaf] = []
    children: list[ChildArray] = []
    for ordinal, field in enumerate(schema.fields):
        path, position = (*prefix, field.name), (*ordinals, ordinal)
        data_type = field.dataType
        if isinstance(data_type, StructType):
            nested_leaves, nested_children = split_schema(data_type, path, position)
            leaves.extend(nested_leaves)
            children.extend(nested_children)
        elif objects_in_array(data_type):
            children.append(ChildArray(path, data_type.elementType, position))
        else:
            leaves.append(Leaf(path, data_type, position))
    return leaves, children


def positional_type(data_type: DataType) -> DataType:
    """The same type with every struct field renamed `f<ordinal>`, at every depth.

    Example:
        >>> from pyspark.sql.types import LongType
        >>> positional_type(StructType([StructField("A.b", LongType())])).simpleString()
        'struct<f0:bigint>'
    """
    if isinstance(data_type, StructType):
        return StructType(
            [
                StructField(f"f{ordinal}", positional_type(field.dataType), True)
                for ordinal, field in enumerate(data_type.fields)
            ]
        )
    if isinstance(data_type, ArrayType):
        return ArrayType(positional_type(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(data_type.keyType, positional_type(data_type.valueType), True)
    return data_type


def field_at(record: Column, ordinals: Ordinals) -> Column:
    """The value at `ordinals` inside a struct cast to its positional type."""
    value = record
    for ordinal in ordinals:
        value = value.getField(f"f{ordinal}")
    return value


def with_leaf_types(schema: StructType, types: dict[JsonPath, DataType]) -> StructType:
    """The schema with the leaves named in `types` given those types (for parsing).

    Paths into the elements of an array of objects go through ELEMENT_KEY.
    """

    def retype(data_type: DataType, path: JsonPath) -> DataType:
        if path in types:
            return types[path]
        if isinstance(data_type, StructType):
            return StructType(
                [
                    StructField(f.name, retype(f.dataType, (*path, f.name)), True)
                    for f in data_type.fields
                ]
            )
        if objects_in_array(data_type):
            return ArrayType(retype(data_type.elementType, (*path, ELEMENT_KEY)), True)
        return data_type

    return retype(schema, ())


def max_depth(schema: DataType) -> int:
    """How deeply structs and arrays nest in a type (a scalar is 0)."""
    if isinstance(schema, StructType):
        return 1 + max((max_depth(f.dataType) for f in schema.fields), default=0)
    if isinstance(schema, ArrayType):
        return 1 + max_depth(schema.elementType)
    return 0


def deeper_than(value: Column, data_type: DataType, levels: int) -> Column:
    """Whether a value (of positional `data_type`) nests more than `levels` objects/arrays.

    Built only from the schema, so it costs nothing when no path is that deep.
    """
    if max_depth(data_type) <= levels:
        return F.lit(False)
    if levels == 0:
        return value.isNotNull()
    if isinstance(data_type, StructType):
        checks = [
            deeper_than(value.getField(f.name), f.dataType, levels - 1) for f in data_type.fields
        ]
        result = checks[0]
        for check in checks[1:]:
            result = result | check
        return F.coalesce(result, F.lit(False))
    element = data_type.elementType  # ArrayType: max_depth > 0 rules scalars out
    return F.coalesce(
        F.exists(value, lambda item: deeper_than(item, element, levels - 1)), F.lit(False)
    )


def leaves_of_kind(
    value: Column, data_type: DataType, kinds: tuple[type, ...]
) -> list[tuple[Column, bool]]:
    """Every leaf of one of `kinds` in a value (of positional `data_type`), inside
    objects and arrays: (the leaf, whether it is an array of such values).

    A leaf inside arrays comes as one array of its values (`a[].b` is the
    array of every element's `b`, nested arrays flattened), so a check on it
    is one array function (`array_contains`, ...), compiled like the rest of
    the parse, where a lambda (`exists`) is not.
    """

    def walk(value: Column, data_type: DataType, in_array: bool) -> list[tuple[Column, bool]]:
        if isinstance(data_type, kinds):
            return [(value, in_array)]
        if isinstance(data_type, StructType):
            return [
                leaf
                for f in data_type.fields
                for leaf in walk(value.getField(f.name), f.dataType, in_array)
            ]
        if isinstance(data_type, ArrayType):
            if in_array:  # an array of arrays, as one array per row
                return walk(F.flatten(value), data_type.elementType, True)
            return walk(value, data_type.elementType, True)
        return []

    return walk(value, data_type, False)
