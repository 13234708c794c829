{#- Devices are counted from landing, not summed from fct_daily_active_devices: a
    device that upgrades during a day, or reports from two countries, is one device
    of its model (found by review: the sum counted it once per firmware and
    country, so the model's devices and each share were off). A changed day is
    recomputed whole and replaces that day's rows, as in fct_daily_active_devices. #}
{{ config(
    materialized='incremental',
    incremental_strategy='replace_partitions',
    partition_by=['event_date'],
    on_schema_change='append_new_columns'
) }}

with

events as (

    {{ rows_of_changed_days(ref('lnd_device_events')) }}

),

by_firmware as (

    select
        events.event_date,
        events.device_model,
        events.firmware,
        count(distinct events.serial) as active_devices,
        max(events._commit_id) as _source_commit_id

    from events

    group by 1, 2, 3

),

by_model as (

    select
        events.event_date,
        events.device_model,
        count(distinct events.serial) as model_devices

    from events

    group by 1, 2

),

adoption as (

    select
        by_firmware.event_date,
        by_firmware.device_model,
        by_firmware.firmware,
        by_firmware.active_devices,
        {#- NULL, not a failure (ANSI), for a model whose events that day name no
            device: events without a serial count no active device. #}
        try_divide(by_firmware.active_devices, by_model.model_devices) as share_of_model,
        by_firmware._source_commit_id

    from by_firmware

    inner join by_model
        on
            by_firmware.event_date = by_model.event_date
            and by_firmware.device_model <=> by_model.device_model

)

select * from adoption
