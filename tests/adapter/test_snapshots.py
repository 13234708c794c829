"""`dbt snapshot` on plain Parquet (upstream dbt-spark refuses it): dbt's own snapshot
suites, and what a snapshot must keep through deletes, reruns and rollbacks.

dbt's suites change their seed with an SQL UPDATE, which Parquet tables lack; the
same change is made here by rewriting the seed (`rewrite_rows`), so the suites'
assertions run as they are.
"""

from __future__ import annotations

import pytest
from dbt.tests.adapter.basic import test_snapshot_check_cols, test_snapshot_timestamp
from dbt.tests.adapter.basic.test_snapshot_check_cols import BaseSnapshotCheckCols
from dbt.tests.adapter.basic.test_snapshot_timestamp import BaseSnapshotTimestamp
from dbt.tests.util import generate_update_clause, get_connection, relation_from_name, run_dbt

from tests.adapter.targets import session_profile


def rewrite_rows(adapter, update_rows_config: dict) -> None:
    """dbt.tests.util.update_rows as a rewrite: the seed's rows with the update applied,
    written over the seed (Parquet has no UPDATE)."""
    relation = relation_from_name(adapter, update_rows_config["name"])
    target = update_rows_config["dst_col"]
    clause = generate_update_clause(adapter, update_rows_config["clause"])
    where = update_rows_config.get("where", "true")
    with get_connection(adapter):
        columns = [c.name for c in adapter.get_columns_in_relation(relation)]
        values = ", ".join(
            f"case when {where} then {clause} else {name} end as {name}" if name == target else name
            for name in columns
        )
        copy = f"{relation}__rewritten"
        for statement in (
            f"drop table if exists {copy}",
            f"create table {copy} as select {values} from {relation}",
            f"insert overwrite table {relation} select * from {copy}",
            f"drop table {copy}",
        ):
            adapter.execute(statement)


@pytest.fixture
def parquet_updates(monkeypatch):
    for module in (test_snapshot_timestamp, test_snapshot_check_cols):
        monkeypatch.setattr(module, "update_rows", rewrite_rows)


class SessionTarget:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self):
        return session_profile()


@pytest.mark.usefixtures("parquet_updates")
class TestSnapshotTimestamp(SessionTarget, BaseSnapshotTimestamp):
    pass


@pytest.mark.usefixtures("parquet_updates")
class TestSnapshotCheckCols(SessionTarget, BaseSnapshotCheckCols):
    pass


SOURCE = "select * from {{ ref(var('seed', 'people')) }}"
SNAPSHOT = """
{% snapshot people_history %}
{{ config(unique_key='id', strategy='timestamp', updated_at='updated_at',
          hard_deletes='new_record', dbt_valid_to_current="to_timestamp('9999-12-31')") }}
select * from {{ ref(var('seed', 'people')) }}
{% endsnapshot %}
"""
PEOPLE = "id,name,updated_at\n1,ann,2026-01-01 00:00:00\n2,bob,2026-01-01 00:00:00\n"
# ann renamed (a newer updated_at), bob deleted, cid new; the source gains a column.
PEOPLE_LATER = (
    "id,name,updated_at,team\n1,anne,2026-02-01 00:00:00,red\n3,cid,2026-02-01 00:00:00,blue\n"
)


class TestSnapshotHistory(SessionTarget):
    """hard_deletes='new_record' and dbt_valid_to_current: a key's whole history, a column
    new in the source, a rerun that changes nothing, a rollback of the last snapshot
    commit, and a source that repeats a key."""

    @pytest.fixture(scope="class")
    def seeds(self):
        twice = PEOPLE_LATER + "4,dee,2026-03-01 00:00:00,red\n4,dan,2026-03-01 00:00:00,red\n"
        return {"people.csv": PEOPLE, "people_later.csv": PEOPLE_LATER, "people_twice.csv": twice}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"people_history.sql": SNAPSHOT}

    def history(self, project) -> list[tuple]:
        rows = project.run_sql(
            "select id, name, dbt_is_deleted, cast(dbt_valid_to as string)"
            f" from {project.test_schema}.people_history order by id, dbt_valid_from",
            fetch="all",
        )
        return [tuple(row) for row in rows]

    def test_history_of_updates_deletes_and_inserts(self, project):
        run_dbt(["seed"])
        run_dbt(["snapshot"])
        current = "9999-12-31 00:00:00"
        first = self.history(project)
        assert first == [(1, "ann", "False", current), (2, "bob", "False", current)]

        run_dbt(["snapshot", "--vars", "seed: people_later"])
        later = self.history(project)
        assert [row[:3] for row in later] == [
            (1, "ann", "False"),
            (1, "anne", "False"),
            (2, "bob", "False"),
            (2, "bob", "True"),
            (3, "cid", "False"),
        ]
        assert later[0][3] == "2026-02-01 00:00:00"  # closed when anne arrived
        assert later[2][3] != current and later[3][3] == current  # bob closed, then deleted
        assert later[1][3] == later[4][3] == current
        # The new column reaches the table (and its version store): NULL in older rows.
        teams = project.run_sql(
            f"select id, name, team from {project.test_schema}.people_history"
            " order by id, dbt_valid_from",
            fetch="all",
        )
        assert [tuple(row) for row in teams][:2] == [(1, "ann", None), (1, "anne", "red")]

        run_dbt(["snapshot", "--vars", "seed: people_later"])
        assert self.history(project) == later  # nothing new: nothing changes

        run_dbt(["run-operation", "rollback_last_commit", "--args", "{model: people_history}"])
        assert self.history(project) == first
        run_dbt(["snapshot", "--vars", "seed: people_later"])
        assert [row[:3] for row in self.history(project)] == [row[:3] for row in later]

        # A key sent twice for one updated_at would lose a row: the run fails instead.
        failed = run_dbt(["snapshot", "--vars", "seed: people_twice"], expect_pass=False)
        assert "rows share a dbt_scd_id" in failed[0].message
        assert [row[:3] for row in self.history(project)] == [row[:3] for row in later]


REGIONS = """
{% snapshot regions_history %}
{{ config(unique_key='id', strategy='check', check_cols='all', partition_by='region') }}
select 1 as id, {{ var('region', "''") }} as region, 'ann' as name
{% endsnapshot %}
"""


class TestSnapshotPartitionedByText(SessionTarget):
    """A review found '' in a text partition column: stored as NULL, it differed from the
    source's '' at every run, so each run closed the row and opened a copy (or, with the
    column in the key and hard_deletes='invalidate', closed it for good)."""

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"regions_history.sql": REGIONS}

    def test_an_empty_partition_value_is_refused_with_the_fix(self, project):
        failed = run_dbt(["snapshot"], expect_pass=False)
        assert "rows hold '' in a partition_by column the snapshot compares (region)" in (
            failed[0].message
        )
        assert "nullif(<column>, '')" in failed[0].message
        for _ in range(2):  # the fix the error names: the second run changes nothing
            run_dbt(["snapshot", "--vars", "region: nullif('', '')"])
        rows = project.run_sql(
            f"select id, region, name, dbt_valid_to from {project.test_schema}.regions_history",
            fetch="all",
        )
        assert [tuple(row) for row in rows] == [(1, None, "ann", None)]
