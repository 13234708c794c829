{#- Media follow their event: a correction that moves it to another day moves them. #}
{{ config(
    incremental_strategy='upsert',
    unique_key=['event_id', 'media_index'],
    ordering_field='_batch_id',
    global_key=true,
    partition_by=['event_date'],
    on_schema_change='append_new_columns'
) }}

-- depends_on: {{ ref('raw_device_events') }}
{%- set media = source('ingestion', 'raw_device_events__data_media') %}

with

raw_media as (

    {#- The child table raw_device_events writes for its `_data.media` array. #}
    select * from {{ media }}

    where {{ unseen_batches(source=media) }}

),

typed as (

    select
        raw_media._parent_data_event_id as event_id,
        raw_media._index as media_index,
        raw_media.data_media_media_id as media_id,
        raw_media.data_media_type as media_type,
        {{ exact_column(media, 'data_media_duration_s', 'double', 'raw_media') }} as duration_s,
        {{ exact_column(media, 'data_media_size_bytes', 'bigint', 'raw_media') }} as size_bytes,
        cast(raw_media._event_date as date) as event_date,
        raw_media._batch_id

    from raw_media

),

placed as (

    {#- Media of an event without a valid time cannot be placed on a day; raw keeps it. #}
    select * from typed

    where event_date is not null

)

select * from placed
