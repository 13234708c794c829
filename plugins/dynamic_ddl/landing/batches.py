"""Which raw batches an incremental model has not taken yet, as a filter on `_batch_id`.

Batch ids sort in the order batches commit, so the new batches are those
after the greatest id the model has stored (upsert/increments.py finds it
without reading the model's whole table) and, when the model reads a raw or
child table, no later than the newest batch the raw ledger has committed: a
batch another run is still writing is left for the next run. As literals,
so Spark reads only the new `_batch_id` partitions of raw.
"""

from __future__ import annotations

from dynamic_ddl.catalog import Sql
from dynamic_ddl.ingest.bookkeeping import newest_committed_batch
from dynamic_ddl.sql_text import quoted_identifier, sql_literal
from dynamic_ddl.upsert.increments import greatest_value
from dynamic_ddl.upsert.spec import UpsertSpec


def unseen_batches_filter(
    sql: Sql, column: str, this: str | None, source: str | None, qualifier: str = ""
) -> str:
    """The filter on `source`'s `column` (prefixed with `qualifier`) for batches `this`
    (None on a first build) has not taken; `true` when nothing bounds them."""
    name = (f"{qualifier}." if qualifier else "") + quoted_identifier(column)
    terms = []
    if this is not None:
        seen = greatest_value(sql, UpsertSpec(this), column)
        if seen is not None:
            terms.append(f"{name} > {sql_literal(seen)}")
    if source is not None:
        known, newest = newest_committed_batch(sql, source)
        if known:
            terms.append("false" if newest is None else f"{name} <= {sql_literal(newest)}")
    return " and ".join(terms) or "true"
