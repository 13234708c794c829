"""Property-based test of the pivot macros through dbt: generated keys, nothing lost.

Each example loads a few batches of key/value rows with generated keys
(tests/json_text.py's tricky keys and any text) into a source table and runs,
after each batch, an incremental upsert pivot (`lnd_kv`, only the new batch)
and, at the end, a from-scratch pivot of every row (`fresh_kv`). Properties:

- no run fails because of the keys or values;
- per (id, ts), the values in the pivot columns and `_overflow` are exactly
  the greatest value of each key (no value lost, none in two places);
- the incremental and the fresh build have the same columns.

Each (id, ts) comes in one batch only: how a row's attributes combine across
batches is the landing layer's semantics (issue 21), not the pivot's.
`make test` runs a few fixed examples; FUZZ_EXAMPLES / FUZZ_RANDOM as in
tests/test_fuzz_ingest.py.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from dbt.tests.util import run_dbt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.adapter.test_pivot import PivotProject
from tests.json_text import TRICKY_KEYS

EXAMPLES = max(1, int(os.environ.get("FUZZ_EXAMPLES", "12")) // 4)
RANDOM = os.environ.get("FUZZ_RANDOM") == "1"

SOURCES = """
sources:
  - name: feed
    schema: "{{ target.schema }}"
    tables:
      - name: kv
"""
INCREMENTAL = """
{{ config(
    materialized='incremental', incremental_strategy='upsert', unique_key=['id', 'ts'],
    ordering_field='batch', on_schema_change='append_new_columns'
) }}
{{ pivot_key_values(
    source('feed', 'kv'), group_by=['id', 'ts'], carry=['batch'], where=unseen_batches('batch')
) }}
"""
FRESH = """
{{ config(materialized='table') }}
{{ pivot_key_values(source('feed', 'kv'), group_by=['id', 'ts'], carry=['batch']) }}
"""
FIXED = {"id", "ts", "batch", "_overflow", "_unconverted"}

keys = st.one_of(st.sampled_from([k for k in TRICKY_KEYS if k]), st.text(min_size=1, max_size=8))
values = st.one_of(st.none(), st.text(max_size=6))


@st.composite
def batches(draw) -> list[list[tuple]]:
    """Batches of (id, ts, key, value) rows; each (id, ts) in one batch only."""
    count = draw(st.integers(min_value=1, max_value=3))
    return [
        draw(
            st.lists(
                st.tuples(st.sampled_from([f"u{n}-{b}" for n in range(3)]), keys, values).map(
                    lambda row, b=b: (row[0], f"t{b}", row[1], row[2], b)
                ),
                min_size=1,
                max_size=12,
            )
        )
        for b in range(1, count + 1)
    ]


def expected_values(rows: list[tuple]) -> dict[tuple, Counter]:
    """Per (id, ts): the greatest non-null value of each key, as a multiset."""
    greatest: dict[tuple, dict[str, str]] = {}
    for entity, ts, key, value, _ in rows:
        group = greatest.setdefault((entity, ts), {})
        if value is not None and (key not in group or value > group[key]):
            group[key] = value
    return {group: Counter(by_key.values()) for group, by_key in greatest.items()}


def pivoted_values(project, table: str) -> tuple[dict[tuple, Counter], list[str]]:
    """Per (id, ts): the values in the pivot columns and `_overflow`; and the columns."""
    columns = [row[0] for row in project.run_sql(f"describe {table}", fetch="all")]
    found = {}
    for row in project.run_sql(f"select * from {table}", fetch="all"):
        record = dict(zip(columns, row, strict=True))
        held = [v for c, v in record.items() if c in pivot_columns(columns) and v is not None]
        held += list((record["_overflow"] or {}).values())
        found[(record["id"], record["ts"])] = Counter(held)
    return found, columns


def pivot_columns(columns: list[str]) -> list[str]:
    """The pivot's key columns: never starting with `_` (the upsert's commit columns do)."""
    return [c for c in columns if c not in FIXED and not c.startswith("_")]


class TestPivotFuzz(PivotProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": SOURCES, "lnd_kv.sql": INCREMENTAL, "fresh_kv.sql": FRESH}

    def test_generated_keys_are_never_lost(self, project, spark):
        @settings(
            max_examples=EXAMPLES,
            derandomize=not RANDOM,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            print_blob=True,
        )
        @given(generated=batches())
        def check(generated):
            schema = project.test_schema
            for table in ("kv", "lnd_kv", "lnd_kv__versions", "fresh_kv"):
                project.run_sql(f"drop table if exists {schema}.{table}")
            everything = []
            for rows in generated:
                frame = spark.createDataFrame(
                    rows, "id string, ts string, record_key string, record_value string, batch int"
                )
                frame.write.mode("append").format("parquet").saveAsTable(f"{schema}.kv")
                everything += rows
                run_dbt(["run", "--select", "lnd_kv"])
                incremental, _ = pivoted_values(project, f"{schema}.lnd_kv")
                assert incremental == expected_values(everything)
            run_dbt(["run", "--select", "fresh_kv"])
            fresh, fresh_columns = pivoted_values(project, f"{schema}.fresh_kv")
            assert fresh == expected_values(everything)
            _, incremental_columns = pivoted_values(project, f"{schema}.lnd_kv")
            incremental_keys = sorted(pivot_columns(incremental_columns))
            assert incremental_keys == sorted(pivot_columns(fresh_columns))

        check()
