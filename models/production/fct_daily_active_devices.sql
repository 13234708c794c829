{#- A changed day is recomputed whole and replaces that day's rows: groups an
    event left are gone, not kept with a stale count (issue 21). #}
{{ config(
    materialized='incremental',
    incremental_strategy='replace_partitions',
    partition_by=['event_date'],
    on_schema_change='append_new_columns'
) }}

with

events as (

    {#- Every row of the days changed since this model's last run: only they are recomputed. #}
    {{ rows_of_changed_days(ref('lnd_device_events')) }}

),

daily as (

    select
        events.event_date,
        events.device_model,
        events.firmware,
        events.country,
        count(distinct events.serial) as active_devices,
        count(*) as event_count,
        max(events._commit_id) as _source_commit_id

    from events

    group by 1, 2, 3, 4

)

select * from daily
