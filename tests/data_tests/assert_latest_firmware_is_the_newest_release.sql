-- A device model's latest firmware must be its most recent release.
-- Returns the models where dim_device_models disagrees with the seed.
with

releases as (

    select * from {{ ref('firmware_releases') }}

),

newest as (

    select
        releases.model_code,
        max(cast(releases.released_on as date)) as newest_released_on

    from releases

    group by releases.model_code

),

device_models as (

    select * from {{ ref('dim_device_models') }}

)

select
    device_models.model_code,
    device_models.latest_firmware_released_on,
    newest.newest_released_on

from device_models

left join newest
    on device_models.model_code = newest.model_code

where
    not (device_models.latest_firmware_released_on <=> newest.newest_released_on)
