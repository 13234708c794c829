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


{#
    For a model that recomputes every key an unseen batch touches from all of
    that key's rows (a pivot whose groups span batches): three filters on a
    raw or child table's rows, from one reading of its ledger, so that they
    agree:
    - `unseen`: the batches this model has not taken (as unseen_batches);
    - `committed`: every batch the ledger has committed, taken or not;
    - `days`: the days (`day_column` partitions) the unseen batches hold rows
      on, as literals, so only those days are read for the keys' older rows
      (`true` on a full build).
    Each is `true` without `execute` (parse, lint).

    Example:
        {% set batches = unseen_batch_filters(ref('raw_app_attributes')) %}
        ... where {{ batches.committed }} and {{ batches.days }}

    Arguments:
        source: the raw or child table read (a ref or source), required
        day_column: its day partition column, default `_event_date`
        column: the batch id column, default `_batch_id`
#}
{% macro unseen_batch_filters(source, day_column='_event_date', column='_batch_id') -%}
    {%- if not execute -%}
        {{ return({'unseen': 'true', 'committed': 'true', 'days': 'true'}) }}
    {%- endif -%}
    {{ return(adapter.unseen_batch_filters(column, this if is_incremental() else none, source, day_column)) }}
{%- endmacro %}
