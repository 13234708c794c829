"""The pivot macros vs Spark's native PIVOT, and key discovery as history grows.

Pivot: ENTITY_ROWS[k] entities x K keys (K = 20 and 200, 2 million key/value
rows each), as a Parquet table. `ours` runs the SQL `pivot_key_values`
renders (keys given, so no discovery), `native` runs
`PIVOT (max(record_value) FOR record_key IN (<the same keys>))`; both into
Spark's no-op sink, so the figures are the query, not the writer.

Discovery: a raw-like table partitioned by `_batch_id` holds 10 batches
(1x) and then 100 (10x); the query `discover_pivot_keys` runs for the
newest batch (`_batch_id > '<previous>'`, as `unseen_batches` renders it)
is timed at both sizes.

The SQL comes from the macros themselves: `dbt compile --inline` on the
project, in this process, on the embedded session.
"""

from __future__ import annotations

import os
import statistics
import time

from dbt.cli.main import dbtRunner
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dynamic_ddl import spark_conf

KEYS = (20, 200)
KV_ROWS = 2_000_000
BATCH_ROWS = 200_000
HISTORY = (10, 100)  # batches before the new one: 1x, 10x
DISCOVERY_KEYS = 40
RUNS = 3
SCHEMA = "bench_pivot"
BENCH_DIR = spark_conf.project_root() / ".local" / "bench" / "pivot"


def session() -> SparkSession:
    # dbt's embedded target (used to compile) must find this same session and state.
    os.environ[spark_conf.STATE_DIR_ENV] = str(BENCH_DIR / "state")
    builder = SparkSession.builder.master("local[2]").appName("bench-pivot")
    builder = builder.config("spark.driver.memory", "4g")
    for key, value in spark_conf.all_settings(BENCH_DIR / "state").items():
        builder = builder.config(key, value)
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def key_values(spark: SparkSession, keys: int, rows: int, batch: str = "b0"):
    """`rows` key/value rows: rows/keys entities, each with every one of `keys` keys."""
    return spark.range(rows).select(
        (F.col("id") / keys).cast("long").cast("string").alias("id"),
        F.lit("2026-11-03T10:00:00Z").alias("ts"),
        F.concat(F.lit("attribute_"), (F.col("id") % keys).cast("string")).alias("record_key"),
        F.sha2(F.col("id").cast("string"), 256).substr(1, 12).alias("record_value"),
        F.lit(batch).alias("_batch_id"),
    )


def compiled(inline: str) -> str:
    """The SQL the project's macros render for `inline` (dbt compile, in process)."""
    root = spark_conf.project_root()
    result = dbtRunner().invoke(
        [
            "compile",
            "--inline",
            inline,
            "--project-dir",
            str(root),
            "--profiles-dir",
            str(root / "profiles"),
            "--target",
            "session",
            "--quiet",
        ]
    )
    if not result.success:
        raise RuntimeError(f"dbt compile failed: {result.exception}")
    return result.result.results[0].node.compiled_code


def timed(spark: SparkSession, sql: str) -> float:
    started = time.monotonic()
    spark.sql(sql).write.format("noop").mode("overwrite").save()
    return time.monotonic() - started


def pivot_figures(spark: SparkSession) -> list[dict]:
    rows = []
    for keys in KEYS:
        table = f"{SCHEMA}.kv_{keys}"
        key_values(spark, keys, KV_ROWS).write.mode("overwrite").saveAsTable(table)
        names = [f"attribute_{i}" for i in range(keys)]
        ours = compiled(
            f"{{{{ pivot_key_values('{table}', group_by=['id', 'ts'], keys={names!r}) }}}}"
        )
        values = ", ".join(f"'{name}' as {name}" for name in names)
        native = (
            f"select * from (select id, ts, record_key, record_value from {table}) "
            f"pivot (max(record_value) for record_key in ({values}))"
        )
        assert spark.sql(ours).count() == spark.sql(native).count() == KV_ROWS // keys
        timed(spark, ours), timed(spark, native)  # warm-up
        times = {"ours": [], "native": []}
        for _ in range(RUNS):
            times["ours"].append(timed(spark, ours))
            times["native"].append(timed(spark, native))
        rows.append(
            {
                "keys": keys,
                "rows": KV_ROWS,
                "ours": statistics.median(times["ours"]),
                "native": statistics.median(times["native"]),
            }
        )
        print(rows[-1], flush=True)
    return rows


def discovery_figures(spark: SparkSession) -> list[dict]:
    table = f"{SCHEMA}.raw_kv"
    spark.sql(f"drop table if exists {table}")
    rows = []
    written = 0
    for history in HISTORY:
        for batch in range(written, history + 1):
            key_values(spark, DISCOVERY_KEYS, BATCH_ROWS, f"b{batch:04d}").write.mode(
                "append"
            ).partitionBy("_batch_id").format("parquet").saveAsTable(table)
        written = history + 1
        # The newest batch is b<history>: the filter unseen_batches renders for it.
        query = compiled(
            f"{{{{ dynamic_ddl.pivot_discovery_query('{table}', 'record_key', "
            f"\"`_batch_id` > 'b{history - 1:04d}'\") }}}}"
        )
        assert len(spark.sql(query).collect()) == DISCOVERY_KEYS
        spark.sql(query).collect()  # warm-up
        times = []
        for _ in range(RUNS):
            started = time.monotonic()
            spark.sql(query).collect()
            times.append(time.monotonic() - started)
        rows.append({"history": history, "seconds": statistics.median(times)})
        print(rows[-1], flush=True)
    return rows


def measure() -> dict:
    spark = session()
    try:
        spark.sql(f"create database if not exists {SCHEMA}")
        return {"pivot": pivot_figures(spark), "discovery": discovery_figures(spark)}
    finally:
        spark.stop()


def report(measured: dict) -> str:
    lines = [
        "| keys | key/value rows | ours s | native PIVOT s | ours ÷ native (goal ≤ 1.2x) |",
        "|---|---|---|---|---|",
    ]
    for row in measured["pivot"]:
        lines.append(
            f"| {row['keys']} | {row['rows']:,} | {row['ours']:.2f} | {row['native']:.2f} "
            f"| {row['ours'] / row['native']:.2f}x |"
        )
    first, last = measured["discovery"][0], measured["discovery"][-1]
    lines += [
        "",
        "| history (batches) | discovery of the new batch s |",
        "|---|---|",
        *(f"| {row['history']} | {row['seconds']:.3f} |" for row in measured["discovery"]),
        "",
        f"Discovery at {last['history']} batches ÷ at {first['history']}: "
        f"{last['seconds'] / first['seconds']:.2f}x (goal: flat within ±25%).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(measure()))
