"""Input lines with their exact line numbers, for the few lines that go to quarantine.

The main read (parse.py) takes lines with `spark.read.text`, which is fast
but numbers nothing. Quarantine rows need a line number, so the files that
hold rejected lines are read again whole (`wholetext`) and split here: no
JSON is parsed, and files with no rejected line are not read again.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F


def read_lines(spark: SparkSession, files: list[str]) -> DataFrame:
    """One row per input line: _source_file, _line_number (1-based), line.

    Splits the way `spark.read.text` does: a trailing newline ends the last
    line rather than starting an empty one; `\\r\\n` counts as one newline.
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


def decoded(line: Column) -> Column:
    """The line as Java decodes it (invalid UTF-8 becomes U+FFFD), the way `split` sees it.

    `spark.read.text` keeps a line's bytes as they are, while the split in
    read_lines decodes them; joining on the decoded text on both sides
    matches a line with invalid bytes to its number.
    """
    return F.regexp_replace(line, r"\r$", "")


def number_rejected_lines(spark: SparkSession, rejected: DataFrame) -> DataFrame:
    """Rejected (_source_file, line, ...) rows with their _line_number.

    A line's verdict depends only on its text, so every line of a file with
    the text of a rejected line is itself rejected: joining the distinct
    rejected texts back to the numbered lines yields each rejected line once.
    The exact bytes come from the rejected side (two lines that differ only
    in their invalid bytes would share one of them).
    """
    files = [row[0] for row in rejected.select("_source_file").distinct().collect()]
    if not files:
        return rejected.withColumn("_line_number", F.lit(None).cast("bigint"))
    verdicts = rejected.withColumn("_key", decoded(F.col("line"))).dropDuplicates(
        ["_source_file", "_key"]
    )
    numbered = read_lines(spark, files).select(
        "_source_file", "_line_number", F.col("line").alias("_key")
    )
    return numbered.join(verdicts, ["_source_file", "_key"]).drop("_key")
