"""The pivot macros (macros/pivot.sql) through dbt on a real Spark: results equal
Spark's native PIVOT, hostile keys stay data, new keys add columns to an upsert
model, types convert or keep their text, and the column cap, allow and deny
lists hold."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt
from dbt_common.exceptions import CompilationError

from tests.adapter.targets import WithProjectMacros

SOURCES = """
sources:
  - name: feed
    schema: "{{ target.schema }}"
    tables:
      - name: attributes
      - name: hostile
      - name: flood
"""

PIVOTED = "{{ pivot_key_values(source('feed', 'attributes'), group_by=['id', 'ts']) }}"

LANDING = """
{{ config(
    materialized='incremental', incremental_strategy='upsert', unique_key=['id', 'ts'],
    ordering_field='batch', on_schema_change='append_new_columns'
) }}
{{ pivot_key_values(
    source('feed', 'attributes'), group_by=['id', 'ts'], carry=['batch'],
    where=unseen_batches('batch'), types={'n': 'double', 'flag': 'boolean'}
) }}
"""

CAPPED = """{{ pivot_key_values(
    source('feed', 'attributes'), group_by=['id', 'ts'], max_columns=2, deny=['b']
) }}"""

ALLOWED = """{{ pivot_key_values(
    source('feed', 'attributes'), group_by=['id', 'ts'], allow=['b', 'n']
) }}"""

EMPTY = "{{ pivot_key_values(source('feed', 'attributes'), group_by=['id', 'ts'], where='false') }}"

FLOODED = """{{ pivot_key_values(
    source('feed', 'flood'), group_by=['id', 'ts'], max_columns=3, pin=['rare']
) }}"""

HOSTILE_MODEL = "{{ pivot_key_values(source('feed', 'hostile'), group_by=['id', 'ts']) }}"

BAD_TYPE = """{{ pivot_key_values(
    source('feed', 'attributes'), group_by=['id', 'ts'], types={'n': 'double); drop table x; --'}
) }}"""

# (id, ts, record_key, record_value, batch)
BATCHES = {
    1: [
        ("u1", "t1", "a", "1", 1),
        ("u1", "t1", "b", "x", 1),
        ("u2", "t1", "a", "2", 1),
        ("u2", "t1", "a", "9", 1),  # a repeated key: the greatest value wins
        ("u3", "t1", None, "lost key", 1),
    ],
    2: [
        ("u1", "t2", "c", "new", 2),  # a new key: a new column
        ("u2", "t1", "a", "3", 2),  # a late update of u2 at t1
        ("u4", "t1", "n", "1.5", 2),
        ("u5", "t1", "n", "abc", 2),  # does not convert: kept as text
        ("u5", "t1", "flag", "true", 2),
        # Found by review: Spark's cast reads these as doubles; a column holds none.
        ("u6", "t1", "n", "1e400", 2),
        ("u7", "t1", "n", "NaN", 2),
    ],
}

HOSTILE_KEYS = [
    "it's",
    'say "hi"',
    "back`tick",
    "x' then 1 end) as pwn, (case when '1",
    "a -- comment",
    "a; drop table canary",
    "a */ /* b",
    "line\nbreak",
    "cr\rreturn",
    "tab\tkey",
    "ünïcödé",
    "日本語",
    "State",
    "state",
    "STATE",
    "select",
    "from",
    "id",
    "k" * 300,
    "trailing\\",
    "back\\slash'",
    "{{ 1 }}",
    "  spaced  ",
    "",
    "_leading",
    "double__under",
    "9lives",
    # Crafted: their MD5s share the first 8 hex digits, so both hash to city__93b09fab.
    "City%%!?!",
    "City ?!$*",
]
# One device sends 60 junk keys once; every device sends state and language.
FLOOD = [("junk", "t", f"junk{i:02}", "x", 1) for i in range(60)] + [
    (f"d{i}", "t", key, f"{key}{i}", 1) for i in range(5) for key in ("state", "language")
]
FLOOD.append(("d0", "t", "rare", "r", 1))


def _rows(project, sql: str) -> list[tuple]:
    return [tuple(row) for row in project.run_sql(sql, fetch="all")]


def _columns(project, table: str) -> list[str]:
    return [row[0] for row in project.run_sql(f"describe {table}", fetch="all")]


def _load(spark, schema: str, table: str, rows: list[tuple], mode: str = "append") -> None:
    frame = spark.createDataFrame(
        rows, "id string, ts string, record_key string, record_value string, batch int"
    )
    frame.write.mode(mode).format("parquet").saveAsTable(f"{schema}.{table}")


def _compiled(project, model: str) -> str:
    path = Path(project.project_root) / "target" / "compiled" / "dynamic_ddl" / "models"
    return (path / f"{model}.sql").read_text()


class PivotProject(WithProjectMacros):
    """A dbt project on the embedded session with the project's pivot macros."""

    MACRO_FILES = ("pivot.sql", "pivot_discovery.sql", "unseen_batches.sql")

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"name": "dynamic_ddl", "models": {"+file_format": "parquet"}}


class TestPivot(PivotProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "sources.yml": SOURCES,
            "pivoted.sql": PIVOTED,
            "lnd_kv.sql": LANDING,
            "capped.sql": CAPPED,
            "allowed.sql": ALLOWED,
            "empty.sql": EMPTY,
            "hostile_pivot.sql": HOSTILE_MODEL,
            "flooded.sql": FLOODED,
        }

    @pytest.fixture(scope="class", autouse=True)
    def loaded(self, project, spark):
        schema = project.test_schema
        _load(spark, schema, "attributes", BATCHES[1], mode="overwrite")
        hostile = [("e1", "t", key, f"v{i}", 1) for i, key in enumerate(HOSTILE_KEYS)]
        _load(spark, schema, "hostile", hostile, mode="overwrite")
        _load(spark, schema, "flood", FLOOD, mode="overwrite")
        project.run_sql(f"create table {schema}.canary (x int) using parquet")

    def test_equals_spark_native_pivot(self, project):
        run_dbt(["run", "--select", "pivoted"])
        schema = project.test_schema
        ours = _rows(project, f"select id, ts, a, b from {schema}.pivoted order by id, ts")
        native = _rows(
            project,
            f"""select id, ts, a, b from (
                    select id, ts, record_key, record_value from {schema}.attributes
                ) pivot (max(record_value) for record_key in ('a' as a, 'b' as b))
                order by id, ts""",
        )
        assert ours == native
        assert ours == [("u1", "t1", "1", "x"), ("u2", "t1", "9", None), ("u3", "t1", None, None)]
        assert _columns(project, f"{schema}.pivoted") == [
            "id",
            "ts",
            "a",
            "b",
            "_overflow",
            "_unconverted",
        ]

    def test_hostile_keys_stay_data(self, project):
        run_dbt(["run", "--select", "hostile_pivot"])
        first = _compiled(project, "hostile_pivot")
        run_dbt(["compile", "--select", "hostile_pivot"])
        assert _compiled(project, "hostile_pivot") == first, "same keys, same SQL"

        schema = project.test_schema
        columns = _columns(project, f"{schema}.hostile_pivot")
        pivot_columns = columns[2:-2]
        assert columns[:2] == ["id", "ts"] and columns[-2:] == ["_overflow", "_unconverted"]
        assert len(pivot_columns) == len(set(pivot_columns)) == len(HOSTILE_KEYS)
        assert all(re.fullmatch(r"[a-z0-9][a-z0-9_]*", name) for name in pivot_columns)
        assert all(len(name) <= 64 for name in pivot_columns)
        # A plain key is its own name; others get 8 hex of their MD5.
        assert "state" in pivot_columns
        for key in ("State", "STATE", "select", "id"):
            digest = hashlib.md5(key.encode()).hexdigest()[:8]
            assert f"{key.lower()}__{digest}" in pivot_columns
        # Two keys on one name: the first in key order keeps it, the other gets its whole MD5.
        assert "city__93b09fab" in pivot_columns
        assert f"city__{hashlib.md5(b'City%%!?!').hexdigest()}" in pivot_columns

        # Each key's value landed in exactly one column: every literal matched its key only.
        row = project.run_sql(f"select * from {schema}.hostile_pivot", fetch="one")
        values = [value for value in row[2:-2]]
        assert sorted(values) == sorted(f"v{i}" for i in range(len(HOSTILE_KEYS)))
        assert row[-2] is None  # no key went to _overflow
        assert _rows(project, f"select count(*) from {schema}.canary") == [(0,)]

    def test_new_key_adds_a_column_and_updates_upsert(self, project, spark):
        schema = project.test_schema
        run_dbt(["run", "--select", "lnd_kv"])
        assert _columns(project, f"{schema}.lnd_kv")[:5] == ["id", "ts", "batch", "a", "b"]

        _load(spark, schema, "attributes", BATCHES[2])
        run_dbt(["run", "--select", "lnd_kv"])
        assert "`batch` > 1" in _compiled(project, "lnd_kv"), "pivots only the new batch"
        rows = _rows(
            project,
            f"select id, ts, a, b, c, n, flag, _unconverted from {schema}.lnd_kv order by id, ts",
        )
        assert rows == [
            ("u1", "t1", "1", "x", None, None, None, None),
            ("u1", "t2", None, None, "new", None, None, None),
            ("u2", "t1", "3", None, None, None, None, None),
            ("u3", "t1", None, None, None, None, None, None),
            ("u4", "t1", None, None, None, 1.5, None, None),
            ("u5", "t1", None, None, None, None, True, {"n": "abc"}),
            ("u6", "t1", None, None, None, None, None, {"n": "1e400"}),
            ("u7", "t1", None, None, None, None, None, {"n": "NaN"}),
        ]
        # A run with no new batch keeps every column and renders the same SQL.
        run_dbt(["run", "--select", "lnd_kv"])
        first = _compiled(project, "lnd_kv")
        run_dbt(["run", "--select", "lnd_kv"])
        assert _compiled(project, "lnd_kv") == first
        assert "cast(null as string) as `c`" in first
        assert _rows(project, f"select count(*) from {schema}.lnd_kv") == [(8,)]

    def test_cap_allow_and_deny(self, project):
        run_dbt(["run", "--select", "capped", "allowed"])
        schema = project.test_schema
        # The cap of two takes the keys the most rows carry: a (4 rows), n (2).
        assert _columns(project, f"{schema}.capped") == [
            "id",
            "ts",
            "a",
            "n",
            "_overflow",
            "_unconverted",
        ]
        capped = dict(
            (row[0], row[1])
            for row in _rows(project, f"select concat(id, '@', ts), _overflow from {schema}.capped")
        )
        # Over the cap: c and flag go to _overflow; b is denied, so nowhere.
        assert capped["u5@t1"] == {"flag": "true"}
        assert capped["u1@t2"] == {"c": "new"}
        assert capped["u1@t1"] is None
        assert _columns(project, f"{schema}.allowed")[2:4] == ["b", "n"]
        allowed = dict(
            _rows(project, f"select concat(id, '@', ts), _overflow from {schema}.allowed")
        )
        assert allowed["u5@t1"] == {"flag": "true"}
        assert allowed["u1@t2"] == {"c": "new"}

    def test_a_flood_of_keys_does_not_evict_the_keys_models_read(self, project):
        run_dbt(["run", "--select", "flooded"])
        schema = project.test_schema
        # rare is pinned; state and language are carried by five rows each, junk by one.
        assert _columns(project, f"{schema}.flooded")[2:-2] == ["language", "rare", "state"]
        overflow = _rows(project, f"select _overflow from {schema}.flooded where id = 'junk'")
        assert overflow == [({f"junk{i:02}": "x" for i in range(60)},)]  # nothing lost
        states = _rows(project, f"select id, state from {schema}.flooded where state is not null")
        assert sorted(states) == [(f"d{i}", f"state{i}") for i in range(5)]

    def test_zero_rows_give_an_empty_table(self, project):
        run_dbt(["run", "--select", "empty"])
        schema = project.test_schema
        assert _columns(project, f"{schema}.empty") == ["id", "ts", "_overflow", "_unconverted"]
        assert _rows(project, f"select count(*) from {schema}.empty") == [(0,)]


class TestPivotRefusesBadArguments(WithProjectMacros):
    MACRO_FILES = ("pivot.sql", "pivot_discovery.sql")

    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": SOURCES, "bad_type.sql": BAD_TYPE}

    def test_a_bad_type_names_the_fix_at_parse(self, project):
        with pytest.raises(CompilationError, match="is not supported. Use one of string, boolean"):
            run_dbt(["parse"])


# Each run pivots every (id, ts) a new batch touches from all of its rows, newest first.
NEWEST = """
{{ config(
    materialized='incremental', incremental_strategy='upsert', unique_key=['id', 'ts'],
    ordering_field='batch', on_schema_change='append_new_columns'
) }}
{%- set touched_rows -%}
    (
        select kv.* from {{ source('feed', 'changes') }} as kv
        left semi join (
            select id, ts from {{ source('feed', 'changes') }} where {{ unseen_batches('batch') }}
        ) as touched on kv.id <=> touched.id and kv.ts <=> touched.ts
    )
{%- endset %}
{{ pivot_key_values(
    touched_rows, group_by=['id', 'ts'], carry=['batch'], types={'n': 'double'},
    max_columns=2, pin=['a', 'n', 'q'], latest_by=['batch']
) }}
"""

CHANGES = {
    1: [
        ("u1", "t1", "a", "9", 1),
        ("u1", "t1", "n", "abc", 1),  # does not convert: kept as text, until a newer value
        ("u1", "t1", "o", "x", 1),  # over the cap of two: _overflow
        ("u1", "t1", "p", "1", 1),
        ("u2", "t1", "a", "1", 1),
    ],
    2: [
        ("u1", "t1", "a", "3", 2),  # smaller, but newer: wins
        ("u1", "t1", "n", "2.5", 2),
        ("u1", "t1", "o", "y", 2),
        ("u1", "t1", "p", None, 2),  # a NULL keeps the older value
        ("u1", "t1", "q", "late", 2),  # pinned: a column, though the cap of two is full
    ],
}


class TestPivotNewestValue(PivotProject):
    @pytest.fixture(scope="class")
    def models(self):
        sources = SOURCES + "      - name: changes\n"
        return {"sources.yml": sources, "newest_kv.sql": NEWEST}

    def test_a_value_sent_again_keeps_its_newest_and_equals_a_build_from_scratch(
        self, project, spark
    ):
        schema = project.test_schema
        query = f"select id, ts, batch, a, n, _overflow, _unconverted from {schema}.newest_kv"
        _load(spark, schema, "changes", CHANGES[1], mode="overwrite")
        run_dbt(["run", "--select", "newest_kv"])
        assert _rows(project, f"{query} where id = 'u1'") == [
            ("u1", "t1", 1, "9", None, {"o": "x", "p": "1"}, {"n": "abc"})
        ]
        _load(spark, schema, "changes", CHANGES[2])
        run_dbt(["run", "--select", "newest_kv"])
        query = query.replace(", n,", ", n, q,")
        incremental = _rows(project, f"{query} order by id")
        assert incremental == [
            ("u1", "t1", 2, "3", 2.5, "late", {"o": "y", "p": "1"}, None),
            ("u2", "t1", 1, "1", None, None, None, None),
        ]
        run_dbt(["run", "--select", "newest_kv", "--full-refresh"])
        assert _rows(project, f"{query} order by id") == incremental


# Upsert models whose rows depend on a pivot's cap and on a topic's time formats, set by
# vars (time formats as vars.raw_topics sets them).
REBUILT = """
{{ config(
    materialized='incremental', incremental_strategy='upsert', unique_key=['id', 'ts'],
    ordering_field='batch'
) }}
{{ pivot_key_values(
    source('feed', 'attributes'), group_by=['id', 'ts'], carry=['batch'],
    where=unseen_batches('batch'), max_columns=var('cap', 1)
) }}
"""

TIMED = """
{{ config(
    materialized='incremental', incremental_strategy='upsert', unique_key=['id', 'ts'],
    ordering_field='batch'
) }}
select id, ts, max(batch) as batch, {{ event_timestamp('ts', 'feed') }} as at
from {{ source('feed', 'attributes') }}
group by id, ts
"""


class TestAPivotChangedOverLandedRowsIsRefused(PivotProject):
    """Stop 50's list: after a pivot's `max_columns` (or `pin`, `types`) or the topic's time
    formats changed, an incremental run left the rows landed before as they were beside
    new ones built the new way, silently. It is refused now, naming --full-refresh."""

    MACRO_FILES = (*PivotProject.MACRO_FILES, "event_timestamp.sql")

    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": SOURCES, "rebuilt_kv.sql": REBUILT, "timed.sql": TIMED}

    def test_a_run_that_builds_rows_another_way_names_the_full_refresh(self, project, spark):
        schema = project.test_schema
        pivoted = f"select id, ts, a, _overflow from {schema}.rebuilt_kv order by id"
        timed = f"select id, ts, at from {schema}.timed order by id"
        _load(spark, schema, "attributes", BATCHES[1], mode="overwrite")
        run_dbt(["run"])
        landed = {"rebuilt_kv": _rows(project, pivoted), "timed": _rows(project, timed)}
        assert landed["rebuilt_kv"][0] == ("u1", "t1", "1", {"b": "x"})  # over the cap of one
        _load(spark, schema, "attributes", [("u9", "t1", "b", "y", 2)])
        changes = {
            "rebuilt_kv": ("{cap: 2}", ['"max_columns": 1', '"max_columns": 2']),
            "timed": ("{raw_topics: {feed: {time_formats: ['dd.MM.yyyy']}}}", ["dd.MM.yyyy"]),
        }
        for model, (variables, named) in changes.items():
            (result,) = run_dbt(["run", "-s", model, "--vars", variables], expect_pass=False)
            assert f"dbt build --full-refresh -s {model}+" in result.message, variables
            assert all(text in result.message for text in named), result.message
        assert {"rebuilt_kv": _rows(project, pivoted), "timed": _rows(project, timed)} == landed
        # A command that renders but commits nothing leaves no note for the next one.
        run_dbt(["compile", "-s", "rebuilt_kv", "--vars", "{cap: 2}"])
        run_dbt(["run"])  # built as before: goes on
        assert ("u9", "t1", None, {"b": "y"}) in _rows(project, pivoted)
        run_dbt(["run", "--full-refresh", "--vars", "{cap: 2}"])
        run_dbt(["run", "--vars", "{cap: 2}"])
        assert _rows(project, f"select b from {schema}.rebuilt_kv where id = 'u1'") == [("x",)]
