{#
    A filter for the raw batches an incremental model has not taken yet:
    `<column> > '<newest batch id in this>'` as a literal, so Spark reads only
    the new `_batch_id` partitions of raw (batch ids sort in time order).
    `true` on a full build, and without `execute` (parse, lint).

    Example:
        select * from {{ ref('raw_app_attributes') }}
        where {{ unseen_batches() }}

    Arguments:
        column: the batch id column, in raw and in this model, default `_batch_id`
#}
{% macro unseen_batches(column='_batch_id') -%}
    {%- if not (execute and is_incremental()) -%}
        {{ return('true') }}
    {%- endif -%}
    {%- set quoted = adapter.quote(column) -%}
    {%- set seen = run_query('select max(' ~ quoted ~ ') from ' ~ this).columns[0].values()[0] -%}
    {%- if seen is none -%}
        {{ return('true') }}
    {%- endif -%}
    {%- set bound = seen if seen is number else dynamic_ddl.pivot_literal(seen | string) -%}
    {{ return(quoted ~ ' > ' ~ bound) }}
{%- endmacro %}
