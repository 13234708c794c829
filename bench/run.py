"""`make bench`: run every benchmark, print the figures, write docs/benchmarks.md."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import commit_age  # noqa: E402
import compaction  # noqa: E402
import global_key  # noqa: E402
import ingestion  # noqa: E402
import ledger_age  # noqa: E402
import model_overhead  # noqa: E402
import pivot  # noqa: E402
import repartition  # noqa: E402
import retention  # noqa: E402
import type_flip  # noqa: E402
import upsert  # noqa: E402

from dynamic_ddl.spark_conf import project_root  # noqa: E402


def machine() -> str:
    """One line about where the figures were measured."""
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{os.cpu_count()} cores, {memory_gb:.0f} GiB, Python {platform.python_version()}, "
        f"{java[0] if java else 'java ?'}, measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )


def main() -> None:
    sections = []
    started = time.monotonic()
    overhead = model_overhead.report(model_overhead.main())
    sections.append(
        "## Python model overhead\n\n"
        "A trivial Python model (`session.range(1)`) vs a trivial SQL model "
        "(`select 1`), each a table, both after a warm-up model in the same run; "
        "median of 4 runs after a warm-up run; times are "
        "dbt's own `execution_time` from `run_results.json`.\n\n"
        "Command: `make bench` (or `.venv/bin/python bench/model_overhead.py`).\n\n" + overhead
    )
    measured = ingestion.measure()
    ingestion.chart(measured, project_root() / "docs" / "ingestion_throughput.png")
    sections.append(ingestion.section(measured))
    sections.append(ledger_age.section(ledger_age.measure()))
    sections.append(type_flip.section(type_flip.measure()))
    sections.append(
        "## Upsert vs rebuild\n\n"
        "A batch into a table of 100 day partitions (1x) and 1,000 (10x), 100,000 rows "
        "each; the batch is written to Parquet first (untimed) so both sides read the "
        "same input; one local[2] session (4 GiB driver); median of 5 upserts after 3 "
        "untimed ones (JIT warm-up, as on a long-running server) and of 3 "
        "rebuilds (the 10x table, which no goal compares against, is not rebuilt). "
        "`upsert` is the whole commit (merge and "
        "write of the changed partitions in one job, log, swap, cleanup); "
        "`rebuild` recomputes the latest row per key over table + batch and writes "
        "the whole table.\n\n"
        "Command: `make bench` (or `.venv/bin/python bench/upsert.py`).\n\n"
        + upsert.report(upsert.measure())
    )
    session = upsert.session()
    try:
        keys_anywhere = global_key.report(global_key.measure(session))
    finally:
        session.stop()
    sections.append(
        "## What `global_key` costs\n\n"
        "A batch of 10,000 keys (one key per device, each in one day) into a table of "
        "100 day partitions, 1M rows (1x) and 10M rows (10x): keys looked up in the "
        "batch's partitions only, in every partition (`global_key`), and in every "
        "partition with a tenth of the batch moving to another day; median of 3 commits "
        "after 2 untimed ones; one local[2] session (4 GiB driver).\n\n"
        "Command: `make bench` (or `.venv/bin/python bench/global_key.py`).\n\n" + keys_anywhere
    )
    sections.append(
        "## Commit time as a table ages\n\n"
        "Commits of 10 keys into one of 20 day partitions of an upsert table, a different"
        " day each time; the median of 5 commits after the 10th, 100th, 250th, 500th and 1,000th"
        " (the log is compacted every 50 lines, old versions dropped at each commit).\n\n"
        "Command: `make bench` (or `.venv/bin/python bench/commit_age.py`).\n\n"
        + commit_age.report(commit_age.measure())
    )
    sections.append(retention.section(retention.measure()))
    sections.append(repartition.section(repartition.measure()))
    sections.append(compaction.section(compaction.measure()))
    sections.append(
        "## Pivot vs Spark's native PIVOT, and key discovery\n\n"
        "2,000,000 key/value rows (100,000 entities x 20 keys; 10,000 x 200) in Parquet; "
        "`ours` is the SQL `pivot_key_values` renders (keys given), `native` is "
        "`PIVOT (max(record_value) FOR record_key IN (...))` with the same keys; both "
        "into the no-op sink; one local[2] session (4 GiB driver); median of 3 runs "
        "after a warm-up. Discovery times the query `discover_pivot_keys` runs for a "
        "new batch of 200,000 rows (40 keys) under 10 and 100 earlier batches.\n\n"
        "Command: `make bench` (or `.venv/bin/python bench/pivot.py`).\n\n"
        + pivot.report(pivot.measure())
    )
    text = (
        "# Benchmarks\n\nWritten by `make bench`. "
        + machine()
        + ".\nA section rerun alone (`.venv/bin/python bench/<name>.py`) gives its own date."
        + "\n\n"
        + "\n\n".join(sections)
        + "\n"
    )
    (project_root() / "docs" / "benchmarks.md").write_text(text)
    print(text)
    print(f"(benchmarks took {time.monotonic() - started:.0f} s; written to docs/benchmarks.md)")


if __name__ == "__main__":
    main()
