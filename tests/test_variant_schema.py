"""Reading schema_of_variant_agg's type strings, hostile keys included."""

from __future__ import annotations

import pytest

from dynamic_ddl.schema.variant_schema import VariantSchemaError, parse_variant_type


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("BIGINT", "bigint"),
        ("OBJECT<>", "struct<>"),
        ("OBJECT<a: OBJECT<b: BIGINT>, `a.b`: STRING>", "struct<a:struct<b:bigint>,a.b:string>"),
        ("OBJECT<`it's`: BOOLEAN, `x y`: ARRAY<DOUBLE>>", "struct<it's:boolean,x y:array<double>>"),
        ("OBJECT<`q``b`: VOID, `名前`: VARIANT>", "struct<q`b:void,名前:variant>"),
        (
            "OBJECT<d: DECIMAL(18,2), t: ARRAY<OBJECT<k: STRING>>>",
            "struct<d:decimal(18,2),t:array<struct<k:string>>>",
        ),
        ("OBJECT<State: STRING, state: STRING>", "struct<State:string,state:string>"),
    ],
)
def test_parses(text, expected):
    assert parse_variant_type(text).simpleString() == expected


@pytest.mark.parametrize(
    "text", ["OBJECT<a BIGINT>", "OBJECT<`a: BIGINT>", "MAP<STRING>", "BIGINT x"]
)
def test_rejects_with_position(text):
    with pytest.raises(VariantSchemaError, match="position"):
        parse_variant_type(text)
