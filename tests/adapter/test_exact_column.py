"""`exact_column` reads a raw column and its `__text` companion as a build from scratch
reads the one column of the union type (docs/decisions/0005, "Types"): batch by batch, a
bigint column keeps the values of other types in `<column>__text`; at once, the same
lines give one double or string column. Every type a landing model asks for must read
the same value either way, or an incremental landing table differs from its recompute."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from dynamic_ddl.catalog import RETIRED_SUFFIX
from dynamic_ddl.ingest.job import ingest_topic
from tests.adapter.targets import WithProjectMacros
from tests.conftest import PROJECT_ROOT
from tests.test_hostile_inbox import TOPIC, write_lines

# Two attributes of one feed, each first sent as integers (bigint columns), then: only
# numbers (their union is double), and numbers with text (string). Padded with nulls.
FIRST = ['{"id": 0, "ts": "2026-11-01", "numbers": 1, "mixed": 1}']
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


def _later_lines() -> list[str]:
    count = max(len(values) for values in LATER.values())
    padded = {name: values + ["null"] * (count - len(values)) for name, values in LATER.items()}
    return [
        f'{{"id": {i}, "ts": "2026-11-02", '
        + ", ".join(f'"{name}": {values[i - 1]}' for name, values in padded.items())
        + "}"
        for i in range(1, count + 1)
    ]


def _model(source: str) -> str:
    relation = f"source('{source}', 'raw_feed')"
    reads = ",\n".join(
        f"    {{{{ exact_column({relation}, '{name}', '{data_type}', 'feed') }}}}"
        f" as {name}_as_{data_type}"
        for name, types in TYPES.items()
        for data_type in types
    )
    return f"select\n    feed.id,\n{reads}\nfrom {{{{ {relation} }}}} as feed\n"


def _ingest(spark, schema: str, inbox: Path) -> None:
    spark.sql(f"create database if not exists {schema}")
    config = {**TOPIC, "inbox_dir": str(inbox), "schema": schema, "table": "raw_feed"}
    ingest_topic(spark, config).collect()


class TestExactColumn(WithProjectMacros):
    MACRO_FILES = ("exact_column.sql",)

    @pytest.fixture(scope="class")
    def raw_tables(self, spark, tmp_path_factory, unique_schema) -> dict[str, str]:
        """The feed's raw table batch by batch and at once: source name -> schema."""
        tables = {}
        for way in ("batches", "at_once"):
            inbox, schema = tmp_path_factory.mktemp(way), f"{unique_schema}_{way}"
            write_lines(inbox, "1.json", FIRST)
            if way == "batches":
                _ingest(spark, schema, inbox)
            write_lines(inbox, "2.json", _later_lines())
            _ingest(spark, schema, inbox)
            tables[way] = schema
        return tables

    @pytest.fixture(scope="class")
    def models(self, raw_tables):
        sources = "sources:\n" + "".join(
            f"  - name: {way}\n    schema: {schema}\n    tables:\n      - name: raw_feed\n"
            for way, schema in raw_tables.items()
        )
        return {"sources.yml": sources, **{f"read_{way}.sql": _model(way) for way in raw_tables}}

    def _read(self, project, way: str, name: str) -> dict[int, tuple]:
        """Attribute `name` as read in each type: id -> (as int, as bigint, ...)."""
        columns = ", ".join(f"{name}_as_{data_type}" for data_type in TYPES[name])
        rows = project.run_sql(
            f"select id, {columns} from {project.test_schema}.read_{way}", fetch="all"
        )
        return {row[0]: tuple(row[1:]) for row in rows}

    def test_batch_by_batch_reads_as_at_once(self, project, spark, raw_tables):
        batches = spark.table(f"{raw_tables['batches']}.raw_feed")
        at_once = dict(spark.table(f"{raw_tables['at_once']}.raw_feed").dtypes)
        for name, union in (("numbers", "double"), ("mixed", "string")):
            assert dict(batches.dtypes)[name] == "bigint" and f"{name}__text" in batches.columns
            assert at_once[name] == union and f"{name}__text" not in at_once

        assert len(run_dbt(["run"])) == len(raw_tables)
        for name in LATER:
            read = self._read(project, "batches", name)
            assert read == self._read(project, "at_once", name), name
            assert len(read) == len(LATER["mixed"]) + 1

        read = self._read(project, "batches", "mixed")
        mixed = {value: read[i] for i, value in enumerate(LATER["mixed"], 1)}
        # (int, bigint, double, boolean, string), as Spark casts the union column.
        assert mixed["55.5"] == (55, 55, 55.5, True, "55.5")
        assert mixed['"abc"'] == (None, None, None, None, "abc")
        assert mixed['"42"'] == (42, 42, 42.0, True, "42")
        assert mixed["true"] == (None, None, None, True, "true")
        assert mixed["9007199254740993"][1] == 9007199254740993  # exact in bigint
        numbers = self._read(project, "batches", "numbers")
        assert numbers[5] == (None, None, 1.5e300, True)  # beyond an int: NULL, not a failure

    def test_a_raw_table_a_killed_swap_hid_names_the_raw_model_to_run(self, spark, raw_tables):
        """Found by review: between a compaction's two renames (a kill there) the raw
        table's rows are under its retired name until its raw model runs; a landing model
        run alone meanwhile failed on "table not found", naming no fix."""
        table = f"{raw_tables['batches']}.raw_feed"
        spark.sql(f"alter table {table} rename to {table}{RETIRED_SUFFIX}")
        try:
            (result,) = run_dbt(["run", "-s", "read_batches"], expect_pass=False)
        finally:
            spark.sql(f"alter table {table}{RETIRED_SUFFIX} rename to {table}")
        assert f"{table} is hidden" in result.message
        assert f"dbt run -s raw_{TOPIC['topic']})" in result.message


@pytest.mark.parametrize(
    "model", sorted((PROJECT_ROOT / "models" / "landing").glob("*.sql")), ids=lambda p: p.stem
)
def test_landing_models_read_every_raw_data_column_with_its_text_companion(model):
    """Found by review: landing models read ids, serials, firmware, countries, keys and
    event times from the column alone. Once a batch brought text where the first sent
    numbers (firmware 3, then "3.1.0"), the value sat in the companion, the column held
    NULL, and the event was dropped or grouped under NULL batch by batch, not from
    scratch. So no raw data column is read directly (`raw_<alias>.<column>`; lineage
    columns start with `_`): exact_column reads it with its companion, as a build from
    scratch reads the union column."""
    text = model.read_text()
    assert re.search(r"\bexact_column\(", text), model.name
    direct = re.findall(r"\b(raw_\w+\.[a-z]\w*)", text)
    assert direct == [], f"{model.name} reads {direct} without exact_column"


# lnd_device_state (a Python model) types its key and event time; every other column
# passes through from raw with its `__text` companion (landing/rows.py).
TYPED_BY_LANDING = {"serial", "updated_at"}
READERS_OF_DEVICE_STATE = sorted(
    path
    for folder in ("models", "snapshots")
    for path in (PROJECT_ROOT / folder).rglob("*.sql")
    if "ref('lnd_device_state')" in path.read_text()
)


@pytest.mark.parametrize("model", READERS_OF_DEVICE_STATE, ids=lambda p: p.stem)
def test_readers_of_the_python_landing_model_read_its_raw_columns_with_their_companion(model):
    """Found by review: dim_devices and snp_device_firmware read the firmware, mode and
    battery from lnd_device_state's columns alone; firmware 3, then "3.1.0", left the
    device's firmware NULL batch by batch (the text in `state_firmware__text`), not
    from scratch. So only the columns landing types are read directly."""
    text = model.read_text()
    direct = set(re.findall(r"\bdevice_state\.([a-z]\w*)", text)) - TYPED_BY_LANDING
    assert direct == set(), f"{model.name} reads {direct} without exact_column"


def test_the_python_landing_model_has_readers_to_check():
    """The guard above has something to guard: the project's readers are found."""
    assert {p.stem for p in READERS_OF_DEVICE_STATE} >= {"dim_devices", "snp_device_firmware"}
