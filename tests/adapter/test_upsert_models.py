"""Both faces of the upsert through dbt: a Python model and a SQL model with the
`upsert` strategy give the same table; `changed_since` pulls only changed rows;
`as_of` reads a table as of a kept commit, `rollback_to` restores it,
`rollback_last_commit` undoes the last commit, a savepoint stops a full refresh,
`vacuum` removes orphans, and `repartition` changes the layout in place."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture, write_file

from dynamic_ddl import steps
from dynamic_ddl.catalog import local_path
from dynamic_ddl.locks import RUN_LOCK, WAIT_ENV, LockSettings, acquire, release
from tests.adapter.targets import session_profile

CONFIG = dict(
    materialized="incremental",
    incremental_strategy="upsert",
    unique_key="device",
    ordering_field="log_ts",
    partition_by=["bucket"],
    delete_marker="gone",
)
SETTINGS = ", ".join(f"{name}={value!r}" for name, value in CONFIG.items())

SQL_MODEL = f"""
{{{{ config({SETTINGS}) }}}}
select device, state, log_ts, gone, bucket, batch from {{{{ source('feed', 'updates') }}}}
{{% if is_incremental() %}}
where batch > (select coalesce(max(batch), 0) from {{{{ this }}}})
{{% endif %}}
"""

# The same model in Python: the batches this table has not seen yet.
PY_MODEL = f"""
def model(dbt, session):
    dbt.config({SETTINGS})
    updates = dbt.source("feed", "updates")
    if dbt.is_incremental:
        seen = session.table(str(dbt.this)).agg({{"batch": "max"}}).first()[0] or 0
        updates = updates.where(updates.batch > seen)
    return updates
"""

PULL_MODEL = """
{{ config(materialized='incremental', unique_key='device', incremental_strategy='append') }}
select device, state, log_ts, _commit_id from {{ ref('lnd_sql') }}
where {{ changed_since(ref('lnd_sql')) }}
"""

SOURCES = """
sources:
  - name: feed
    schema: "{{ target.schema }}"
    tables:
      - name: updates
"""

BATCHES = {
    1: [("a", "on", 1, False, 0), ("b", "on", 1, False, 1), ("c", "on", 1, False, 2)],
    # a: newer; b: an older update arriving late; c: deleted.
    2: [("a", "off", 2, False, 0), ("b", "stale", 0, False, 1), ("c", None, 3, True, 2)],
    3: [("d", "on", 4, False, 3)],
}

# Says, in every row, whether dbt built it as a first build or as an increment.
FLAG_MODEL = """
{{ config(materialized='incremental', incremental_strategy='upsert', unique_key='device',
          ordering_field='log_ts', partition_by=['bucket']) }}
select device, log_ts, bucket, batch,
    {{ "'increment'" if is_incremental() else "'first build'" }} as built_as
from {{ source('feed', 'updates') }}
{% if is_incremental() %}
where batch > (select coalesce(max(batch), 0) from {{ this }})
{% endif %}
"""


@contextmanager
def _run_lock_held(project) -> Iterator[None]:
    """The run lock of the project's schema held by this process, as a `dbt run` holds it,
    while others wait for it at most 1 s."""
    adapter, table = project.adapter, f"{project.test_schema}.{RUN_LOCK}"
    with adapter.connection_named("run_lock_holder"):
        holder = acquire(adapter._fetch_rows, table, LockSettings(wait_seconds=0))
    waited = os.environ.get(WAIT_ENV)
    os.environ[WAIT_ENV] = "1"
    try:
        yield
    finally:
        if waited is None:
            del os.environ[WAIT_ENV]
        else:
            os.environ[WAIT_ENV] = waited
        with adapter.connection_named("run_lock_holder"):
            release(adapter._fetch_rows, table, holder)


class UpsertModelsSuite:
    """Runs on any target (the Thrift variant is in test_python_models_thrift.py)."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "lnd_sql.sql": SQL_MODEL,
            "lnd_python.py": PY_MODEL,
            "pulled.sql": PULL_MODEL,
            "sources.yml": SOURCES,
        }

    def _load(self, project, batch: int) -> None:
        values = ", ".join(
            f"('{d}', {('null' if s is None else repr(s))}, {t}, {str(g).lower()}, {b}, {batch})"
            for d, s, t, g, b in BATCHES[batch]
        )
        project.run_sql(f"insert into {project.test_schema}.updates values {values}")

    def _rows(self, project, table: str) -> list[tuple]:
        return [
            tuple(r)
            for r in project.run_sql(
                f"select device, state, log_ts from {project.test_schema}.{table} order by device",
                fetch="all",
            )
        ]

    def test_both_faces_upsert_alike_pull_changes_and_roll_back(self, project):
        project.run_sql(
            f"create table {project.test_schema}.updates (device string, state string,"
            " log_ts bigint, gone boolean, bucket int, batch int) using parquet"
        )
        self._load(project, 1)
        run_dbt(["run"])
        assert self._rows(project, "pulled") == [("a", "on", 1), ("b", "on", 1), ("c", "on", 1)]

        self._load(project, 2)
        run_dbt(["run"])
        expected = [("a", "off", 2), ("b", "on", 1)]
        assert self._rows(project, "lnd_sql") == expected
        assert self._rows(project, "lnd_python") == expected
        # Only a changed: b's late update changed nothing, c's delete removes a row.
        pulled = project.run_sql(
            f"select device, state from {project.test_schema}.pulled order by device, state",
            fetch="all",
        )
        assert [tuple(r) for r in pulled] == [("a", "off"), ("a", "on"), ("b", "on"), ("c", "on")]

        # An operation that changes a table's history waits for a run holding the schema:
        # the run read the table's state when it rendered its models, before their
        # commits, and would undo a rollback in between without knowing. Here this test
        # holds the run lock: the rollback fails naming the holder, and changes nothing.
        with _run_lock_held(project):
            waited, logs = run_dbt_and_capture(
                ["run-operation", "rollback_last_commit", "--args", "{model: lnd_sql}"],
                expect_pass=False,
            )
        assert f"{project.test_schema}.{RUN_LOCK} is locked by process" in logs
        assert self._rows(project, "lnd_sql") == expected

        # The table as of its first commit (b's row is still that commit's): read, restored.
        first_batch = [("a", "on", 1), ("b", "on", 1), ("c", "on", 1)]
        table = f"{project.test_schema}.lnd_sql"
        first = project.run_sql(f"select min(_commit_id) from {table}", fetch="one")[0]
        then = "{{ as_of(ref('lnd_sql'), '" + first + "') }}"
        shown = run_dbt(["show", "--inline", f"select device, state, log_ts from {then} as t"])
        assert sorted(tuple(row) for row in shown[0].agate_table.rows) == first_batch
        restore = json.dumps({"model": "lnd_sql", "at": first})
        run_dbt(["run-operation", "rollback_to", "--args", restore])
        assert self._rows(project, "lnd_sql") == first_batch
        # A restore is a commit: rollback_last_commit undoes it.
        run_dbt(["run-operation", "rollback_last_commit", "--args", "{model: lnd_sql}"])
        assert self._rows(project, "lnd_sql") == expected

        # A savepoint keeps its history until released: a --full-refresh, which would
        # drop it, is refused before it builds anything (it once dropped it silently).
        last = project.run_sql(f"select max(_commit_id) from {table}", fetch="one")[0]
        pinned = json.dumps({"model": "lnd_sql", "at": last})
        run_dbt(["run-operation", "savepoint", "--args", pinned])
        refused = run_dbt(["run", "--select", "lnd_sql", "--full-refresh"], expect_pass=False)
        assert "release them first" in refused[0].message
        assert self._rows(project, "lnd_sql") == expected
        run_dbt(["run-operation", "release_savepoint", "--args", pinned])

        # Vacuum: orphans of killed writes go, and what the table reads stays.
        store = local_path(
            next(
                row[1]
                for row in project.run_sql(f"describe table extended {table}__versions", "all")
                if row[0] == "Location"
            )
        )
        version = next(store.glob("bucket=0/_version=*"))
        orphan = version.with_name("_version=20260101000000000000")
        shutil.copytree(version, orphan)
        (store / "_temporary" / "0").mkdir(parents=True)
        run_dbt(["run-operation", "vacuum", "--args", "{model: lnd_sql}"])
        assert not orphan.exists() and not (store / "_temporary").exists()
        listed = project.run_sql(f"show partitions {table}__versions", fetch="all")
        assert not any("20260101000000000000" in row[0] for row in listed)
        assert self._rows(project, "lnd_sql") == expected

        # Repartition in place: the rows stay, a downstream pull takes nothing new, and
        # the model's own run fails until its partition_by says the same.
        pulled_before = sorted(
            tuple(r)
            for r in project.run_sql(f"select * from {project.test_schema}.pulled", fetch="all")
        )
        run_dbt(
            ["run-operation", "repartition", "--args", "{model: lnd_sql, partition_by: [device]}"]
        )
        described = project.run_sql(f"describe {table}", fetch="all")
        layout = [row[0] for row in described]
        assert layout[layout.index("# Partition Information") + 2 :] == ["device"]
        assert self._rows(project, "lnd_sql") == expected
        run_dbt(["run", "--select", "pulled"])
        pulled_after = sorted(
            tuple(r)
            for r in project.run_sql(f"select * from {project.test_schema}.pulled", fetch="all")
        )
        assert pulled_after == pulled_before
        failed = run_dbt(["run", "--select", "lnd_sql"], expect_pass=False)
        assert "run-operation repartition" in failed[0].message

    def test_a_table_a_killed_repartition_hid_is_back_before_its_model_renders(self, project):
        """Found by review: a repartition killed between its swap's two renames left the
        table's name empty; dbt saw no table and ran the model as a first build, whose
        commit put the table back only then. The run now puts it back first: killed at
        its first swap the repartition is undone and the model builds its increment;
        killed at its last, it is finished (the model must then say its layout)."""
        schema = project.test_schema
        project.run_sql(
            f"create table if not exists {schema}.updates (device string, state string,"
            " log_ts bigint, gone boolean, bucket int, batch int) using parquet"
        )
        for batch in (1, 2):
            if not project.run_sql(f"select 1 from {schema}.updates where batch = {batch}", "all"):
                self._load(project, batch)
        write_file(FLAG_MODEL, project.project_root, "models", "lnd_flag.sql")
        run_dbt(["run", "--select", "lnd_flag"])

        def repartition_killed_at_swap(nth: int) -> None:
            seen = []

            def kill(step: str) -> None:
                seen.append(step)
                if seen.count("swap.rename_new") == nth and step == "swap.rename_new":
                    raise steps.Interrupted(step)

            args = "{model: lnd_flag, partition_by: [device]}"
            with pytest.raises(steps.Interrupted), steps.hooked(kill):
                run_dbt(["run-operation", "repartition", "--args", args])
            listed = project.run_sql(f"show tables in {schema} like 'lnd_flag*'", "all")
            assert "lnd_flag" not in {row[1] for row in listed}  # hidden

        def layout() -> list[str]:
            described = [row[0] for row in project.run_sql(f"describe {schema}.lnd_flag", "all")]
            return described[described.index("# Partition Information") + 2 :]

        repartition_killed_at_swap(1)
        self._load(project, 3)
        _, logs = run_dbt_and_capture(["run", "--select", "lnd_flag"])
        assert "the repartition undone" in logs
        rows = project.run_sql(f"select device, built_as from {schema}.lnd_flag order by 1", "all")
        assert [tuple(row) for row in rows] == [
            ("a", "first build"),
            ("b", "first build"),
            ("c", "first build"),
            ("d", "increment"),
        ]
        assert layout() == ["bucket"]

        repartition_killed_at_swap(2)
        failed, logs = run_dbt_and_capture(["run", "--select", "lnd_flag"], expect_pass=False)
        assert "it is finished: the table has its new layout" in logs
        assert "run-operation repartition" in logs  # the model's partition_by differs
        assert layout() == ["device"]
        rows = project.run_sql(f"select device, built_as from {schema}.lnd_flag order by 1", "all")
        assert [row[0] for row in rows] == ["a", "b", "c", "d"]


class TestUpsertModelsSession(UpsertModelsSuite):
    @pytest.fixture(scope="class")
    def dbt_profile_target(self):
        return session_profile()
