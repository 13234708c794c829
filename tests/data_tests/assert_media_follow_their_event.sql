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

    select * from expected

    except

    select * from stored

),

stale as (

    select * from stored

    except

    select * from expected

)

select
    'missing' as problem,
    missing.event_id,
    missing.media_index,
    missing.media_id,
    missing.event_date
from missing

union all

select
    'stale' as problem,
    stale.event_id,
    stale.media_index,
    stale.media_id,
    stale.event_date
from stale
