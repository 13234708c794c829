with

daily_devices as (

    select * from {{ ref('fct_daily_active_devices') }}

),

by_firmware as (

    select
        daily_devices.event_date,
        daily_devices.device_model,
        daily_devices.firmware,
        {#- A device reports one country, so its counts add up across countries. #}
        sum(daily_devices.active_devices) as active_devices

    from daily_devices

    group by 1, 2, 3

),

adoption as (

    select
        by_firmware.event_date,
        by_firmware.device_model,
        by_firmware.firmware,
        by_firmware.active_devices,
        {#- NULL, not a failure (ANSI), for a model whose events that day name no
            device: events without a serial count no active device. #}
        try_divide(
            by_firmware.active_devices,
            sum(by_firmware.active_devices) over (
                partition by by_firmware.event_date, by_firmware.device_model
            )
        ) as share_of_model

    from by_firmware

)

select * from adoption
