"""Time travel on upsert tables: read a table as of any kept commit (by id or by time),
restore it to one, keep exactly the history keep_commits and keep_days ask for, pin a
commit with a savepoint, vacuum what killed writes left behind, and repartition in place."""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from dynamic_ddl import steps
from dynamic_ddl.catalog import (
    local_path,
    partition_columns,
    spark_sql,
    table_exists,
    table_location,
)
from dynamic_ddl.upsert import commit_log
from dynamic_ddl.upsert.care import VacuumResult, repartition, vacuum
from dynamic_ddl.upsert.commit_log import read_log
from dynamic_ddl.upsert.commits import (
    CHECKPOINT,
    COMMITTED,
    LOGGED_AT_FORMAT,
    RELEASED,
    ROLLED_BACK,
    SAVEPOINT,
    LogEntry,
    PartitionChange,
    commit_at,
    commit_time,
    commits_to_keep,
    compacted,
    replay,
    rolled_back_over,
)
from dynamic_ddl.upsert.history import (
    as_of_sql,
    commit_of,
    release_savepoint,
    rollback_to,
    savepoint,
)
from dynamic_ddl.upsert.increments import changed_days, changed_since_filter
from dynamic_ddl.upsert.protocol import (
    UpsertError,
    UpsertSpec,
    drop_upsert_table,
    rollback_last_commit,
    upsert,
)
from dynamic_ddl.upsert.relayout import finish_repartition

SCHEMA = "upsert_history_tests"
COLUMNS = "day string, device string, state string, log_ts bigint"
START = datetime(2026, 11, 1)


@pytest.fixture(scope="module")
def sql(spark):
    spark.sql(f"drop schema if exists {SCHEMA} cascade")
    spark.sql(f"create schema {SCHEMA}")
    return spark_sql(spark)


def _spec(name: str, **overrides) -> UpsertSpec:
    return UpsertSpec(f"{SCHEMA}.{name}", ("device",), "log_ts", ("day",), **overrides)


def _existing(sql, spec: UpsertSpec) -> UpsertSpec:
    """The existing table's spec with its model's key, as `run-operation repartition`
    passes it."""
    return replace(UpsertSpec.of_table(sql, spec.target), unique_key=spec.unique_key)


def _rows(spark, relation: str) -> list[tuple]:
    rows = spark.sql(f"select day, device, state, log_ts from {relation}").collect()
    return sorted(tuple(r) for r in rows)


def _commits(
    spark, sql, spec: UpsertSpec, count: int, first: int = 1, apart=timedelta(hours=1)
) -> list[list[tuple]]:
    """`count` commits `apart` (the `first`-th onwards): each changes d1 and adds a
    partition of its own; the table's rows after each."""
    states = []
    for n in range(first, first + count):
        rows = [("d1", "a", f"s{n}", n), (f"d{n + 1}", f"k{n}", "on", n)]
        spark.createDataFrame(rows, COLUMNS).createOrReplaceTempView("batch")
        upsert(sql, spec, "batch", now=START + n * apart)
        states.append(_rows(spark, spec.target))
    return states


def test_history_operations_refuse_a_table_that_is_no_longer_an_upsert_table(spark, sql):
    """Found by review: a model switched from upsert to a table kept its store and log,
    and rollback_last_commit re-pointed the new table's partitions at stale versions
    (dropping those the old commit had made, files included)."""
    spec = _spec("switched")
    _commits(spark, sql, spec, 2)
    pinned = read_log(sql, spec).history[0].commit_id
    savepoint(sql, spec, pinned)
    spark.sql(f"drop table {spec.target}")
    spark.sql(
        f"create table {spec.target} using parquet partitioned by (day) as select"
        " 'b' as device, 'new' as state, 9L as log_ts, 'd1' as day"
    )
    before = _rows(spark, spec.target)
    with pytest.raises(UpsertError, match="is not an upsert table"):
        rollback_last_commit(sql, spec)
    assert _rows(spark, spec.target) == before
    # Its savepoint can still be released, so a --full-refresh back to upsert can go.
    assert release_savepoint(sql, spec, pinned) == pinned
    assert _rows(spark, spec.target) == before
    spark.sql(f"drop table {spec.target}")
    spark.sql(f"create view {spec.target} as select 'd1' as day")
    with pytest.raises(UpsertError, match="is not an upsert table"):
        rollback_last_commit(sql, spec)
    spark.sql(f"drop view {spec.target}")


def test_a_table_reads_as_of_each_kept_commit_and_no_older(spark, sql):
    spec = _spec("kept", keep_commits=2)
    states = _commits(spark, sql, spec, 5)
    ids = [commit.commit_id for commit in read_log(sql, spec).history]
    # The newest commit and the keep_commits before it: by id, and by a time after each.
    for commit, expected, hour in zip(ids[-3:], states[-3:], (3, 4, 5), strict=True):
        assert _rows(spark, as_of_sql(sql, spec, commit)) == expected
        later = (START + timedelta(hours=hour, minutes=30)).isoformat(sep=" ")
        assert _rows(spark, as_of_sql(sql, spec, later)) == expected
    with pytest.raises(UpsertError, match="no longer keeps the files .* keep_commits"):
        as_of_sql(sql, spec, ids[1])
    with pytest.raises(UpsertError, match="keeps no commit made at or before"):
        as_of_sql(sql, spec, "2026-10-01 00:00:00")
    with pytest.raises(UpsertError, match="names no kept commit"):
        as_of_sql(sql, spec, "last tuesday")


def test_the_compacted_log_keeps_every_kept_commit(spark, sql, monkeypatch):
    monkeypatch.setattr(commit_log, "COMPACT_AFTER", 3)
    spec = _spec("compacted", keep_commits=2)
    states = _commits(spark, sql, spec, 4)
    state = read_log(sql, spec)
    assert state.entries < 8, "the log was not compacted"
    for commit, expected in zip(state.history, states[-3:], strict=True):
        assert _rows(spark, as_of_sql(sql, spec, commit.commit_id)) == expected


def test_keep_commits_bounds_the_version_store(spark, sql):
    one, three = _spec("keep_one"), _spec("keep_three", keep_commits=3)
    _commits(spark, sql, one, 4)
    _commits(spark, sql, three, 4)

    def d1_versions(spec: UpsertSpec) -> int:
        return sum("day=d1/" in row[0] for row in sql(f"show partitions {spec.versions}"))

    # d1 changes in every commit: its current version and one per kept commit.
    assert d1_versions(one) == 2 and d1_versions(three) == 4


def test_keep_days_keeps_every_commit_of_those_days_before_the_last_one(spark, sql, monkeypatch):
    monkeypatch.setattr(commit_log, "COMPACT_AFTER", 3)  # the compacted log keeps them too
    spec = _spec("by_age", keep_days=2)  # and keep_commits=1
    states = _commits(spark, sql, spec, 5, apart=timedelta(days=1))  # Nov 2 to Nov 6
    assert read_log(sql, spec).entries < 10, "the log was not compacted"
    # Any time from Nov 4 (2 days before the last commit) reads; so does the state before
    # the first commit of those days, which a time between midnight and it reads (the
    # commit made at midnight shows once logged, a moment later).
    reads = (
        ("2026-11-04 00:01:00", states[2]),
        ("2026-11-04 00:00:00", states[1]),
        ("2026-11-03 23:00:00", states[1]),
    )
    for at, expected in reads:
        assert _rows(spark, as_of_sql(sql, spec, at)) == expected
    with pytest.raises(UpsertError, match="keep_commits or keep_days"):
        as_of_sql(sql, spec, "2026-11-02 12:00:00")
    # d1 changes in every commit: its current version and one per kept commit.
    assert sum("day=d1/" in row[0] for row in sql(f"show partitions {spec.versions}")) == 4


def test_a_table_is_restored_to_a_kept_commit_by_a_commit_of_its_own(spark, sql):
    spec = _spec("restored", keep_commits=2)
    states = _commits(spark, sql, spec, 3)
    first = read_log(sql, spec).history[0].commit_id
    restore = rollback_to(sql, spec, first)
    assert restore is not None
    assert _rows(spark, spec.target) == states[0]  # d3 and d4, made since, are gone
    assert rollback_to(sql, spec, first) is None  # as it was already: no commit
    # The restore is a commit: it is undone like one, and the table goes on from it.
    rollback_last_commit(sql, spec)
    assert _rows(spark, spec.target) == states[2]
    with pytest.raises(UpsertError, match="keep_commits"):
        rollback_to(sql, spec, "2026-10-01")


def test_a_savepoint_keeps_a_commit_past_keep_commits_until_released(spark, sql, monkeypatch):
    monkeypatch.setattr(commit_log, "COMPACT_AFTER", 3)  # the savepoint outlives compactions
    spec = _spec("pinned")  # keep_commits=1
    states = _commits(spark, sql, spec, 2)
    first = read_log(sql, spec).history[0].commit_id
    assert savepoint(sql, spec, first) == first
    assert savepoint(sql, spec, first) == first  # set again: still one savepoint
    _commits(spark, sql, spec, 4, first=3)
    assert first not in [c.commit_id for c in read_log(sql, spec).history]
    # Found by review: rolling back a pinned commit dropped its savepoint.
    last = read_log(sql, spec).history[-1].commit_id
    assert savepoint(sql, spec, last) == last
    with pytest.raises(UpsertError, match="has a savepoint.*release_savepoint"):
        rollback_last_commit(sql, spec)
    assert release_savepoint(sql, spec, last) == last
    assert _rows(spark, as_of_sql(sql, spec, first)) == states[0]
    rollback_to(sql, spec, first)
    assert _rows(spark, spec.target) == states[0]

    assert release_savepoint(sql, spec, first) == first
    _commits(spark, sql, spec, 1, first=7)  # its cleanup drops what only the savepoint kept
    with pytest.raises(UpsertError, match="no longer keeps commit"):
        as_of_sql(sql, spec, first)
    with pytest.raises(UpsertError, match="no savepoint"):
        release_savepoint(sql, spec, first)


def _hourly(count: int) -> list[LogEntry]:
    """`count` commits an hour apart, each a new version of one partition."""
    ids = [(START + timedelta(hours=n)).strftime("%Y%m%d%H%M%S%f") for n in range(count)]
    return [
        LogEntry(commit, COMMITTED, (PartitionChange("d=1", previous, commit),))
        for previous, commit in zip([None, *ids], ids, strict=False)
    ]


def test_a_time_never_names_a_savepoint_across_commits_the_log_forgot():
    """A savepoint on commit 2 of 10, the log compacted to the last two: 05:30 was after
    commit 6, which the log no longer knows; it must not read as the savepoint."""
    log = _hourly(10)
    pinned = LogEntry(log[1].commit_id, SAVEPOINT, (PartitionChange("d=1", None, "v2"),))
    state = replay(compacted(replay([*log, pinned])))
    assert log[1].commit_id in state.savepoints
    assert commit_at(state, START + timedelta(hours=5, minutes=30)) is None
    assert commit_at(state, START + timedelta(hours=9, minutes=30)) == log[-1].commit_id


def test_a_rolled_back_commit_is_no_savepoint():
    log = _hourly(3)
    pin = LogEntry(log[-1].commit_id, SAVEPOINT, (PartitionChange("d=1", None, "x"),))
    undone = LogEntry(log[-1].commit_id, ROLLED_BACK, log[-1].changes)
    assert replay([*log, pin]).savepoints and not replay([*log, pin, undone]).savepoints
    released = LogEntry(log[0].commit_id, RELEASED)
    again = LogEntry(log[0].commit_id, SAVEPOINT, pin.changes)
    assert replay([*log, again, released]).savepoints == {}  # order of lines is no matter
    assert replay([released, *log, again]).savepoints == {}


def _logged(commit: LogEntry, after: timedelta, action: str = COMMITTED) -> LogEntry:
    """`commit`'s line of `action`, logged `after` its id's time."""
    at = (commit_time(commit.commit_id) + after).strftime(LOGGED_AT_FORMAT)
    return LogEntry(commit.commit_id, action, commit.changes, at)


def test_a_time_reads_the_commit_the_table_showed_then_not_one_still_running():
    """Found by review: a time named the newest commit whose id (its start) was before it.
    A model runs for minutes before its commit's partitions move: a time in between read
    the new commit, which no reader could see yet. A commit shows from its `committed`
    line, and a compacted log keeps that time."""
    first, second = (_logged(c, timedelta(minutes=20)) for c in _hourly(2))
    while_running = START + timedelta(hours=1, minutes=10)
    for state in (replay([first, second]), replay(compacted(replay([first, second]), keep=1))):
        assert commit_at(state, while_running) == first.commit_id
        assert commit_at(state, START + timedelta(hours=1, minutes=21)) == second.commit_id
        assert commit_at(state, START + timedelta(minutes=10)) is None


def test_a_time_when_a_commit_since_rolled_back_showed_is_refused():
    """Found by review: after rollback_last_commit, a time when the rolled back commit
    showed read the commit before it, which the table did not show then (the rolled back
    one's files are gone). Such a time is refused, naming the window; a time after the
    rollback reads the commit it restored. A compacted log keeps the window."""
    first, second, third = _hourly(3)
    undone = _logged(second, timedelta(minutes=30), ROLLED_BACK)
    log = [first, second, undone, _logged(third, timedelta(minutes=1))]
    for state in (replay(log), replay(compacted(replay(log), keep=1))):
        shown = START + timedelta(hours=1, minutes=15)  # second showed from 01:00 to 01:30
        assert commit_at(state, shown) == first.commit_id
        assert rolled_back_over(state, shown, first.commit_id) == second.commit_id
        with pytest.raises(UpsertError, match=f"may have shown commit {second.commit_id}"):
            commit_of(state, shown.isoformat(sep=" "), "s.t")
        after = START + timedelta(hours=1, minutes=45)
        assert commit_of(state, after.isoformat(sep=" "), "s.t") == first.commit_id
        assert commit_of(state, "2026-11-01 02:02:00", "s.t") == third.commit_id
        # Found by review: a typo's future time read the table as it is now.
        with pytest.raises(UpsertError, match="in the future"):
            commit_of(state, "2062-11-01 02:02:00", "s.t")


def test_keep_days_keeps_the_commit_shown_at_the_start_of_its_days():
    """Found by review: keep_days counted commits by their ids. One that started before
    the days kept and showed in them was kept as the oldest, but the commit the table
    showed at their start (the one before it) was not: a time there could not be read."""
    first, started_before, last = (
        LogEntry(when.strftime("%Y%m%d%H%M%S%f"), COMMITTED, (), shown.strftime(LOGGED_AT_FORMAT))
        for when, shown in (
            (datetime(2026, 11, 2), datetime(2026, 11, 2, 0, 1)),
            (datetime(2026, 11, 3, 23, 55), datetime(2026, 11, 4, 0, 10)),
            (datetime(2026, 11, 6), datetime(2026, 11, 6, 0, 1)),
        )
    )
    state = replay([first, started_before, last])
    keep = commits_to_keep(state, 1, keep_days=2)  # from Nov 4 00:00
    shown_at_start = commit_at(state, datetime(2026, 11, 4, 0, 5))
    assert shown_at_start == first.commit_id
    # The table reads as of each of its last keep + 1 commits (TableState.retained).
    assert shown_at_start in [c.commit_id for c in state.history[-(keep + 1) :]]


def test_a_log_compacted_without_times_reads_commits_by_their_ids():
    """A log compacted before times were kept wrote its commits with the compaction's time
    (the checkpoint's): those read by the time their ids encode, as before."""
    first, second = _hourly(2)
    at = "2026-11-20 00:00:00.000000"
    checkpoint = LogEntry(first.commit_id, CHECKPOINT, (), at)
    rewritten = [LogEntry(c.commit_id, COMMITTED, c.changes, at) for c in (first, second)]
    state = replay([checkpoint, *rewritten])
    assert commit_at(state, START + timedelta(hours=1, minutes=1)) == second.commit_id


def test_as_of_a_time_while_a_rolled_back_commit_showed_is_refused_on_a_real_table(spark, sql):
    """The same through the engine: each line's time is read back from the log table."""
    spec = _spec("rolled_back_window")
    states = _commits(spark, sql, spec, 2)
    rollback_last_commit(sql, spec)
    state = read_log(sql, spec)
    (undone,) = state.rolled_back_at
    second_shown = commit_time(undone) + timedelta(minutes=30)  # before the rollback, today
    with pytest.raises(UpsertError, match="rolled back at"):
        as_of_sql(sql, spec, second_shown.isoformat(sep=" "))
    after = state.rolled_back_at[undone]
    assert _rows(spark, as_of_sql(sql, spec, after)) == states[0]
    first_shown = START + timedelta(hours=1, minutes=30)
    assert _rows(spark, as_of_sql(sql, spec, first_shown.isoformat(sep=" "))) == states[0]


def test_vacuum_drops_orphans_and_what_the_retention_no_longer_keeps(spark, sql):
    spec = _spec("vacuumed", keep_commits=2)
    states = _commits(spark, sql, spec, 3)
    ids = [commit.commit_id for commit in read_log(sql, spec).history]
    store = local_path(table_location(sql, spec.versions))
    # What writes killed mid-job leave: a version folder no partition lists, job folders.
    orphan = next(store.glob("day=d1/_version=*")).with_name("_version=20260101000000000000")
    shutil.copytree(next(store.glob("day=d1/_version=*")), orphan)
    for folder in ("_temporary/0/_temporary", ".spark-staging-0a1b"):
        (store / folder).mkdir(parents=True)
    # With keep_commits lowered to 1, d1's version before commit 2 goes too.
    done = vacuum(sql, replace(spec, keep_commits=1))
    assert done == VacuumResult(dropped_versions=2, orphans=1, job_folders=2)
    on_disk = {str(p.relative_to(store)) for p in store.glob("day=*/_version=*")}
    assert on_disk == {row[0] for row in sql(f"show partitions {spec.versions}")}
    assert not any(store.glob("_temporary")) and not any(store.glob(".spark-staging*"))
    assert _rows(spark, spec.target) == states[-1]
    assert _rows(spark, as_of_sql(sql, spec, ids[1])) == states[1]
    with pytest.raises(UpsertError, match="no longer keeps the files"):
        as_of_sql(sql, spec, ids[0])
    assert vacuum(sql, spec) == VacuumResult(0, 0, 0)  # nothing left to remove
    with pytest.raises(UpsertError, match="run-operation vacuum"):
        vacuum(sql, UpsertSpec.of_table(sql, spec.target))  # no retention known


def test_repartition_changes_the_layout_in_place_and_the_table_goes_on(spark, sql):
    spec = _spec("relaid", keep_commits=2)  # by day
    states = _commits(spark, sql, spec, 3)
    lineage = f"select device, _commit_id from {spec.target}"
    ids_before = sorted(tuple(r) for r in sql(lineage))
    seen = max(commit_id for _, commit_id in ids_before)  # what a downstream model took
    commit = repartition(sql, _existing(sql, spec), ["state", "day"])
    assert partition_columns(sql, spec.target) == ["state", "day"]
    assert _rows(spark, spec.target) == states[-1]
    # Rows keep their commit ids: a model pulling changed_since finds nothing new.
    assert sorted(tuple(r) for r in sql(lineage)) == ids_before
    pulled = changed_since_filter(sql, UpsertSpec.of_table(sql, spec.target), "t", seen)
    assert sql(f"select count(*) from {spec.target} as t where {pulled}") == [(0,)]
    assert read_log(sql, spec).last_commit_id == commit
    assert not table_exists(sql, f"{spec.target}__repartition")
    store = local_path(table_location(sql, spec.versions))
    assert {p.name.split("=")[0] for p in store.iterdir() if "=" in p.name} == {"state"}
    assert repartition(sql, _existing(sql, spec), ["state", "day"]) is None

    # The model's old partition_by fails, naming the fix; the new one commits.
    with pytest.raises(UpsertError, match="partitioned by .*run-operation repartition"):
        _commits(spark, sql, spec, 1, first=4)
    with pytest.raises(UpsertError, match="spelled the same"):
        _commits(spark, sql, replace(spec, partition_by=("STATE", "day")), 1, first=4)
    relaid = replace(spec, partition_by=("state", "day"))
    states += _commits(spark, sql, relaid, 1, first=4)
    assert _rows(spark, spec.target) == states[-1]
    newest = read_log(sql, spec).history[-1].commit_id  # history starts after the rewrite
    assert _rows(spark, as_of_sql(sql, relaid, newest)) == states[-1]
    rollback_last_commit(sql, relaid)
    assert _rows(spark, spec.target) == states[2]


def test_remembered_deletes_move_with_a_repartition(spark, sql):
    spec = _spec("relaid_deletes", delete_marker="gone")
    columns = f"{COLUMNS}, gone boolean"

    def commit(rows: list[tuple], target: UpsertSpec) -> None:
        spark.createDataFrame(rows, columns).createOrReplaceTempView("batch")
        upsert(sql, target, "batch")

    commit([("d1", "a", "on", 1, False), ("d1", "b", "on", 1, False)], spec)
    commit([("d1", "b", None, 5, True)], spec)  # b deleted at 5: remembered
    with pytest.raises(UpsertError, match="remembers deletes .* state"):
        repartition(sql, _existing(sql, spec), ["state"])  # deletes keep none
    assert partition_columns(sql, spec.target) == ["day"]

    repartition(sql, _existing(sql, spec), ["device"])
    relaid = replace(spec, partition_by=("device",))
    # An update older than the delete, arriving late, does not bring b back; a newer does.
    commit([("d1", "b", "stale", 3, False)], relaid)
    assert _rows(spark, spec.target) == [("d1", "a", "on", 1)]
    commit([("d1", "b", "back", 7, False)], relaid)
    assert _rows(spark, spec.target) == [("d1", "a", "on", 1), ("d1", "b", "back", 7)]
    # The table keeps the key it was built with (found by review: lost in the swap).
    with pytest.raises(UpsertError, match="unique by device, but the model says device global"):
        commit([("d1", "b", "back", 8, False)], replace(relaid, global_key=True))
    # ... and the ranking its deletes were remembered by.
    with pytest.raises(UpsertError, match="ranked by log_ts, but the model ranks by log_ts,st"):
        commit([("d1", "b", "back", 8, False)], replace(relaid, tie_break=("state",)))
    # Deletes a merge no longer finds (past tombstone_days; 0: none) do not stand in the
    # way of a layout that cannot place them.
    commit([("d1", "a", None, 9, True)], relaid)
    forgets = replace(_existing(sql, spec), tombstone_days=0)
    repartition(sql, forgets, ["state"])
    assert partition_columns(sql, spec.target) == ["state"]
    assert _rows(spark, spec.target) == [("d1", "b", "back", 7)]


def test_a_remembered_delete_in_the_null_partition_moves_with_a_repartition(spark, sql):
    """Found by review: a tombstone whose kept partition value is a real NULL (the row's
    day unknown) was taken for one that keeps no value, and the repartition refused
    with a fix that did not apply. It goes to the NULL partition of the new layout."""
    spec = _spec("relaid_null_deletes", delete_marker="gone")
    columns = f"{COLUMNS}, gone boolean"

    def commit(rows: list[tuple], target: UpsertSpec) -> None:
        spark.createDataFrame(rows, columns).createOrReplaceTempView("batch")
        upsert(sql, target, "batch")

    commit([(None, "d1", "on", 1, False), (None, "d2", "on", 1, False)], spec)
    commit([(None, "d1", None, 5, True)], spec)  # d1 deleted at 5, its day NULL
    repartition(sql, _existing(sql, spec), ["device", "day"])
    relaid = replace(spec, partition_by=("device", "day"))
    assert partition_columns(sql, spec.target) == ["device", "day"]
    commit([(None, "d1", "stale", 3, False)], relaid)  # older than the delete: stays gone
    assert _rows(spark, spec.target) == [(None, "d2", "on", 1)]
    commit([(None, "d1", "back", 7, False)], relaid)
    assert _rows(spark, spec.target) == [(None, "d1", "back", 7), (None, "d2", "on", 1)]


def test_a_tie_break_named_after_deletes_were_remembered_does_not_place_them(spark, sql):
    """Found by review: a tombstone keeps the ranking columns the model named when it was
    written; one named later (the table does not record it) is NULL there without being
    NULL in the deleted row, so a layout by it cannot place the delete: refused."""
    spec = _spec("relaid_new_tie", delete_marker="gone")
    for rows in ([("d1", "a", "on", 1, False)], [("d1", "a", "off", 5, True)]):
        spark.createDataFrame(rows, f"{COLUMNS}, gone boolean").createOrReplaceTempView("batch")
        upsert(sql, spec, "batch")
    later = replace(_existing(sql, spec), ordering_field="log_ts", tie_break=("state",))
    with pytest.raises(UpsertError, match="keep no value of state"):
        repartition(sql, later, ["state"])
    assert partition_columns(sql, spec.target) == ["day"]


def _interrupted_repartition(sql, spec: UpsertSpec, partition_by: list[str], at: str, nth=1):
    """A repartition interrupted at the `nth` time it reaches step `at`, as a kill leaves it."""
    reached = 0

    def hook(step: str) -> None:
        nonlocal reached
        reached += step == at
        if step == at and reached == nth:
            raise steps.Interrupted(step)

    with pytest.raises(steps.Interrupted), steps.hooked(hook):
        repartition(sql, _existing(sql, spec), partition_by)


def test_a_killed_repartition_leaves_readers_and_rebuilds_whole(spark, sql, monkeypatch):
    monkeypatch.setattr(commit_log, "COMPACT_AFTER", 3)
    spec = _spec("relaid_killed")
    states = _commits(spark, sql, spec, 3)
    assert read_log(sql, spec).entries < 6, "the log was not compacted"
    seen = max(r[0] for r in sql(f"select _commit_id from {spec.target}"))
    # Killed while the store and log are rewritten: the log is empty, the table whole,
    # and a downstream pull still tells new rows by their commit ids.
    _interrupted_repartition(sql, spec, ["state"], "repartition.log")
    assert _rows(spark, spec.target) == states[-1]
    for since, expected in ((None, len(states[-1])), (seen, 0)):
        pulled = changed_since_filter(sql, UpsertSpec.of_table(sql, spec.target), "t", since)
        assert sql(f"select count(*) from {spec.target} as t where {pulled}") == [(expected,)]
    # Finished by the next writer; the compacted log's older lines do not come back.
    finish_repartition(sql, spec)
    assert read_log(sql, spec).entries == 1  # the checkpoint
    assert _rows(spark, spec.target) == states[-1]
    # A rebuild from scratch (what --full-refresh does) after a kill between the renames
    # of the last swap: nothing of the old table comes back.
    _interrupted_repartition(sql, spec, ["day"], "swap.rename_new", nth=2)
    drop_upsert_table(sql, UpsertSpec.of_table(sql, spec.target))
    spark.createDataFrame([("d9", "z", "new", 1)], COLUMNS).createOrReplaceTempView("batch")
    upsert(sql, spec, "batch")
    assert _rows(spark, spec.target) == [("d9", "z", "new", 1)]
    left = {row[1] for row in sql(f"show tables in {SCHEMA} like 'relaid_killed*'")}
    assert left == {"relaid_killed", "relaid_killed__versions"}


def test_readers_by_the_log_refuse_a_repartition_killed_after_its_swap(spark, sql):
    # Found by review: killed between its swap and the store's rewrite, the table has the
    # new layout and its log the old one. as_of read nothing, silently, and a pull of
    # changes filtered the new partition column by the old one's values.
    spec = _spec("relaid_half")
    states = _commits(spark, sql, spec, 2)
    seen = min(r[0] for r in sql(f"select _commit_id from {spec.target}"))
    last = read_log(sql, spec).last_commit_id
    _interrupted_repartition(sql, spec, ["state"], "repartition.drop_store")
    relaid = UpsertSpec.of_table(sql, spec.target)
    assert relaid.partition_by == ("state",)
    with pytest.raises(UpsertError, match="repartition of .* interrupted"):
        as_of_sql(sql, relaid, last)
    with pytest.raises(ValueError, match="repartition of .* interrupted"):
        changed_days(sql, relaid, "state", seen)
    pulled = changed_since_filter(sql, relaid, "t", seen)
    newer = f"select count(*) from {spec.target} as t where _commit_id > '{seen}'"
    assert sql(f"select count(*) from {spec.target} as t where {pulled}") == sql(newer) != [(0,)]
    finish_repartition(sql, relaid)  # what the next writer does: every day changed
    states_now = {row[0] for row in sql(f"select distinct state from {spec.target}")}
    assert set(changed_days(sql, relaid, "state", seen)) == states_now
    assert _rows(spark, spec.target) == states[-1]


def test_repartition_refuses_what_it_cannot_do_and_says_why(spark, sql):
    spec = _spec("not_relaid")
    _commits(spark, sql, spec, 2)
    existing = _existing(sql, spec)
    for partition_by, message in (
        ([], "needs partition_by"),
        (["nope"], "must name distinct columns .*nope"),
        (["state", "STATE"], "a repeated one"),
        (["_commit_id"], "_commit_id"),
    ):
        with pytest.raises(UpsertError, match=message):
            repartition(sql, existing, partition_by)
    savepoint(sql, existing, read_log(sql, spec).history[0].commit_id)
    with pytest.raises(UpsertError, match="release them first"):
        repartition(sql, existing, ["state"])
    assert partition_columns(sql, spec.target) == ["day"]


def test_repartition_never_puts_two_rows_of_a_key_in_one_partition(spark, sql):
    """Found by review: without global_key a key is unique within its partition only,
    so a key stored on two days is two rows. Repartitioned by state, both sat in one
    partition, and the next commit there kept one: a row lost with no delete. Such a
    layout is refused, naming the fix; one keeping the day, or a global key, is not."""
    spec = _spec("relaid_keys")

    def commit(rows: list[tuple], target: UpsertSpec) -> None:
        spark.createDataFrame(rows, COLUMNS).createOrReplaceTempView("batch")
        upsert(sql, target, "batch")

    commit([("d1", "a", "on", 1)], spec)
    commit([("d2", "a", "on", 2)], spec)  # the same key on another day: a second row
    stored = _rows(spark, spec.target)
    assert len(stored) == 2
    with pytest.raises(UpsertError, match="rows of one key .*device.* Keep day"):
        repartition(sql, _existing(sql, spec), ["state"])
    with pytest.raises(UpsertError, match="needs the model's unique_key"):
        repartition(sql, UpsertSpec.of_table(sql, spec.target), ["state"])
    assert partition_columns(sql, spec.target) == ["day"]
    assert _rows(spark, spec.target) == stored

    repartition(sql, _existing(sql, spec), ["state", "day"])  # keeps the day: no check
    relaid = replace(spec, partition_by=("state", "day"))
    commit([("d3", "b", "on", 3)], relaid)
    assert _rows(spark, spec.target) == sorted([*stored, ("d3", "b", "on", 3)])


def test_repartition_counts_a_remembered_delete_as_a_row_of_its_key(spark, sql):
    """Found by review: a key deleted on one day (a remembered delete) and live on
    another passed the check, which read live rows only; by the key, both met in one
    partition, and the next commit there removed the live row, no delete sent."""
    spec = _spec("relaid_tombstones", delete_marker="gone")
    columns = f"{COLUMNS}, gone boolean"

    def commit(rows: list[tuple]) -> None:
        spark.createDataFrame(rows, columns).createOrReplaceTempView("batch")
        upsert(sql, spec, "batch")

    commit([("d1", "a", "on", 1, False), ("d2", "a", "on", 3, False)])
    commit([("d1", "a", None, 5, True)])  # a deleted on d1 at 5: remembered there
    assert _rows(spark, spec.target) == [("d2", "a", "on", 3)]
    with pytest.raises(UpsertError, match="rows of one key"):
        repartition(sql, _existing(sql, spec), ["device"])
    assert partition_columns(sql, spec.target) == ["day"]


def test_bad_keep_commits_or_keep_days_names_the_fix():
    for value in (0, -1, 1.5, True):
        with pytest.raises(UpsertError, match="keep_commits"):
            _spec("bad", keep_commits=value).validate()
    # 999999 ("forever"): found by review, every commit failed after it was made.
    for value in (-1, 1.5, True, "7", 999_999):
        with pytest.raises(UpsertError, match="keep_days"):
            _spec("bad", keep_days=value).validate()
