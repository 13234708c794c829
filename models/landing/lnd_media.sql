{#- The media of an event are those of its winning version in lnd_device_events (the
    highest revision, then the later line), found by that version's raw lineage:
    an older version arriving late changes nothing, a correction moves them to its
    day, and an item a correction dropped is removed. Each run takes the events
    whose winner changed since its last run (changed_since): their winners' media
    are upserted, and media stored for them that the winner lacks are deleted. #}
{{ config(
    incremental_strategy='upsert',
    unique_key=['event_id', 'media_index'],
    ordering_field='_source_commit_id',
    delete_marker='_dropped',
    tombstone_days=0,
    global_key=true,
    partition_by=['event_date'],
    on_schema_change='append_new_columns'
) }}

-- depends_on: {{ ref('raw_device_events') }}
{%- set events = ref('lnd_device_events') %}
{%- set media = source('ingestion', 'raw_device_events__data_media') %}
{%- set changed = changed_since(events, column='_source_commit_id') %}

with

changed_events as (

    {#- No alias: the changed_since filter names the table's columns by the table. #}
    select
        event_id,
        event_date,
        _batch_id,
        _source_file,
        _line_number,
        _commit_id as _source_commit_id

    from {{ events }}

    where {{ changed }}

),

raw_media as (

    {#- The child table raw_device_events writes for its `_data.media` array, read on the
        changed events' days only (a raw row's `_event_date` is its event's date). #}
    select raw_media.*

    from {{ media }} as raw_media

    where {{ listed_values(
        '_event_date',
        'select distinct event_date from ' ~ events ~ ' where ' ~ changed,
        'raw_media'
    ) if is_incremental() else 'true' }}

),

winning_media as (

    select
        changed_events.event_id,
        raw_media._index as media_index,
        {{ exact_column(media, 'data_media_media_id', 'string', 'raw_media') }} as media_id,
        {{ exact_column(media, 'data_media_type', 'string', 'raw_media') }} as media_type,
        {{ exact_column(media, 'data_media_duration_s', 'double', 'raw_media') }} as duration_s,
        {{ exact_column(media, 'data_media_size_bytes', 'bigint', 'raw_media') }} as size_bytes,
        changed_events.event_date,
        changed_events._batch_id,
        changed_events._source_commit_id,
        false as _dropped

    from raw_media

    inner join changed_events
        on
            raw_media._batch_id = changed_events._batch_id
            and raw_media._source_file = changed_events._source_file
            and raw_media._line_number = changed_events._line_number

),

dropped_media as (

    {#- Media stored for a changed event that its winner no longer has (none on a full build). #}
    {%- if is_incremental() %}
        select
            media_now.event_id,
            media_now.media_index,
            media_now.media_id,
            media_now.media_type,
            media_now.duration_s,
            media_now.size_bytes,
            changed_events.event_date,
            changed_events._batch_id,
            changed_events._source_commit_id,
            true as _dropped

        from {{ this }} as media_now

        inner join changed_events
            on media_now.event_id = changed_events.event_id

        left anti join winning_media
            on
                media_now.event_id = winning_media.event_id
                and media_now.media_index = winning_media.media_index
    {%- else %}
        select
            winning_media.event_id,
            winning_media.media_index,
            winning_media.media_id,
            winning_media.media_type,
            winning_media.duration_s,
            winning_media.size_bytes,
            winning_media.event_date,
            winning_media._batch_id,
            winning_media._source_commit_id,
            winning_media._dropped

        from winning_media

        where false
    {%- endif %}

),

followed as (

    select * from winning_media

    union all

    select * from dropped_media

)

select * from followed
