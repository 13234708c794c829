"""`adapter.quote`, as every macro of the project names a column with it: the one home of
identifiers (`sql_text.quoted_identifier`), so a column named with a backquote, a dot, a
space or a quote means exactly itself in the SQL the macros build."""

from __future__ import annotations

import json

import pytest
from dbt.tests.util import (
    get_connection,
    get_relation_columns,
    relation_from_name,
    run_dbt,
    run_dbt_and_capture,
)

from dynamic_ddl.sql_text import quoted_identifier
from tests.adapter.targets import WithProjectMacros

# `#events`: dbt-spark's describe parser took it for a section heading (found by review).
NAMES = ["we`ird", "``", "a.b", "two words", "it's", 'say "hi"', "-- not a comment", "#events"]


def _model() -> str:
    columns = ",\n".join(
        f"    {index} as {{{{ adapter.quote({json.dumps(name)}) }}}}"
        for index, name in enumerate(NAMES)
    )
    return f"select\n{columns}\n"


class TestQuoting(WithProjectMacros):
    MACRO_FILES = ("table_checksums.sql",)

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "landing": {
                "hostile_names.sql": _model(),
                "x_then_null.sql": "select 'x' as a, cast(null as string) as b",
                "null_then_x.sql": "select cast(null as string) as a, 'x' as b",
                "hostile_struct.sql": (
                    "select named_struct('a-b', 1, 'c:d', array(named_struct('x y', 'z'))) as s,"
                    " named_struct('plain', 1) as p"
                ),
            }
        }

    def test_a_column_named_with_a_backquote_is_quoted_as_its_name(self, project, spark):
        """Found by review: dbt-spark's quote wrapped a name in backquotes as it was, so
        `we`ird` ended the identifier early: the model failed to parse, and
        `table_checksums` failed on any table with such a column."""
        assert len(run_dbt(["run"])) == 4
        table = f"{project.test_schema}.hostile_names"
        assert spark.table(table).columns == NAMES
        assert spark.table(table).first() == tuple(range(len(NAMES)))

        _, output = run_dbt_and_capture(
            ["run-operation", "table_checksums", "--args", "{layer: landing}"]
        )
        printed = json.loads(_json_line(output, "hostile_names"))
        hashed = ", ".join(quoted_identifier(name) for name in sorted(NAMES))
        nulls = ", ".join(f"{quoted_identifier(name)} is null" for name in sorted(NAMES))
        expected = spark.sql(
            f"select cast(sum(cast(xxhash64({hashed}, array({nulls})) as decimal(38, 0)))"
            f" as string) from {table}"
        ).first()[0]
        assert printed["hostile_names"] == {
            "rows": 1,
            "checksum": expected,
            "columns": sorted(NAMES),
        }
        # Found by review: xxhash64 skips NULLs, so a value in the wrong one of two
        # columns of a type hashed the same.
        assert printed["x_then_null"]["checksum"] != printed["null_then_x"]["checksum"]

    def test_a_structs_type_is_listed_as_ddl_reads_it(self, project, spark):
        """Found by review: dbt's column listing gave a struct's type as `describe` writes
        it (`struct<a-b:int,...>`), and snapshots and on_schema_change wrote that into SQL
        (`cast(null as ...)`), which failed. Plain names keep `describe`'s text."""
        run_dbt(["run", "--select", "hostile_struct"])
        types = {
            name: kind for name, kind, _ in get_relation_columns(project.adapter, "hostile_struct")
        }
        assert types["p"] == "struct<plain:int>"
        assert types["s"] == "struct<`a-b`:int,`c:d`:array<struct<`x y`:string>>>"
        table = f"{project.test_schema}.hostile_struct"
        columns = spark.table(table).columns
        casts = ", ".join(f"cast(null as {types[name]}) as {name}" for name in columns)
        cast = spark.sql(f"select {casts}").schema.simpleString()
        assert cast == spark.table(table).schema.simpleString()
        # A temporary view, as dbt names its `__dbt_tmp` relations: without the schema.
        spark.sql("select named_struct('a-b', 1) as s").createOrReplaceTempView("struct_tmp")
        view = relation_from_name(project.adapter, "hostile_struct").incorporate(
            path={"identifier": "struct_tmp"}
        )
        with get_connection(project.adapter):
            listed = project.adapter.get_columns_in_relation(view.include(schema=False))
        assert [(c.name, c.dtype) for c in listed] == [("s", "struct<`a-b`:int>")]

    def test_a_layer_or_argument_that_names_nothing_is_refused(self, project):
        """Found by review: a misspelled layer printed {}, so two engines "agreed"."""
        for args, error in (
            ("{layer: landng}", "no model is in the layer landng; the layers are landing"),
            ("{layers: landing}", "layers must be a list"),
            ("{exclude: _batch_id}", "exclude must be a list"),
        ):
            _, output = run_dbt_and_capture(
                ["run-operation", "table_checksums", "--args", args], expect_pass=False
            )
            assert error in output, args


def _json_line(output: str, table: str) -> str:
    """The JSON object `table_checksums` printed, out of dbt's log lines."""
    line = next(line for line in output.splitlines() if f'"{table}"' in line)
    return line[line.index("{") :]
