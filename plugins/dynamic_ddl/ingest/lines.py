"""A batch of JSON-lines files as numbered lines, each parsed once or given a reason.

Files are read whole (`wholetext`), so every line keeps its file and exact
line number, gzip included; a file is the unit of parallelism (the sample
generator writes at most 50,000 lines per file). Nothing is dropped: a line
either parses into an object or carries the reason it goes to quarantine.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

REPLACEMENT_CHAR = "\ufffd"  # what the UTF-8 decoder puts where bytes were invalid


@dataclass(frozen=True)
class LineLimits:
    """Lines longer than `max_line_bytes` are quarantined before parsing."""

    max_line_bytes: int = 1_000_000


def read_lines(spark: SparkSession, files: list[str]) -> DataFrame:
    """One row per input line: _source_file, _line_number (1-based), line.

    A trailing newline ends the last line rather than starting an empty one;
    Windows line endings lose their carriage return.
    """
    whole = spark.read.text(files, wholetext=True)  # the argument; .option() is overridden
    return (
        whole.select(
            F.col("_metadata.file_path").alias("_source_file"),
            F.posexplode(F.split(F.regexp_replace("value", r"\r?\n\z", ""), r"\r?\n")).alias(
                "position", "line"
            ),
        )
        .withColumn("_line_number", (F.col("position") + 1).cast("bigint"))
        .select("_source_file", "_line_number", "line")
    )


def rejection_reason(line: Column, variant: Column, limits: LineLimits) -> Column:
    """Why a line cannot become a raw row, or NULL when it can."""
    return (
        F.when(F.octet_length(line) > limits.max_line_bytes, F.lit("line_too_long"))
        .when(F.contains(line, F.lit(REPLACEMENT_CHAR)), F.lit("invalid_utf8"))
        .when(F.trim(line) == "", F.lit("empty_line"))
        .when(variant.isNull(), F.lit("unparseable_json"))
        .when(~F.startswith(F.schema_of_variant(variant), F.lit("OBJECT")), F.lit("not_an_object"))
    )


def classify_lines(lines: DataFrame, limits: LineLimits = LineLimits()) -> DataFrame:
    """Parse each line once: adds `_variant` (NULL when rejected) and `_reject_reason`.

    Over-long lines are not parsed at all.
    """
    too_long = F.octet_length("line") > limits.max_line_bytes
    parsed = lines.withColumn("_variant", F.when(~too_long, F.try_parse_json("line")))
    reason = rejection_reason(F.col("line"), F.col("_variant"), limits)
    return parsed.withColumn("_reject_reason", reason).withColumn(
        "_variant", F.when(F.col("_reject_reason").isNull(), F.col("_variant"))
    )
