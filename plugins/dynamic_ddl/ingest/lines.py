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
    Splitting on one plain character, then trimming `\\r` per line, is about
    twice as fast as splitting the whole file with a regular expression.
    """
    whole = spark.read.text(files, wholetext=True)  # the argument; .option() is overridden
    pieces = whole.select(
        F.col("_metadata.file_path").alias("_source_file"), F.split("value", "\n").alias("pieces")
    )
    numbered = pieces.select(
        "_source_file",
        F.size("pieces").alias("count"),
        F.posexplode("pieces").alias("position", "line"),
    )
    after_last_newline = (F.col("position") == F.col("count") - 1) & (F.col("line") == "")
    return numbered.where(~after_last_newline).select(
        "_source_file",
        (F.col("position") + 1).cast("bigint").alias("_line_number"),
        F.regexp_replace("line", "\r$", "").alias("line"),
    )


def decoded(line: Column) -> Column:
    """The line as Java decodes it (invalid UTF-8 becomes U+FFFD), the way `split` sees it.

    `spark.read.text` keeps a line's bytes as they are, while the split in
    read_lines decodes them; joining on the decoded text on both sides
    matches a line with invalid bytes to its number.
    """
    return F.regexp_replace(line, r"\r$", "")


def number_rejected_lines(
    spark: SparkSession, rejected: DataFrame, files: list[str], small: bool = False
) -> DataFrame:
    """Rejected (_source_file, line, ...) rows with their _line_number.

    `files` are the files that hold rejected lines (only they are read again);
    `small` says the rejected lines are few enough to send to every task.

    A line's verdict depends only on its text, so every line of a file with
    the text of a rejected line is itself rejected: joining the distinct
    rejected texts back to the numbered lines yields each rejected line once.
    The exact bytes come from the rejected side (two lines that differ only
    in their invalid bytes would share one of them).
    """
    if not files:
        return rejected.withColumn("_line_number", F.lit(None).cast("bigint"))
    verdicts = rejected.withColumn("_key", decoded(F.col("line"))).dropDuplicates(
        ["_source_file", "_key"]
    )
    numbered = read_lines(spark, files).select(
        "_source_file", "_line_number", F.col("line").alias("_key")
    )
    if small:
        verdicts = F.broadcast(verdicts)  # no shuffle of every line of the files
    return numbered.join(verdicts, ["_source_file", "_key"]).drop("_key")
