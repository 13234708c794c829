{#- A correction of an event carries a higher revision: it wins in an incremental
    run and in a build from scratch alike (a batch id would tie there). On equal
    revisions the later line wins (newer batch, then file path, then line), in both
    builds too: a build from scratch takes the inbox's files in path order.
    A correction may move the event to another day: the key is global, so it leaves
    its old day. #}
{{ config(
    incremental_strategy='upsert',
    unique_key='event_id',
    ordering_field='event_revision',
    tie_break=['_batch_id', '_source_file', '_line_number'],
    global_key=true,
    partition_by=['event_date'],
    on_schema_change='append_new_columns'
) }}

{%- set raw = ref('raw_device_events') %}
{#- The event time as sent: its column, or the text its type could not hold. #}
{%- set logged_at = exact_column(raw, 'data_log_ts', 'string', 'raw_events') %}

with

raw_events as (

    select * from {{ raw }}

    where {{ unseen_batches(source=raw) }}

),

typed as (

    select
        {{ exact_column(raw, 'data_event_id', 'string', 'raw_events') }} as event_id,
        {{ exact_column(raw, 'data_event_type', 'string', 'raw_events') }} as event_type,
        {{ exact_column(raw, 'data_device_serial', 'string', 'raw_events') }} as serial,
        {{ exact_column(raw, 'data_device_model', 'string', 'raw_events') }} as device_model,
        {{ exact_column(raw, 'data_device_firmware', 'string', 'raw_events') }} as firmware,
        {{ exact_column(raw, 'data_country', 'string', 'raw_events') }} as country,
        {{ exact_column(raw, 'data_record_id', 'string', 'raw_events') }} as user_id,
        {{ exact_column(raw, 'data_record_email', 'string', 'raw_events') }} as email,
        {{ exact_column(raw, 'data_ip', 'string', 'raw_events') }} as ip_address,
        {{ exact_column(raw, 'data_device_battery_level_pct', 'int', 'raw_events') }} as battery_level_pct,
        {{ exact_column(raw, 'data_device_battery_temperature_c', 'double', 'raw_events') }} as battery_temperature_c,
        {{ exact_column(raw, 'data_device_battery_charging', 'boolean', 'raw_events') }} as battery_charging,
        {{ exact_column(raw, 'data_device_battery_cycle_count', 'bigint', 'raw_events') }} as battery_cycle_count,
        {{ exact_column(raw, 'data_network_type', 'string', 'raw_events') }} as network_type,
        {#- bigint: a revision may be a time in epoch milliseconds, which an int turned
            into NULL, then 1, so a stale retry beat its correction (found by review). #}
        coalesce(
            {{ exact_column(raw, 'data_event_revision', 'bigint', 'raw_events') }}, 1
        ) as event_revision,
        {{ event_timestamp(logged_at, 'device_events') }} as logged_at,
        cast({{ event_timestamp(logged_at, 'device_events') }} as date) as event_date,
        raw_events._batch_id,
        raw_events._source_file,
        raw_events._line_number

    from raw_events

),

placed as (

    {#- An event without an id or a valid time cannot be placed; raw keeps it. #}
    select * from typed

    where event_id is not null and event_date is not null

)

select * from placed
