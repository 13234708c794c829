"""Storage of an upsert table's version store after 100 commits, per keep_commits.

Issue 24's goal: after retention, the store of a table that has taken 100
commits holds at most (retained commits + 1) times what it held after one.
The worst case is measured: every commit changes a key in every partition,
so every partition gets a new version each time. Sizes are the bytes of the
store's Parquet files on disk.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql import SparkSession

sys.path.insert(0, __file__.rsplit("/", 1)[0])

import ingestion  # noqa: E402
from upsert import BENCH_DIR, session  # noqa: E402

from dynamic_ddl.catalog import spark_sql, table_location  # noqa: E402
from dynamic_ddl.upsert.protocol import UpsertSpec, upsert  # noqa: E402

SECTION = "## Version store after retention"
SCHEMA = "bench_retention"
PARTITIONS = 10
ROWS_PER_PARTITION = 20_000
COMMITS = 100
KEEPS = (1, 5)


def store_bytes(sql, spec: UpsertSpec) -> int:
    """Bytes of the Parquet files under the table's version store."""
    root = Path(urlparse(table_location(sql, spec.versions)).path)
    return sum(
        (Path(folder) / name).stat().st_size
        for folder, _, names in os.walk(root)
        for name in names
        if name.endswith(".parquet") and "_temporary" not in folder
    )


def commit(spark: SparkSession, sql, spec: UpsertSpec, n: int) -> None:
    """Commit n: on the first, every row; then one key per partition gets state n."""
    rows = ROWS_PER_PARTITION if n == 1 else 1
    spark.sql(
        f"create or replace temporary view retention_batch as select"
        f" concat('dev-', id) as device, {n} as log_ts,"
        f" concat('state ', {n}, ' of device ', id, repeat('.', 40)) as state,"
        f" cast(id % {PARTITIONS} as int) as day"
        f" from range({rows * PARTITIONS})"
    )
    upsert(sql, spec, "retention_batch")


def measure() -> dict:
    spark = session()
    sql = spark_sql(spark)
    results = {}
    try:
        spark.sql(f"drop schema if exists {SCHEMA} cascade")
        spark.sql(f"create schema {SCHEMA}")
        for keep in KEEPS:
            spec = UpsertSpec(
                f"{SCHEMA}.keep_{keep}", ("device",), "log_ts", ("day",), keep_commits=keep
            )
            commit(spark, sql, spec, 1)
            first = store_bytes(sql, spec)
            for n in range(2, COMMITS + 1):
                commit(spark, sql, spec, n)
            results[keep] = (first, store_bytes(sql, spec))
            print(f"keep_commits={keep}: {first:,} -> {results[keep][1]:,} bytes", flush=True)
        return results
    finally:
        spark.stop()


def section(results: dict) -> str:
    rows = [
        f"| {keep} | {first / 2**20:.1f} | {last / 2**20:.1f} | {last / first:.2f}x"
        f" | <= {keep + 1}x | {'yes' if last / first <= keep + 1 else 'no'} |"
        for keep, (first, last) in results.items()
    ]
    return "\n".join(
        [
            SECTION,
            "",
            f"An upsert table of {PARTITIONS} partitions x {ROWS_PER_PARTITION:,} rows; after"
            f" its first commit, {COMMITS - 1} more, each changing one key in every partition"
            " (the worst case: every partition gets a new version each time). The version"
            " store's Parquet bytes after the first commit and after the last.",
            "",
            "Command: `make bench` (or `.venv/bin/python bench/retention.py`, which rewrites"
            " this section only).",
            "",
            f"| keep_commits | MiB after 1 commit | MiB after {COMMITS} | ratio | goal | met |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            f"- State: {BENCH_DIR}.",
        ]
    )


if __name__ == "__main__":
    ingestion.write_section(section(measure()), SECTION)
