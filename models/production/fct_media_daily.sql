{{ config(
    materialized='incremental',
    incremental_strategy='upsert',
    unique_key=['event_date', 'media_type'],
    ordering_field='_source_commit_id',
    partition_by=['event_date'],
    on_schema_change='append_new_columns'
) }}

with

media as (

    {#- Every row of the days changed since this model's last run: only they are recomputed. #}
    {{ rows_of_changed_days(ref('lnd_media')) }}

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
