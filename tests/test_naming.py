"""Column naming for JSON paths: the documented rule, on hostile keys."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dynamic_ddl.schema.naming import (
    MAX_NAME_LENGTH,
    UnaddressableKey,
    assign_column_names,
    base_column_name,
    json_path,
)


def test_talk_example():
    assert base_column_name(("_data", "record", "state")) == "data_record_state"


def test_hostile_keys_become_plain_lowercase_names():
    cases = {
        ("First Name",): "first_name",
        ("a.b",): "a_b",
        ("température",): "temperature",
        ("名前",): base_column_name(("名前",)),
        ("select",): "select",
        ("1st-place",): "c_1st_place",
        ("--;drop table x",): "drop_table_x",
        ("",): "col",
        ("`quoted`",): "quoted",
    }
    for path, expected in cases.items():
        name = base_column_name(path)
        assert name == expected
        assert name.replace("_", "").isalnum() and name == name.lower() and name.isascii()
    assert base_column_name(("名前",)).startswith("k") and len(base_column_name(("名前",))) == 7


def test_long_paths_are_cut_with_a_stable_suffix():
    path = ("x" * 300,)
    name = base_column_name(path)
    assert len(name) == MAX_NAME_LENGTH
    assert name == base_column_name(path)
    assert base_column_name(("x" * 301,)) != name


def test_collisions_resolve_deterministically_whatever_the_order():
    paths = [
        ("Name",),
        ("name",),
        ("NAME",),
        ("a.b",),
        ("a", "b"),
        ("first name",),
        ("first_name",),
    ]
    forward = assign_column_names(paths)
    backward = assign_column_names(list(reversed(paths)))
    assert forward == backward
    assert len(set(forward.values())) == len(paths)
    assert forward[("a", "b")] == "a_b"  # the first in sorted order keeps the plain name


def test_existing_names_are_kept_when_a_colliding_path_arrives():
    existing = {("name",): "name"}
    names = assign_column_names([("Name",), ("name",)], existing)
    assert names[("name",)] == "name"
    assert names[("Name",)].startswith("name_")


def test_json_path_quotes_keys_that_need_it():
    assert json_path(("_data", "record", "id")) == "$._data.record.id"
    assert json_path(("a.b", "it's", "x y")) == """$['a.b']["it's"]['x y']"""
    with pytest.raises(UnaddressableKey):
        json_path(("both ' and \"",))


def test_a_key_with_both_quotes_still_gets_a_collision_free_name():
    names = assign_column_names([("both'\"",), ("both",)])
    assert names[("both",)] == "both" and names[("both'\"",)].startswith("both_")


KEYS = st.text(alphabet=st.sampled_from("xX_.é名 "), max_size=130)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.lists(KEYS, min_size=1, max_size=3).map(tuple), max_size=8))
@example([("x" * 110 + "_yy",), ("X" * 110 + "_yy",)])  # found by review: `xx…x__eb8a5326`
def test_any_paths_get_distinct_plain_names_never_holding_a_double_underscore(paths):
    """`__` separates a raw table from its child and protocol tables: a column (and so a
    child table's array name) never holds it, and no name is longer than the limit."""
    names = assign_column_names(paths)
    assert len(set(names.values())) == len(set(paths))
    for name in names.values():
        assert "__" not in name and len(name) <= MAX_NAME_LENGTH, name
