-- lnd_media holds exactly the media of each event's winning version in
-- lnd_device_events, on the event's day: found by the winner's raw lineage in
-- the whole child table (lnd_media reads only the days of changed events, so
-- this also checks that a raw media row's day is its event's day).
-- Returns the media rows one side has and the other lacks.
with

winners as (

    select * from {{ ref('lnd_device_events') }}

),

raw_media as (

    select * from {{ source('ingestion', 'raw_device_events__data_media') }}

),

expected as (

    select
        winners.event_id,
        raw_media._index as media_index,
        raw_media.data_media_media_id as media_id,
        winners.event_date

    from raw_media

    inner join winners
        on
            raw_media._batch_id = winners._batch_id
            and raw_media._source_file = winners._source_file
            and raw_media._line_number = winners._line_number

),

stored as (

    select
        media.event_id,
        media.media_index,
        media.media_id,
        media.event_date

    from {{ ref('lnd_media') }} as media

),

missing as (

    select
        'missing' as problem,
        expected.*
    from expected

    left anti join stored
        on
            expected.event_id = stored.event_id
            and expected.media_index = stored.media_index
            and expected.media_id <=> stored.media_id
            and expected.event_date = stored.event_date

),

stale as (

    select
        'stale' as problem,
        stored.*
    from stored

    left anti join expected
        on
            stored.event_id = expected.event_id
            and stored.media_index = expected.media_index
            and stored.media_id <=> expected.media_id
            and stored.event_date = expected.event_date

)

select * from missing

union all

select * from stale
