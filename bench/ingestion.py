"""Raw ingestion throughput: ours vs a bare JSON-to-Parquet conversion vs the naive pivot.

Same files for all three, generated once per size under .local/bench/ingest
(device_events of the sample generator), on one local[2] session, warmed up
first. Each figure is the median of RUNS runs.

- ours: `ingest_topic` into an empty schema (ledger, inference, parse,
  flatten, child table, quarantine, registry: everything a raw model does);
- bare: `spark.read.json(files).write.parquet(out)`, schema inferred;
- naive: the talk's approach: every leaf exploded to record_key /
  record_value rows, then MAX(CASE WHEN) grouped by event id and timestamp.
"""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dynamic_ddl import spark_conf
from dynamic_ddl.ingest.job import ingest_topic
from dynamic_ddl.ingest.ledger import count_lines
from dynamic_ddl.sampledata.generator import GeneratorConfig, generate
from dynamic_ddl.sampledata.reference import load_reference
from dynamic_ddl.schema.flatten import split_schema

BASE_EVENTS = 25_000
SETUP_EVENTS = 5_000
SCALES = (1, 4, 16)
RUNS = 3
TOPIC = {"topic": "device_events", "record_key": ["_data.event.id"], "event_time": "_data.log_ts"}
BENCH_DIR = spark_conf.project_root() / ".local" / "bench" / "ingest"


def sample(events: int) -> Path:
    """An inbox with `events` device events (generated once, then reused)."""
    inbox = BENCH_DIR / f"inbox-{events}"
    if not (inbox / ".done").exists():
        shutil.rmtree(inbox, ignore_errors=True)
        generate(GeneratorConfig(inbox, events=events, file_events=50_000), load_reference())
        (inbox / ".done").touch()
    return inbox


def files_of(inbox: Path) -> list[str]:
    return sorted(str(p) for p in (inbox / "device_events").rglob("*.json"))


def session() -> SparkSession:
    builder = SparkSession.builder.master("local[2]").appName("bench-ingestion")
    builder = builder.config("spark.driver.memory", "4g")  # 16x: 400k events in one batch
    for key, value in spark_conf.all_settings(BENCH_DIR / "state").items():
        builder = builder.config(key, value)
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _config(inbox: Path) -> dict:
    return {**TOPIC, "inbox_dir": str(inbox), "schema": "bench_raw", "table": "raw_device_events"}


def _fresh_schema(spark: SparkSession) -> None:
    spark.sql("drop schema if exists bench_raw cascade")
    spark.sql("create schema bench_raw")


def ours(spark: SparkSession, inbox: Path) -> float:
    """A new topic's first batch: every column is new (tables created, new paths checked)."""
    _fresh_schema(spark)
    started = time.monotonic()
    ingest_topic(spark, _config(inbox))
    return time.monotonic() - started


def ours_known(spark: SparkSession, inbox: Path) -> float:
    """A batch of a topic whose columns exist already: the everyday case."""
    _fresh_schema(spark)
    # Not timed: an earlier, smaller batch creates the tables and the registry.
    ingest_topic(spark, _config(sample(SETUP_EVENTS)))
    started = time.monotonic()
    ingest_topic(spark, _config(inbox))
    return time.monotonic() - started


def no_new_files(spark: SparkSession, inbox: Path) -> float:
    started = time.monotonic()
    assert ingest_topic(spark, _config(inbox)).count() == 0
    return time.monotonic() - started


def bare(spark: SparkSession, inbox: Path) -> float:
    started = time.monotonic()
    spark.read.json(files_of(inbox)).write.mode("overwrite").parquet(str(BENCH_DIR / "out-bare"))
    return time.monotonic() - started


def naive(spark: SparkSession, inbox: Path) -> float:
    """Explode every leaf to key/value rows, then pivot back with MAX(CASE WHEN)."""
    started = time.monotonic()
    events = spark.read.json(files_of(inbox))
    leaves, _ = split_schema(events.schema)
    leaves = [leaf for leaf in leaves if leaf.path != ("_data", "event", "id")]
    keys = [".".join(leaf.path) for leaf in leaves]
    pairs = F.explode(
        F.map_from_arrays(
            F.array(*[F.lit(k) for k in keys]),
            F.array(*[F.col("`" + "`.`".join(leaf.path) + "`").cast("string") for leaf in leaves]),
        )
    ).alias("record_key", "record_value")
    long: DataFrame = events.select(
        F.col("_data.event.id").alias("id"), F.col("_data.log_ts").alias("log_ts"), pairs
    )
    pivot = long.groupBy("id", "log_ts").agg(
        *[
            F.max(F.when(F.col("record_key") == k, F.col("record_value"))).alias(
                k.replace(".", "_")
            )
            for k in keys
        ]
    )
    pivot.write.mode("overwrite").parquet(str(BENCH_DIR / "out-naive"))
    return time.monotonic() - started


def timed(run, spark: SparkSession, inbox: Path) -> float:
    """The median of RUNS runs' own measured seconds."""
    return statistics.median(run(spark, inbox) for _ in range(RUNS))


PATHS = {"ours": ours, "ours_known": ours_known, "bare": bare, "naive": naive}


def measure() -> dict:
    """Seconds per path and size, plus the no-new-files run and the data sizes."""
    inboxes = {scale: sample(BASE_EVENTS * scale) for scale in SCALES}
    spark = session()
    try:
        for run in PATHS.values():  # warm-up: JIT, catalog, file system caches
            run(spark, inboxes[1])
        results: dict = {"sizes": {}, **{name: {} for name in PATHS}}
        for scale, inbox in inboxes.items():
            mb = sum(Path(f).stat().st_size for f in files_of(inbox)) / 2**20
            lines = sum(count_lines(Path(f)) for f in files_of(inbox))
            results["sizes"][scale] = (lines, mb)
            for name, run in PATHS.items():
                results[name][scale] = timed(run, spark, inbox)
                print(f"{name:>10} {scale:>2}x {lines:>8} lines: {results[name][scale]:6.2f} s")
        results["no_new_files"] = timed(no_new_files, spark, inboxes[SCALES[-1]])
        return results
    finally:
        spark.stop()


def chart(results: dict, path: Path) -> None:
    """Events per second against data size, one line per path."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4))
    lines = [results["sizes"][s][0] for s in SCALES]
    for name, label in (
        ("ours", "ours, a new topic's first batch"),
        ("ours_known", "ours, a known topic's batch"),
        ("bare", "bare read.json"),
        ("naive", "naive pivot"),
    ):
        rates = [results["sizes"][s][0] / results[name][s] for s in SCALES]
        axes.plot(lines, rates, marker="o", label=label)
    axes.set_xscale("log")
    axes.set_xlabel("input lines (device_events)")
    axes.set_ylabel("events per second")
    axes.set_title("Raw ingestion throughput, local[2]")
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def _spread(results: dict, name: str) -> float:
    """How far the cost per event strays from the 1x cost, at worst."""
    costs = [results[name][s] / results["sizes"][s][0] for s in SCALES]
    return max(abs(cost / costs[0] - 1) for cost in costs)


def report(results: dict) -> str:
    """The markdown section for docs/benchmarks.md."""
    rows = [
        "| size | lines | MB | ours new s | ours known s | bare s | naive s |"
        " bare ÷ ours (new / known) | naive ÷ ours (new / known) | ours known µs/event |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for scale in SCALES:
        lines, mb = results["sizes"][scale]
        o, k, b, n = (results[name][scale] for name in PATHS)
        rows.append(
            f"| {scale}x | {lines} | {mb:.0f} | {o:.2f} | {k:.2f} | {b:.2f} | {n:.2f} |"
            f" {b / o:.2f}x / {b / k:.2f}x | {n / o:.1f}x / {n / k:.1f}x |"
            f" {k / lines * 1e6:.0f} |"
        )
    return "\n".join(
        [
            *rows,
            "",
            "- `ours new`: a new topic's first batch (tables created, every path new);"
            " `ours known`: a batch of a topic whose columns exist (the everyday case).",
            f"- Cost per event across 1x/4x/16x, worst distance from the 1x cost: new"
            f" {_spread(results, 'ours'):.0%}, known {_spread(results, 'ours_known'):.0%}"
            " (goal: flat within ±25%).",
            f"- A run with no new files (16x already ingested): {results['no_new_files']:.2f} s.",
            "- `bare ÷ ours`: the bare conversion's time over ours (goal >= 1.0x);"
            " `naive ÷ ours`: how many times faster we are than the naive pivot (goal >= 5x).",
            "- Chart: [ingestion_throughput.png](ingestion_throughput.png).",
        ]
    )


if __name__ == "__main__":
    measured = measure()
    chart(measured, spark_conf.project_root() / "docs" / "ingestion_throughput.png")
    print(report(measured))
