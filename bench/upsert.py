"""Upsert vs rebuild: a small batch into a table of many partitions.

The table holds ROWS_PER_PARTITION rows in each of PARTITIONS day
partitions (1x), then 10x as many partitions (the table grows as history
does). The batch updates 1% of the 1x table's rows, spread over 2% of its
partitions; it is written to Parquet first (untimed), so both sides read the
same input. `upsert` commits it through the copy-on-write protocol;
`rebuild` recomputes the whole table (latest row per key over table + batch)
and writes it anew. An upsert figure is the median of UPSERT_RUNS commits,
after WARMUP_UPSERTS untimed ones (the JVM compiles the commit's code paths
over its first commits; a long-running Thrift server has done so long ago); a
rebuild's is the median of REBUILD_RUNS (a rebuild runs long enough to warm
up within its first run). The 10x table is not rebuilt: no goal compares against it,
and it would take minutes.

A commit has a fixed cost (a dozen metastore calls and small Spark jobs,
about 1.4 s here) whatever the table's size, while a rebuild grows with the
table: a day partition holds 100,000 rows (a fleet of 100,000 devices), so
the comparison is made on a table where one would consider upserts, as in
Hoodie's case (24 min -> 2 min).
"""

from __future__ import annotations

import statistics
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dynamic_ddl import spark_conf
from dynamic_ddl.upsert.protocol import UpsertSpec, upsert

PARTITIONS = 100
ROWS_PER_PARTITION = 100_000
GROWTH = 10
WARMUP_UPSERTS = 3
UPSERT_RUNS = 5
REBUILD_RUNS = {"1x": 3, "10x": 0}
SCHEMA = "bench_upsert"
BENCH_DIR = spark_conf.project_root() / ".local" / "bench" / "upsert"


def session() -> SparkSession:
    builder = SparkSession.builder.master("local[2]").appName("bench-upsert")
    builder = builder.config("spark.driver.memory", "4g")
    for key, value in spark_conf.all_settings(BENCH_DIR / "state").items():
        builder = builder.config(key, value)
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def rows(spark: SparkSession, partitions: int, per_partition: int, version: int):
    """`partitions` days of `per_partition` devices each; `state` tells the version."""
    return spark.range(partitions * per_partition).select(
        F.date_add(F.lit("2020-01-01").cast("date"), (F.col("id") % partitions).cast("int"))
        .cast("string")
        .alias("day"),
        F.concat(F.lit("dev-"), (F.col("id") / partitions).cast("long")).alias("device"),
        F.lit(f"v{version}").alias("state"),
        F.lit(version).cast("bigint").alias("log_ts"),
        F.sha2(F.col("id").cast("string"), 256).alias("payload"),
    )


def spec(name: str) -> UpsertSpec:
    return UpsertSpec(
        f"{SCHEMA}.{name}", unique_key=("device",), ordering_field="log_ts", partition_by=("day",)
    )


def write_batch(spark: SparkSession, version: int) -> None:
    """1% of the 1x table's rows, in 2% of its partitions (the first days), as the
    Parquet table `bench_batch` (view) both sides read."""
    touched = max(1, PARTITIONS * 2 // 100)
    per_partition = PARTITIONS * ROWS_PER_PARTITION // 100 // touched
    first_days = F.col("day") < F.date_add(F.lit("2020-01-01").cast("date"), touched).cast("string")
    path = str(BENCH_DIR / "batch")
    rows(spark, PARTITIONS, ROWS_PER_PARTITION, version).where(first_days).limit(
        touched * per_partition
    ).write.mode("overwrite").parquet(path)
    spark.read.parquet(path).createOrReplaceTempView("bench_batch")


def timed_upsert(spark: SparkSession, sql, name: str, version: int) -> float:
    write_batch(spark, version)
    started = time.monotonic()
    result = upsert(sql, spec(name), "bench_batch")
    elapsed = time.monotonic() - started
    assert result.changed_partitions == max(1, PARTITIONS * 2 // 100), result
    return elapsed


def rebuild(spark: SparkSession, table: str, version: int) -> float:
    """The whole table again: latest row per key over table + batch, written anew."""
    write_batch(spark, version)
    started = time.monotonic()
    spark.sql(
        f"""
        select day, device, state, log_ts, payload from (
            select *, row_number() over (partition by day, device order by log_ts desc) as r
            from (select day, device, state, log_ts, payload from {table}
                  union all select * from bench_batch)
        ) where r = 1"""
    ).write.mode("overwrite").partitionBy("day").parquet(str(BENCH_DIR / "rebuilt"))
    return time.monotonic() - started


def measure(scales: tuple[str, ...] = ("1x", "10x")) -> dict:
    spark = session()
    sql = lambda statement: spark.sql(statement).collect()  # noqa: E731
    try:
        spark.sql(f"drop schema if exists {SCHEMA} cascade")
        spark.sql(f"create schema {SCHEMA}")
        results = {}
        for scale, partitions in (("1x", PARTITIONS), ("10x", PARTITIONS * GROWTH)):
            if scale not in scales:
                continue
            name = f"t_{scale}"
            rows(spark, partitions, ROWS_PER_PARTITION, 1).createOrReplaceTempView("bench_load")
            upsert(sql, spec(name), "bench_load")  # not timed: the table's first commit
            runs = [
                timed_upsert(spark, sql, name, 2 + run)
                for run in range(WARMUP_UPSERTS + UPSERT_RUNS)
            ]
            upserts = runs[WARMUP_UPSERTS:]
            table = f"{SCHEMA}.{name}"
            rebuilds = [rebuild(spark, table, 10 + run) for run in range(REBUILD_RUNS[scale])]
            results[scale] = {
                "rows": partitions * ROWS_PER_PARTITION,
                "partitions": partitions,
                "upsert": statistics.median(upserts),
                "rebuild": statistics.median(rebuilds) if rebuilds else None,
                "rebuild_runs": len(rebuilds),
            }
            print(scale, results[scale], flush=True)
        return results
    finally:
        spark.stop()


def report(results: dict) -> str:
    rows_ = [
        "| table | rows | partitions | upsert s | rebuild s (runs) | upsert ÷ rebuild |",
        "|---|---|---|---|---|---|",
    ]
    for scale, r in results.items():
        rebuild, ratio = "not run", "-"
        if r["rebuild"] is not None:
            rebuild = f"{r['rebuild']:.2f} ({r['rebuild_runs']})"
            ratio = f"{r['upsert'] / r['rebuild']:.3f}x"
        rows_.append(
            f"| {scale} | {r['rows']:,} | {r['partitions']} | {r['upsert']:.2f} |"
            f" {rebuild} | {ratio} |"
        )
    growth = results["10x"]["upsert"] / results["1x"]["upsert"]
    return "\n".join(
        [
            *rows_,
            "",
            f"- The batch: {PARTITIONS * ROWS_PER_PARTITION // 100:,} rows (1% of the 1x table)"
            f" in {max(1, PARTITIONS * 2 // 100)} partitions (2% of the 1x table's).",
            "- Upsert vs rebuild, goal <= 0.1x.",
            f"- The same batch as the table grows 1x -> 10x: {growth:.2f}x the time"
            " (goal <= 1.5x).",
        ]
    )


if __name__ == "__main__":
    import sys

    # `bench/upsert.py 1x` measures the 1x table only (a quicker check).
    scales = tuple(sys.argv[1:]) or ("1x", "10x")
    measured = measure(scales)
    print(report(measured) if len(measured) == 2 else measured)
