"""From raw rows to landing rows: typed, keyed, bucketed, with the raw batch they came from.

The upsert (dynamic_ddl.upsert) keeps the latest row per key; these
functions only shape the batch it receives.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dynamic_ddl.catalog import spark_sql
from dynamic_ddl.landing.batches import unseen_batches_filter
from dynamic_ddl.schema.event_time import event_timestamp_sql
from dynamic_ddl.schema.exact import text_column
from dynamic_ddl.sql_text import quoted_identifier

# Raw-only lineage: the landing row keeps `_batch_id`, `_source_file` and `_line_number`
# (a tie-break both an incremental run and a build from scratch see); the rest stays in
# raw (`_slot` differs between builds: compaction stamps its slots).
RAW_ONLY = (
    "_slot",
    "_raw_json",
    "_overflow",
    "_ingested_at",
    "_event_date",
)


def unseen_batches(
    spark: SparkSession, raw: DataFrame, raw_table: str, landing: str | None
) -> DataFrame:
    """The rows of `raw` (the table `raw_table`) of batches the landing table has not
    taken yet, and the raw ledger has committed (landing/batches.py).

    Reads only the raw partitions that may hold new batches (by `_slot`); every
    committed batch on the first build, when `landing` is None.
    """
    return raw.where(
        F.expr(unseen_batches_filter(spark_sql(spark), "_batch_id", landing, raw_table))
    )


def landing_rows(
    raw: DataFrame,
    key: str,
    event_time: str,
    buckets: int,
    event_time_format: str | None = None,
    delete_marker: str | None = None,
) -> DataFrame:
    """Raw rows as landing rows: event time typed, a `<key>_bucket` partition, raw-only
    lineage dropped, and a boolean `delete_marker` column (false where raw has none:
    a topic's first batches may not have sent the field yet).

    The event time is read as schema/event_time.py reads it; a value it cannot
    read gives NULL (its raw row keeps the text); a row without an event time
    loses to any row with one. The delete marker is read from its column and,
    where the column's type could not hold a value (a feed sending `1` for
    true), from its `__text` companion, which is then dropped: what a column of
    the union type gives a build from scratch.
    """
    marked = [] if delete_marker is None else [delete_marker, text_column(delete_marker)]
    kept = [c for c in raw.columns if c not in RAW_ONLY and c not in marked]
    typed = F.expr(event_timestamp_sql(quoted_identifier(event_time), event_time_format))
    marker = []
    if delete_marker is not None:
        # As exact_column reads a boolean: a number written as a double (`2.5`) through
        # a double, as the column of the union type (double or string) gives it.
        sent = [
            F.coalesce(
                F.col(c).try_cast("boolean"), F.col(c).try_cast("double").try_cast("boolean")
            )
            for c in marked
            if c in raw.columns
        ]
        marker = [F.coalesce(*sent, F.lit(False)).alias(delete_marker)]
    return raw.select(
        *[typed.alias(c) if c == event_time else F.col(c) for c in kept],
        *marker,
        F.pmod(F.xxhash64(key), F.lit(buckets)).cast("int").alias(f"{key}_bucket"),
    )
