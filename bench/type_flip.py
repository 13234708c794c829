"""What a type flip costs as a raw table grows (issue 23: "no longer grows with the table").

A raw table of device_events at 1x (100,000 events) and 10x (1,000,000),
then batches of BATCH_EVENTS events: `normal` as the sample sends them,
`flip` with `_data.device.battery.level_pct` (a bigint column) sent as text
("n/a") and as 2.5 in alternate events, so every batch of it conflicts with
the column. Each batch is its own file in an inbox of its own (the table,
ledger and registry are shared), median of RUNS after WARMUP. A flip writes
the batch's partitions and the `__text` companion only; before issue 23 it
rewrote the whole table, so its cost grew with the table.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from pathlib import Path

import ingestion  # bench/ingestion.py: samples and the session

from dynamic_ddl.ingest.job import ingest_topic

SIZES = {"1x": 100_000, "10x": 1_000_000}
BATCH_EVENTS = 1_000
WARMUP = 2  # the first batches of a session also warm the JVM up
RUNS = 3
SCHEMA = "bench_flip"
SECTION = "## A type flip as a raw table grows"


def _config(inbox: Path) -> dict:
    return {**ingestion.TOPIC, "inbox_dir": str(inbox), "schema": SCHEMA, "table": "raw_events"}


def batch_lines(flip: bool) -> list[str]:
    """BATCH_EVENTS sample events (valid lines only); with `flip`, the level as text or 2.5."""
    lines = []
    for path in ingestion.files_of(ingestion.sample(BATCH_EVENTS)):
        for line in Path(path).read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            if flip:
                battery = event["_data"]["device"]["battery"]
                battery["level_pct"] = "n/a" if len(lines) % 2 else 2.5
            lines.append(json.dumps(event))
    return lines


def timed_batch(spark, inbox: Path, name: str, lines: list[str]) -> float:
    """Write one batch file into `inbox` and time the raw model that ingests it."""
    folder = inbox / "device_events" / "dt=2026-12-01"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    (summary,) = ingest_topic(spark, _config(inbox)).collect()
    elapsed = time.monotonic() - started
    assert summary.raw_rows == len(lines), summary
    return elapsed


def measure() -> dict:
    spark = ingestion.session()
    batches = {"normal": batch_lines(False), "flip": batch_lines(True)}
    results: dict = {}
    try:
        for scale, events in SIZES.items():
            spark.sql(f"drop schema if exists {SCHEMA} cascade")
            spark.sql(f"create schema {SCHEMA}")
            ingest_topic(spark, _config(ingestion.sample(events)))  # the table: not timed
            column = spark.table(f"{SCHEMA}.raw_events").schema["data_device_battery_level_pct"]
            assert column.dataType.simpleString() == "bigint", column
            results[(scale, "rows")] = spark.table(f"{SCHEMA}.raw_events").count()
            inbox = ingestion.BENCH_DIR / "flip-inbox"
            shutil.rmtree(inbox, ignore_errors=True)
            for kind, lines in batches.items():
                times = [
                    timed_batch(spark, inbox, f"{kind}-{run}", lines)
                    for run in range(WARMUP + RUNS)
                ]
                results[(scale, kind)] = statistics.median(times[WARMUP:])
                print(scale, kind, results[(scale, kind)], flush=True)
            kept = spark.table(f"{SCHEMA}.raw_events").where(
                "data_device_battery_level_pct__text is not null"
            )
            assert kept.count() == (WARMUP + RUNS) * len(batches["flip"])  # none rounded or lost
    finally:
        spark.stop()
    return results


def report(results: dict) -> str:
    lines = [
        "| table | rows | normal batch s | flip batch s | flip ÷ normal |",
        "|---|---|---|---|---|",
    ]
    for scale in SIZES:
        normal, flip = results[(scale, "normal")], results[(scale, "flip")]
        rows = results[(scale, "rows")]
        lines.append(f"| {scale} | {rows:,} | {normal:.2f} | {flip:.2f} | {flip / normal:.2f} |")
    growth = results[("10x", "flip")] / results[("1x", "flip")]
    verdict = "met" if growth <= 1.2 else "NOT met"
    lines.append("")
    lines.append(f"A flip at 10x ÷ a flip at 1x: **{growth:.2f}** (goal <= 1.2: {verdict}).")
    return "\n".join(lines)


def section(results: dict) -> str:
    return (
        f"{SECTION}\n\n"
        f"A raw device_events table of 100,000 events (1x) and 1,000,000 (10x), then "
        f"batches of {BATCH_EVENTS:,} events, each a file of its own: `normal` as the "
        "sample sends them, `flip` with the bigint column `data_device_battery_level_pct` "
        "sent as text and as 2.5 (every value goes to its `__text` companion); the whole "
        f"raw model per batch, median of {RUNS} after {WARMUP} untimed; one local[2] "
        "session (4 GiB driver). Before issue 23 a flip rewrote the whole table.\n\n"
        "Command: `make bench` (or `.venv/bin/python bench/type_flip.py`, which rewrites "
        "this section only).\n\n" + report(results)
    )


if __name__ == "__main__":
    ingestion.write_section(section(measure()), SECTION)
