"""Registry rows become column docs; YAML descriptions win."""

from __future__ import annotations

from dynamic_ddl.adapter.discovered_columns import (
    DiscoveredColumn,
    describe,
    descriptions_from_pattern,
    descriptions_to_add,
    registry_query,
)


def _column(name: str, path: str, status: str = "active") -> DiscoveredColumn:
    return DiscoveredColumn("raw_t", name, path, "bigint", "20261121T101500Z-a1", "b9", status)


def test_a_description_names_path_type_and_first_batch():
    text = describe(_column("data_event_id", "_data.event.id"))
    assert text == (
        "Discovered at run time: JSON path `_data.event.id`, type bigint, "
        "first seen in batch 20261121T101500Z-a1."
    )


def test_a_stale_column_says_since_when_it_is_missing():
    text = describe(_column("data_gps_lat", "_data.gps.lat", status="stale"))
    assert text.endswith("; not sent since batch b9.")


def test_yaml_descriptions_win_and_empty_ones_are_filled():
    discovered = [_column("data_a", "_data.a"), _column("data_b", "_data.b"), _column("c", "c")]
    documented = {"DATA_A": "Written by a person.", "data_b": "  ", "_batch_id": "The batch."}
    added = descriptions_to_add(documented, discovered)
    assert set(added) == {"data_b", "c"}
    assert added["c"].startswith("Discovered at run time: JSON path `c`")


def test_a_text_companion_in_the_warehouse_is_described_with_its_column():
    discovered = [_column("data_n", "_data.n"), _column("data_m", "_data.m")]
    in_warehouse = ["data_n", "DATA_N__TEXT", "data_m", "data_x__text"]
    added = descriptions_to_add({}, discovered, in_warehouse)
    assert set(added) == {"data_n", "DATA_N__TEXT", "data_m"}  # no companion data_m lacks
    assert added["DATA_N__TEXT"].startswith("Values at JSON path `_data.n` that data_n (bigint)")
    assert "exact_column" in added["DATA_N__TEXT"]
    assert set(descriptions_to_add({"data_n__text": "Mine."}, discovered, in_warehouse)) == {
        "data_n",
        "data_m",
    }


def test_the_registry_query_reads_one_schema_quoted():
    assert registry_query("analytics").endswith("from `analytics`.`raw_schema_registry`")


def test_a_pattern_describes_the_undescribed_warehouse_columns():
    in_warehouse = {"id": "string", "theme": "string", "storage_used_gb": "double"}
    added = descriptions_from_pattern(
        "Key `{column}`, as {type}.", {"ID": "The user.", "theme": ""}, in_warehouse
    )
    assert added == {
        "theme": "Key `theme`, as string.",
        "storage_used_gb": "Key `storage_used_gb`, as double.",
    }
