with

device_models as (

    select * from {{ ref('device_models') }}

),

product_lines as (

    select * from {{ ref('product_lines') }}

),

latest_firmware as (

    select * from {{ ref('int_firmware_releases_ranked') }}

    where recency_rank = 1

),

joined as (

    select
        device_models.model_code,
        device_models.model_name,
        device_models.product_line,
        product_lines.product_line_name,
        product_lines.category as device_category,
        cast(device_models.launched_on as date) as launched_on,
        latest_firmware.firmware_version as latest_firmware_version,
        latest_firmware.released_on as latest_firmware_released_on,
        coalesce(latest_firmware.release_count, 0) as firmware_release_count

    from device_models

    inner join product_lines
        on device_models.product_line = product_lines.product_line

    left join latest_firmware
        on device_models.model_code = latest_firmware.model_code

)

select * from joined
