"""A batch parsed once, into its staging Parquet, which every later write reads."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import reduce

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from dynamic_ddl.ingest.ledger import InboxFile
from dynamic_ddl.ingest.parse import (
    DISCARD_ROW_REASON,
    REJECT_REASON,
    grown_since_scan,
    parse_lines,
    read_text_lines,
)
from dynamic_ddl.ingest.planning import value_checks
from dynamic_ddl.ingest.settings import IngestSettings
from dynamic_ddl.ingest.tables import database_location
from dynamic_ddl.schema.naming import JsonPath
from dynamic_ddl.sql_text import glob_escaped


def staging_location(spark: SparkSession, table: str) -> str:
    """Where a raw table's batch is staged: `<database location>/_staging/<table>`."""
    schema, name = table.split(".")
    return f"{database_location(spark, schema)}/_staging/{name}"


def stage_batch(
    spark: SparkSession,
    settings: IngestSettings,
    files: list[InboxFile],
    links: list[str],
    source: StructType,
    location: str,
    candidates: set[JsonPath],
    misfits: Sequence[tuple[JsonPath, Column]],
    discards: Sequence[tuple[str, Column]] = (),
    rewrite: Callable[[Column], Column] | None = None,
) -> tuple[DataFrame, LineCounts, dict[JsonPath, int], dict[JsonPath, int]]:
    """Parse the batch's lines once, with `source`, into its staging Parquet at `location`.

    Returns the staged lines (`read_text_lines`' columns, `_record`,
    `_reject_reason`), their counts, for each of the `candidates` (new
    paths) the number of accepted records holding a value there, and per
    path of `misfits` (planning.misfit_checks for paths parsed as text,
    planning.time_misfit_checks for new paths that may be times) the number
    holding a value that does not fit. `discards`
    (planning.row_discards) reject the records they hold for, counted per
    what they object to in the counts; `rewrite` changes each record first
    (parse_lines). Reading Parquet back is
    far cheaper than parsing JSON again, and every later pass reads it; a
    rerun of the batch overwrites it.
    """
    counts, valued = Observation(), Observation()
    # Files the scan found cut mid-line, whose line may have been finished since: those
    # that grew (one aggregate each, so not every file that lacks a final line end).
    cut = [f for f in files if f.cut_bytes and f.path in grown_since_scan([f])]
    lines = read_text_lines(spark, links, files)
    discard = reduce(operator.or_, [check for _, check in discards]) if discards else None
    parsed = parse_lines(lines, source, settings.limits, counts, discard, rewrite)
    checks = value_checks(source, candidates)
    accepted = F.col(REJECT_REASON).isNull()
    discarded = F.col(REJECT_REASON) == DISCARD_ROW_REASON
    parsed = parsed.observe(
        valued,
        F.lit(0).alias("none"),  # an observation needs a metric, even with no candidates
        *[F.count_if(accepted & check).alias(f"path{i}") for i, (_, check) in enumerate(checks)],
        *[F.count_if(accepted & check).alias(f"misfit{i}") for i, (_, check) in enumerate(misfits)],
        *[F.count_if(discarded & c).alias(f"discard{i}") for i, (_, c) in enumerate(discards)],
        *[last_line_bytes(f.path).alias(f"cut{i}") for i, f in enumerate(cut)],
    )
    if not settings.topic.keep_raw_json:
        # The inbox keeps the text: staged only for the lines quarantine shows.
        parsed = parsed.withColumn("line", F.when(~accepted, F.col("line")))
    # Staged lines are read once or twice, then deleted: no dictionaries, which
    # for text and ids are built only to be dropped (about 15% of the write).
    parsed.write.mode("overwrite").option("parquet.enable.dictionary", "false").parquet(location)
    metrics = valued.get
    carried = {path: metrics[f"path{i}"] for i, (path, _) in enumerate(checks)}
    misfit = {path: metrics[f"misfit{i}"] for i, (path, _) in enumerate(misfits)}
    by_discard = {what: metrics[f"discard{i}"] for i, (what, _) in enumerate(discards)}
    read = {f.path: metrics[f"cut{i}"] for i, f in enumerate(cut)}
    line_counts = replace(
        LineCounts.observed(counts), discarded_rows=by_discard, last_line_bytes=read
    )
    # With its schema: no Spark job to read it back from the files' footers.
    staged = spark.read.schema(parsed.schema).parquet(glob_escaped(location))
    return staged, line_counts, carried, misfit


def cut_lines_unmeasured(files: Sequence[InboxFile], counts: LineCounts) -> list[str]:
    """The files the scan found cut mid-line that grew since, whose last line the
    staging did not measure (they grew after it looked): Spark may have read that line
    finished, which the ledger entry would not know, and the next run would take the
    line again (found by review). Staged again, they are measured."""
    measured = counts.last_line_bytes
    return [
        f.path
        for f in files
        if f.cut_bytes and f.path not in measured and f.path in grown_since_scan([f])
    ]


def last_line_bytes(path: str) -> Column:
    """An aggregate: the bytes of the last line read of the file `path` (last by piece,
    then row), NULL when none was read."""
    of_file = F.col("_source_file") == F.lit(path)
    return F.max_by(
        F.when(of_file, F.octet_length("line")),
        F.when(of_file, F.struct("_split_start", "_row_id")),
    )


@dataclass(frozen=True)
class LineCounts:
    """How the lines of a batch were judged, as observed while writing them."""

    accepted: int
    rejected: int
    # Of the rejected, per what a `discard_row` path objects to: the records that bring it.
    discarded_rows: dict[str, int] = field(default_factory=dict)
    # Per file the scan found cut mid-line: the bytes of its last line as Spark read it.
    last_line_bytes: dict[str, int | None] = field(default_factory=dict)

    @classmethod
    def observed(cls, observation: Observation) -> LineCounts:
        """The counts an observation passed to `parse_lines` collected."""
        metrics = observation.get
        return cls(metrics["accepted"], metrics["rejected"])
