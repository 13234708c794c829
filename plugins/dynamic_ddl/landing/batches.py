"""Which raw batches an incremental model has not taken yet, as a filter on `_batch_id`.

Batch ids sort in the order batches commit, so the new batches are those
after the greatest id the model has stored (upsert/increments.py finds it
without reading the model's whole table) and, when the model reads a raw or
child table, no later than the newest batch the raw ledger has committed: a
batch another run is still writing is left for the next run. As literals;
on `_batch_id` of a raw or child table, the lower bound on `_slot` too, so
Spark reads only the partitions that may hold new batches (a row's slot is
never below its batch id: ingest/compaction.py).
"""

from __future__ import annotations

from dynamic_ddl.catalog import Sql, table_columns
from dynamic_ddl.ingest.bookkeeping import newest_committed_batch
from dynamic_ddl.ingest.raw_rows import BATCH_ID_COLUMN, SLOT_COLUMN
from dynamic_ddl.sql_text import quoted_identifier, sql_literal
from dynamic_ddl.upsert.increments import greatest_value
from dynamic_ddl.upsert.spec import UpsertSpec


def unseen_batches_filter(
    sql: Sql, column: str, this: str | None, source: str | None, qualifier: str = ""
) -> str:
    """The filter on `source`'s `column` (prefixed with `qualifier`) for batches `this`
    (None on a first build) has not taken; `true` when nothing bounds them."""
    prefix = f"{qualifier}." if qualifier else ""
    names = [prefix + quoted_identifier(column)]
    seen = greatest_value(sql, UpsertSpec(this), column) if this is not None else None
    known, newest = newest_committed_batch(sql, source) if source is not None else (False, None)
    if known and column == BATCH_ID_COLUMN and SLOT_COLUMN in dict(table_columns(sql, source)):
        names.append(prefix + quoted_identifier(SLOT_COLUMN))
    terms = [f"{name} > {sql_literal(seen)}" for name in names if seen is not None]
    if known:
        terms.append("false" if newest is None else f"{names[0]} <= {sql_literal(newest)}")
    return " and ".join(terms) or "true"
