{#- lnd_device_state passes raw's columns through with their `__text` companions
    (a value raw's column type could not hold): exact_column reads each pair as a
    build from scratch reads the one column of the union type. #}
{%- set state = ref('lnd_device_state') %}

with

device_state as (

    select * from {{ state }}

),

devices as (

    select
        {{ mask_pii('device_state.serial') }} as device_key,
        {{ exact_column(state, 'state_firmware', 'string', 'device_state') }} as firmware,
        {{ exact_column(state, 'state_mode', 'string', 'device_state') }} as device_mode,
        {{ exact_column(state, 'state_battery_pct', 'bigint', 'device_state') }} as battery_pct,
        {{ exact_column(state, 'state_storage_free_mb', 'bigint', 'device_state') }}
            as storage_free_mb,
        device_state.updated_at as state_reported_at

    from device_state

)

select * from devices
