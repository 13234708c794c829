"""A raw model's small batch as its topic's ledger ages: after 0, 1,000 and 4,000 batches.

The ledger keeps a partition per batch, one small file each. Four thousand
batches are two weeks of five-minute batches. The earlier batches are written
as a raw model leaves them, in one insert: one committed entry per batch, for a
file gone from the inbox since. Each timed run ingests a new copy of the
1,000-event sample: new names, and a line of its own, so no copy is taken for a
rename of the one before. Reading the ledger is timed alone too (`read_ledger`,
once per run of the raw model). The first run after the earlier batches are
written moves them to the ledger's archive (bookkeeping.archive_ledger): it is
timed apart, the runs after it are the steady state.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])

from ingestion import (  # noqa: E402
    BENCH_DIR,
    SETUP_EVENTS,
    _config,
    _fresh_schema,
    sample,
    session,
    write_section,
)

from dynamic_ddl.ingest import bookkeeping  # noqa: E402
from dynamic_ddl.ingest.bookkeeping import BookkeepingTables, read_ledger  # noqa: E402
from dynamic_ddl.ingest.job import ingest_topic  # noqa: E402

AGES = (0, 1_000, 4_000)
RUNS = 3
SMALL_BATCH_EVENTS = 1_000
TABLES = BookkeepingTables.in_schema("bench_raw")
LEDGER = TABLES.ledger
TOPIC = "device_events"
SECTION = "## A batch as the ledger ages"


def add_history(spark: SparkSession, start: int, end: int) -> None:
    """Batches start..end-1 in the ledger: one committed entry each, of a file now gone."""
    number = F.lpad(F.col("id").cast("string"), 8, "0")
    history = spark.range(start, end).select(
        F.concat(F.lit("/gone/events-"), number, F.lit(".json")).alias("path"),
        F.lit(40_000).alias("size_bytes"),
        F.lit(1.7e9).alias("modified_at"),
        F.sha2(number, 256).alias("checksum"),
        F.lit(100).alias("line_count"),
        F.concat(F.lit("20260101T000000Z-"), number).alias("batch_id"),
        F.lit("committed").alias("state"),
        F.current_timestamp().alias("recorded_at"),
        F.lit(1).alias("first_line"),
        F.lit(TOPIC).alias("topic"),
    )
    target = spark.table(LEDGER).schema
    history.select(*[F.col(f.name).cast(f.dataType) for f in target.fields]).write.insertInto(
        LEDGER
    )


def new_copy(source: Path, inbox: Path, name: str) -> None:
    """`inbox` holding the sample's files under new names, each with a line of its own."""
    shutil.rmtree(inbox, ignore_errors=True)
    shutil.copytree(source / TOPIC, inbox / TOPIC)
    for path in sorted((inbox / TOPIC).rglob("*.json")):
        renamed = path.with_name(f"{name}-{path.name}")
        path.rename(renamed)
        with renamed.open("a") as file:
            file.write(json.dumps({"_data": {"event": {"id": renamed.name}}}) + "\n")


def measure() -> dict:
    """Per age: the seconds of the first batch (which archives the earlier ones), the
    median batch seconds after it and the median `read_ledger` seconds."""
    spark = session()
    inbox = BENCH_DIR / "inbox-aging"
    try:
        _fresh_schema(spark)
        ingest_topic(spark, _config(sample(SETUP_EVENTS)))  # the tables, the ledger
        results: dict = {"first": {}, "batch": {}, "read": {}}
        had = 0
        for age in AGES:
            add_history(spark, had, age)
            had = age
            batches, reads = [], []
            for run in range(RUNS + 1):  # the first one warms up
                new_copy(sample(SMALL_BATCH_EVENTS), inbox, f"age{age}-run{run}")
                started = time.monotonic()
                ingest_topic(spark, _config(inbox))
                batches.append(time.monotonic() - started)
                started = time.monotonic()
                read_ledger(spark, TABLES, TOPIC)
                reads.append(time.monotonic() - started)
            results["first"][age] = batches[0]
            results["batch"][age] = statistics.median(batches[1:])
            results["read"][age] = statistics.median(reads[1:])
            print(
                f"after {age:,} batches: the first batch {batches[0]:.2f} s, then"
                f" {results['batch'][age]:.2f} s,"
                f" reading the ledger {results['read'][age]:.2f} s",
                flush=True,
            )
        # The steady state's archiving run: once every ARCHIVE_AFTER batches.
        add_history(spark, had, had + bookkeeping.ARCHIVE_AFTER)
        new_copy(sample(SMALL_BATCH_EVENTS), inbox, "archiving")
        started = time.monotonic()
        ingest_topic(spark, _config(inbox))
        results["archiving"] = time.monotonic() - started
        print(
            f"a batch that archives {bookkeeping.ARCHIVE_AFTER} more: {results['archiving']:.2f} s"
        )
        return results
    finally:
        spark.stop()


def section(results: dict) -> str:
    """The docs/benchmarks.md section."""
    young, old = results["batch"][AGES[0]], results["batch"][AGES[-1]]
    rows = [
        f"| {age:,} | {results['first'][age]:.2f} | {results['batch'][age]:.2f}"
        f" | {results['read'][age]:.2f} |"
        for age in AGES
    ]
    return "\n".join(
        [
            SECTION,
            "",
            "A known topic's batch of 1,000 events (the whole raw model) after 0, 1,000 and"
            " 4,000 earlier batches in the ledger (a partition and a file each, as raw models"
            " leave them; 4,000 is two weeks of five-minute batches; besides the bench's own"
            " setup batches); one local[2] session (4 GiB driver). The first batch after"
            " them moves them to the ledger's archive (once a topic keeps more than"
            f" {bookkeeping.ARCHIVE_AFTER} batch partitions: none at 0); the"
            " batches after it are the median of 3. `read_ledger`, which every run"
            " of a raw model does once, is timed alone too (median of 3).",
            "",
            "Command: `make bench` (or `.venv/bin/python bench/ledger_age.py`, which rewrites"
            " this section only).",
            "",
            "| batches before | first batch s | batch s | reading the ledger s |",
            "|---|---|---|---|",
            *rows,
            "",
            f"- After {AGES[1]:,} and {AGES[-1]:,} batches a batch takes"
            f" {results['batch'][AGES[1]]:.2f} s and {old:.2f} s: flat with the ledger's age."
            " Before the archive the same rows were 7.72 s and 16.56 s, 3.0 ms more for"
            ' every earlier batch (docs/decisions/0005, "A batch as the ledger ages"). The'
            f" first row ({young:.2f} s) is the first timed, in a JVM still warming up.",
            "- Its runs read a ledger of a few batch partitions; a topic's cycles between 1"
            f" and {bookkeeping.ARCHIVE_AFTER + 1}, 3 ms a partition.",
            f"- The first batch after {AGES[1]:,} or {AGES[-1]:,} batches moves them all,"
            " reading, rewriting and dropping a partition each: a one-time cost,"
            " for a topic whose ledger grew before the archive existed. After that a run"
            f" archives every {bookkeeping.ARCHIVE_AFTER} batches or so: such a batch (the"
            f" {bookkeeping.ARCHIVE_AFTER} earlier ones moved) took"
            f" {results['archiving']:.2f} s.",
            "- The rows compare with each other: the machine's speed varies over a day, and"
            " the raw ingestion section's small batch was measured at another time.",
        ]
    )


if __name__ == "__main__":
    write_section(section(measure()), SECTION)
