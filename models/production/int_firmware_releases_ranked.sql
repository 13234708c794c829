with

releases as (

    select * from {{ ref('firmware_releases') }}

),

ranked as (

    select
        releases.model_code,
        releases.firmware_version,
        cast(releases.released_on as date) as released_on,
        row_number() over (
            partition by releases.model_code
            order by cast(releases.released_on as date) desc, releases.firmware_version desc
        ) as recency_rank,
        count(*) over (partition by releases.model_code) as release_count

    from releases

)

select * from ranked
