"""Python models on open-source Spark: dbt's own adapter suites plus our guarantees.

Every class runs on the embedded `session` target; the Thrift variants live in
test_python_models_thrift.py and reuse these classes with another profile.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbt.tests.adapter.python_model.test_python_model import (
    BasePythonEmptyTests,
    BasePythonIncrementalTests,
    BasePythonModelTests,
)
from dbt.tests.adapter.python_model.test_spark import (
    PANDAS_MODEL,
    PANDAS_ON_SPARK_MODEL,
    PYSPARK_MODEL,
    BasePySparkTests,
)
from dbt.tests.util import run_dbt

from tests.adapter.targets import session_profile


class SessionTarget:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self):
        return session_profile()


class PythonModelSuite(BasePythonModelTests):
    pass


class PySparkSuite(BasePySparkTests):
    """dbt's suite without the Koalas model: Koalas is retired (pandas-on-Spark replaced it)."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "pandas_df.py": PANDAS_MODEL,
            "pyspark_df.py": PYSPARK_MODEL,
            "pandas_on_spark_df.py": PANDAS_ON_SPARK_MODEL,
        }

    def test_different_dataframes(self, project):
        results = run_dbt(["run"])
        assert len(results) == 3
        for name in ("pandas_df", "pyspark_df", "pandas_on_spark_df"):
            rows = project.run_sql(
                f"select City, Latitude from {project.test_schema}.{name} order by City",
                fetch="all",
            )
            assert [tuple(row) for row in rows][0] == ("Bogota", 4.60)
            assert len(rows) == 5


class PythonIncrementalSuite(BasePythonIncrementalTests):
    """dbt's suite with `append`: merge needs Delta, which cannot be installed here."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+incremental_strategy": "append"}}


class PythonEmptySuite(BasePythonEmptyTests):
    pass


FLAKY_PY = """def model(dbt, session):
    dbt.config(materialized="{materialized}")
    if dbt.config.get("fail_now"):
        raise ValueError("the provider sent garbage")
    return dbt.ref("numbers").selectExpr("n", "n * n as n_squared")
"""

NUMBERS_SQL = "select explode(sequence(1, 5)) as n"
DOWNSTREAM_SQL = "select count(*) as row_count from {{ ref('flaky') }}"


class FailingModelSuite:
    """A model that raises fails alone, shows its traceback, and keeps the old table."""

    materialized = "table"

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "numbers.sql": NUMBERS_SQL,
            "flaky.py": FLAKY_PY.format(materialized=self.materialized),
            "downstream.sql": DOWNSTREAM_SQL,
        }

    def test_failure_keeps_previous_table(self, project):
        assert len(run_dbt(["run"])) == 3
        before = project.run_sql(f"select * from {project.test_schema}.flaky", fetch="all")
        assert len(before) == 5

        results = run_dbt(
            ["run", "--full-refresh", "--vars", "{fail_now: true}"],
            expect_pass=False,
        )
        by_name = {result.node.name: result for result in results}
        assert str(by_name["numbers"].status) == "success"
        assert str(by_name["flaky"].status) == "error"
        assert str(by_name["downstream"].status) == "skipped"
        message = by_name["flaky"].message
        assert "ValueError: the provider sent garbage" in message
        assert 'models/flaky.py", line 4, in model' in message

        after = project.run_sql(f"select * from {project.test_schema}.flaky", fetch="all")
        assert sorted(map(tuple, after)) == sorted(map(tuple, before))


FLAKY_CONFIG = {"models": {"+fail_now": "{{ var('fail_now', false) }}"}}


class FailingTableSuite(FailingModelSuite):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return FLAKY_CONFIG


class FailingIncrementalSuite(FailingModelSuite):
    materialized = "incremental"

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return FLAKY_CONFIG


NUMBERS_UPTO_SQL = "select explode(sequence(1, {{ var('upto', 5) }})) as n"

SEEN_PY = """
def model(dbt, session):
    dbt.config(materialized="incremental")
    numbers = dbt.ref("numbers_upto")
    if dbt.is_incremental:
        seen = session.table(str(dbt.this))
        numbers = numbers.join(seen, on="n", how="left_anti")
    return numbers
"""


class IncrementalThisSuite:
    """dbt.this and dbt.is_incremental in a Python model; tables default to Parquet."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"numbers_upto.sql": NUMBERS_UPTO_SQL, "numbers_seen.py": SEEN_PY}

    def test_incremental_reads_this(self, project):
        run_dbt(["run"])
        run_dbt(["run", "--vars", "{upto: 8}"])
        rows = project.run_sql(
            f"select n from {project.test_schema}.numbers_seen order by n", fetch="all"
        )
        assert [row[0] for row in rows] == list(range(1, 9))
        described = project.run_sql(
            f"describe table extended {project.test_schema}.numbers_seen", fetch="all"
        )
        provider = [row[1] for row in described if row[0] == "Provider"]
        assert provider == ["parquet"]


CHAIN_SOURCE_SQL = """
select * from values
    (1, 'camera', 10.0), (2, 'camera', 2.5), (3, 'drone', 7.0),
    (4, 'drone', 1.0), (5, 'camera', 4.0)
    as readings(id, device_type, value)
"""

CHAIN_PY = """
from pyspark.sql import functions as F


def model(dbt, session):
    dbt.config(materialized="table")
    readings = dbt.ref("chain_source")
    return readings.withColumn("is_large", F.col("value") >= F.lit(5.0))
"""

CHAIN_SUMMARY_SQL = """
select
    device_type,
    count(*) as readings,
    sum(case when is_large then 1 else 0 end) as large_readings,
    sum(value) as total_value
from {{ ref('chain_enriched') }}
group by device_type
"""


class ChainSuite:
    """SQL -> Python -> SQL in one `dbt build`."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "chain_source.sql": CHAIN_SOURCE_SQL,
            "chain_enriched.py": CHAIN_PY,
            "chain_summary.sql": CHAIN_SUMMARY_SQL,
        }

    def test_sql_python_sql(self, project):
        results = run_dbt(["build"])
        assert [str(r.status) for r in results] == ["success"] * 3
        rows = project.run_sql(
            f"select * from {project.test_schema}.chain_summary order by device_type",
            fetch="all",
        )
        assert [tuple(row) for row in rows] == [("camera", 3, 1, 16.5), ("drone", 2, 1, 8.0)]

    def test_docs_show_python_model_lineage(self, project):
        run_dbt(["build"])
        run_dbt(["docs", "generate"])
        target = Path(project.project_root) / "target"
        manifest = json.loads((target / "manifest.json").read_text())
        python_node = "model.test.chain_enriched"
        assert manifest["nodes"][python_node]["language"] == "python"
        assert manifest["parent_map"][python_node] == ["model.test.chain_source"]
        assert manifest["child_map"][python_node] == ["model.test.chain_summary"]
        catalog = json.loads((target / "catalog.json").read_text())
        columns = catalog["nodes"][python_node]["columns"]
        assert {"id", "device_type", "value", "is_large"} <= {name.lower() for name in columns}


class TestPythonModelSession(SessionTarget, PythonModelSuite):
    pass


class TestPySparkSession(SessionTarget, PySparkSuite):
    pass


class TestPythonIncrementalSession(SessionTarget, PythonIncrementalSuite):
    pass


class TestPythonEmptySession(SessionTarget, PythonEmptySuite):
    pass


class TestFailingTableSession(SessionTarget, FailingTableSuite):
    pass


class TestFailingIncrementalSession(SessionTarget, FailingIncrementalSuite):
    pass


class TestChainSession(SessionTarget, ChainSuite):
    pass


class TestIncrementalThisSession(SessionTarget, IncrementalThisSuite):
    pass
