{{ config(
    materialized='incremental',
    incremental_strategy='upsert',
    unique_key=['event_date', 'media_type'],
    ordering_field='_source_commit_id',
    partition_by=['event_date'],
    on_schema_change='append_new_columns'
) }}

with

changed_days as (

    {#- The days with media changed since this model's last run: only they are recomputed. #}
    select distinct event_date
    from {{ ref('lnd_media') }}
    where {{ changed_since(ref('lnd_media'), column='_source_commit_id') }}

),

media as (

    select lnd_media.*
    from {{ ref('lnd_media') }} as lnd_media
    inner join changed_days
        on lnd_media.event_date = changed_days.event_date

),

daily as (

    select
        media.event_date,
        media.media_type,
        count(*) as media_count,
        sum(media.size_bytes) / power(1024, 3) as size_gib,
        sum(media.duration_s) as duration_s,
        max(media._commit_id) as _source_commit_id

    from media

    group by 1, 2

)

select * from daily
