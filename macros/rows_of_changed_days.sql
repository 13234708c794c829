{#
    All rows of an upsert table on the days that changed since this model's
    last run: for a daily aggregate that must recompute a changed day whole
    (a distinct count cannot be patched), and nothing else. A day changed when
    its partition was rewritten since the upstream commit this model saw last,
    kept as max(_commit_id) per row in `commit_column`: new rows, rows that
    moved to another day, deletes. The days are listed as literals, so only
    their partitions are read. With `incremental_strategy='replace_partitions'`
    and partition_by the day alone, each listed day is replaced, also one left
    with no rows (its old rows are removed, not kept stale).

    Example:
        events as (
            {{ rows_of_changed_days(ref('lnd_device_events')) }}
        ),

    Arguments:
        relation: the upsert table read, required
        day_column: its day partition column, default `event_date`
        commit_column: this model's column holding the upstream commit id, default `_source_commit_id`
        partition_column: this model's partition column holding the day, when it renames
            it (`event_date as day`), default `day_column`; with replace_partitions the
            model must be partitioned by it alone
#}
{% macro rows_of_changed_days(
    relation, day_column='event_date', commit_column='_source_commit_id', partition_column=none
) -%}
    select changed_day_rows.*
    from {{ relation }} as changed_day_rows
    {#- A unit test's fixture is a CTE: its rows' commit ids tell the changed days. #}
    {%- if execute and relation.schema %}
    where {{ adapter.changed_days_filter(
        relation, this, is_incremental(), 'changed_day_rows', day_column, commit_column,
        partition_column or day_column) }}
    {%- else %}
    {%- set day = adapter.quote(day_column) %}
    where changed_day_rows.{{ day }} in (
        select distinct {{ day }}
        from {{ relation }}
        where {{ changed_since(relation, column=commit_column) }}
    )
    {%- endif %}
{%- endmacro %}
