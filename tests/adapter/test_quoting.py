"""`adapter.quote`, as every macro of the project names a column with it: the one home of
identifiers (`sql_text.quoted_identifier`), so a column named with a backquote, a dot, a
space or a quote means exactly itself in the SQL the macros build."""

from __future__ import annotations

import json

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dynamic_ddl.sql_text import quoted_identifier
from tests.adapter.targets import WithProjectMacros

NAMES = ["we`ird", "``", "a.b", "two words", "it's", 'say "hi"', "-- not a comment"]


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
        return {"landing": {"hostile_names.sql": _model()}}

    def test_a_column_named_with_a_backquote_is_quoted_as_its_name(self, project, spark):
        """Found by review: dbt-spark's quote wrapped a name in backquotes as it was, so
        `we`ird` ended the identifier early: the model failed to parse, and
        `table_checksums` failed on any table with such a column."""
        assert len(run_dbt(["run"])) == 1
        table = f"{project.test_schema}.hostile_names"
        assert spark.table(table).columns == NAMES
        assert spark.table(table).first() == tuple(range(len(NAMES)))

        _, output = run_dbt_and_capture(
            ["run-operation", "table_checksums", "--args", "{layer: landing}"]
        )
        printed = json.loads(_json_line(output, "hostile_names"))
        hashed = ", ".join(quoted_identifier(name) for name in sorted(NAMES))
        expected = spark.sql(
            f"select cast(sum(cast(xxhash64({hashed}) as decimal(38, 0))) as string) from {table}"
        ).first()[0]
        assert printed["hostile_names"] == {
            "rows": 1,
            "checksum": expected,
            "columns": sorted(NAMES),
        }


def _json_line(output: str, table: str) -> str:
    """The JSON object `table_checksums` printed, out of dbt's log lines."""
    line = next(line for line in output.splitlines() if f'"{table}"' in line)
    return line[line.index("{") :]
