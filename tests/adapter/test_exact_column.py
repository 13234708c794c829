"""`exact_column` reads a raw column and its `__text` companion as a build from scratch
reads the one column of the union type (docs/decisions/0005, "Types"): batch by batch, a
bigint column keeps the values of other types in `n__text`; at once, the same lines give
one double or string column. Every type a landing model asks for must read the same
value either way, or an incremental landing table differs from its recompute."""

from __future__ import annotations

from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from dynamic_ddl.ingest.job import ingest_topic
from tests.adapter.targets import WithProjectMacros
from tests.test_hostile_inbox import TOPIC, write_lines

FIRST = ['{"id": 0, "ts": "2026-11-01", "n": 1}']  # makes n a bigint column
# Values a feed sends later: a union of numbers only (double), and one with text (string).
LATER = {
    "numbers": ["40", "55.5", "2.0", "-7.9", "1.5e300", "null", "-0"],
    "mixed": [
        *("40", "55.5", '"abc"', '"42"', "true", '"1"', "2.0", '"0"', "false", "-3.5"),
        "9007199254740993",  # (with floats, at once infers double and rounds it: 0005)
    ],
}
TYPES = {
    "numbers": ("int", "bigint", "double", "boolean"),
    # A double column prints 40 as 40.0 where a bigint prints 40: strings only from text.
    "mixed": ("int", "bigint", "double", "boolean", "string"),
}


def _model(source: str, types: tuple[str, ...]) -> str:
    reads = ",\n".join(
        f"    {{{{ exact_column(source('{source}', 'raw_feed'), 'n', '{data_type}', 'feed') }}}}"
        f" as as_{data_type}"
        for data_type in types
    )
    return f"select\n    feed.id,\n{reads}\nfrom {{{{ source('{source}', 'raw_feed') }}}} as feed\n"


def _ingest(spark, schema: str, inbox: Path) -> None:
    spark.sql(f"create database if not exists {schema}")
    config = {**TOPIC, "inbox_dir": str(inbox), "schema": schema, "table": "raw_feed"}
    ingest_topic(spark, config).collect()


class TestExactColumn(WithProjectMacros):
    MACRO_FILES = ("exact_column.sql",)

    @pytest.fixture(scope="class")
    def raw_tables(self, spark, tmp_path_factory, unique_schema) -> dict[str, tuple[str, str]]:
        """Each feed's raw table batch by batch and at once: source name -> (feed, schema)."""
        tables = {}
        for feed, values in LATER.items():
            later = [
                f'{{"id": {i}, "ts": "2026-11-02", "n": {v}}}' for i, v in enumerate(values, 1)
            ]
            for way in ("batches", "at_once"):
                inbox, schema = tmp_path_factory.mktemp(way), f"{unique_schema}_{feed}_{way}"
                write_lines(inbox, "1.json", FIRST)
                if way == "batches":
                    _ingest(spark, schema, inbox)
                write_lines(inbox, "2.json", later)
                _ingest(spark, schema, inbox)
                tables[f"{feed}_{way}"] = (feed, schema)
        return tables

    @pytest.fixture(scope="class")
    def models(self, raw_tables):
        sources = "sources:\n" + "".join(
            f"  - name: {name}\n    schema: {schema}\n    tables:\n      - name: raw_feed\n"
            for name, (_, schema) in raw_tables.items()
        )
        reads = {
            f"read_{name}.sql": _model(name, TYPES[feed]) for name, (feed, _) in raw_tables.items()
        }
        return {"sources.yml": sources, **reads}

    def _read(self, project, name: str) -> dict[int, tuple]:
        rows = project.run_sql(f"select * from {project.test_schema}.read_{name}", fetch="all")
        return {row[0]: tuple(row[1:]) for row in rows}

    def test_batch_by_batch_reads_as_at_once(self, project, spark, raw_tables):
        def raw(name: str):
            return spark.table(f"{raw_tables[name][1]}.raw_feed")

        for feed, union in (("numbers", "double"), ("mixed", "string")):
            batches, at_once = raw(f"{feed}_batches"), raw(f"{feed}_at_once")
            assert dict(batches.dtypes)["n"] == "bigint" and "n__text" in batches.columns
            assert dict(at_once.dtypes)["n"] == union and "n__text" not in at_once.columns

        assert len(run_dbt(["run"])) == len(raw_tables)
        for feed in LATER:
            read = self._read(project, f"{feed}_batches")
            assert read == self._read(project, f"{feed}_at_once"), feed
            assert len(read) == len(LATER[feed]) + 1

        read = self._read(project, "mixed_batches")
        mixed = {value: read[i] for i, value in enumerate(LATER["mixed"], 1)}
        # (int, bigint, double, boolean, string), as Spark casts the union column.
        assert mixed["55.5"] == (55, 55, 55.5, True, "55.5")
        assert mixed['"abc"'] == (None, None, None, None, "abc")
        assert mixed['"42"'] == (42, 42, 42.0, True, "42")
        assert mixed["true"] == (None, None, None, True, "true")
        assert mixed["9007199254740993"][1] == 9007199254740993  # exact in bigint
        numbers = self._read(project, "numbers_batches")
        assert numbers[5] == (None, None, 1.5e300, True)  # beyond an int: NULL, not a failure
