"""dbt's own incremental suites, run with `incremental_strategy='upsert'` on Parquet.

Two adaptations, both from the upsert's documented semantics:
- rows carry `_commit_id` and `_commit_ts`; the suites compare every column
  of the relation named first, so the schema-change suite names the
  expected relation first (the unique-key suite does already);
- the latest row per key wins on the first build too, so where the suites'
  seed holds one key twice (NY, with `state` as the key), the expected
  table holds its latest row;
- the record key is required, and checked on the first build already;
- the predicates suite's model has no ordering column: `id` orders, so on a
  tie the incoming row wins (a correction), as the suite expects.
"""

from __future__ import annotations

import pytest
from dbt.tests.adapter.incremental import test_incremental_on_schema_change as schema_suite
from dbt.tests.adapter.incremental import test_incremental_predicates as predicates_suite
from dbt.tests.adapter.incremental import test_incremental_unique_id as unique_suite
from dbt.tests.util import check_relations_equal, run_dbt

from dynamic_ddl.catalog import database_location, local_path, spark_sql
from tests.adapter.targets import session_profile

# NY's two rows: Brooklyn (2021-04-02) is later than Manhattan (2021-04-01).
WITHOUT_MANHATTAN = "union all\nselect 'NY','New York','Manhattan','2021-04-01'\n"


def upsert_models(**config) -> dict:
    """A project_config_update: every model an `upsert` on Parquet, with `config`."""
    settings = {"file_format": "parquet", "incremental_strategy": "upsert", **config}
    return {"models": {f"+{key}": value for key, value in settings.items()}}


def _expected_first(adapter, relations, **kwargs):
    """check_relations_equal comparing the columns of the expected (second) relation."""
    return check_relations_equal(adapter, list(reversed(relations)), **kwargs)


class UpsertSuite:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self):
        return session_profile()

    @pytest.fixture(scope="class", autouse=True)
    def legacy_inserts(self, spark):
        """The suites insert text into date columns, which ANSI store assignment refuses."""
        spark.conf.set("spark.sql.storeAssignmentPolicy", "LEGACY")
        yield
        spark.conf.unset("spark.sql.storeAssignmentPolicy")


class TestUpsertUniqueKey(UpsertSuite, unique_suite.BaseIncrementalUniqueKey):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return upsert_models(ordering_field="last_visit_date")

    @pytest.fixture(scope="class")
    def models(self):
        models = unique_suite.SubBaseIncrementalUniqueKey.models.__wrapped__(self)
        expected = {
            name: sql.replace(WITHOUT_MANHATTAN, "") for name, sql in models["expected"].items()
        }
        # With (state, county, city) as the key, both NY rows are distinct keys.
        expected["trinary__inplace_overwrite.sql"] = models["expected"][
            "unique_key_list__inplace_overwrite.sql"
        ]
        return {**models, "expected": expected}

    def test__trinary_unique_key_list(self, project):
        expected_fields = self.get_expected_fields(
            relation="trinary__inplace_overwrite", seed_rows=8, opt_model_count=1
        )
        test_case_fields = self.get_test_fields(
            project,
            seed="seed",
            incremental_model="trinary_unique_key_list",
            update_sql_file="duplicate_insert",
            opt_model_count=self.update_incremental_model("trinary__inplace_overwrite"),
        )
        self.check_scenario_correctness(expected_fields, test_case_fields, project)

    def test__empty_unique_key_list(self, project):
        """upsert needs a record key: a clear error, not an append."""
        run_dbt(["seed"])
        (result,) = run_dbt(["run", "--select", "empty_unique_key_list"], expect_pass=False)
        assert "needs unique_key" in result.message

    test__no_unique_keys = test__empty_unique_key_list
    test__empty_str_unique_key = test__empty_unique_key_list

    def test__bad_unique_key(self, project):
        """A key column the model lacks fails the first build already, naming the column."""
        run_dbt(["seed"])
        (result,) = run_dbt(["run", "--select", "not_found_unique_key"], expect_pass=False)
        assert "thisisnotacolumn" in result.message and "unique_key" in result.message

    def test__bad_unique_key_list(self, project):
        run_dbt(["seed"])
        (result,) = run_dbt(["run", "--select", "not_found_unique_key_list"], expect_pass=False)
        assert "thisisnotacolumn" in result.message and "unique_key" in result.message


class TestUpsertOnSchemaChange(UpsertSuite, schema_suite.BaseIncrementalOnSchemaChange):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return upsert_models(unique_key="id", ordering_field="id")

    @pytest.fixture(autouse=True)
    def compare_expected_columns(self, monkeypatch):
        monkeypatch.setattr(schema_suite, "check_relations_equal", _expected_first)

    def test_run_incremental_sync_all_columns(self, project):
        """Parquet cannot drop columns: sync_all_columns is refused with the alternatives."""
        select = "model_a incremental_sync_all_columns"
        results = run_dbt(["run", "--select", select], expect_pass=False)
        message = next(r.message for r in results if r.node.name == "incremental_sync_all_columns")
        assert "append_new_columns" in message and "cannot drop columns" in message


class TestUpsertIncrementalPredicates(UpsertSuite, predicates_suite.BaseIncrementalPredicates):
    """Stored rows failing `incremental_predicates` take no part in the merge and are kept:
    the stored id 2 stays beside the incoming one, as with dbt's delete+insert."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return upsert_models(
            incremental_predicates=["DBT_INTERNAL_DEST.id != 2"], ordering_field="id"
        )


class TestUpsertPredicatesConfig(TestUpsertIncrementalPredicates):
    """dbt's older name for the config, `predicates`, works the same."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return upsert_models(predicates=["id != 2"], ordering_field="id")


CONTRACT_MODEL = """
{{ config(materialized='incremental', incremental_strategy='upsert',
          unique_key='id', ordering_field='ts', on_schema_change='fail') }}
select 1 as id, cast(2 as bigint) as ts, 'a' as label
"""


def _contract_yml(label_type: str) -> str:
    columns = [("id", "int"), ("ts", "bigint"), ("label", label_type)]
    columns += [("_commit_id", "string"), ("_commit_ts", "timestamp")]
    listed = "\n".join(f"      - {{name: {n}, data_type: {t}}}" for n, t in columns)
    return (
        "models:\n  - name: contracted\n    config:\n      contract: {enforced: true}\n"
        f"    columns:\n{listed}\n"
    )


class TestUpsertChecksItsContractOnEveryRun:
    """dbt-spark checks contracts only when creating a table; an upsert merges from a view."""

    @pytest.fixture(scope="class")
    def dbt_profile_target(self):
        return session_profile()

    @pytest.fixture(scope="class")
    def models(self):
        return {"contracted.sql": CONTRACT_MODEL, "schema.yml": _contract_yml("string")}

    def test_a_type_the_sql_does_not_give_fails_the_run(self, project):
        run_dbt(["run"])
        run_dbt(["run"])  # the incremental run checks it too
        # Found by review: a full refresh built its staging table with dbt-spark's
        # contract check, which knows no commit columns: it failed on every contract
        # model, where the README names it as the fix after a rollback.
        run_dbt(["run", "--full-refresh"])
        rows = project.run_sql(
            f"select id, label from {project.test_schema}.contracted", fetch="all"
        )
        assert [tuple(row) for row in rows] == [(1, "a")]
        (project.project_root / "models" / "schema.yml").write_text(_contract_yml("int"), "utf-8")
        result = run_dbt(["run"], expect_pass=False)
        message = result.results[0].message
        assert "contract" in message and "label" in message


STRICT_MODEL = """
{{ config(materialized='incremental', incremental_strategy='upsert',
          unique_key='id', ordering_field='ts', on_schema_change='fail') }}
select 1 as id, cast(2 as bigint) as ts, %s
"""


class TestFailOnAnySchemaChange:
    """on_schema_change='fail' fails on any change, as dbt means it: found by review, a
    column retyped was cast into the stored type (1.5 stored as 1) and one dropped was
    written NULL, silently; only an added column failed."""

    @pytest.fixture(scope="class")
    def dbt_profile_target(self):
        return session_profile()

    @pytest.fixture(scope="class")
    def models(self):
        return {"strict.sql": STRICT_MODEL % "cast(7 as bigint) as amount, 'a' as label"}

    @pytest.mark.parametrize(
        ("columns", "change"),
        [
            ("cast(7.5 as double) as amount, 'a' as label", "amount is double, stored as bigint"),
            ("cast(7 as bigint) as amount", "lacks label"),
            ("cast(7 as bigint) as amount, 'a' as label, 1 as extra", "adds extra"),
        ],
    )
    def test_a_changed_column_fails_the_run_and_changes_nothing(self, project, columns, change):
        model = project.project_root / "models" / "strict.sql"
        model.write_text(STRICT_MODEL % "cast(7 as bigint) as amount, 'a' as label", "utf-8")
        run_dbt(["run"])
        model.write_text(STRICT_MODEL % columns, "utf-8")
        result = run_dbt(["run"], expect_pass=False)
        assert change in result.results[0].message
        rows = project.run_sql(
            f"select amount, label from {project.test_schema}.strict", fetch="all"
        )
        assert [tuple(row) for row in rows] == [(7, "a")]


REFRESHED_MODEL = """
{{ config(materialized='incremental', incremental_strategy='upsert', file_format='parquet',
          unique_key='id', ordering_field='version', partition_by=['day'],
          tie_break=var('tie_break', none), on_schema_change=var('on_change', 'ignore')) }}
select id, day, {{ var('version') }} as version, {{ var('fail', '') }} 'v' as label
from (select 1 as id, 'd1' as day union all select 2 as id, 'd2' as day)
"""


class TestAFailingFullRefreshKeepsTheTable:
    """--full-refresh builds first: a model whose SQL fails keeps the table, its versions and
    its rollback (it used to drop all three before building)."""

    @pytest.fixture(scope="class")
    def dbt_profile_target(self):
        return session_profile()

    @pytest.fixture(scope="class")
    def models(self):
        return {"refreshed.sql": REFRESHED_MODEL}

    def test_a_failing_full_refresh_keeps_rows_and_rollback(self, project, spark):
        table = f"{project.test_schema}.refreshed"
        run_dbt(["run", "--vars", "{version: 1}"])
        run_dbt(["run", "--vars", "{version: 2}"])
        broken = "{version: 3, fail: 'no_such_column +'}"
        run_dbt(["run", "--full-refresh", "--vars", broken], expect_pass=False)
        rows = project.run_sql(f"select id, version from {table} order by id", fetch="all")
        assert [tuple(r) for r in rows] == [(1, 2), (2, 2)]
        # Found by review: a config the commit refuses (a column the result lacks, a
        # setting upsert does not take) failed only after the table and its history
        # were dropped. It fails before, naming the fix.
        for config in ("tie_break: no_such_column", "on_change: sync_all_columns"):
            result = run_dbt(
                ["run", "--full-refresh", "--vars", f"{{version: 3, {config}}}"], expect_pass=False
            )
            assert "no_such_column" in result.results[0].message or "sync_all_columns" in (
                result.results[0].message
            )
            rows = project.run_sql(f"select id, version from {table} order by id", fetch="all")
            assert [tuple(r) for r in rows] == [(1, 2), (2, 2)], config
        run_dbt(["run-operation", "rollback_last_commit", "--args", "{model: refreshed}"])
        rows = project.run_sql(f"select id, version from {table} order by id", fetch="all")
        assert [tuple(r) for r in rows] == [(1, 1), (2, 1)]
        # Found by review: a rebuild killed while writing its staging table left files
        # in its folder, and Spark refuses a managed table over a folder that is not
        # empty: every later rebuild of the model failed until the folder was removed.
        schema_folder = local_path(database_location(spark_sql(spark), project.test_schema))
        project.run_sql(f"drop table if exists {table}__dbt_new")  # a failed rebuild's
        leftover = schema_folder / "refreshed__dbt_new" / "_temporary" / "0"
        leftover.mkdir(parents=True)
        (leftover / "part-00000.parquet").write_bytes(b"half written")
        run_dbt(["run", "--full-refresh", "--vars", "{version: 4}"])
        rows = project.run_sql(f"select id, version from {table} order by id", fetch="all")
        assert [tuple(r) for r in rows] == [(1, 4), (2, 4)]
