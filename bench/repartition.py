"""Repartition in place vs a --full-refresh rebuild of the same model.

Issue 24's goal: re-partitioning a table takes at most the time of a
`--full-refresh` rebuild of its model (<= 1.0x). The rebuild is what the
upsert materialization does on --full-refresh: the model's rows into
`<table>__dbt_new`, the table, its versions and log dropped, a first commit
from `__dbt_new`. Two models are rebuilt: a landing model as this project's
are (the latest row per key over a raw history, here two rows per key), and
the cheapest model there is (its rows read from a Parquet copy of the
table). All end with the same table under the new layout.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import replace

sys.path.insert(0, __file__.rsplit("/", 1)[0])

import ingestion  # noqa: E402
from upsert import BENCH_DIR, session  # noqa: E402

from dynamic_ddl.catalog import partition_columns, spark_sql  # noqa: E402
from dynamic_ddl.upsert.care import repartition  # noqa: E402
from dynamic_ddl.upsert.protocol import UpsertSpec, drop_upsert_table, upsert  # noqa: E402

SECTION = "## Repartition in place"
SCHEMA = "bench_repartition"
DAYS = 100
ROWS_PER_DAY = 20_000
BUCKETS = 10
RUNS = 3
LAYOUTS = (("bucket",), ("day",))  # alternated: each run repartitions to the other


def spec(partition_by: tuple[str, ...]) -> UpsertSpec:
    return UpsertSpec(f"{SCHEMA}.events", ("device",), "log_ts", partition_by)


# The models rebuilt: the latest row per key over a raw history, and a copy.
MODELS = {
    "landing": (
        f"select device, log_ts, state, bucket, day from (select *, row_number() over"
        f" (partition by device order by log_ts desc) as newest from {SCHEMA}.history)"
        " where newest = 1"
    ),
    "copy": f"select * from {SCHEMA}.source",
}


def build(spark, sql) -> None:
    """The table (by day) and the models' sources: a Parquet copy of its rows, and a raw
    history holding an older row for every key besides."""
    spark.sql(f"drop schema if exists {SCHEMA} cascade")
    spark.sql(f"create schema {SCHEMA}")
    rows = (
        "select concat('dev-', id) as device, {ts} as log_ts,"
        " concat('state ', {ts}, ' of device ', id, repeat('.', 30)) as state,"
        f" cast(id % {BUCKETS} as int) as bucket, cast(id % {DAYS} as int) as day"
        f" from range({DAYS * ROWS_PER_DAY})"
    )
    spark.sql(f"create table {SCHEMA}.source using parquet as {rows.format(ts=2)}")
    spark.sql(
        f"create table {SCHEMA}.history using parquet as {rows.format(ts=1)}"
        f" union all {rows.format(ts=2)}"
    )
    upsert(sql, spec(("day",)), f"{SCHEMA}.source")


def full_refresh(spark, sql, partition_by: tuple[str, ...], model: str) -> None:
    """What the upsert materialization does on --full-refresh of `model` (MODELS)."""
    new = f"{SCHEMA}.events__dbt_new"
    spark.sql(f"drop table if exists {new}")
    spark.sql(f"create table {new} using parquet as {MODELS[model]}")
    drop_upsert_table(sql, UpsertSpec.of_table(sql, f"{SCHEMA}.events"))
    upsert(sql, spec(partition_by), new)
    spark.sql(f"drop table {new}")


def measure() -> dict[str, list[float]]:
    spark = session()
    sql = spark_sql(spark)
    times: dict[str, list[float]] = {"repartition": [], **{m: [] for m in MODELS}}
    try:
        build(spark, sql)
        for run in range(RUNS * 2):
            layout = LAYOUTS[run % 2]
            started = time.perf_counter()
            existing = UpsertSpec.of_table(sql, f"{SCHEMA}.events")
            repartition(sql, replace(existing, unique_key=("device",)), layout)
            times["repartition"].append(time.perf_counter() - started)
            assert partition_columns(sql, f"{SCHEMA}.events") == list(layout)
            for model in MODELS:  # from scratch, into the same layout
                started = time.perf_counter()
                full_refresh(spark, sql, layout, model)
                times[model].append(time.perf_counter() - started)
            print(
                f"run {run + 1}: "
                + ", ".join(f"{name} {spent[-1]:.2f} s" for name, spent in times.items()),
                flush=True,
            )
        return times
    finally:
        spark.stop()


def section(times: dict[str, list[float]]) -> str:
    # The first run of each is a warm-up (JIT, first listing of the new schema).
    ours = statistics.median(times["repartition"][1:])
    rows = []
    for model, label in (("landing", "landing model"), ("copy", "copy of the table")):
        rebuild = statistics.median(times[model][1:])
        ratio = ours / rebuild
        rows.append(
            f"| {label} | {ours:.2f} | {rebuild:.2f} | {ratio:.2f}x | <= 1.0x |"
            f" {'yes' if ratio <= 1.0 else 'no'} |"
        )
    return "\n".join(
        [
            SECTION,
            "",
            f"An upsert table of {DAYS * ROWS_PER_DAY:,} rows switched between"
            f" `partition_by: [day]` ({DAYS} partitions) and `[bucket]` ({BUCKETS}), in"
            " turns: by `repartition`, and by a `--full-refresh` of its model (the rows into"
            " `__dbt_new`, the table dropped, a first commit) into the same layout. Two"
            " models: a landing model as this project's are (the latest row per key over a"
            " raw history of two rows per key), and the cheapest model there is (a copy of"
            " the table's rows in Parquet). One local[2] session (4 GiB driver); medians"
            f" of {RUNS * 2 - 1} runs after a warm-up, both layouts.",
            "",
            "Command: `make bench` (or `.venv/bin/python bench/repartition.py`, which"
            " rewrites this section only).",
            "",
            "| model rebuilt | repartition s | full refresh s | ratio | goal | met |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            "- Repartition writes the rows twice (an interim copy under the new layout,"
            " then the version store), the floor while the store is a managed table of a"
            ' fixed name (docs/decisions/0006, "Repartition in place"). A rebuild writes'
            " them twice too (`__dbt_new`, then the store), and runs its model and the"
            " merge besides.",
            f"- State: {BENCH_DIR}.",
        ]
    )


if __name__ == "__main__":
    ingestion.write_section(section(measure()), SECTION)
