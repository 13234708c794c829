{#
    The timestamp of an event time, read as the raw layer reads it
    (dynamic_ddl/schema/event_time.py): the topic's `event_time_format` and
    `time_formats`, epoch seconds or milliseconds, ISO 8601, then the common text formats;
    NULL when none reads it. One definition for raw, Python and SQL models
    (the formats of the topic's entry in vars: a raw model's meta override
    of `time_formats` is not seen here).

    Example:
        {{ event_timestamp('raw_events.data_log_ts', 'device_events') }}

    Arguments:
        expression: SQL of the event time value (any type), required
        topic: the topic in vars.raw_topics whose formats apply, default none
#}
{% macro event_timestamp(expression, topic=none) -%}
    {%- set topics = var('raw_topics', {}) -%}
    {%- set entry = topics[topic] if topic and topic in topics else {} -%}
    {%- set declared = entry.get('time_formats') or [] -%}
    {%- if declared is string -%}{%- set declared = [declared] -%}{%- endif -%}
    {%- set formats = [entry.get('event_time_format')] + declared -%}
    {{ adapter.event_timestamp_sql(expression, formats) }}
{%- endmacro %}
