"""kill -9 of a whole `dbt run` in the middle of an upsert, for both faces (a SQL
model with the `upsert` strategy, a Python model), on the Thrift target.

Each face is killed twice, as it writes the new versions and as it moves
partitions to them; every partition stays whole, and a plain rerun converges
to the uninterrupted result and leaves only the versions a rollback needs.
The moments are seen from outside, in the warehouse's folders, as a user's
`kill -9` would hit them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import DBT, connect_to_fresh_schema

SCHEMA = "upsert_kill_dbt"
DAYS, DEVICES = 24, 1200  # device i lives in day i % DAYS
CONFIG = (
    "materialized='incremental', incremental_strategy='upsert', unique_key='device',"
    " ordering_field='log_ts', partition_by=['day']"
)
MODELS = {
    "lnd_sql.sql": f"{{{{ config({CONFIG}) }}}}\n"
    "select device, state, log_ts, day from {{ source('feed', 'updates') }}\n",
    "lnd_python.py": textwrap.dedent(
        f"""
        def model(dbt, session):
            dbt.config({CONFIG.replace("'", '"')})
            return dbt.source("feed", "updates")
        """
    ),
    "sources.yml": f"sources:\n  - name: feed\n    schema: {SCHEMA}\n    tables:\n"
    "      - name: updates\n",
}


def batch_sql(batch: int) -> str:
    """The feed's rows. Batch 1: every device `v1` at log_ts 1. Batch 2: even devices a
    newer `v2`, odd devices an older update arriving late (it must lose)."""
    if batch == 1:
        state, log_ts = "'v1'", "1"
    else:
        state = "if(id % 2 = 0, 'v2', 'late')"
        log_ts = "if(id % 2 = 0, 2, 0)"
    return (
        f"select concat('k', lpad(cast(id as string), 4, '0')) as device, {state} as state,"
        f" cast({log_ts} as bigint) as log_ts, concat('d', lpad(cast(id % {DAYS} as string),"
        f" 2, '0')) as day from range({DEVICES})"
    )


def expected_rows() -> list[tuple]:
    """An uninterrupted run's result: even devices took batch 2, odd ones kept batch 1."""
    return sorted(
        (f"k{i:04d}", "v2" if i % 2 == 0 else "v1", 2 if i % 2 == 0 else 1, f"d{i % DAYS:02d}")
        for i in range(DEVICES)
    )


@pytest.fixture(scope="module")
def connect(thrift_server):
    with connect_to_fresh_schema(thrift_server, SCHEMA) as session:
        yield session


@pytest.fixture(scope="module")
def project(tmp_path_factory, thrift_server, connect) -> Path:
    """A dbt project of both faces on the Thrift target, built once on batch 1; the
    feed then holds batch 2."""
    root = tmp_path_factory.mktemp("kill_dbt")
    (root / "models").mkdir()
    for name, text in MODELS.items():
        (root / "models" / name).write_text(text)
    (root / "dbt_project.yml").write_text(
        "name: kill_dbt\nversion: '1.0'\nprofile: kill_dbt\nmodel-paths: [models]\n"
    )
    (root / "profiles.yml").write_text(
        textwrap.dedent(
            f"""
            kill_dbt:
              target: thrift
              outputs:
                thrift:
                  type: dynamic_spark
                  method: thrift
                  host: 127.0.0.1
                  port: {thrift_server.thrift_port}
                  schema: {SCHEMA}
                  connect_url: {thrift_server.connect_url}
                  connect_token: {thrift_server.connect_token}
                  threads: 1
            """
        )
    )
    connect.sql(f"create table {SCHEMA}.updates using parquet as {batch_sql(1)}")
    assert dbt_run(root).wait(timeout=600) == 0, (root / "dbt.log").read_text()[-3000:]
    connect.sql(f"insert overwrite table {SCHEMA}.updates {batch_sql(2)}")
    return root


def dbt_run(root: Path, *select: str) -> subprocess.Popen:
    """`dbt run` as a user starts it, in its own process; its output goes to dbt.log."""
    args = [str(DBT), "run", "--project-dir", str(root), "--profiles-dir", str(root)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBT_")}
    env.update(DBT_TARGET_PATH=str(root / "target"), DBT_LOG_PATH=str(root / "logs"))
    with open(root / "dbt.log", "w") as log:
        return subprocess.Popen(
            [*args, *(["--select", *select] if select else [])],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def kill_when(process: subprocess.Popen, moment: Callable[[], bool], what: str) -> None:
    """SIGKILL `process` as soon as `moment()` holds, polled every few milliseconds."""
    deadline = time.monotonic() + 600
    while not moment():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"dbt run ended (code {process.returncode}) before it was {what}")
        time.sleep(0.003)
    os.kill(process.pid, signal.SIGKILL)
    assert process.wait(timeout=60) == -signal.SIGKILL


def location(connect, table: str) -> Path:
    rows = connect.sql(f"describe table extended {table}").collect()
    return Path(next(r[1] for r in rows if r[0] == "Location").removeprefix("file:"))


def wait_until(condition: Callable[[], bool], seconds: float = 120) -> None:
    """The server aborts a killed client's statement on its own; wait for that."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the server kept the killed run's write going"
        time.sleep(0.1)


def rows(connect, table: str) -> list[tuple]:
    connect.sql(f"refresh table {table}")
    result = connect.sql(f"select device, state, log_ts, day from {table}").collect()
    return sorted(tuple(r) for r in result)


def assert_whole(connect, table: str, days: int = DAYS, rows: int = DEVICES) -> None:
    """Every day holds all its rows (of `rows` over `days`), all from one batch: its old
    state (v1) or its new one (v2)."""
    connect.sql(f"refresh table {table}")
    found = connect.sql(
        f"select day, count(*), collect_set(state) from {table} group by day"
    ).collect()
    assert len(found) == days
    for day, count, states in found:
        assert count == rows // days
        assert sorted(states) in (["v1"], ["v2"]), f"{day} mixes versions: {states}"


def log_actions(connect, model: str) -> list[str]:
    connect.sql(f"refresh table {SCHEMA}.upsert_commits")
    result = connect.sql(
        f"select action from {SCHEMA}.upsert_commits where table_name = '{model}'"
        " order by logged_at, action desc"
    ).collect()
    return [r[0] for r in result]


@pytest.mark.parametrize("model", ["lnd_sql", "lnd_python"])
def test_kill_9_of_dbt_run_mid_upsert_then_rerun_converges(project, connect, model):
    table = f"{SCHEMA}.{model}"
    versions = location(connect, f"{table}__versions")
    log_folder = location(connect, f"{SCHEMA}.upsert_commits") / f"table_name={model}"
    assert log_actions(connect, model) == ["pending", "committed"]  # batch 1's commit

    # Killed while the merge job writes the new versions: nothing logged, nothing moved.
    run = dbt_run(project, model)
    kill_when(run, lambda: (versions / "_temporary").exists(), "writing new versions")
    assert_whole(connect, table)
    assert log_actions(connect, model) == ["pending", "committed"]
    wait_until(lambda: not (versions / "_temporary").exists())

    # Killed once the commit is logged pending, as partitions move to the new versions.
    logged = set(log_folder.iterdir())
    run = dbt_run(project, model)
    kill_when(run, lambda: len(set(log_folder.iterdir()) - logged) > 0, "logged pending")
    assert_whole(connect, table)
    assert log_actions(connect, model)[-1] == "pending"

    # A plain rerun finishes the pending commit; the batch then changes nothing more.
    rerun = dbt_run(project, model)
    assert rerun.wait(timeout=600) == 0, (project / "dbt.log").read_text()[-3000:]
    assert rows(connect, table) == expected_rows()
    assert log_actions(connect, model) == ["pending", "committed", "pending", "committed"]
    # Kept: each day's current version and, for the 12 days batch 2 changed, the
    # previous one (for a rollback). The killed runs' versions are gone, on disk too.
    stored = {p.relative_to(versions) for p in versions.glob("day=*/_version=*")}
    listed = connect.sql(f"show partitions {table}__versions").collect()
    assert {Path(r[0]) for r in listed} == stored
    assert len(stored) == DAYS + DAYS // 2
