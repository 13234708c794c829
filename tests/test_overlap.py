"""Two runs at once on one table: they take turns, the result is one run's, and a run
that cannot wait names the holder."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from dynamic_ddl.catalog import spark_sql
from dynamic_ddl.ingest.job import ingest_topic
from dynamic_ddl.locks import (
    LEASE_ENV,
    WAIT_ENV,
    Holder,
    LockLost,
    LockSettings,
    LockTimeout,
    NotALock,
    RunLock,
    _take_over,
    acquire,
    held,
    lock_table,
    read_holder,
    release,
    renew,
    this_host,
)
from dynamic_ddl.upsert.protocol import upsert
from dynamic_ddl.upsert.spec import UpsertSpec

TOPIC = {"topic": "overlap", "record_key": ["id"], "event_time": "ts"}


def _together(*runs) -> list[BaseException]:
    """Start the runs at once in threads; the errors they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(runs))

    def run(target):
        start.wait()
        try:
            target()
        except BaseException as error:  # noqa: BLE001 - reported to the test
            errors.append(error)

    threads = [threading.Thread(target=run, args=(r,)) for r in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    return errors


def test_two_ingestions_at_once_take_every_line_once(spark, tmp_path):
    spark.sql("drop database if exists overlap_raw cascade")
    spark.sql("create database overlap_raw")
    inbox = tmp_path / "inbox"
    folder = inbox / TOPIC["topic"] / "dt=2026-11-01"
    folder.mkdir(parents=True)
    for n in range(3):
        lines = [
            f'{{"id": "{n}-{i}", "ts": "2026-11-0{n + 1}T00:00:00Z", "v": {i}}}' for i in range(50)
        ]
        (folder / f"f{n}.json").write_text("\n".join(lines) + "\n")
    config = {**TOPIC, "inbox_dir": str(inbox), "schema": "overlap_raw", "table": "raw_overlap"}
    summaries: list[list] = []
    errors = _together(
        *[lambda: summaries.append(ingest_topic(spark, config).collect()) for _ in range(2)]
    )
    assert not errors
    assert sorted(sum(row.files for row in s) for s in summaries) == [0, 3]  # one run did all
    rows = spark.table("overlap_raw.raw_overlap")
    assert rows.count() == 150 and rows.select("id").distinct().count() == 150
    ledger = spark.table("overlap_raw.raw_file_ledger").collect()
    assert sorted((r.path.rsplit("/", 1)[1], r.state) for r in ledger) == [
        (f"f{n}.json", "committed") for n in range(3)
    ]


def test_two_upserts_at_once_both_commit(spark):
    spark.sql("drop database if exists overlap_upsert cascade")
    spark.sql("create database overlap_upsert")
    spec = UpsertSpec("overlap_upsert.target", ("id",), "ts", ("day",))
    # Keys 0-39 at ts 1, keys 20-79 at ts 2: in either order both commits change rows.
    for n, keys in ((1, "0, 40"), (2, "20, 80")):
        spark.sql(
            f"create or replace temporary view batch{n} as select concat('k', id) as id,"
            f" {n} as ts, concat('d', id % 4) as day, '{n}' as state from range({keys})"
        )
    sql = spark_sql(spark)
    assert not _together(*[lambda n=n: upsert(sql, spec, f"batch{n}") for n in (1, 2)])
    rows = {r.id: r.state for r in spark.table(spec.target).collect()}
    expected = {f"k{i}": "1" if i < 20 else "2" for i in range(80)}
    assert rows == expected  # the greatest ts wins for every key, both batches whole
    log = spark.sql(
        "select action, count(*) from overlap_upsert.upsert_commits group by action"
    ).collect()
    assert dict(log) == {"pending": 2, "committed": 2}


def test_a_run_that_cannot_wait_names_the_holder(spark):
    spark.sql("create database if not exists overlap_wait")
    sql = spark_sql(spark)
    with held(sql, "overlap_wait.t"):
        waiting: list[BaseException] = []

        def second():
            try:
                with held(sql, "overlap_wait.t", LockSettings(wait_seconds=1)):
                    pass
            except LockTimeout as error:
                waiting.append(error)

        thread = threading.Thread(target=second)
        thread.start()
        thread.join(timeout=60)
    (error,) = waiting
    assert f"process {os.getpid()}" in str(error) and "overlap_wait.t" in str(error)
    with held(sql, "overlap_wait.t", LockSettings(wait_seconds=1)):
        pass  # released: taken at once


def test_a_killed_holders_lock_is_taken_over_at_once(spark):
    """A lock of a process of this host that no longer runs does not wait for its lease."""
    spark.sql("create database if not exists overlap_stale")
    spark.sql(
        "create table if not exists overlap_stale.t__lock (holder string) using parquet"
        f" tblproperties ('holder.host' = '{this_host()}', 'holder.pid' = '{2**22 + 7}',"
        " 'holder.run' = 'gone', 'lease.expires_at' = '4000000000.0')"
    )
    with held(spark_sql(spark), "overlap_stale.t", LockSettings(wait_seconds=0)) as holder:
        assert holder.pid == os.getpid()


def test_a_run_lock_renewal_that_fails_once_is_tried_again(spark):
    """Found by review: the first error of a renewal (a server hiccup) ended the run
    lock's renewal thread, so a second run took the lock over once the lease ran out,
    while the first still ran. A failed renewal is tried again at the next third."""
    spark.sql("create database if not exists overlap_renew")
    sql = spark_sql(spark)
    failures = iter([RuntimeError("the server went away for a moment")])

    def renew_in(work):
        failure = next(failures, None)
        if failure is not None:
            raise failure
        work(sql)

    lock = RunLock("overlap_renew", LockSettings(wait_seconds=0, lease_seconds=3), renew_in)
    lock.acquire(sql)
    try:
        time.sleep(3.5)  # past the first lease: failed at 1 s, renewed at 2 s and 3 s
        with pytest.raises(LockTimeout):
            acquire(sql, lock.table, LockSettings(wait_seconds=0))
        assert lock.lost is None
    finally:
        lock.release(sql)


def test_a_holder_in_another_pid_namespace_of_this_host_name_is_not_taken_for_gone(spark):
    """Found by review: containers sharing the host's name (host networking) each have
    their own process ids. A live holder in another one was looked up here, not found,
    and its lock taken over at once: two runs held it. A lock names the PID namespace
    too, and a holder of another one keeps its lock until its lease ends."""
    assert this_host().startswith(socket.gethostname())
    spark.sql("create database if not exists overlap_namespace")
    spark.sql(
        "create table if not exists overlap_namespace.t__lock (holder string) using parquet"
        f" tblproperties ('holder.host' = '{socket.gethostname()} pid:[1]',"
        f" 'holder.pid' = '{2**22 + 7}', 'holder.run' = 'elsewhere',"
        " 'lease.expires_at' = '4000000000.0')"
    )
    settings = LockSettings(wait_seconds=0)
    with (
        pytest.raises(LockTimeout, match="pid:\\[1\\]"),
        held(spark_sql(spark), "overlap_namespace.t", settings),
    ):
        pass


def test_a_table_of_the_locks_name_that_is_not_a_lock_is_never_taken_over(spark):
    """Found by review: a table `<target>__lock` of a user's (no holder in its properties)
    was read as an expired lock, renamed away and dropped, files and all. It is named in
    an error instead, and kept."""
    spark.sql("create database if not exists overlap_not_a_lock")
    spark.sql("create table overlap_not_a_lock.t__lock (note string) using parquet")
    spark.sql("insert into overlap_not_a_lock.t__lock values ('mine')")
    settings = LockSettings(wait_seconds=0)
    with (
        pytest.raises(NotALock, match="overlap_not_a_lock.t__lock exists and is not a lock"),
        held(spark_sql(spark), "overlap_not_a_lock.t", settings),
    ):
        pass
    assert spark.table("overlap_not_a_lock.t__lock").collect()[0].note == "mine"


def test_a_holder_that_renews_as_its_lock_is_taken_over_keeps_it(spark):
    """Found by review: a run whose lease had run out read the lock as stale; the holder
    renewed it; the run then moved it aside and dropped it, and both ran on. A lock
    renewed after it was read as stale is put back, and the taker waits."""
    spark.sql("create database if not exists overlap_renewed")
    sql = spark_sql(spark)
    table = "overlap_renewed.t"
    holder = acquire(sql, table, LockSettings(wait_seconds=0, lease_seconds=0.5))
    time.sleep(0.6)
    stale = read_holder(sql, lock_table(table))
    assert stale.is_stale(time.time())  # its lease ran out: a taker's view
    renewed = renew(sql, table, holder, 60, "a step")

    _take_over(sql, lock_table(table), stale)

    assert read_holder(sql, lock_table(table)) == renewed
    with pytest.raises(LockTimeout, match=f"process {os.getpid()}"):
        acquire(sql, table, LockSettings(wait_seconds=0))
    release(sql, table, renewed)


def test_a_renewal_racing_a_take_over_is_lost_not_kept(spark):
    """Found by review: a holder past its lease read its own lock, another run took it
    over, and the holder's renewal then extended the new holder's lease and went on as
    if it held the lock. A renewal reads the lock again after it: LockLost."""
    spark.sql("create database if not exists overlap_renew_race")
    sql = spark_sql(spark)
    table = "overlap_renew_race.t"
    first = acquire(sql, table, LockSettings(wait_seconds=0, lease_seconds=0.5))
    second: list[Holder] = []

    def taken_over_after_the_first_read(statement: str):
        rows = sql(statement)
        if statement.startswith("show tblproperties") and not second:
            time.sleep(0.6)  # the first holder's lease runs out
            second.append(acquire(sql, table, LockSettings(wait_seconds=0)))
        return rows

    with pytest.raises(LockLost, match="now held by process"):
        renew(taken_over_after_the_first_read, table, first, 60, "a step")
    assert read_holder(sql, lock_table(table)).token == second[0].token
    release(sql, table, second[0])


@pytest.mark.parametrize(("variable", "value"), [(LEASE_ENV, "0"), (WAIT_ENV, "10m")])
def test_lock_settings_from_the_environment_are_checked_naming_the_variable(
    monkeypatch, variable, value
):
    """Found by review: a lease of 0 s was taken as it was, and a waiting run took a live
    holder's lock at once (two writers); `10m` failed with a bare float() error."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=f"{variable} must be a number of seconds"):
        LockSettings.from_env()
