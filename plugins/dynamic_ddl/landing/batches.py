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

from dynamic_ddl.catalog import (
    RETIRED_SUFFIX,
    Sql,
    read_settled,
    schema_exists,
    table_columns,
    table_exists,
)
from dynamic_ddl.ingest.bookkeeping import BookkeepingTables, newest_committed_batch
from dynamic_ddl.ingest.raw_rows import BATCH_ID_COLUMN, SLOT_COLUMN
from dynamic_ddl.sql_text import quoted_identifier, rows_predicate, sql_literal
from dynamic_ddl.upsert.increments import greatest_value
from dynamic_ddl.upsert.spec import UpsertSpec


def unseen_batches_filter(
    sql: Sql, column: str, this: str | None, source: str | None, qualifier: str = ""
) -> str:
    """The filter on `source`'s `column` (prefixed with `qualifier`) for batches `this`
    (None on a first build) has not taken; `true` when nothing bounds them."""
    return unseen_batch_filters(sql, column, this, source, qualifier=qualifier)["unseen"]


def unseen_batch_filters(
    sql: Sql,
    column: str,
    this: str | None,
    source: str | None,
    day_column: str | None = None,
    qualifier: str = "",
) -> dict[str, str]:
    """Filters on `source`'s rows (columns prefixed with `qualifier`), from one reading
    of the ledger so that they agree:

    - `unseen`: the batches `this` (None on a first build) has not taken;
    - `committed`: every batch the ledger has committed, taken or not;
    - `days`: with `day_column`, the days (partitions) the unseen batches hold rows
      on, as literals (`true` on a first build): for a model that recomputes every
      key an unseen batch touches from all of its rows (those days alone are read).
    """
    if source is not None:
        refuse_a_hidden_table(sql, source)
    seen = greatest_value(sql, UpsertSpec(this), column) if this is not None else None
    known, newest = newest_committed_batch(sql, source) if source is not None else (False, None)
    bounded = [column]
    if known and column == BATCH_ID_COLUMN and SLOT_COLUMN in dict(table_columns(sql, source)):
        bounded.append(SLOT_COLUMN)

    def bounds(prefix: str) -> tuple[str, str]:
        names = [prefix + quoted_identifier(name) for name in bounded]
        committed = []
        if known:
            committed.append("false" if newest is None else f"{names[0]} <= {sql_literal(newest)}")
        unseen = [f"{name} > {sql_literal(seen)}" for name in names if seen is not None]
        return " and ".join(unseen + committed) or "true", " and ".join(committed) or "true"

    unseen, committed = bounds(f"{qualifier}." if qualifier else "")
    filters = {"unseen": unseen, "committed": committed}
    if day_column is not None:
        filters["days"] = "true"
        if this is not None:
            day = quoted_identifier(day_column)
            days = sql(f"select distinct {day} from {source} where {bounds('')[0]}")
            filters["days"] = rows_predicate([day_column], [tuple(row) for row in days], qualifier)
    return filters


def refuse_a_hidden_table(sql: Sql, table: str) -> None:
    """Raise ValueError naming the model to run when `table` (`schema.name`) is gone from
    its name with its rows under the retired name: a run killed between a swap's two
    renames (a raw table's compaction or layout migration, an upsert table's
    repartition) leaves it so until the table's writer runs again (found by review: a
    landing model run alone failed on "table not found", naming no fix)."""
    schema, name = table.split(".")
    if not schema_exists(sql, schema):  # nothing built yet (dbt compile, a first build)
        return
    if table_exists(sql, table) or not table_exists(sql, table + RETIRED_SUFFIX):
        return
    registry = BookkeepingTables.in_schema(schema).registry
    topics = []
    if table_exists(sql, registry):
        query = f"select distinct topic from {registry} where table_name = {sql_literal(name)}"
        topics = [row[0] for row in read_settled(sql, registry, query)]
    # A raw or child table's writer is its topic's raw model; any other, its own model.
    models = " ".join(f"raw_{topic}" for topic in sorted(topics)) or name
    raise ValueError(
        f"{table} is hidden: a run killed between the two renames of a compaction,"
        f" layout change or repartition left its rows under {table}{RETIRED_SUFFIX}, and"
        f" the next run of its model puts it back first thing. Run it (dbt run -s"
        f" {models}), then this model."
    )
