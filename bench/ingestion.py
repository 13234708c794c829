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

import json
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dynamic_ddl import spark_conf, steps
from dynamic_ddl.ingest.job import ingest_topic
from dynamic_ddl.ingest.ledger import count_lines
from dynamic_ddl.sampledata.generator import GeneratorConfig, generate
from dynamic_ddl.sampledata.reference import load_reference
from dynamic_ddl.schema.flatten import split_schema

BASE_EVENTS = 25_000
SETUP_EVENTS = 5_000
SMALL_BATCH_EVENTS = 1_000
SCALES = (1, 4, 16, 64)
RUNS = 3
BIG_RUNS = 1  # at 64x (1.6M events, 0.8 GB) one run per path: the bench must end
TOPIC = {"topic": "device_events", "record_key": ["_data.event.id"], "event_time": "_data.log_ts"}
BENCH_DIR = spark_conf.project_root() / ".local" / "bench" / "ingest"
# The least driver memory Spark starts with (it refuses less than 450 MiB): a batch of
# every size runs in it, or the driver's need grows with the batch.
LEAST_HEAP = "512m"


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


def session(memory: str = "4g", state: Path = BENCH_DIR / "state") -> SparkSession:
    builder = SparkSession.builder.master("local[2]").appName("bench-ingestion")
    builder = builder.config("spark.driver.memory", memory)
    for key, value in spark_conf.all_settings(state).items():
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


def timed(run, spark: SparkSession, inbox: Path, runs: int = RUNS) -> float:
    """The median of `runs` runs' own measured seconds."""
    return statistics.median(run(spark, inbox) for _ in range(runs))


def peak_heap_mb(spark: SparkSession, run, inbox: Path) -> float:
    """The driver JVM's peak heap use during one run, in MiB (sum of the heap pools' peaks)."""
    management = spark._jvm.java.lang.management.ManagementFactory  # type: ignore[union-attr]
    pools = [
        p for p in management.getMemoryPoolMXBeans() if p.getType().toString() == "Heap memory"
    ]
    management.getMemoryMXBean().gc()
    for pool in pools:
        pool.resetPeakUsage()
    run(spark, inbox)
    return sum(pool.getPeakUsage().getUsed() for pool in pools) / 2**20


def in_least_heap(inbox: Path) -> float | None:
    """Seconds of one `ours known` run in a JVM of its own with LEAST_HEAP of driver
    memory (its own state: Derby admits one JVM); None when it did not finish."""
    command = [sys.executable, __file__, "--least-heap", str(inbox)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        return None
    reported = [line for line in done.stdout.splitlines() if line.startswith('{"seconds"')]
    if done.returncode != 0 or not reported:
        print(f"{LEAST_HEAP} driver, {inbox.name}: failed\n{done.stderr[-2000:]}", flush=True)
        return None
    return json.loads(reported[-1])["seconds"]


def least_heap_run(inbox: Path) -> None:
    """The child of in_least_heap: prints {"seconds": ...}."""
    spark = session(LEAST_HEAP, BENCH_DIR / "state-least-heap")
    try:
        print(json.dumps({"seconds": ours_known(spark, inbox)}))
    finally:
        spark.stop()


def step_profile(spark: SparkSession, inbox: Path) -> list[tuple[str, float]]:
    """Seconds from each named step of a known topic's batch to the next (dynamic_ddl.steps)."""
    _fresh_schema(spark)
    ingest_topic(spark, _config(sample(SETUP_EVENTS)))
    marks = [("start", time.monotonic())]
    with steps.hooked(lambda step: marks.append((step, time.monotonic()))):
        ingest_topic(spark, _config(inbox))
    marks.append(("end", time.monotonic()))
    return [(step, end - begin) for (step, begin), (_, end) in zip(marks, marks[1:], strict=False)]


PATHS = {"ours": ours, "ours_known": ours_known, "bare": bare, "naive": naive}


def measure() -> dict:
    """Seconds per path and size, the small batch, peak heap, a step profile, data sizes."""
    inboxes = {scale: sample(BASE_EVENTS * scale) for scale in SCALES}
    spark = session()
    try:
        for run in PATHS.values():  # warm-up: JIT, catalog, file system caches
            run(spark, inboxes[1])
        results: dict = {"sizes": {}, "peak_heap_mb": {}, **{name: {} for name in PATHS}}
        for scale, inbox in inboxes.items():
            mb = sum(Path(f).stat().st_size for f in files_of(inbox)) / 2**20
            lines = sum(count_lines(Path(f)) for f in files_of(inbox))
            results["sizes"][scale] = (lines, mb)
            runs = BIG_RUNS if scale == SCALES[-1] else RUNS
            for name, run in PATHS.items():
                results[name][scale] = timed(run, spark, inbox, runs)
                print(f"{name:>10} {scale:>2}x {lines:>8} lines: {results[name][scale]:6.2f} s")
            results["peak_heap_mb"][scale] = peak_heap_mb(spark, ours_known, inbox)
        results["no_new_files"] = timed(no_new_files, spark, inboxes[SCALES[-1]])
        results["small_batch"] = timed(ours_known, spark, sample(SMALL_BATCH_EVENTS), 5)
        results["profile"] = step_profile(spark, inboxes[16])
    finally:
        spark.stop()
    results["least_heap"] = {scale: in_least_heap(inbox) for scale, inbox in inboxes.items()}
    (BENCH_DIR / "results.json").write_text(json.dumps(results, indent=1))  # for `--memory`
    return results


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


def goals(results: dict) -> list[tuple[str, str, str, bool]]:
    """Issue 22's goals: (measure, measured, goal, met)."""
    rate = {name: results["bare"][16] / results[name][16] for name in ("ours", "ours_known")}
    big = results["bare"][64] / results["ours_known"][64]
    naive = results["naive"][16] / results["ours_known"][16]
    per_event = {s: results["ours_known"][s] / results["sizes"][s][0] for s in (16, 64)}
    drift = per_event[64] / per_event[16]
    least = [results["least_heap"][s] for s in (1, 16, 64)]
    return [
        (
            "known topic ÷ bare, 16x",
            f"{rate['ours_known']:.2f}x",
            ">= 0.8x",
            rate["ours_known"] >= 0.8,
        ),
        ("known topic ÷ bare, 64x", f"{big:.2f}x", ">= 0.9x", big >= 0.9),
        (
            "new topic's first batch ÷ bare, 16x",
            f"{rate['ours']:.2f}x",
            ">= 0.6x",
            rate["ours"] >= 0.6,
        ),
        ("faster than the naive pivot, 16x", f"{naive:.1f}x", ">= 2.5x", naive >= 2.5),
        (
            f"batch of {SMALL_BATCH_EVENTS:,} events, whole raw model",
            f"{results['small_batch']:.2f} s",
            "<= 1.0 s",
            results["small_batch"] <= 1.0,
        ),
        ("cost per event, 64x ÷ 16x", f"{drift:.2f}", "0.8-1.25", 0.8 <= drift <= 1.25),
        (
            f"a known batch in a {LEAST_HEAP[:-1]} MiB driver, 1x / 16x / 64x",
            " / ".join("failed" if s is None else f"{s:.0f} s" for s in least),
            "flat with size",
            None not in least,
        ),
    ]


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
    heap = results["peak_heap_mb"]
    goal_rows = ["| measure | measured | goal | met |", "|---|---|---|---|"]
    goal_rows += [
        f"| {m} | {v} | {g} | {'yes' if ok else 'no'} |" for m, v, g, ok in goals(results)
    ]
    total = sum(seconds for _, seconds in results["profile"])
    profile = ["| from step | s | share |", "|---|---|---|"]
    profile += [
        f"| `{step}` | {seconds:.2f} | {seconds / total:.0%} |"
        for step, seconds in results["profile"]
    ]
    return "\n".join(
        [
            *rows,
            "",
            "- `ours new`: a new topic's first batch (tables created, every path new);"
            " `ours known`: a batch of a topic whose columns exist (the everyday case).",
            f"- 64x: {BIG_RUNS} run per path; the other sizes: median of {RUNS}.",
            f"- A run with no new files (64x already ingested): {results['no_new_files']:.2f} s.",
            "- Driver heap in use at its peak during a known batch in the 4 GiB session,"
            " 1x / 16x / 64x: " + " / ".join(f"{heap[s]:.0f}" for s in (1, 16, 64)) + " MiB."
            " The JVM fills the heap it is given before it collects, so this grows with the"
            " work; the goals below run each size in the least driver Spark starts with"
            f" ({LEAST_HEAP[:-1]} MiB) instead.",
            "- Chart: [ingestion_throughput.png](ingestion_throughput.png).",
            "",
            "Issue 22's goals:",
            "",
            *goal_rows,
            "",
            f"Where a known topic's batch at 16x spends its time ({total:.1f} s in all; each"
            " row runs from the named step of the protocol to the next):",
            "",
            *profile,
        ]
    )


SECTION = "## Raw ingestion"


def section(results: dict) -> str:
    """The whole docs/benchmarks.md section, heading and method included."""
    return (
        f"{SECTION}\n\n"
        "device_events from the sample generator at 1x, 4x, 16x and 64x; one local[2] "
        "session (4 GiB driver), warmed up. `ours new` is the whole raw model's work "
        "(`ingest_topic` into an empty schema: ledger, schema inference, one parse into "
        "staging, flatten, child table, quarantine, registry); `ours known` the same for a "
        "topic whose tables exist (an earlier, smaller batch, not timed); `bare` is "
        "`spark.read.json(files).write.parquet(out)`; `naive` explodes every leaf to "
        "key/value rows and pivots back with MAX(CASE WHEN) by event id and timestamp. "
        "Driver memory: one `ours known` run per size in a JVM of its own with "
        f"`spark.driver.memory={LEAST_HEAP}`, a cold start (JIT not warm).\n\n"
        "Command: `make bench` (or `.venv/bin/python bench/ingestion.py`, which rewrites "
        f"this section only). Measured {datetime.now(UTC):%Y-%m-%d}.\n\n" + report(results)
    )


def replace_section(document: str, text: str, heading: str = SECTION) -> str:
    """`document` with its section `heading` (up to the next `## `) replaced by `text`;
    `text` appended when the document has no such section yet."""
    if heading not in document:
        return document.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n"
    start = document.index(heading)
    end = document.find("\n## ", start + len(heading))
    rest = document[end:] if end != -1 else ""
    return document[:start] + text.rstrip("\n") + "\n" + rest


def write_section(text: str, heading: str = SECTION) -> None:
    """Print a benchmark's section and put it in docs/benchmarks.md in place of its
    last one (`python bench/<name>.py` reruns one benchmark)."""
    print(text)
    benchmarks = spark_conf.project_root() / "docs" / "benchmarks.md"
    benchmarks.write_text(replace_section(benchmarks.read_text(), text, heading))


def kept_results() -> dict:
    """The results the last `measure()` kept (results.json; `make bench` too), sizes as
    numbers again."""
    kept = json.loads((BENCH_DIR / "results.json").read_text())
    return {
        name: {int(k): v for k, v in value.items()} if isinstance(value, dict) else value
        for name, value in kept.items()
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["--least-heap"]:
        least_heap_run(Path(sys.argv[2]))
        sys.exit(0)
    if sys.argv[1:2] == ["--memory"]:  # the driver memory figures only, into the kept results
        measured = kept_results()
        least = {scale: in_least_heap(sample(BASE_EVENTS * scale)) for scale in SCALES}
        measured["least_heap"] = least
        (BENCH_DIR / "results.json").write_text(json.dumps(measured, indent=1))
    else:
        measured = measure()
    docs = spark_conf.project_root() / "docs"
    chart(measured, docs / "ingestion_throughput.png")
    write_section(section(measured))
