"""What `global_key` costs: the same batch upserted with keys looked up in the batch's
partitions only, and in every partition (with and without rows that move).

A table of PARTITIONS day partitions (1x), then 10x as many rows; every
device is one key in one day. The batch updates BATCH_ROWS devices of the
first two days; `moving` sends a tenth of them to another day. The lookup
reads the key and partition columns of the whole table, so its cost grows
with the table; the figures say how much. Median of RUNS commits after
WARMUP ones (see upsert.py for why).
"""

from __future__ import annotations

import statistics
import time

from pyspark.sql import functions as F

from dynamic_ddl.upsert.protocol import UpsertSpec, upsert

PARTITIONS = 100
ROWS_PER_PARTITION = {"1x": 10_000, "10x": 100_000}
BATCH_ROWS = 10_000
WARMUP = 2
RUNS = 3
SCHEMA = "bench_global_key"


def rows(spark, per_partition: int, version: int):
    """Devices `dev-<id>`, each in day `id % PARTITIONS`; `state` tells the version."""
    return spark.range(PARTITIONS * per_partition).select(
        F.date_add(F.lit("2020-01-01").cast("date"), (F.col("id") % PARTITIONS).cast("int"))
        .cast("string")
        .alias("day"),
        F.concat(F.lit("dev-"), F.col("id")).alias("device"),
        F.lit(f"v{version}").alias("state"),
        F.lit(version).cast("bigint").alias("log_ts"),
    )


def batch(spark, per_partition: int, version: int, moving: bool) -> None:
    """BATCH_ROWS devices of the first two days; with `moving`, one in ten sent to a
    day 50 days later (it leaves its partition)."""
    first_days = F.col("day") < "2020-01-03"
    picked = rows(spark, per_partition, version).where(first_days).limit(BATCH_ROWS)
    if moving:
        moved = F.date_add(F.col("day").cast("date"), 50).cast("string")
        last_digit = F.substring(F.col("device"), -1, 1) == "0"
        picked = picked.withColumn("day", F.when(last_digit, moved).otherwise(F.col("day")))
    picked.localCheckpoint().createOrReplaceTempView("bench_batch")


def spec(name: str, global_key: bool) -> UpsertSpec:
    return UpsertSpec(
        f"{SCHEMA}.{name}",
        unique_key=("device",),
        ordering_field="log_ts",
        partition_by=("day",),
        global_key=global_key,
    )


def measure(spark) -> dict:
    sql = lambda statement: spark.sql(statement).collect()  # noqa: E731
    spark.sql(f"drop schema if exists {SCHEMA} cascade")
    spark.sql(f"create schema {SCHEMA}")
    results: dict = {}
    for scale, per_partition in ROWS_PER_PARTITION.items():
        rows(spark, per_partition, 1).createOrReplaceTempView("bench_load")
        for case, global_key, moving in (
            ("batch partitions", False, False),
            ("global, no move", True, False),
            ("global, 10% move", True, True),
        ):
            name = f"t_{scale}_{case.split(',')[0].split()[0]}_{int(moving)}"
            upsert(sql, spec(name, global_key), "bench_load")  # not timed
            times = []
            for run in range(WARMUP + RUNS):
                batch(spark, per_partition, 2 + run, moving)
                started = time.monotonic()
                upsert(sql, spec(name, global_key), "bench_batch")
                times.append(time.monotonic() - started)
            results[(scale, case)] = statistics.median(times[WARMUP:])
            print(scale, case, results[(scale, case)], flush=True)
    return results


def report(results: dict) -> str:
    lines = [
        "| table | rows | batch partitions s | global, no move s | global, 10% move s |",
        "|---|---|---|---|---|",
    ]
    for scale, per_partition in ROWS_PER_PARTITION.items():
        cells = [
            f"{results[(scale, case)]:.2f}"
            for case in ("batch partitions", "global, no move", "global, 10% move")
        ]
        lines.append(f"| {scale} | {PARTITIONS * per_partition:,} | {' | '.join(cells)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    import upsert as upsert_bench  # bench/upsert.py: the same session settings

    session = upsert_bench.session()
    try:
        print(report(measure(session)))
    finally:
        session.stop()
