{#
    All rows of an upsert table on the days that changed since this model's
    last run: for a daily aggregate that must recompute a changed day whole
    (a distinct count cannot be patched), and nothing else. The changed days
    come from `changed_since`, so the model must keep the upstream commit id
    it saw, as max(_commit_id) per row, in `commit_column`. The days are
    listed as literals, so only their partitions are read.

    Example:
        events as (
            {{ rows_of_changed_days(ref('lnd_device_events')) }}
        ),

    Arguments:
        relation: the upsert table read, required
        day_column: its day column (ideally its partition), default `event_date`
        commit_column: this model's column holding the upstream commit id, default `_source_commit_id`
#}
{% macro rows_of_changed_days(relation, day_column='event_date', commit_column='_source_commit_id') -%}
    {%- set day = adapter.quote(day_column) -%}
    {%- set changed_days -%}
        select distinct {{ day }}
        from {{ relation }}
        where {{ changed_since(relation, column=commit_column) }}
    {%- endset -%}
    select changed_day_rows.*
    from {{ relation }} as changed_day_rows
    {#- The days as literals: Spark then reads only their partitions (a unit
        test's fixture is a CTE, which only the query itself can read). #}
    {%- if execute and relation.schema %}
    where {{ adapter.values_in('changed_day_rows.' ~ day, changed_days) }}
    {%- else %}
    where changed_day_rows.{{ day }} in ({{ changed_days }})
    {%- endif %}
{%- endmacro %}
