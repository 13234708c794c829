"""kill -9 of a process in the middle of an upsert commit, at several moments: every
partition stays whole, and rerunning the batch gives the uninterrupted result.

The upserting process is a separate Python process talking to the test run's
Spark Connect server (one metastore, as in production), killed with SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from dynamic_ddl.steps import KILL_AT_ENV
from tests.conftest import connect_to_fresh_schema
from tests.test_upsert_kill_dbt import assert_whole

SCHEMA = "upsert_kill"
PARTITIONS, ROWS = 24, 1200  # enough partitions to kill mid-swap

UPSERT_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from pyspark.sql.connect.session import SparkSession
    from dynamic_ddl.upsert.protocol import UpsertSpec, upsert

    url, table, version = sys.argv[1], sys.argv[2], int(sys.argv[3])
    # Optional: SIGKILL this process right after the n-th statement containing `marker`.
    marker, kill_after = (sys.argv[4], int(sys.argv[5])) if len(sys.argv) > 5 else ("", 0)
    seen = 0

    def sql(statement):
        global seen
        result = spark.sql(statement).collect()
        seen += bool(marker) and marker in statement.lower()
        if kill_after and seen == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    spark = SparkSession.builder.remote(url).create()
    spark.range({rows}).selectExpr(
        "concat('d', cast(id % {partitions} as string)) as day",
        "concat('k', cast(id as string)) as device",
        f"'v{{version}}' as state",
        f"cast({{version}} as bigint) as log_ts",
    ).createOrReplaceTempView("batch")
    spec = UpsertSpec(table, ("device",), "log_ts", ("day",))
    upsert(sql, spec, "batch")
    """
).format(rows=ROWS, partitions=PARTITIONS)


@pytest.fixture(scope="module")
def connect(thrift_server):
    with connect_to_fresh_schema(thrift_server, SCHEMA) as session:
        yield session


def _start(
    url: str, table: str, version: int, *kill_at: str | int, step: str = ""
) -> subprocess.Popen:
    """Upsert `version` into `table`; kill_at = (marker, n) kills after the n-th statement
    containing marker, an exact moment whatever the machine's speed; `step` kills at
    the first time the protocol reaches that named step (steps.py)."""
    arguments = [url, table, str(version), *map(str, kill_at)]
    env = {**os.environ, KILL_AT_ENV: f"{step}:1"} if step else None
    return subprocess.Popen([sys.executable, "-c", UPSERT_SCRIPT, *arguments], env=env)


def _data(connect, table: str) -> list[tuple]:
    connect.sql(f"refresh table {table}")
    rows = connect.sql(f"select day, device, state, log_ts from {table} order by device")
    return [tuple(r) for r in rows.collect()]


def _latest_commit(connect) -> str:
    connect.sql(f"refresh table {SCHEMA}.upsert_commits")
    return connect.sql(
        f"select max(commit_id) from {SCHEMA}.upsert_commits where table_name = 'killed'"
    ).first()[0]


@pytest.fixture(scope="module")
def reference(connect, thrift_server) -> str:
    """The uninterrupted result: version 1, then version 2."""
    table = f"{SCHEMA}.clean"
    for version in (1, 2):
        assert _start(thrift_server.connect_url, table, version).wait(timeout=300) == 0
    return table


def test_kill_9_while_partitions_move_then_rerun_converges(connect, thrift_server, reference):
    url, killed = thrift_server.connect_url, f"{SCHEMA}.killed"
    assert _start(url, killed, 1).wait(timeout=300) == 0
    # Killed while swapping partitions: half swapped, logged pending, not committed.
    before = _latest_commit(connect)
    swapping = _start(url, killed, 2, " set location ", PARTITIONS // 2)
    assert swapping.wait(timeout=300) == -signal.SIGKILL
    connect.sql(f"refresh table {SCHEMA}.upsert_commits")
    actions = connect.sql(
        f"select action from {SCHEMA}.upsert_commits"
        f" where table_name = 'killed' and commit_id > '{before}'"
    ).collect()
    assert [r[0] for r in actions] == ["pending"]
    assert_whole(connect, killed, PARTITIONS, ROWS)

    assert _start(url, killed, 2).wait(timeout=300) == 0  # takes the dead run's lock over
    assert _data(connect, killed) == _data(connect, reference)
    connect.sql(f"refresh table {SCHEMA}.upsert_commits")
    log = connect.sql(
        f"select commit_id, max(action = 'committed' or action = 'rolled_back') as done"
        f" from {SCHEMA}.upsert_commits where table_name = 'killed' group by commit_id"
    ).collect()
    assert all(row[1] for row in log)  # nothing left pending


# A sample of the named steps (test_interruptions.py raises at every one): the
# killed process holds the table's lock, which the rerun takes over at once.
@pytest.mark.parametrize("step", ["upsert.log_committed"])
def test_kill_9_at_a_named_step_then_rerun_converges(connect, thrift_server, reference, step):
    url = thrift_server.connect_url
    table = f"{SCHEMA}.at_{step.replace('.', '_')}"
    assert _start(url, table, 1).wait(timeout=300) == 0
    assert _start(url, table, 2, step=step).wait(timeout=300) == -signal.SIGKILL
    assert_whole(connect, table, PARTITIONS, ROWS)
    assert _start(url, table, 2).wait(timeout=300) == 0  # takes the dead run's lock over
    assert _data(connect, table) == _data(connect, reference)
