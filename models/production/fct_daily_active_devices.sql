{{ config(
    materialized='incremental',
    incremental_strategy='upsert',
    unique_key=['event_date', 'device_model', 'firmware', 'country'],
    ordering_field='_source_commit_id',
    partition_by=['event_date'],
    on_schema_change='append_new_columns'
) }}

with

changed_days as (

    {#- The days with events changed since this model's last run: only they are recomputed. #}
    select distinct event_date
    from {{ ref('lnd_device_events') }}
    where {{ changed_since(ref('lnd_device_events'), column='_source_commit_id') }}

),

events as (

    select lnd_device_events.*
    from {{ ref('lnd_device_events') }} as lnd_device_events
    inner join changed_days
        on lnd_device_events.event_date = changed_days.event_date

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
