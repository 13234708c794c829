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

    The key, the event time and the delete marker are each read from their
    column and, where the column's type could not hold a value (a feed sending
    `"SN-1"` where the first batch sent numbers), from its `__text` companion,
    which is then dropped: what the column of the union type gives a build from
    scratch. The key is text (`1` is "1"), whatever type raw gave it, so its
    type never depends on which batch came first. The event time is read as
    schema/event_time.py reads it; a value it cannot read gives NULL (its raw
    row keeps the text); a row without an event time loses to any row with one.
    Other columns pass through with their companions: read them as
    `exact_column` reads raw. A row without a key stays in raw only, as in the SQL
    landing models: upserted, every such row became one row with a NULL key, which
    the key's not_null test failed at every build from then on (found by review).
    """
    marked = [] if delete_marker is None else [delete_marker, text_column(delete_marker)]
    key_text = F.expr(_as_text_sql(raw, key))
    read = {
        key: key_text,
        event_time: F.expr(event_timestamp_sql(_as_text_sql(raw, event_time), event_time_format)),
    }
    folded = {text_column(key), text_column(event_time), *marked}
    kept = [c for c in raw.columns if c not in RAW_ONLY and c not in folded]
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
    return raw.where(key_text.isNotNull()).select(
        *[read[c].alias(c) if c in read else F.col(c) for c in kept],
        *marker,
        F.pmod(F.xxhash64(key_text), F.lit(buckets)).cast("int").alias(f"{key}_bucket"),
    )


def _as_text_sql(raw: DataFrame, column: str) -> str:
    """SQL for a raw column and its `__text` companion as one text: the column's value
    as a string, else the companion's text (NULL when raw has neither yet)."""
    present = [c for c in (column, text_column(column)) if c in raw.columns]
    texts = [f"cast({quoted_identifier(c)} as string)" for c in present]
    return f"coalesce({', '.join(texts)})" if texts else "cast(null as string)"
