with

readings as (

    select * from {{ ref('lnd_device_events') }}

    where battery_level_pct is not null

),

by_model as (

    select
        readings.device_model,
        count(*) as reading_count,
        count(distinct readings.serial) as device_count,
        avg(readings.battery_level_pct) as avg_level_pct,
        avg(readings.battery_temperature_c) as avg_temperature_c,
        avg(case when readings.battery_level_pct < 20 then 1 else 0 end) as low_battery_share,
        avg(case when readings.battery_temperature_c >= 45 then 1 else 0 end) as hot_battery_share,
        avg(case when readings.battery_charging then 1 else 0 end) as charging_share,
        {#- bigint in landing; cast for a landing table built when it was an int. #}
        cast(max(readings.battery_cycle_count) as bigint) as max_cycle_count

    from readings

    group by 1

)

select * from by_model
