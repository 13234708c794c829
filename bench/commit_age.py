"""Commit time as an upsert table ages: after 10 commits and after 1,000.

A commit reads the table's commit log and lists its version store; neither
may grow with the table's age (the log is compacted, old versions are
dropped). The table holds PARTITIONS small day partitions; each commit
updates a few keys of one day, a different day each time. A figure is the
median of the RUNS commits that follow the 10th and the 1,000th.
"""

from __future__ import annotations

import statistics
import sys
import time

from pyspark.sql import SparkSession

sys.path.insert(0, __file__.rsplit("/", 1)[0])

from upsert import BENCH_DIR, session  # noqa: E402

from dynamic_ddl.catalog import spark_sql  # noqa: E402
from dynamic_ddl.upsert.protocol import UpsertSpec, upsert  # noqa: E402

SCHEMA = "bench_commit_age"
PARTITIONS = 20
AGES = (10, 100, 250, 500, 1000)  # the goal compares the first and the last
RUNS = 5


def commit(spark: SparkSession, sql, spec: UpsertSpec, n: int) -> float:
    """The n-th commit: 10 keys of day n % PARTITIONS get state n; its time in seconds."""
    spark.sql(
        f"create or replace temporary view age_batch as select concat('dev-', id) as device,"
        f" {n} as log_ts, 'v{n}' as state, date_add(date'2026-01-01', {n % PARTITIONS}) as day"
        " from range(10)"
    )
    started = time.monotonic()
    assert upsert(sql, spec, "age_batch").changed_partitions == 1
    return time.monotonic() - started


def measure() -> dict:
    spark = session()
    sql = spark_sql(spark)
    spec = UpsertSpec(f"{SCHEMA}.aging", ("device",), "log_ts", ("day",))
    try:
        spark.sql(f"drop schema if exists {SCHEMA} cascade")
        spark.sql(f"create schema {SCHEMA}")
        results, n = {}, 0
        for age in AGES:
            while n < age:
                n += 1
                commit(spark, sql, spec, n)
            times = []
            for _ in range(RUNS):
                n += 1
                times.append(commit(spark, sql, spec, n))
            results[age] = statistics.median(times)
            print(f"after {age} commits: {results[age]:.2f} s", flush=True)
        entries = spark.sql(
            f"select count(*) from {SCHEMA}.upsert_commits where table_name = 'aging'"
        ).first()[0]
        versions = spark.sql(f"show partitions {spec.versions}").count()
        results["log_lines"], results["versions"] = entries, versions
        return results
    finally:
        spark.stop()


def report(results: dict) -> str:
    young, old = results[AGES[0]], results[AGES[-1]]
    return "\n".join(
        [
            "| commits before | commit s (median of 5) |",
            "|---|---|",
            *(f"| {age:,} | {results[age]:.2f} |" for age in AGES),
            "",
            f"- After {AGES[-1]:,} commits a commit takes {old / young:.2f}x the time it took"
            " after 10 (goal <= 1.2x).",
            f"- Then the log held {results['log_lines']} lines and the version store"
            f" {results['versions']} partition versions, for {PARTITIONS} partitions.",
            f"- State: {BENCH_DIR}.",
        ]
    )


if __name__ == "__main__":
    print(report(measure()))
