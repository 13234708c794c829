{#
    A filter for the raw batches an incremental model has not taken yet:
    `<column> > '<newest batch id in this>'`, and, when `source` is a raw or
    child table, `<column> <= '<newest batch its ledger committed>'` (a batch
    another run is still writing waits for the next run). Literals, and on a
    raw or child table `_slot > '<newest>'` too, so Spark reads only the raw
    partitions that may hold new batches (batch ids sort in commit order; a
    row's slot is never below its batch id, compacted or not). The newest id in this is found from this model's last upsert
    commit, without reading its whole table (dynamic_ddl/landing/batches.py).
    Only the ledger bound on a full build; `true` without `execute` (parse, lint).

    Example:
        select * from {{ ref('raw_app_attributes') }}
        where {{ unseen_batches(source=ref('raw_app_attributes')) }}

    Arguments:
        column: the batch id column, in raw and in this model, default `_batch_id`
        source: the raw or child table read (a ref or source), optional
#}
{% macro unseen_batches(column='_batch_id', source=none) -%}
    {%- if not execute -%}
        {{ return('true') }}
    {%- endif -%}
    {{ return(adapter.unseen_batches_filter(column, this if is_incremental() else none, source)) }}
{%- endmacro %}
