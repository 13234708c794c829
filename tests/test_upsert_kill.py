"""kill -9 of a process in the middle of an upsert commit, at several moments: every
partition stays whole, and rerunning the batch gives the uninterrupted result.

The upserting process is a separate Python process talking to the test run's
Spark Connect server (one metastore, as in production), killed with SIGKILL.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import connect_to_fresh_schema

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


def _start(url: str, table: str, version: int, *kill_at: str | int) -> subprocess.Popen:
    """Upsert `version` into `table`; kill_at = (marker, n) kills after the n-th statement
    containing marker, an exact moment whatever the machine's speed."""
    arguments = [url, table, str(version), *map(str, kill_at)]
    return subprocess.Popen([sys.executable, "-c", UPSERT_SCRIPT, *arguments])


def _data(connect, table: str) -> list[tuple]:
    connect.sql(f"refresh table {table}")
    rows = connect.sql(f"select day, device, state, log_ts from {table} order by device")
    return [tuple(r) for r in rows.collect()]


def _latest_commit(connect) -> str:
    connect.sql(f"refresh table {SCHEMA}.upsert_commits")
    return connect.sql(
        f"select max(commit_id) from {SCHEMA}.upsert_commits where table_name = 'killed'"
    ).first()[0]


def _assert_whole(connect, table: str) -> None:
    connect.sql(f"refresh table {table}")
    counts = connect.sql(f"select day, count(*) from {table} group by day").collect()
    assert len(counts) == PARTITIONS and {r[1] for r in counts} == {ROWS // PARTITIONS}


def test_kill_9_during_a_commit_then_rerun_converges(connect, thrift_server):
    url = thrift_server.connect_url
    for table in ("clean", "killed"):
        assert _start(url, f"{SCHEMA}.{table}", 1).wait(timeout=300) == 0
    assert _start(url, f"{SCHEMA}.clean", 2).wait(timeout=300) == 0
    killed = f"{SCHEMA}.killed"

    # Killed after writing the new versions, before the commit is logged ...
    before = _latest_commit(connect)
    writing = _start(url, killed, 2, f"insert into {killed}__versions", 1)
    assert writing.wait(timeout=300) == -signal.SIGKILL
    _assert_whole(connect, killed)
    assert _latest_commit(connect) == before
    # ... and while swapping partitions: half swapped, logged pending, not committed.
    swapping = _start(url, killed, 2, " set location ", PARTITIONS // 2)
    assert swapping.wait(timeout=300) == -signal.SIGKILL
    connect.sql(f"refresh table {SCHEMA}.upsert_commits")
    actions = connect.sql(
        f"select action from {SCHEMA}.upsert_commits"
        f" where table_name = 'killed' and commit_id > '{before}'"
    ).collect()
    assert [r[0] for r in actions] == ["pending"]
    _assert_whole(connect, killed)
    states = connect.sql(f"select distinct state from {killed}").collect()
    assert {r[0] for r in states} <= {"v1", "v2"}

    assert _start(url, killed, 2).wait(timeout=300) == 0
    assert _data(connect, killed) == _data(connect, f"{SCHEMA}.clean")
    connect.sql(f"refresh table {SCHEMA}.upsert_commits")
    log = connect.sql(
        f"select commit_id, max(action = 'committed' or action = 'rolled_back') as done"
        f" from {SCHEMA}.upsert_commits where table_name = 'killed' group by commit_id"
    ).collect()
    assert all(row[1] for row in log)  # nothing left pending
