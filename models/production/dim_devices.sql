with

device_state as (

    select * from {{ ref('lnd_device_state') }}

),

devices as (

    select
        {{ mask_pii('device_state.serial') }} as device_key,
        device_state.state_firmware as firmware,
        device_state.state_mode as device_mode,
        device_state.state_battery_pct as battery_pct,
        device_state.state_storage_free_mb as storage_free_mb,
        device_state.updated_at as state_reported_at

    from device_state

)

select * from devices
