{#
    All rows of an upsert table on the days that changed since this model's
    last run: for a daily aggregate that must recompute a changed day whole
    (a distinct count cannot be patched), and nothing else. The changed days
    come from `changed_since`, so the model must keep the upstream commit id
    it saw, as max(_commit_id) per row, in `commit_column`.

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
    select changed_day_rows.*
    from {{ relation }} as changed_day_rows
    where changed_day_rows.{{ day }} in (
        select distinct {{ day }}
        from {{ relation }}
        where {{ changed_since(relation, column=commit_column) }}
    )
{%- endmacro %}
